/* free() twice: glibc's tcache check aborts with "free(): double free detected in tcache 2". */
#include <stdlib.h>
#include <stdio.h>
__attribute__((noinline)) static void release(char *p) { free(p); }
int main(void) {
    char *p = malloc(32);
    p[0] = 1;
    release(p);
    release(p);
    puts("unreachable");
    return 0;
}
