// Windows x64 and x86: a null-pointer write in a callback that libgcc's unwinder calls:
// the trace function given to _Unwind_Backtrace (the walk C++ exception handling uses,
// here asked for a backtrace), which crashes at the third frame. The stack crosses the
// unwinder: trace::count_frame <- _Unwind_Backtrace <- trace::collect <- main. The
// minidump is written by dump_on_crash.c's filter (C).
//
// Before each store the callback prints `trace I RETURN IP`: its own return address
// (into _Unwind_Backtrace) and the unwinder's pc of frame I (_Unwind_GetIP: the return
// address into collect, then into main, then into main's caller), the program's own
// record of its stack for the tests to compare with.
#include <cstdint>
#include <cstdio>
#include <unwind.h>

extern "C" {
#include "dump_on_crash.h"
}

namespace trace {

struct Counter {
    int frames;
    int *slots[4]; // slots[2] is null
};

__attribute__((noinline)) _Unwind_Reason_Code count_frame(struct _Unwind_Context *context,
                                                         void *arg) {
    Counter *c = static_cast<Counter *>(arg);
    int i = c->frames++;
    _Unwind_Ptr ip = _Unwind_GetIP(context);
    std::printf("trace %d %llx %llx\n", i,
                static_cast<unsigned long long>(
                    reinterpret_cast<std::uintptr_t>(__builtin_return_address(0))),
                static_cast<unsigned long long>(ip));
    std::fflush(stdout);
    *c->slots[i] = static_cast<int>(ip); // access violation at i == 2
    return _URC_NO_REASON;
}

__attribute__((noinline)) int collect(int argc) {
    static int seen[4];
    Counter c{0, {&seen[0], &seen[1], argc > 100 ? &seen[2] : nullptr, &seen[3]}};
    _Unwind_Backtrace(count_frame, &c);
    return c.frames + seen[0];
}

} // namespace trace

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    std::printf("%d\n", trace::collect(argc));
    return 0;
}
