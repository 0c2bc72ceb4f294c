/* bench/big-debug.sh: the crashing program of a 2 GB debug file. Its own unit is small;
 * the script links UNITS copies of a unit of types alone beside it (a header's types,
 * repeated in every unit that includes it, as a large C++ program's debug file holds
 * them), so the walk must find this unit among thousands without reading them. */
#include <stdio.h>

__attribute__((noinline)) static void crash_here(int *p) { *p = 42; }

__attribute__((noinline)) void middle(int *p) {
    crash_here(p);
    printf("not reached\n");
}

__attribute__((noinline)) void outer(int depth, int *p) {
    if (depth)
        outer(depth - 1, p);
    else
        middle(p);
    printf("depth %d\n", depth);
}

int main(int argc, char **argv) {
    (void)argv;
    outer(3, argc > 5 ? &argc : NULL);
    return 0;
}
