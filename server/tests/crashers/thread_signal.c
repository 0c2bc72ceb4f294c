/* A signal handler that faults on another thread: main parks a worker in read(2), then
 * sends it SIGUSR1 with pthread_kill; the handler faults on the worker while main waits
 * in pthread_join. The worker's stack reads: fault_in_handler, on_usr1, the signal
 * trampoline, libc's read (interrupted in the system call), blocked_reader,
 * start_thread. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int pipe_fds[2];
static atomic_int parked;
int *volatile handler_target;
volatile int sink;

__attribute__((noinline)) static void fault_in_handler(int sig) {
    *handler_target = sig; /* SIGSEGV on the worker, inside its SIGUSR1 handler */
    sink++;
}

static void on_usr1(int sig) {
    fault_in_handler(sig);
    sink++;
}

__attribute__((noinline)) static void *blocked_reader(void *arg) {
    (void)arg;
    char c;
    atomic_store(&parked, 1);
    while (read(pipe_fds[0], &c, 1) != 0)
        sink++;
    return NULL;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_t reader;
    pthread_create(&reader, NULL, blocked_reader, NULL);
    while (!atomic_load(&parked))
        usleep(1000);
    usleep(100000); /* let it enter read(2) */
    pthread_kill(reader, SIGUSR1);
    pthread_join(reader, NULL);
    printf("%d\n", sink);
    return 0;
}
