/* A read through a non-canonical pointer: a general-protection fault, no address. */
#include <stdint.h>
volatile uintptr_t bad = 0xdead000000000010;
__attribute__((noinline)) static long peek(void) { return *(volatile long *)bad; }
int main(void) { return (int)peek(); }
