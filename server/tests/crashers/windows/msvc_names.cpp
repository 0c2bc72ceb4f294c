// Windows x64, the MSVC C++ ABI: built by clang for x86_64-pc-windows-msvc and linked by
// lld-link with a PDB, as a Visual Studio build would be, but with no C runtime (none is
// installed here): its own entry point, the few Windows functions it calls declared in
// msvc_dump_on_crash.h and imported through mingw-w64's import libraries. Its functions'
// names are MSVC decorations (`?area@Square@geometry@@UEBAHPEAH@Z`): built without -g, the
// PDB holds only public symbols, which the walk must undecorate to name the frames.
//
// The fault: entry -> app::run -> geometry::Grid<unsigned char, 3>::visit ->
// geometry::scaled<__int64> -> a virtual call to geometry::Square::area, which writes
// through a null pointer. Its unhandled exception filter (msvc_dump_on_crash.h) writes
// the minidump to the path that is the last word of its command line.
#include "msvc_dump_on_crash.h"

namespace geometry {
struct Shape {
    virtual int area(int *out) const = 0;
};
struct Square : Shape {
    int side;
    explicit Square(int s) : side(s) {}
    __declspec(noinline) int area(int *out) const override {
        *out = side * side; // out is null
        return side;
    }
};
template <typename T> __declspec(noinline) T scaled(const Shape &shape, T factor, int *out) {
    return static_cast<T>(shape.area(out)) * factor;
}
template <typename T, int N> struct Grid {
    T cells[N];
    __declspec(noinline) long long visit(const Shape &shape, int *out) const {
        return scaled<long long>(shape, cells[0] + N, out);
    }
};
} // namespace geometry

namespace app {
volatile int sink;
__declspec(noinline) int run(int *out, short n) {
    geometry::Square square(n);
    geometry::Grid<unsigned char, 3> grid = {{1, 2, 3}};
    return static_cast<int>(grid.visit(square, out)) + sink;
}
} // namespace app

extern "C" int entry() {
    dump_on_crash();
    return app::run(app::sink == 12345 ? (int *)&app::sink : nullptr, 7);
}
