/* Issue 37's grouping suite, C part: one bug per id (argv[1]), crashed on the main thread
 * or on a worker thread (argv[2] = "thread"). Built twice, the second time with -DMOVED,
 * which puts 4 KiB of code before every function: a rebuilt binary whose code moved.
 * server/tests/grouping.rs says which crashes are one bug. */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NI __attribute__((noinline))
#ifdef MOVED
NI void moved_padding(void) { __asm__ volatile(".skip 4096"); }
#endif

volatile int sink;
int *volatile null_ptr;
const char *volatile null_str;

NI void validate_order(int n) { assert(n < 0 && "order count"); sink = n; }
NI void validate_user(int n) { assert(n > 100 && "user id"); sink = n; }
NI void give_up(void) { abort(); }
/* one bug, reached from two callers: read_field reads through the pointer it is given */
NI int read_field(int *p) { return p[4]; }
NI int from_config(void) { return read_field(null_ptr) + 1; }
NI int from_request(void) { return read_field(null_ptr) + 2; }
NI void write_counter(void) { *null_ptr = 7; }
/* two bugs inside libc: each caller passes a null string to strlen */
NI int name_length(void) { return (int)strlen(null_str); }
NI int path_length(void) { return (int)strlen(null_str) + 1; }
NI int descend(int n) { volatile char pad[64]; pad[0] = (char)n; return descend(n + 1) + pad[0]; }
NI void free_twice(void) { char *volatile p = malloc(32); free(p); free(p); }

static int bug;
static int threaded;

static void *run(void *arg) {
    (void)arg;
    switch (bug) {
    case 1: validate_order(1); break;
    case 2: validate_user(1); break;
    case 3: give_up(); break;
    case 4: sink = threaded ? from_request() : from_config(); break;
    case 5: write_counter(); break;
    case 6: sink = name_length(); break;
    case 7: sink = path_length(); break;
    case 8: sink = descend(0); break;
    case 9: free_twice(); break;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    bug = atoi(argv[1]);
    threaded = argc > 2 && strcmp(argv[2], "thread") == 0;
#ifdef MOVED
    if (argc > 5) moved_padding();
#endif
    if (!threaded) { run(0); return 0; }
    pthread_t t;
    pthread_create(&t, 0, run, 0);
    pthread_join(t, 0);
    return 0;
}
