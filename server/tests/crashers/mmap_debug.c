/* Maps files as data, as a program that symbolizes itself does, then faults a few calls
 * deep: libc's separate debug file (found by libc's own build-id under
 * /usr/lib/debug/.build-id, which libc6-dbg installs), the program's own executable
 * (/proc/self/exe) and its own executable once more at a file offset past its header.
 * None of these mappings is a module: gdb lists only what the dynamic linker loaded.
 * With the argument `live` it does not fault: it prints `ready` and waits in pause()
 * where it would have faulted, for gcore to dump it. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char libc_debug[512];
volatile int sink;
static int live;

static int find_libc(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (!strstr(info->dlpi_name, "libc.so")) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_NOTE) continue;
        const unsigned char *n = (const unsigned char *)(info->dlpi_addr + p->p_vaddr);
        const unsigned char *end = n + p->p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *h = (const ElfW(Nhdr) *)n;
            const unsigned char *name = n + sizeof(ElfW(Nhdr));
            const unsigned char *desc = name + ((h->n_namesz + 3) & ~3u);
            if (h->n_type == NT_GNU_BUILD_ID && h->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                int k = sprintf(libc_debug, "/usr/lib/debug/.build-id/%02x/", desc[0]);
                for (unsigned j = 1; j < h->n_descsz; j++)
                    k += sprintf(libc_debug + k, "%02x", desc[j]);
                strcpy(libc_debug + k, ".debug");
                return 1;
            }
            n = desc + ((h->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static void map_as_data(const char *path, off_t offset) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= offset) {
        perror(path);
        _exit(2);
    }
    void *p = mmap(NULL, st.st_size - offset, PROT_READ, MAP_PRIVATE, fd, offset);
    if (p == MAP_FAILED) {
        perror("mmap");
        _exit(2);
    }
    sink += ((volatile unsigned char *)p)[0];
    close(fd);
}

__attribute__((noinline)) void crash_here(int *p, int v) {
    if (live) {
        puts("ready");
        fflush(stdout);
        for (;;) pause();
    }
    *p = v; /* SIGSEGV: p is null */
    sink += v;
}

__attribute__((noinline)) int middle(int *p, int depth) {
    crash_here(p, depth * 3);
    return sink + depth;
}

int main(int argc, char **argv) {
    live = argc > 1 && strcmp(argv[1], "live") == 0;
    dl_iterate_phdr(find_libc, NULL);
    if (!libc_debug[0]) {
        fprintf(stderr, "libc has no build-id\n");
        return 2;
    }
    map_as_data(libc_debug, 0);
    map_as_data("/proc/self/exe", 0);
    map_as_data("/proc/self/exe", 4096);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", middle(p, 7));
    return 0;
}
