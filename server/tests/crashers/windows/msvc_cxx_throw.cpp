// Windows x64, the MSVC C++ ABI: an uncaught `throw` built by clang for
// x86_64-pc-windows-msvc and linked by lld-link, as a Visual Studio build would be, but
// with no C or C++ runtime (none is installed here). The compiler emits the throw as
// MSVC does: the exception's ThrowInfo, CatchableTypeArray, CatchableTypes and
// TypeDescriptors in the image's data, and a call of _CxxThrowException(object,
// ThrowInfo). The
// runtime's part is written here as vcruntime does it: _CxxThrowException raises
// 0xE06D7363 with the magic number, the object, the ThrowInfo and the image base; and
// type_info's vftable, which the TypeDescriptors point to, is a symbol of this program.
//
// entry -> app::start -> config::load, which throws a config::missing_section (derived
// from config::error); nothing catches it. Its unhandled exception filter
// (msvc_dump_on_crash.h) writes the minidump to the path that is the last word of its
// command line.
#include "msvc_dump_on_crash.h"

extern "C" {
__declspec(dllimport) void __stdcall RaiseException(DWORD, DWORD, DWORD,
                                                    const unsigned long long *);
extern char __ImageBase;

// vcruntime's _CxxThrowException on x64
__declspec(noreturn) void __stdcall _CxxThrowException(void *object, void *throw_info) {
    const unsigned long long parameters[4] = {0x19930520, (unsigned long long)object,
                                              (unsigned long long)throw_info,
                                              (unsigned long long)&__ImageBase};
    RaiseException(0xE06D7363, 1 /* EXCEPTION_NONCONTINUABLE */, 4, parameters);
    for (;;) {
    }
}

// type_info's vftable (`??_7type_info@@6B@`), the first word of every TypeDescriptor
const void *type_info_vftable[1] = {nullptr};
}
#pragma comment(linker, "/alternatename:??_7type_info@@6B@=type_info_vftable")

// the deleting destructors the vftables hold call it; nothing is deleted
void operator delete(void *) noexcept {}

namespace config {
struct error {
    const char *text;
    explicit error(const char *t) : text(t) {}
    virtual ~error() {}
};
struct missing_section : error {
    int line;
    missing_section(const char *t, int l) : error(t), line(l) {}
};
volatile int sink;
__declspec(noinline) int load(int line) {
    if (sink == 0)
        throw missing_section("no [server] section", line);
    return sink;
}
} // namespace config

namespace app {
__declspec(noinline) int start(int n) { return config::load(n + 1) + 1; }
} // namespace app

extern "C" int entry() {
    dump_on_crash();
    return app::start(41);
}
