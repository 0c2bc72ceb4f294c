/* Windows x64: the frames that exercise the unwind codes beyond pushes and allocations.
 * main -> with_alloca (a variable-size alloca: the frame is addressed from a frame
 * register, UWOP_SET_FPREG) -> with_xmm (doubles live across a call: xmm6 and up are
 * non-volatile on Windows and saved with UWOP_SAVE_XMM128) -> msvcrt's qsort -> compare,
 * a callback that writes through a null pointer, so the walk crosses a system DLL's
 * .pdata between two of the program's frames. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "dump_on_crash.h"

volatile int sink;
int *volatile target;

static int compare(const void *a, const void *b) {
    *target = *(const int *)a; /* access violation: target is null */
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) double with_xmm(double x, double y, int n) {
    double a = x * 1.5, b = y * 2.5, c = x + y, d = x - y;
    int values[] = {4, 1, 3, 2, n};
    qsort(values, 5, sizeof values[0], compare);
    /* a, b, c, d live across the call */
    return a * b + c * d + values[0];
}

__attribute__((noinline)) int with_alloca(int n) {
    char *buffer = alloca(n);
    for (int i = 0; i < n; i++) buffer[i] = (char)i;
    double r = with_xmm(buffer[n - 1], n, n);
    return (int)r + buffer[0] + sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    printf("%d\n", with_alloca(64 + argc));
    return 0;
}
