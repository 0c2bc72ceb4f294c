/* Unbounded recursion on the main thread, whose stack the program first limits to
 * 256 KiB (RLIMIT_STACK, which the kernel checks as the stack grows): SIGSEGV just below
 * the stack's lowest page. The crash is on the main thread, so the recorder can take a
 * minidump of it too (overflow.c overflows a worker thread's stack). */
#include <sys/resource.h>
volatile int sink;
__attribute__((noinline)) static int descend(int n) { volatile char pad[48]; pad[0] = (char)n; return descend(n + 1) + pad[0]; }
int main(void) {
    struct rlimit r = { 256 << 10, 256 << 10 };
    if (setrlimit(RLIMIT_STACK, &r) != 0) return 2;
    sink = descend(0);
    return sink;
}
