/* bench/cold-walk.sh: 20 threads blocked in different calls (a pipe read, poll, a
 * condition variable, nanosleep, a mutex, select, a futex-backed barrier), then the main
 * thread aborts: a core of a busy server at the moment it died. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t started;

__attribute__((noinline)) static void wait_read(void) { char c; (void)!read(fds[0], &c, 1); }
__attribute__((noinline)) static void wait_poll(void) { struct pollfd p = {fds[0], POLLIN, 0}; poll(&p, 1, -1); }
__attribute__((noinline)) static void wait_cond(void) { pthread_mutex_lock(&cm); for (;;) pthread_cond_wait(&cv, &cm); }
__attribute__((noinline)) static void wait_sleep(void) { struct timespec t = {3600, 0}; nanosleep(&t, 0); }
__attribute__((noinline)) static void wait_mutex(void) { pthread_mutex_lock(&held); }
__attribute__((noinline)) static void wait_select(void) { fd_set r; FD_ZERO(&r); FD_SET(fds[0], &r); select(fds[0] + 1, &r, 0, 0, 0); }

static void (*const waits[])(void) = {wait_read, wait_poll, wait_cond, wait_sleep, wait_mutex, wait_select};

__attribute__((noinline)) static void *worker(void *arg) {
    long i = (long)arg;
    pthread_barrier_wait(&started);
    waits[i % (sizeof waits / sizeof *waits)]();
    return 0;
}

int main(void) {
    if (pipe(fds)) return 1;
    pthread_mutex_lock(&held);
    pthread_barrier_init(&started, 0, 21);
    pthread_t t[20];
    for (long i = 0; i < 20; i++) pthread_create(&t[i], 0, worker, (void *)i);
    pthread_barrier_wait(&started);
    usleep(200000); /* every thread reaches its call */
    abort();
}
