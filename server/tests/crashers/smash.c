/* A buffer overrun caught by the stack protector: __stack_chk_fail aborts. */
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) static void fill(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }
__attribute__((noinline)) static int parse(const char *input, size_t n) { char buf[16]; fill(buf, input, n); return buf[0]; }
int main(void) { static char big[64]; memset(big, 'A', sizeof big); printf("%d\n", parse(big, sizeof big)); return 0; }
