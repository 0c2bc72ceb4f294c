/* A function whose last instruction is a call that never returns (abort), and which is the
 * last function of .text (gcc -O2 puts main in .text.startup, before it): the return
 * address its callee saves is one past the end of the section, in no executable code.
 * gdb and eu-stack look the caller up at the call (return address - 1), as the walk must. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void prepare(int n) { printf("%d\n", n); }

__attribute__((noinline)) void die_after(int n) {
    prepare(n);
    abort();
}

int main(int argc, char **argv) {
    (void)argv;
    die_after(argc);
    return 0;
}
