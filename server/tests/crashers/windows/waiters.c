/* Windows x86 (built with frame pointers): three threads block while the main thread
 * crashes, each in another of the system's waits — an event (WaitForSingleObject), Sleep,
 * and a critical section the main thread holds — each in a function of its own, one of
 * them two calls deep. Before it blocks, each waiting function records the return
 * addresses of its own stack with CaptureStackBackTrace (wine's i386 ntdll follows the
 * ebp chain: the first is the waiting function's own return address) and prints them as
 * "trace TID FUNCTION ADDRESS...", hexadecimal, so that what a walk of the dump must find
 * below each wait is known from the program itself. */
#include <stdio.h>
#include <windows.h>

#include "dump_on_crash.h"

#define TRACE_MAX 32

static HANDLE never_set;
static HANDLE started;
static CRITICAL_SECTION held;
volatile int sink;

/* Prints the trace line of the calling function `name` (see above). */
#define PRINT_TRACE(name)                                                                  \
    do {                                                                                   \
        void *frames[TRACE_MAX];                                                           \
        USHORT n = CaptureStackBackTrace(0, TRACE_MAX, frames, NULL);                      \
        printf("trace %lu %s", GetCurrentThreadId(), name);                                \
        for (USHORT i = 0; i < n; i++)                                                     \
            printf(" %lx", (unsigned long)(ULONG_PTR)frames[i]);                           \
        printf("\n");                                                                      \
        fflush(stdout);                                                                    \
    } while (0)

__attribute__((noinline)) static void wait_for_event(void) {
    PRINT_TRACE("wait_for_event");
    SetEvent(started);
    WaitForSingleObject(never_set, INFINITE);
    sink++;
}

__attribute__((noinline)) static void relay(void) {
    wait_for_event();
    sink++;
}

__attribute__((noinline)) static DWORD WINAPI event_thread(void *arg) {
    (void)arg;
    relay();
    sink++;
    return 0;
}

__attribute__((noinline)) static void sleep_long(void) {
    PRINT_TRACE("sleep_long");
    SetEvent(started);
    Sleep(100000);
    sink++;
}

__attribute__((noinline)) static DWORD WINAPI sleep_thread(void *arg) {
    (void)arg;
    sleep_long();
    sink++;
    return 0;
}

__attribute__((noinline)) static void enter_held(void) {
    PRINT_TRACE("enter_held");
    SetEvent(started);
    EnterCriticalSection(&held);
    sink++;
    LeaveCriticalSection(&held);
}

__attribute__((noinline)) static DWORD WINAPI lock_thread(void *arg) {
    (void)arg;
    enter_held();
    sink++;
    return 0;
}

__attribute__((noinline)) static void fault(int *p) {
    *p = 1; /* access violation: p is null */
    sink++;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    never_set = CreateEventA(NULL, TRUE, FALSE, NULL);
    started = CreateEventA(NULL, FALSE, FALSE, NULL);
    InitializeCriticalSection(&held);
    EnterCriticalSection(&held);
    LPTHREAD_START_ROUTINE threads[] = {event_thread, sleep_thread, lock_thread};
    for (int i = 0; i < 3; i++) {
        if (!CreateThread(NULL, 0, threads[i], NULL, 0, NULL))
            return 1;
        if (WaitForSingleObject(started, 30000) != WAIT_OBJECT_0)
            return 2;
    }
    Sleep(300); /* let the last one enter its wait */
    fault(argc > 100 ? &argc : NULL);
    return 0;
}
