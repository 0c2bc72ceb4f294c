/* Windows x64: the process dies of an exception raised with RaiseException, its code
 * RAISED given at compile time (-DRAISED=0x…): what the C runtime does for heap
 * corruption (STATUS_HEAP_CORRUPTION), a fast fail (STATUS_STACK_BUFFER_OVERRUN), an
 * uncaught MSVC C++ exception (0xE06D7363, with the MSVC runtime's magic number as its
 * first parameter) or a breakpoint. Frame 0 is in kernelbase's RaiseException; raise_it
 * and main are the program's. The minidump is written by dump_on_crash.c's filter. */
#include <windows.h>
#include <stdio.h>

#include "dump_on_crash.h"

volatile int sink;

__attribute__((noinline)) void raise_it(DWORD code) {
    ULONG_PTR args[3] = {0x19930520, 0, 0};
    RaiseException(code, EXCEPTION_NONCONTINUABLE, code == 0xE06D7363 ? 3 : 0, args);
    sink++;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    raise_it(RAISED);
    printf("%d\n", sink);
    return 0;
}
