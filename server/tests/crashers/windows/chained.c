/* Windows x64: a fault in the second part of a function split in two, whose unwind info
 * chains to the first part's (chained.S, the .pdata and .xdata written by hand). The walk
 * must undo the second part's own prologue, then the first part's, to find `caller`.
 *
 * The reference is the program's own: a vectored exception handler walks the faulting
 * context with RtlVirtualUnwind (rtl_walk.c) and prints `walk PC SP PC SP ...` before the
 * dump is written. winedbg cannot walk past the fault: wine's minidump writer copies each
 * unwind info's codes into the dump but not the parent RUNTIME_FUNCTION a chained one
 * ends with, and winedbg reads unwind info from the dump's memory only. */
#include <windows.h>
#include <stdio.h>

#include "dump_on_crash.h"
#include "rtl_walk.h"

void split_function(int *p);

volatile int sink;

static LONG WINAPI reference(EXCEPTION_POINTERS *ep) {
    if (ep->ExceptionRecord->ExceptionCode == EXCEPTION_ACCESS_VIOLATION)
        print_rtl_walk("walk", ep->ContextRecord);
    return EXCEPTION_CONTINUE_SEARCH;
}

__attribute__((noinline)) int caller(int *p) {
    split_function(p);
    return sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    AddVectoredExceptionHandler(1, reference);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", caller(p));
    return 0;
}
