/* Windows x64: a write through a non-canonical pointer (0x8000000000001000: bits 63..47
 * differ), a general-protection fault, which Windows reports as an access violation at
 * 0xffffffffffffffff: only the instruction's operands give the address. */
#include <stdint.h>
#include <stdio.h>

#include "dump_on_crash.h"

volatile uintptr_t slot = 0x8000000000001000ull;

__attribute__((noinline)) void store(volatile long long *p) { *p = 42; }

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    store((volatile long long *)slot);
    puts("stored");
    return 0;
}
