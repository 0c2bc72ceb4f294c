/* A compiler trap: __builtin_trap() is ud2 on x86_64 (brk on aarch64): SIGILL. */
#include <stdio.h>
__attribute__((noinline)) static int checked_index(int i) {
    if (i > 3)
        __builtin_trap();
    return i;
}
int main(int argc, char **argv) { (void)argv; printf("%d\n", checked_index(argc + 4)); return 0; }
