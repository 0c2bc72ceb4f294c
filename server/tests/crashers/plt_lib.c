/* The shared library of the PLT case: its exported function faults. */
volatile int lib_sink;

__attribute__((noinline)) static void lib_store(int *p, int v) {
    *p = v; /* SIGSEGV: p is null */
    lib_sink += v;
}

int lib_entry(int *p, int v) {
    lib_store(p, v + 1);
    return lib_sink;
}
