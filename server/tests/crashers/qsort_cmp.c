/* A qsort comparator that faults: the frames between it and `sort_records` are libc's
 * own (msort), which the cross libc names only from its dynamic symbols. */
#include <stdio.h>
#include <stdlib.h>

struct record {
    int key;
    int *weight;
};

volatile int sink;

__attribute__((noinline)) static int by_weight(const void *a, const void *b) {
    const struct record *x = a, *y = b;
    return *x->weight - *y->weight; /* SIGSEGV: the third record's weight is null */
}

__attribute__((noinline)) static void sort_records(struct record *r, size_t n) {
    qsort(r, n, sizeof *r, by_weight);
    sink += r[0].key;
}

int main(void) {
    static int w[4] = {4, 3, 2, 1};
    struct record r[6] = {{0, &w[0]}, {1, &w[1]}, {2, NULL}, {3, &w[2]}, {4, &w[3]}, {5, &w[0]}};
    sort_records(r, 6);
    printf("%d\n", r[0].key);
    return 0;
}
