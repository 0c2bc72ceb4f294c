// A crash in a destructor run while an exception unwinds the stack (the cleanup phase
// of the C++ unwinder calls it from _Unwind_RaiseException's landing pad).
#include <cstdio>
#include <stdexcept>

namespace io {

struct Buffer {
    int *data;
    explicit Buffer(int *d) : data(d) {}
    __attribute__((noinline)) ~Buffer() { *data = 0; } // SIGSEGV: data is null
};

__attribute__((noinline)) void fill(int *p) {
    Buffer b(p);
    throw std::runtime_error("fill failed");
}

} // namespace io

int main(int argc, char **) {
    try {
        io::fill(argc > 100 ? &argc : nullptr);
    } catch (const std::exception &e) {
        std::puts(e.what());
    }
    return 0;
}
