/* Windows x86 and x64: a fault inside a vectored exception handler. `victim` writes
 * through a null pointer (the first access violation); the handler the program added
 * with AddVectoredExceptionHandler runs on the same stack, under the system's exception
 * dispatcher, and calls `handler_fault`, which writes through null too (the second, which
 * dump_on_crash.c's filter writes the minidump of). The stack crosses the dispatcher:
 * handler_fault <- on_exception <- (the dispatcher's frames) <- the interrupted victim
 * <- main.
 *
 * The program prints its own record of that stack before the second fault,
 * `handler RETURN PC`: on_exception's return address (into the dispatcher) and the
 * context record's pc of the first fault (in victim). */
#include <stdio.h>
#include <windows.h>

#include "dump_on_crash.h"

volatile int sink;
static int *volatile nowhere;

__attribute__((noinline)) void handler_fault(int code) {
    *nowhere = code; /* the second access violation */
    sink += code;
}

static volatile int entered;

__attribute__((noinline)) LONG CALLBACK on_exception(EXCEPTION_POINTERS *info) {
    /* the second fault comes here too: let it go on to the unhandled filter */
    if (entered++)
        return EXCEPTION_CONTINUE_SEARCH;
    void *ret = __builtin_return_address(0);
    void *pc = info->ContextRecord ?
#if defined(_WIN64)
        (void *)info->ContextRecord->Rip
#else
        (void *)info->ContextRecord->Eip
#endif
        : NULL;
    printf("handler %p %p\n", ret, pc);
    fflush(stdout);
    handler_fault((int)info->ExceptionRecord->ExceptionCode);
    return EXCEPTION_CONTINUE_SEARCH;
}

__attribute__((noinline)) void victim(int v) {
    *nowhere = v; /* the first access violation */
    sink += v;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    AddVectoredExceptionHandler(1, on_exception);
    victim(argc);
    printf("%d\n", sink);
    return 0;
}
