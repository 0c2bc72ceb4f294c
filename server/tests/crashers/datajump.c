/* A call into data: a handler pointer that points at a heap block holding machine code
 * (mov eax, 42; ret). The heap is mapped but not executable, so the call faults at its
 * first byte (SIGSEGV, SEGV_ACCERR, pc = the block). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int (*handler)(int);
static const unsigned char body[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3};
__attribute__((noinline)) static int dispatch(handler h, int x) { return h(x) + 1; }
int main(void) {
    unsigned char *block = malloc(64);
    if (!block) return 1;
    memcpy(block, body, sizeof body);
    printf("block %p\n", (void *)block);
    fflush(stdout);
    return dispatch((handler)block, 1);
}
