/* Windows x64: a null-pointer write three calls below main (crash_here <- middle <- outer
 * <- main), the case of ../basic.c. The functions are kept out of line and do work after
 * each call, so -O2 neither inlines them nor turns the calls into jumps. The minidump is
 * written by dump_on_crash.c's unhandled exception filter. */
#include <stdio.h>

#include "dump_on_crash.h"

volatile int sink;

__attribute__((noinline)) void crash_here(int *p, int v) {
    *p = v; /* access violation: p is null */
    sink += v;
}

__attribute__((noinline)) int middle(int *p, int depth) {
    crash_here(p, depth * 3);
    return sink + depth;
}

__attribute__((noinline)) int outer(int *p) {
    int r = middle(p, 7);
    return r + sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", outer(p));
    return 0;
}
