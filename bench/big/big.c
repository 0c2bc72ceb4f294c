/* bench/big-core.sh: a process with BIG_MB (default 4096) MiB of heap, every page written,
 * and four threads blocked in nanosleep, whose main thread aborts: its core holds the
 * whole heap (a 4 GB core), and the walk must not read or keep it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec t = {3600, 0};
    for (;;) nanosleep(&t, NULL);
    return NULL;
}

/* Writes every page of `n` bytes in chunks of 64 MiB (each its own mapping, as a program
 * that holds many buffers has), a byte pattern the kernel cannot leave out of the core. */
__attribute__((noinline)) static void fill_heap(size_t n) {
    const size_t chunk = (size_t)64 << 20;
    for (size_t done = 0; done < n; done += chunk) {
        unsigned char *p = malloc(chunk);
        if (!p) {
            perror("malloc");
            exit(2);
        }
        memset(p, (int)(0x5a ^ (done >> 26)), chunk);
    }
}

__attribute__((noinline)) static void crash_after_filling(size_t n) {
    fill_heap(n);
    abort();
}

int main(void) {
    const char *mb = getenv("BIG_MB");
    size_t n = (size_t)(mb ? strtoull(mb, NULL, 10) : 4096) << 20;
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, sleeper, NULL);
    usleep(10000);
    crash_after_filling(n);
    return 0;
}
