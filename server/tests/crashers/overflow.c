/* Unbounded recursion on a thread with a 64 KiB stack: SIGSEGV on the guard page. */
#include <pthread.h>
#include <stdio.h>
volatile int sink;
__attribute__((noinline)) static int descend(int n) { volatile char pad[48]; pad[0] = (char)n; return descend(n + 1) + pad[0]; }
static void *worker(void *arg) { (void)arg; sink = descend(0); return NULL; }
int main(void) {
    pthread_attr_t a; pthread_attr_init(&a); pthread_attr_setstacksize(&a, 64 * 1024);
    pthread_t t; pthread_create(&t, &a, worker, NULL); pthread_join(t, NULL);
    printf("%d\n", sink); return 0;
}
