/* A read of a field of a null struct pointer: SIGSEGV at the field's offset. */
#include <stddef.h>
#include <stdio.h>
struct session { long id; char name[16]; int refs; };
__attribute__((noinline)) int refs_of(volatile struct session *s) { return s->refs; }
int main(void) {
    printf("offset %#zx\n", offsetof(struct session, refs));
    fflush(stdout);
    return refs_of(NULL);
}
