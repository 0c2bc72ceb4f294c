/* A null-pointer write three calls below main. The functions are kept out of line and
 * do work after each call, so -O2 neither inlines them nor turns the calls into jumps. */
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) void crash_here(int *p, int v) {
    *p = v; /* SIGSEGV: p is null */
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
    (void)argv;
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", outer(p));
    return 0;
}
