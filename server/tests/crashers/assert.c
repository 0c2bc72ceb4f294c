/* A failed assert: abort() through libc's raise, SIGABRT. */
#include <assert.h>
#include <stdio.h>

__attribute__((noinline)) int check_invariant(int value) {
    assert(value == 42 && "value must be 42");
    return value;
}

int main(int argc, char **argv) {
    (void)argv;
    printf("%d\n", check_invariant(argc));
    return 0;
}
