/* The README's new user's crash: a null string handed to strlen, so the fault is inside
 * libc (glibc's __strlen_<cpu variant>), two calls below main. */
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) size_t name_length(const char *name) {
    return strlen(name) + 1; /* SIGSEGV inside libc: name is null */
}

int main(int argc, char **argv) {
    const char *name = argc > 100 ? argv[0] : NULL;
    printf("%zu\n", name_length(name));
    return 0;
}
