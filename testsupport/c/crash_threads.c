/* Test program: two threads blocked (nanosleep, pthread_cond_wait), then the main thread
 * writes to address 0x10 two calls deep. Build with gcc -g -O1 -pthread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t ready;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *sleeper(void *arg) {
    (void)arg;
    pthread_barrier_wait(&ready);
    struct timespec ts = { 1000, 0 };
    for (;;) nanosleep(&ts, 0);
    return 0;
}

static void *waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    pthread_barrier_wait(&ready);
    for (;;) pthread_cond_wait(&never, &lock);
    return 0;
}

__attribute__((noinline)) void crash_here(volatile int *p) {
    *p = 42;
    __asm__ volatile("");
}

__attribute__((noinline)) void call_crash(volatile int *p) {
    crash_here(p);
    __asm__ volatile("");
}

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&ready, 0, 3);
    pthread_create(&a, 0, sleeper, 0);
    pthread_setname_np(a, "sleeper");
    pthread_create(&b, 0, waiter, 0);
    pthread_setname_np(b, "waiter");
    pthread_barrier_wait(&ready);
    usleep(200 * 1000); /* let both threads reach their blocking call */
    call_crash((volatile int *)(uintptr_t)0x10);
    return 0;
}
