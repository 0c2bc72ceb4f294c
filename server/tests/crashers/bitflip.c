/* A pointer with one flipped bit, as faulty memory or a particle strike leaves it: a heap
 * block's address with bit 40 flipped, 1 TiB away from the heap, where nothing is mapped.
 * Prints the block's real address, then reads through the corrupted pointer
 * (SEGV_MAPERR at the flipped address). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
struct account { long balance; long limit; };
__attribute__((noinline)) static long balance_of(struct account *volatile *slot) {
    return (*slot)->balance;
}
int main(void) {
    struct account *a = malloc(sizeof *a);
    a->balance = 100;
    a->limit = 0;
    printf("address %p\n", (void *)a);
    fflush(stdout);
    struct account *volatile slot = (struct account *)((uintptr_t)a ^ ((uintptr_t)1 << 40));
    return (int)balance_of(&slot);
}
