// An exception nobody catches: __cxa_throw finds no handler, std::terminate calls abort.
#include <stdexcept>
#include <cstdio>
namespace store {
__attribute__((noinline)) int load(int key) { if (key > 2) throw std::runtime_error("no such key"); return key; }
__attribute__((noinline)) int lookup(int key) { return load(key) * 2; }
}
int main() { std::printf("%d\n", store::lookup(5)); return 0; }
