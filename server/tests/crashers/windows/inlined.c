/* Windows x64: a null-pointer write inside two inlined calls (store <- scaled <- work, both
 * always_inline), in a loop, at -O2: the case of a PDB's inline sites, whose lines are
 * binary annotations nested in the procedure. Built by clang with a PDB (see
 * windows_minidump.rs); the minidump is written by dump_on_crash.c's filter. */
#include <stdio.h>

#include "dump_on_crash.h"

volatile int sink;

static inline __attribute__((always_inline)) void store(int *p, int v) {
    *p = v; /* access violation: p is null */
}

static inline __attribute__((always_inline)) void scaled(int *p, int v) {
    sink += v;
    store(p, v * 3);
    sink -= v;
}

__attribute__((noinline)) int work(int *p, int n) {
    for (int i = 0; i < n; i++)
        scaled(p + i, i + sink);
    return sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", work(p, argc + 3));
    return 0;
}
