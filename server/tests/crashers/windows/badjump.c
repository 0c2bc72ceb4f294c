/* Windows x64 and x86: a call through a garbage function pointer (0x13370000, nothing is
 * mapped there): the pc lands outside all code, an access violation (execute) at that
 * address; the return address into dispatch is the word at the stack pointer. */
#include <stdint.h>
#include <stdio.h>

#include "dump_on_crash.h"

typedef void (*handler)(void);
volatile uintptr_t slot = 0x13370000;

__attribute__((noinline)) void dispatch(void) {
    ((handler)slot)();
    puts("returned");
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    dispatch();
    return 0;
}
