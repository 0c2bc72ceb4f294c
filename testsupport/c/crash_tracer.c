/* Test tool: runs a program under ptrace, stops it at its fatal signal and hands the
 * stopped process over, so a minidump writer can attach; then lets the process die so the
 * kernel writes a core of the same crash.
 *
 * usage: crash_tracer PROGRAM [ARGS...]
 *
 * Protocol on stdout/stdin (one line each):
 *   -> "stopped pid=P tid=T signo=S code=C addr=0xA"
 *   -> "gregs G0 G1 ... G22"      (hex, ucontext_t gregs order, <sys/ucontext.h> REG_*)
 *   -> "fpregs HEX"               (the 512-byte FXSAVE area, struct user_fpregs_struct)
 *   <- any line: continue the process (it re-executes the faulting instruction and dies)
 *   -> "exit signaled=0|1 signal=N core=0|1"
 *
 * Only the main thread is traced, so the crash must happen on it. x86_64 only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/ucontext.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static int fatal(int sig) {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
           sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: crash_tracer PROGRAM [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
        setrlimit(RLIMIT_CORE, &rl);
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) { perror("PTRACE_TRACEME"); _exit(127); }
        execv(argv[1], argv + 1);
        perror("execv");
        _exit(127);
    }
    int st;
    int first = 1;
    for (;;) {
        if (waitpid(pid, &st, 0) < 0) { perror("waitpid"); return 1; }
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            printf("died-before-crash status=%d\n", st);
            return 1;
        }
        int sig = WSTOPSIG(st);
        if (first && sig == SIGTRAP) { /* the stop at execve */
            first = 0;
            ptrace(PTRACE_CONT, pid, 0, 0);
            continue;
        }
        first = 0;
        if (fatal(sig)) break;
        ptrace(PTRACE_CONT, pid, 0, (void *)(intptr_t)sig);
    }

    struct user_regs_struct r;
    struct user_fpregs_struct fp;
    siginfo_t si;
    if (ptrace(PTRACE_GETREGS, pid, 0, &r) != 0) { perror("GETREGS"); return 1; }
    if (ptrace(PTRACE_GETFPREGS, pid, 0, &fp) != 0) { perror("GETFPREGS"); return 1; }
    if (ptrace(PTRACE_GETSIGINFO, pid, 0, &si) != 0) { perror("GETSIGINFO"); return 1; }

    long long g[NGREG];
    memset(g, 0, sizeof g);
    g[REG_R8] = r.r8; g[REG_R9] = r.r9; g[REG_R10] = r.r10; g[REG_R11] = r.r11;
    g[REG_R12] = r.r12; g[REG_R13] = r.r13; g[REG_R14] = r.r14; g[REG_R15] = r.r15;
    g[REG_RDI] = r.rdi; g[REG_RSI] = r.rsi; g[REG_RBP] = r.rbp; g[REG_RBX] = r.rbx;
    g[REG_RDX] = r.rdx; g[REG_RAX] = r.rax; g[REG_RCX] = r.rcx; g[REG_RSP] = r.rsp;
    g[REG_RIP] = r.rip; g[REG_EFL] = r.eflags;
    g[REG_CSGSFS] = (long long)((r.cs & 0xffff) | ((r.gs & 0xffff) << 16) |
                                ((r.fs & 0xffff) << 32) | ((r.ss & 0xffff) << 48));
    g[REG_CR2] = (long long)(uintptr_t)si.si_addr;

    /* Stop the whole process, then let the crashed thread go: it takes the pending SIGSTOP
     * before returning to user mode, so every thread stays where the crash left it. */
    kill(pid, SIGSTOP);
    if (ptrace(PTRACE_DETACH, pid, 0, 0) != 0) { perror("DETACH"); return 1; }

    printf("stopped pid=%d tid=%d signo=%d code=%d addr=0x%llx\n", pid, pid, si.si_signo,
           si.si_code, (unsigned long long)(uintptr_t)si.si_addr);
    printf("gregs");
    for (int i = 0; i < NGREG; i++) printf(" %llx", (unsigned long long)g[i]);
    printf("\nfpregs ");
    const unsigned char *b = (const unsigned char *)&fp;
    for (size_t i = 0; i < sizeof fp; i++) printf("%02x", b[i]);
    printf("\n");
    fflush(stdout);

    char line[64];
    if (!fgets(line, sizeof line, stdin)) { /* parent gone: still let it die */ }
    kill(pid, SIGCONT);
    if (waitpid(pid, &st, 0) < 0) { perror("waitpid"); return 1; }
    printf("exit signaled=%d signal=%d core=%d\n", WIFSIGNALED(st) ? 1 : 0,
           WIFSIGNALED(st) ? WTERMSIG(st) : 0, WIFSIGNALED(st) && WCOREDUMP(st) ? 1 : 0);
    return 0;
}
