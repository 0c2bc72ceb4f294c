/* Windows x64: a fast fail with code FAST_FAIL_CODE (given at compile time as one of
 * winnt.h's FAST_FAIL_* names; the program prints its value) in check_length(), as Windows
 * reports one: STATUS_STACK_BUFFER_OVERRUN with the code as the
 * exception's first parameter. It is raised with RaiseException: a real __fastfail
 * (`int 0x29`, the code in ecx) runs no handler and no unhandled exception filter, so the
 * program cannot write its own dump of it (under wine it exits with status 9 and no dump;
 * on Windows the dump comes from Windows Error Reporting). */
#include <windows.h>
#include <stdio.h>

#include "dump_on_crash.h"

volatile int sink;

__attribute__((noinline)) void check_length(int length) {
    if (length > 4) {
        ULONG_PTR args[1] = {FAST_FAIL_CODE};
        RaiseException(0xC0000409, EXCEPTION_NONCONTINUABLE, 1, args);
    }
    sink += length;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    printf("code %d\n", (int)FAST_FAIL_CODE);
    fflush(stdout);
    check_length(argc + 10);
    printf("%d\n", sink);
    return 0;
}
