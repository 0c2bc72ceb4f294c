/* Windows x64: an integer division by zero (EXCEPTION_INT_DIVIDE_BY_ZERO) in average().
 * The divisor is argc - 2: the program runs with one argument, the dump's name. */
#include <stdio.h>

#include "dump_on_crash.h"

__attribute__((noinline)) int average(int total, int count) { return total / count + 1; }

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    printf("%d\n", average(100, argc - 2));
    return 0;
}
