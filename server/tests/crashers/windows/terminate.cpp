// Windows x64: a null-pointer write in a std::terminate handler, called because nobody
// catches a C++ exception. mingw's C++ exceptions are SEH exceptions: __cxa_throw calls
// libgcc's _Unwind_RaiseException, which raises STATUS_GCC_THROW; no frame takes it and
// the C runtime's filter lets execution continue, so _Unwind_RaiseException returns and
// __cxa_throw calls std::terminate, which calls the handler (an uncaught C++ exception
// itself never reaches the unhandled-exception filter: the program would just abort).
// The access violation does, with libstdc++'s exception frames on the stack:
// config::on_terminate <- __cxxabiv1::__terminate <- std::terminate <- __cxa_throw <-
// config::parse <- config::load <- main. The minidump is written by dump_on_crash.c's
// filter (C).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

extern "C" {
#include "dump_on_crash.h"
}

namespace config {

volatile int sink;
int *volatile last_error; // null

[[noreturn]] __attribute__((noinline)) void on_terminate() {
    *last_error = sink; // access violation: last_error is null
    std::abort();
}

__attribute__((noinline)) int parse(const std::string &text) {
    if (text.empty())
        throw std::invalid_argument("empty setting");
    sink += text.size();
    return sink;
}

__attribute__((noinline)) int load(int argc) {
    std::string text(argc > 100 ? "x" : "");
    int r = parse(text);
    return r + sink;
}

} // namespace config

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    std::set_terminate(config::on_terminate);
    std::printf("%d\n", config::load(argc));
    return 0;
}
