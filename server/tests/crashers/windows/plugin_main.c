/* Windows x64: loads plugin.dll with LoadLibrary and calls its plugin_entry, which faults
 * (see plugin.c). */
#include <stdio.h>
#include <windows.h>

#include "dump_on_crash.h"

volatile int sink;

__attribute__((noinline)) int call_plugin(int *p) {
    HMODULE plugin = LoadLibraryA("plugin.dll");
    if (!plugin) {
        fprintf(stderr, "plugin.dll not loaded\n");
        return 1;
    }
    int (*entry)(int *) = (int (*)(int *))(void *)GetProcAddress(plugin, "plugin_entry");
    int r = entry(p);
    return r + sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", call_plugin(p));
    return 0;
}
