/* A SIGSEGV handler running on an alternate signal stack faults again: the walk crosses from the alternate stack back to the thread's stack through __restore_rt. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
volatile int sink;
volatile int *volatile bad_pointer;
__attribute__((noinline)) static void handler_fault(void) { *bad_pointer = 2; sink++; }
static void on_segv(int sig) { (void)sig; handler_fault(); sink++; }
__attribute__((noinline)) static int victim(int n) { if (n > 0) return victim(n - 1) + 1; *bad_pointer = 1; return sink; }
int main(void) {
    stack_t ss; ss.ss_sp = malloc(65536); ss.ss_size = 65536; ss.ss_flags = 0; sigaltstack(&ss, NULL);
    struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = on_segv; sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask); sigaction(SIGSEGV, &sa, NULL);
    printf("%d\n", victim(3)); return 0;
}
