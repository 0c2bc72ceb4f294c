/* A call through a garbage function pointer: the pc lands outside all code. */
#include <stdint.h>
#include <stdio.h>
typedef void (*handler)(void);
volatile uintptr_t slot = 0x13370000;
__attribute__((noinline)) static void dispatch(void) { ((handler)slot)(); }
int main(void) { dispatch(); puts("unreachable"); return 0; }
