/* A live process for gcore: three threads parked in pthread_cond_wait, nanosleep and
 * read, while main prints "ready" and waits in pause(). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static atomic_int parked;
static int pipe_fds[2];

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

int main(void) {
    pthread_t t[3];
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_create(&t[0], NULL, wait_on_cond, NULL);
    pthread_create(&t[1], NULL, sleep_long, NULL);
    pthread_create(&t[2], NULL, read_pipe, NULL);
    while (atomic_load(&parked) < 3)
        usleep(1000);
    usleep(100000); /* let the others enter their system calls */
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
