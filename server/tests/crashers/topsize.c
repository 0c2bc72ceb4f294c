/* A heap overrun into the top chunk's size field: the next malloc that has to carve
 * from the top chunk finds a size larger than the arena and glibc aborts with
 * "malloc(): corrupted top size". Prints nothing on stdout, so the recorder can take
 * a minidump of it. */
#include <stdlib.h>
#include <string.h>
char *volatile last;
__attribute__((noinline)) static void overrun(char *buf, size_t n) { memset(buf, 0xff, n); }
/* not a tail call: grow stays on the stack under malloc */
__attribute__((noinline)) static char *grow(size_t n) { last = malloc(n); return last; }
int main(void) {
    char *buf = malloc(24);
    /* the chunk's 24 usable bytes, then the 8-byte size of the top chunk after them */
    overrun(buf, 32);
    return grow(4096) != NULL;
}
