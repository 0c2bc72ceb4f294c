/* A write to a string literal, which lives in read-only memory: SEGV_ACCERR. */
#include <stdio.h>
__attribute__((noinline)) void shout(char *s) { s[0] = 'H'; }
int main(void) {
    char *greeting = (char *)"hello";
    printf("address %p\n", (void *)greeting);
    fflush(stdout);
    shout(greeting);
    puts(greeting);
    return 0;
}
