// A crash inside a virtual method reached through a base-class pointer.
#include <cstdio>

namespace shapes {

struct Shape {
    virtual ~Shape() = default;
    virtual int area() const = 0;
};

struct Square : Shape {
    int *side;
    explicit Square(int *s) : side(s) {}
    __attribute__((noinline)) int area() const override {
        return *side * *side; // SIGSEGV: side is null
    }
};

__attribute__((noinline)) int total_area(const Shape &s) {
    int a = s.area();
    return a + 1;
}

} // namespace shapes

int main(int argc, char **) {
    int *side = argc > 100 ? &argc : nullptr;
    shapes::Square sq(side);
    std::printf("%d\n", shapes::total_area(sq));
    return 0;
}
