/* Windows x64: a DLL of the test's own (plugin.dll), loaded at run time by plugin_main.c
 * with LoadLibrary; the crash is inside it, two of its functions deep, so the walk needs
 * the DLL's own .pdata (found by its name and code id) to return to the program. */
volatile int plugin_sink;

__attribute__((noinline)) static void plugin_fault(int *p, int v) {
    *p = v; /* access violation: p is null */
    plugin_sink += v;
}

__attribute__((noinline)) __declspec(dllexport) int plugin_entry(int *p) {
    plugin_fault(p, 11);
    return plugin_sink;
}
