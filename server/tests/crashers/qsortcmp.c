/* A comparator called by libc's qsort faults: the walk goes through libc's sort code back to main. */
#include <stdlib.h>
#include <stdio.h>
volatile int *volatile bad_pointer;
static int compare(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (x == 7 || y == 7) *bad_pointer = x;
    return (x > y) - (x < y);
}
__attribute__((noinline)) static void sort_all(int *v, size_t n) { qsort(v, n, sizeof *v, compare); }
int main(void) { int v[32]; for (int i = 0; i < 32; i++) v[i] = (i * 13) % 32; sort_all(v, 32); printf("%d\n", v[0]); return 0; }
