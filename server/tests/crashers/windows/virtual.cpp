// Windows x64: a null-pointer read inside a virtual method called through a base-class
// pointer, in a loop over a std::vector<std::unique_ptr<Base>> (shapes::total_area ->
// shapes::Ring::area). The shapes are made in another function, and each method is kept
// out of line, so -O2 leaves a real virtual call (or a speculatively devirtualized one)
// and a frame for the method. The minidump is written by dump_on_crash.c's filter (C).
#include <cstdio>
#include <memory>
#include <vector>

extern "C" {
#include "dump_on_crash.h"
}

namespace shapes {

struct Shape {
    virtual ~Shape() = default;
    virtual long area() const = 0;
};

struct Square : Shape {
    long side;
    explicit Square(long s) : side(s) {}
    __attribute__((noinline)) long area() const override { return side * side; }
};

struct Ring : Shape {
    const long *inner; // null in the crashing ring
    long outer;
    Ring(const long *i, long o) : inner(i), outer(o) {}
    __attribute__((noinline)) long area() const override {
        return outer * outer - *inner * *inner; // access violation: inner is null
    }
};

__attribute__((noinline)) std::vector<std::unique_ptr<Shape>> make(int argc) {
    std::vector<std::unique_ptr<Shape>> all;
    for (int i = 0; i < argc + 2; i++)
        all.push_back(std::make_unique<Square>(i + 1));
    static const long one = 1;
    all.push_back(std::make_unique<Ring>(argc > 100 ? &one : nullptr, 9));
    return all;
}

__attribute__((noinline)) long total_area(const std::vector<std::unique_ptr<Shape>> &all) {
    long total = 0;
    for (const auto &s : all)
        total += s->area();
    return total;
}

} // namespace shapes

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    auto all = shapes::make(argc);
    std::printf("%ld\n", shapes::total_area(all));
    return 0;
}
