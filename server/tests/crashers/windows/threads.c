/* Windows x64, three threads: one blocks in WaitForSingleObject on an event nobody sets,
 * one in Sleep(100000); once both have started (each sets an event main waits for) the
 * main thread writes through a null pointer in a function of its own. The minidump
 * (dump_on_crash.c) holds every thread, the crashed one with the exception's context. */
#include <windows.h>

#include "dump_on_crash.h"

static HANDLE never_set;
static HANDLE started[2];
volatile int sink;

__attribute__((noinline)) static DWORD WINAPI wait_forever(void *arg) {
    (void)arg;
    SetEvent(started[0]);
    WaitForSingleObject(never_set, INFINITE);
    sink++;
    return 0;
}

__attribute__((noinline)) static DWORD WINAPI sleep_long(void *arg) {
    (void)arg;
    SetEvent(started[1]);
    Sleep(100000);
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
    started[0] = CreateEventA(NULL, TRUE, FALSE, NULL);
    started[1] = CreateEventA(NULL, TRUE, FALSE, NULL);
    if (!CreateThread(NULL, 0, wait_forever, NULL, 0, NULL) ||
        !CreateThread(NULL, 0, sleep_long, NULL, 0, NULL))
        return 1;
    if (WaitForMultipleObjects(2, started, TRUE, 30000) != WAIT_OBJECT_0)
        return 2;
    Sleep(200); /* let them enter their waits */
    fault(argc > 100 ? &argc : NULL);
    return 0;
}
