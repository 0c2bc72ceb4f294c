/* Windows x64, a stack overflow (the guard page): on a thread of its own, with a 1 MiB
 * stack, `descend` calls itself, each frame with a 400-byte local buffer, until the
 * stack runs out, some two thousand calls deep. Windows (and wine: its guard page
 * handling raises it with the two guaranteed pages left) then raises
 * EXCEPTION_STACK_OVERFLOW (0xC00000FD) on that thread, with too little stack left for
 * anything much: under wine the unhandled exception filter's own dispatch overflows
 * again and the thread is killed without running it. So no handler on that thread writes
 * the dump (dump_on_crash.c, linked in, is not used): a vectored exception handler, the
 * first thing the dispatch calls, hands the exception pointers and its thread id to a
 * watcher thread and waits. The watcher writes the minidump (MiniDumpNormal, the crashed
 * thread's context from the exception pointers), leaving itself out of it (wine's
 * dbghelp would give the writing thread the exception's context, as if it were the one
 * that crashed), prints the reference and ends the process with the exception's code,
 * as the unhandled exception would (under wine the exit status is its low byte, 0xFD).
 * The main thread waits for the watcher meanwhile: a thread of the dump that did not
 * crash.
 *
 * The reference, printed by the watcher once the dump is written (hex):
 *   tid TID                  the thread that overflowed
 *   depth N                  how many calls of `descend` counted themselves
 *   counted ADDRESS          the address after the count in `descend`: a frame 0 whose
 *                            pc is before it (in the prologue) did not count itself
 *   into_descend RA          the return address of `descend`'s call of itself
 *   into_caller RA           the return address of its first call, in `overflow_thread`
 *   exception_address PC     the exception record's address: frame 0's pc
 *   walk N PC SP PC SP ...   the system's own walk of the crashed thread (rtl_walk.c,
 *                            RtlVirtualUnwind over its live stack) from the exception's
 *                            context: every frame, innermost first
 * Compiled at -O0, so that `descend` keeps its frame and its call (no tail call). */
#include <windows.h>
#include <dbghelp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtl_walk.h"

/* more frames than the stack can hold */
#define WALK_MAX 100000

static HANDLE crashed, written;
static EXCEPTION_POINTERS *volatile crash_ep;
static volatile DWORD crash_tid;

static volatile int depth;
static void *volatile counted_at, *volatile into_descend, *volatile into_caller;
static DWORD64 walk[2 * WALK_MAX];

__attribute__((noinline)) static void descend(void) {
    volatile char buffer[400];
    ++depth;
counted:
    buffer[0] = (char)depth;
    if (depth == 1) {
        counted_at = &&counted;
        into_caller = __builtin_return_address(0);
    } else if (depth == 2) {
        into_descend = __builtin_return_address(0);
    }
    descend();
    buffer[1] = 0;
}

__attribute__((noinline)) static DWORD WINAPI overflow_thread(void *arg) {
    (void)arg;
    descend();
    return 0;
}

/* On the thread that overflowed, with a few pages of stack: hand over, wait for good. */
static LONG WINAPI hand_over(EXCEPTION_POINTERS *ep) {
    if (ep->ExceptionRecord->ExceptionCode != EXCEPTION_STACK_OVERFLOW)
        return EXCEPTION_CONTINUE_SEARCH;
    crash_ep = ep;
    crash_tid = GetCurrentThreadId();
    SetEvent(crashed);
    Sleep(INFINITE);
    return EXCEPTION_CONTINUE_SEARCH;
}

/* The writer: `overflow.exe --write PID CRASHED WRITTEN EP TID DUMP`, the crashed
 * process's id, the two events' handles (inherited), the addresses of its `crash_ep`
 * and `crash_tid`, and the dump's path. Waits for the crash, reads the exception
 * pointers and the thread id from the crashed process, writes the dump. */
static int write_dump(char **argv) {
    DWORD pid = strtoul(argv[2], NULL, 16);
    HANDLE crashed_event = (HANDLE)(ULONG_PTR)strtoull(argv[3], NULL, 16);
    HANDLE written_event = (HANDLE)(ULONG_PTR)strtoull(argv[4], NULL, 16);
    void *ep_at = (void *)(ULONG_PTR)strtoull(argv[5], NULL, 16);
    void *tid_at = (void *)(ULONG_PTR)strtoull(argv[6], NULL, 16);
    if (WaitForSingleObject(crashed_event, 30000) != WAIT_OBJECT_0)
        return 2;
    HANDLE process = OpenProcess(PROCESS_ALL_ACCESS, FALSE, pid);
    EXCEPTION_POINTERS *ep = NULL;
    DWORD tid = 0;
    if (!process || !ReadProcessMemory(process, ep_at, &ep, sizeof ep, NULL) ||
        !ReadProcessMemory(process, tid_at, &tid, sizeof tid, NULL)) {
        fprintf(stderr, "overflow: cannot read the crashed process (error %lu)\n",
                GetLastError());
        return 3;
    }
    HANDLE file = CreateFileA(argv[7], GENERIC_READ | GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
                              FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        fprintf(stderr, "overflow: cannot create %s (error %lu)\n", argv[7], GetLastError());
        return 4;
    }
    MINIDUMP_EXCEPTION_INFORMATION mei = {tid, ep, TRUE};
    if (!MiniDumpWriteDump(process, pid, file, MiniDumpNormal, &mei, NULL, NULL))
        fprintf(stderr, "overflow: MiniDumpWriteDump failed (error %lu)\n", GetLastError());
    CloseHandle(file);
    SetEvent(written_event);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 8 && !strcmp(argv[1], "--write"))
        return write_dump(argv);
    SECURITY_ATTRIBUTES inherit = {sizeof inherit, NULL, TRUE};
    crashed = CreateEventA(&inherit, TRUE, FALSE, NULL);
    written = CreateEventA(&inherit, TRUE, FALSE, NULL);
    char self[MAX_PATH], command[3 * MAX_PATH];
    GetModuleFileNameA(NULL, self, sizeof self);
    snprintf(command, sizeof command, "\"%s\" --write %lx %llx %llx %llx %llx \"%s\"", self,
             GetCurrentProcessId(), (unsigned long long)(ULONG_PTR)crashed,
             (unsigned long long)(ULONG_PTR)written, (unsigned long long)(ULONG_PTR)&crash_ep,
             (unsigned long long)(ULONG_PTR)&crash_tid, argc > 1 ? argv[1] : "crash.dmp");
    STARTUPINFOA si = {sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessA(NULL, command, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi))
        return 1;
    AddVectoredExceptionHandler(1, hand_over);
    if (!CreateThread(NULL, 1 << 20, overflow_thread, NULL, STACK_SIZE_PARAM_IS_A_RESERVATION,
                      NULL))
        return 1;
    if (WaitForSingleObject(written, 30000) != WAIT_OBJECT_0)
        return 2;
    printf("tid %lx\ndepth %x\ncounted %p\n", crash_tid, depth, counted_at);
    printf("into_descend %p\ninto_caller %p\n", into_descend, into_caller);
    printf("exception_address %p\n", crash_ep->ExceptionRecord->ExceptionAddress);
    int n = rtl_walk(*crash_ep->ContextRecord, walk, WALK_MAX);
    printf("walk %x", n);
    for (int i = 0; i < n; i++)
        printf(" %llx %llx", walk[2 * i], walk[2 * i + 1]);
    printf("\n");
    fflush(stdout);
    /* as the unhandled exception would */
    TerminateProcess(GetCurrentProcess(), EXCEPTION_STACK_OVERFLOW);
    return 0;
}
