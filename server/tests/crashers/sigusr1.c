/* A SIGSEGV raised while handling SIGUSR1. `send_signal` raises SIGUSR1 through libc;
 * the handler faults in `handler_store`. The stack reads: handler_store, on_usr1, the
 * signal trampoline, libc's raise machinery (interrupted inside the kill system call),
 * send_signal, main. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

volatile int sink;
int *volatile handler_target;

__attribute__((noinline)) static void handler_store(int v) {
    *handler_target = v; /* SIGSEGV inside the SIGUSR1 handler */
    sink++;
}

static void on_usr1(int sig) {
    handler_store(sig);
    sink++;
}

__attribute__((noinline)) static int send_signal(int n) {
    raise(SIGUSR1);
    return sink + n;
}

int main(int argc, char **argv) {
    (void)argv;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    printf("%d\n", send_signal(argc));
    return 0;
}
