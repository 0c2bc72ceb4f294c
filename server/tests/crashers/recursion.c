/* 250 nested calls of one recursive function, then a null write at the bottom. */
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) int recurse(int *p, int depth) {
    if (depth == 0) {
        *p = 1; /* SIGSEGV: p is null */
        return sink;
    }
    int r = recurse(p, depth - 1);
    return r + depth + sink; /* not a tail call */
}

int main(int argc, char **argv) {
    (void)argv;
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", recurse(p, 250));
    return 0;
}
