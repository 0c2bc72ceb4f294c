/* Four threads: three workers block in pthread_cond_wait, nanosleep and read, then the
 * main thread crashes once they are parked (minidump recording needs the crash on the
 * main thread: the test's ptrace tool traces only it). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static atomic_int parked;
static int pipe_fds[2];
volatile int sink;

__attribute__((noinline)) static void *wait_on_cond(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    atomic_fetch_add(&parked, 1);
    for (;;)
        pthread_cond_wait(&cond, &lock);
    return NULL;
}

__attribute__((noinline)) static void *sleep_long(void *arg) {
    (void)arg;
    atomic_fetch_add(&parked, 1);
    for (;;) {
        struct timespec ts = {1000, 0};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

__attribute__((noinline)) static void *read_pipe(void *arg) {
    (void)arg;
    char c;
    atomic_fetch_add(&parked, 1);
    for (;;)
        if (read(pipe_fds[0], &c, 1) <= 0)
            break;
    return NULL;
}

__attribute__((noinline)) static void fault(int *p) {
    *p = 1; /* SIGSEGV: p is null */
    sink++;
}

int main(int argc, char **argv) {
    (void)argv;
    pthread_t t[3];
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_create(&t[0], NULL, wait_on_cond, NULL);
    pthread_create(&t[1], NULL, sleep_long, NULL);
    pthread_create(&t[2], NULL, read_pipe, NULL);
    while (atomic_load(&parked) < 3)
        usleep(1000);
    usleep(200000); /* let the others enter their system calls */
    fault(argc > 100 ? &argc : NULL);
    return 0;
}
