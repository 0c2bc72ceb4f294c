// bench/cold-walk.sh: a C++ program that dies in std::terminate: an exception thrown
// through a noexcept function, below a few templates and a virtual call.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

struct Shape {
    virtual ~Shape() = default;
    virtual double area() const = 0;
};
struct Square : Shape {
    double side;
    explicit Square(double s) : side(s) {}
    double area() const override {
        if (side < 0) throw std::domain_error("negative side");
        return side * side;
    }
};

template <typename T> __attribute__((noinline)) double total(const std::vector<T *> &v) noexcept {
    double sum = 0;
    for (auto *s : v) sum += s->area();
    return sum;
}

int main() {
    std::map<std::string, std::vector<Shape *>> groups;
    groups["a"].push_back(new Square(2));
    groups["a"].push_back(new Square(-1));
    double t = 0;
    for (auto &g : groups) t += total(g.second);
    return t > 0 ? 0 : 1;
}
