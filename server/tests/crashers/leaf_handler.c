/* A signal handler that is itself a frameless leaf and faults: frame 0's caller, the
 * signal trampoline, is still in the link register. The stack reads: on_segv, the signal
 * trampoline, victim (at the faulting load), caller, main. */
#include <signal.h>
#include <stdio.h>

int *volatile bad;
volatile int sink;

static void on_segv(int sig) {
    *bad = sig; /* second SIGSEGV, in the handler */
}

__attribute__((noinline)) static int victim(int *p) {
    sink++;
    return *p * 3; /* first SIGSEGV */
}

__attribute__((noinline)) static int caller(void) {
    return victim(bad) + sink;
}

int main(void) {
    signal(SIGSEGV, on_segv);
    printf("%d\n", caller());
    return 0;
}
