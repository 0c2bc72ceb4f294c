/* A return to a non-canonical address: the return address on the stack is overwritten,
 * and `ret` itself faults with a general-protection fault (no address reported) — what a
 * smashed stack looks like without a stack protector. */
#include <stdint.h>
__attribute__((noinline)) static void smash(void) {
    volatile uintptr_t *frame = __builtin_frame_address(0);
    frame[1] = 0xdead000000000000; /* the return address, above the saved frame pointer */
}
int main(void) {
    smash();
    return 0;
}
