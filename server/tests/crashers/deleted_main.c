/* Loads a shared library, deletes its file, then faults inside it: the kernel records the
 * mapping's path as "PATH (deleted)". The module is still the library at PATH (gdb lists
 * it by the dynamic linker's name), found by its build-id wherever a copy is. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    (void)argv;
    const char *path = "./gone/libcrashlib.so";
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    int (*entry)(int *, int) = (int (*)(int *, int))dlsym(lib, "lib_entry");
    if (!entry || unlink(path) != 0) {
        perror("lib_entry / unlink");
        return 2;
    }
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", entry(p, 1));
    return 0;
}
