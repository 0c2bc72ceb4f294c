/* A read of memory unmapped after use: SEGV_MAPERR at an address that was valid. Prints
 * the address it will read. */
#include <stdio.h>
#include <sys/mman.h>
__attribute__((noinline)) static int read_after_unmap(void) {
    volatile int *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p[0] = 7;
    printf("address %p\n", (void *)&p[1000]);
    fflush(stdout);
    munmap((void *)p, 1 << 20);
    return p[1000];
}
int main(void) { printf("%d\n", read_after_unmap()); return 0; }
