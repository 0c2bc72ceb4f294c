/* Runs machine code written at run time, as a JIT does, and faults inside it: once from
 * an anonymous executable page and once from a memfd mapped executable (both have no
 * module, no unwind info and no symbols). The generated code is a leaf that reads address
 * 0 at its first instruction, so the return address is at the top of the stack. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int (*jit_fn)(void);
/* mov eax, dword ptr [0]; ret */
static const unsigned char CODE[] = {0x8b, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00, 0xc3};
volatile int sink;

static jit_fn emit(int use_memfd) {
    void *page;
    if (use_memfd) {
        int fd = memfd_create("jit", 0);
        if (fd < 0 || write(fd, CODE, sizeof CODE) != (ssize_t)sizeof CODE || ftruncate(fd, 4096) != 0) {
            perror("memfd");
            _exit(2);
        }
        page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    } else {
        page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page != MAP_FAILED) memcpy(page, CODE, sizeof CODE);
    }
    if (page == MAP_FAILED) {
        perror("mmap");
        _exit(2);
    }
    return (jit_fn)page;
}

__attribute__((noinline)) int run_generated(jit_fn f) {
    int r = f();
    sink += r;
    return r + 1;
}

__attribute__((noinline)) int interpreter_loop(jit_fn f) {
    int r = run_generated(f);
    return r + sink;
}

int main(int argc, char **argv) {
    (void)argv;
    jit_fn f = emit(argc > 1);
    printf("%d\n", interpreter_loop(f));
    return 0;
}
