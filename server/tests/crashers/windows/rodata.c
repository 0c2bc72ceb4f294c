/* Windows x64: a write to a string literal, which lives in the image's read-only .rdata
 * section: an access violation (write) at the literal's address, which the program
 * prints first. */
#include <stdio.h>

#include "dump_on_crash.h"

__attribute__((noinline)) void shout(char *s) { s[0] = 'H'; }

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    char *greeting = (char *)"hello";
    printf("address %p\n", (void *)greeting);
    fflush(stdout);
    shout(greeting);
    puts(greeting);
    return 0;
}
