// An exception thrown through a noexcept function: the unwinder finds no handler,
// std::terminate runs and aborts. The stack reads: libc's abort machinery,
// std::terminate's helpers, __cxa_throw, parse_setting, load_config (noexcept), main.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace config {

__attribute__((noinline)) int parse_setting(const std::string &text) {
    if (text.empty())
        throw std::invalid_argument("empty setting");
    return static_cast<int>(text.size());
}

__attribute__((noinline)) int load_config(const char *text) noexcept {
    return parse_setting(text) * 2;
}

} // namespace config

int main(int argc, char **) {
    std::printf("%d\n", config::load_config(argc > 100 ? "x" : ""));
    return 0;
}
