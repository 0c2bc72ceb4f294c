/* A SIGSEGV handler that itself faults. The first fault in `victim` enters the handler
 * through the kernel's signal frame; the second, with SIGSEGV blocked, kills the process.
 * The stack reads: handler_fault, on_segv, __restore_rt, victim (at the faulting
 * instruction), main. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

volatile int sink;
volatile int *volatile bad_pointer;

__attribute__((noinline)) static void handler_fault(void) {
    *bad_pointer = 2; /* second SIGSEGV, inside the handler */
    sink++;
}

static void on_segv(int sig) {
    (void)sig;
    handler_fault();
    sink++;
}

__attribute__((noinline)) static int victim(void) {
    *bad_pointer = 1; /* first SIGSEGV */
    return sink;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    printf("%d\n", victim());
    return 0;
}
