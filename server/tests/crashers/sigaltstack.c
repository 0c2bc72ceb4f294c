/* A SIGSEGV handler on an alternate signal stack (SA_ONSTACK) that faults a few calls
 * deep: the walk goes from the heap-allocated signal stack through the trampoline back
 * to the thread's own stack. The stack reads: deep_in_handler (x4), on_segv, the signal
 * trampoline, victim (at the faulting load), main. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int sink;
int *volatile bad;

__attribute__((noinline)) static void deep_in_handler(int n) {
    if (n)
        deep_in_handler(n - 1);
    else
        *bad = 3; /* second SIGSEGV, on the alternate stack */
    sink++;
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)si;
    (void)uc;
    deep_in_handler(sig & 3);
    sink++;
}

__attribute__((noinline)) static int victim(int *p) {
    return *p + sink; /* first SIGSEGV */
}

int main(void) {
    stack_t ss;
    ss.ss_sp = malloc(65536);
    ss.ss_size = 65536;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    printf("%d\n", victim(bad));
    return 0;
}
