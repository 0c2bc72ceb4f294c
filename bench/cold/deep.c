/* bench/cold-walk.sh: a 200-deep recursion that aborts at the bottom. */
#include <stdlib.h>

__attribute__((noinline)) static int descend(int depth, volatile int *sink) {
    if (depth == 0) abort();
    *sink += depth;
    return descend(depth - 1, sink) + *sink;
}

int main(void) {
    volatile int sink = 0;
    return descend(200, &sink);
}
