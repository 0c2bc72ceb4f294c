/* A call through a null function pointer: frame 0's pc is 0, its return address on top of the stack. */
#include <stdio.h>
typedef int (*callback)(int);
volatile callback hook;
__attribute__((noinline)) static int dispatch(int v) { return hook(v) + 1; }
__attribute__((noinline)) static int run(int v) { return dispatch(v * 2) + 3; }
int main(void) { printf("%d\n", run(5)); return 0; }
