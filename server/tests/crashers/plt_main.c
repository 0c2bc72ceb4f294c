/* Calls into libcrashlib.so through the PLT; the library faults. */
#include <stdio.h>

int lib_entry(int *p, int v);

__attribute__((noinline)) int call_library(int *p) {
    int r = lib_entry(p, 5);
    return r + 1;
}

int main(int argc, char **argv) {
    (void)argv;
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", call_library(p));
    return 0;
}
