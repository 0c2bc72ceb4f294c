/* -O3: the static helpers are inlined into `compute`, so the faulting instruction sits in
 * three inlined functions at once; gdb shows them as INLINE_FRAME frames. */
#include <stdio.h>

volatile int sink;

static inline __attribute__((always_inline)) void store_value(int *p, int v) {
    *p = v; /* SIGSEGV: p is null */
}

static inline __attribute__((always_inline)) void scale_and_store(int *p, int v) {
    store_value(p, v * 5);
    sink += v;
}

static inline __attribute__((always_inline)) void prepare(int *p, int v) {
    scale_and_store(p, v + 1);
    sink += 2;
}

__attribute__((noinline)) int compute(int *p, int v) {
    prepare(p, v);
    return sink;
}

int main(int argc, char **argv) {
    (void)argv;
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", compute(p, argc));
    return 0;
}
