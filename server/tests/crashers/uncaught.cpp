// An exception nobody catches: no handler on the whole stack, so __cxa_throw's unwinder
// finds none and calls std::terminate, which aborts. The stack reads: libc's abort
// machinery, std::terminate's helpers, __cxa_throw, connect_to, open_session, main.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace net {

__attribute__((noinline)) int connect_to(const std::string &host) {
    if (host.size() < 100)
        throw std::runtime_error("connection refused");
    return static_cast<int>(host.size());
}

__attribute__((noinline)) int open_session(const char *host) {
    return connect_to(host) + 1;
}

} // namespace net

int main(int argc, char **) {
    std::printf("%d\n", net::open_session(argc > 100 ? "far" : "localhost"));
    return 0;
}
