// Windows x64: a null-pointer write in a destructor run while a C++ exception unwinds the
// stack (io::fill throws, main catches; io::Buffer's destructor runs on the way), or,
// with -DIN_CATCH, in a function called from main's catch block. mingw's C++ exceptions
// are SEH exceptions: libgcc's _Unwind_RaiseException raises STATUS_GCC_THROW, its
// personality (_GCC_specific_handler) finds main's handler and unwinds with RtlUnwindEx,
// which restores the context of fill's landing pad (the destructor's call) or main's
// handler: the unwinder's own frames are gone from the stack when the fault happens.
// The access violation reaches the unhandled-exception filter, which writes the minidump
// (dump_on_crash.c, C).
#include <cstdio>
#include <stdexcept>

extern "C" {
#include "dump_on_crash.h"
}

namespace io {

volatile int sink;

struct Buffer {
    int *data;
    explicit Buffer(int *d) : data(d) {}
    __attribute__((noinline)) ~Buffer() {
        *data = sink; // access violation: data is null
        sink++;
    }
};

__attribute__((noinline)) void report(int *p, const char *what) {
    *p = what[0]; // access violation (IN_CATCH): p is null
    sink++;
}

__attribute__((noinline)) void fill(int *p, int n) {
#ifdef IN_CATCH
    static int fine;
    Buffer b(&fine);
#else
    Buffer b(p);
#endif
    if (n > 0)
        throw std::runtime_error("fill failed");
    sink += n;
}

} // namespace io

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    int *p = argc > 100 ? &argc : nullptr;
    try {
        io::fill(p, argc);
    } catch (const std::exception &e) {
#ifdef IN_CATCH
        io::report(p, e.what());
#endif
        std::puts(e.what());
    }
    return 0;
}
