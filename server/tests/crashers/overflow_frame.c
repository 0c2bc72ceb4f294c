/* Unbounded recursion with large frames (8 KiB of locals) on the main thread, whose stack
 * the program first limits to 256 KiB as overflow_main.c does. Each call lowers the stack
 * pointer by a whole frame in one instruction and then writes near the frame's bottom
 * (pad[64], at sp + 64 or so): when the stack runs out, that write faults in the new frame,
 * above the stack pointer, unless ASLR put the stack's end within those first bytes
 * (about 1 run in 100), when the call's push faults below it. Built with
 * -fno-stack-clash-protection, else the compiler probes each page at the pointer first. */
#include <sys/resource.h>
volatile int sink;
__attribute__((noinline)) static int descend(int n) {
    volatile char pad[8192];
    pad[64] = (char)n;
    return descend(n + 1) + pad[64];
}
int main(void) {
    struct rlimit r = { 256 << 10, 256 << 10 };
    if (setrlimit(RLIMIT_STACK, &r) != 0) return 2;
    sink = descend(0);
    return sink;
}
