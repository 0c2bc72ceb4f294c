/* Windows x64: threads stopped inside function epilogues (epilogue.S: `add rsp; pop;
 * ret`, the same ending in a tail-call `jmp`, and `lea rsp, [rbp + N]; pop; ret`).
 *
 * A fault in an epilogue does not happen in real code, but a thread stopped there does:
 * any thread of a process dumped while it runs. Suspending a running thread until its pc
 * is the instruction wanted takes too long (the pcs a suspension sees are far from
 * uniform), so each thread walks up to it one instruction at a time: for each
 * instruction epilogue.S lists (epi_points), main starts a thread calling that function
 * in a loop; the thread sets the trap flag, and a vectored exception handler takes each
 * single-step trap, sets the flag again until the pc is the instruction, then records the
 * context there (the processor's state before that instruction runs) and parks the
 * thread. main suspends it and gives it that context back (SetThreadContext), as the
 * return from the handler would have: the thread is then suspended in the epilogue, its
 * stack as the function left it. Then main prints, for each thread, the reference its
 * walk is checked against, and writes through a null pointer: the minidump
 * (dump_on_crash.c) holds every thread at the context GetThreadContext gives.
 *
 * The reference, one line per thread:
 *   thread TID point F.I rip RIP rsp RSP truth RA SP self PC SP PC SP ... wine PC SP ...
 * - truth: the caller's frame, known without unwinding: the return address the function
 *   stored the address of at its entry, and the stack pointer just above it;
 * - self: the callers of the thread's loop (`work`), which the thread walked itself with
 *   RtlVirtualUnwind from RtlCaptureContext before looping: they do not change;
 * - wine: wine's own RtlVirtualUnwind walk from the thread's context (rtl_walk.c), for
 *   comparison. */
#include <windows.h>
#include <stdio.h>
#include <stdint.h>

#include "dump_on_crash.h"
#include "rtl_walk.h"

void epi_ret(volatile uint64_t *entry);
void epi_jmp(volatile uint64_t *entry);
void epi_lea(volatile uint64_t *entry);
extern void *epi_points[];

#define MAX_THREADS 16
#define TRAP_FLAG 0x100

struct worker {
    void (*fn)(volatile uint64_t *);
    uint64_t target;
    int function, point;
    volatile uint64_t entry;
    volatile int step;
    HANDLE ready, caught, thread;
    DWORD tid;
    CONTEXT context;
    DWORD64 self[2 * RTL_WALK_MAX];
    int self_frames;
};

static struct worker workers[MAX_THREADS];
static int count;
static HANDLE never;
volatile int sink;

/* Single-steps a worker to its target, then parks it there. */
static LONG WINAPI stepper(EXCEPTION_POINTERS *ep) {
    if (ep->ExceptionRecord->ExceptionCode != EXCEPTION_SINGLE_STEP)
        return EXCEPTION_CONTINUE_SEARCH;
    struct worker *w = NULL;
    for (int k = 0; k < count; k++)
        if (workers[k].tid == GetCurrentThreadId())
            w = &workers[k];
    if (!w)
        return EXCEPTION_CONTINUE_SEARCH;
    CONTEXT *c = ep->ContextRecord;
    if (c->Rip != w->target) {
        c->EFlags |= TRAP_FLAG;
        return EXCEPTION_CONTINUE_EXECUTION;
    }
    c->EFlags &= ~TRAP_FLAG;
    w->context = *c;
    SetEvent(w->caught);
    WaitForSingleObject(never, INFINITE);
    return EXCEPTION_CONTINUE_EXECUTION;
}

__attribute__((noinline)) static DWORD WINAPI work(void *arg) {
    struct worker *w = arg;
    CONTEXT c;
    RtlCaptureContext(&c);
    DWORD64 frames[2 * (RTL_WALK_MAX + 1)];
    int n = rtl_walk(c, frames, RTL_WALK_MAX + 1);
    /* frame 0 is work itself: keep its callers */
    for (int i = 1; i < n; i++) {
        w->self[2 * (i - 1)] = frames[2 * i];
        w->self[2 * (i - 1) + 1] = frames[2 * i + 1];
    }
    w->self_frames = n - 1;
    SetEvent(w->ready);
    for (;;) {
        if (w->step) {
            w->step = 0;
            __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
        }
        w->fn(&w->entry);
    }
    return 0;
}

__attribute__((noinline)) static void fault(int *p) {
    *p = 1; /* access violation: p is null */
    sink++;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    never = CreateEventA(NULL, TRUE, FALSE, NULL);
    AddVectoredExceptionHandler(1, stepper);
    void (*fns[3])(volatile uint64_t *) = {epi_ret, epi_jmp, epi_lea};
    void **p = epi_points;
    for (int f = 0; f < 3; f++, p++)
        for (int i = 0; *p; i++, p++) {
            struct worker *w = &workers[count];
            w->fn = fns[f];
            w->target = (uint64_t)*p;
            w->function = f;
            w->point = i;
            w->ready = CreateEventA(NULL, TRUE, FALSE, NULL);
            w->caught = CreateEventA(NULL, TRUE, FALSE, NULL);
            w->thread = CreateThread(NULL, 0, work, w, CREATE_SUSPENDED, &w->tid);
            if (!w->thread)
                return 2;
            count++;
            ResumeThread(w->thread);
            if (WaitForSingleObject(w->ready, 30000) != WAIT_OBJECT_0)
                return 2;
            w->step = 1;
            if (WaitForSingleObject(w->caught, 30000) != WAIT_OBJECT_0) {
                printf("missed point %d.%d\n", f, i);
                return 3;
            }
            SuspendThread(w->thread);
            w->context.ContextFlags = CONTEXT_FULL;
            CONTEXT now;
            now.ContextFlags = CONTEXT_FULL;
            if (!SetThreadContext(w->thread, &w->context) || !GetThreadContext(w->thread, &now) ||
                now.Rip != w->target || now.Rsp != w->context.Rsp) {
                printf("cannot stop point %d.%d\n", f, i);
                return 4;
            }
        }
    for (int k = 0; k < count; k++) {
        struct worker *w = &workers[k];
        uint64_t entry = w->entry;
        printf("thread %lu point %d.%d rip %llx rsp %llx truth %llx %llx self", w->tid,
               w->function, w->point, w->context.Rip, w->context.Rsp,
               *(unsigned long long *)entry, entry + 8);
        for (int i = 0; i < w->self_frames; i++)
            printf(" %llx %llx", w->self[2 * i], w->self[2 * i + 1]);
        print_rtl_walk(" wine", &w->context);
    }
    fault(argc > 100 ? &argc : NULL);
    return 0;
}
