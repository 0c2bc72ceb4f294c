/* Integer division by zero in an inlined helper at -O2: SIGFPE. */
#include <stdio.h>
#include <stdlib.h>
static inline int ratio(int a, int b) { return a / b; }
__attribute__((noinline)) static int average(int total, int count) { return ratio(total, count) + 1; }
int main(int argc, char **argv) { (void)argv; printf("%d\n", average(100, argc - 1)); return 0; }
