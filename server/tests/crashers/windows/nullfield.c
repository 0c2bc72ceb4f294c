/* Windows x64: a read of a field of a null struct pointer, an access violation (read) at
 * the field's offset, which the program prints first. The minidump is written by
 * dump_on_crash.c's filter. */
#include <stddef.h>
#include <stdio.h>

#include "dump_on_crash.h"

struct session {
    long long id;
    char name[16];
    int refs;
};

__attribute__((noinline)) int refs_of(volatile struct session *s) { return s->refs; }

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    printf("offset %#zx\n", offsetof(struct session, refs));
    fflush(stdout);
    return refs_of(argc > 100 ? (struct session *)argv : NULL);
}
