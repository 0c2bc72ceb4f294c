// Windows x64, the MSVC C++ ABI: built by clang for x86_64-pc-windows-msvc and linked by
// lld-link with a PDB, as a Visual Studio build would be, but with no C runtime (none is
// installed here): its own entry point, the few Windows functions it calls declared here
// and imported through mingw-w64's import libraries. Its functions' names are MSVC
// decorations (`?area@Square@geometry@@UEBAHPEAH@Z`): built without -g, the PDB holds only
// public symbols, which the walk must undecorate to name the frames.
//
// The fault: entry -> app::run -> geometry::Grid<unsigned char, 3>::visit ->
// geometry::scaled<__int64> -> a virtual call to geometry::Square::area, which writes
// through a null pointer. Its unhandled exception
// filter writes the minidump to the path that is the last word of its command line.
typedef void *HANDLE;
typedef unsigned long DWORD;
typedef int BOOL;

extern "C" {
__declspec(dllimport) HANDLE __stdcall CreateFileA(const char *, DWORD, DWORD, void *, DWORD,
                                                   DWORD, HANDLE);
__declspec(dllimport) BOOL __stdcall CloseHandle(HANDLE);
__declspec(dllimport) HANDLE __stdcall GetCurrentProcess(void);
__declspec(dllimport) DWORD __stdcall GetCurrentProcessId(void);
__declspec(dllimport) DWORD __stdcall GetCurrentThreadId(void);
__declspec(dllimport) void *__stdcall SetUnhandledExceptionFilter(long(__stdcall *)(void *));
__declspec(dllimport) char *__stdcall GetCommandLineA(void);
__declspec(dllimport) BOOL __stdcall MiniDumpWriteDump(HANDLE, DWORD, HANDLE, int, void *, void *,
                                                       void *);
}

#pragma pack(push, 4)
struct MinidumpExceptionInformation {
    DWORD thread_id;
    void *exception_pointers;
    BOOL client_pointers;
};
#pragma pack(pop)

static const char *dump_path = "crash.dmp";

static long __stdcall write_dump(void *pointers) {
    HANDLE file = CreateFileA(dump_path, 0xC0000000 /* GENERIC_READ | GENERIC_WRITE */, 0,
                              nullptr, 2 /* CREATE_ALWAYS */, 0x80, nullptr);
    MinidumpExceptionInformation info = {GetCurrentThreadId(), pointers, 0};
    MiniDumpWriteDump(GetCurrentProcess(), GetCurrentProcessId(), file, 0, &info, nullptr,
                      nullptr);
    CloseHandle(file);
    return 1; // EXCEPTION_EXECUTE_HANDLER
}

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
    // the dump's name: the last word of the command line
    char *line = GetCommandLineA();
    char *last = line;
    for (char *c = line; *c; c++)
        if (c[0] == ' ' && c[1] && c[1] != ' ')
            last = c + 1;
    dump_path = last;
    SetUnhandledExceptionFilter(write_dump);
    return app::run(app::sink == 12345 ? (int *)&app::sink : nullptr, 7);
}
