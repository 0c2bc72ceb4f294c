// Issue 37's grouping suite, C++ part (see group_suite.c): vector::at out of range in two
// functions, and an uncaught exception of one type thrown from two functions.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#define NI __attribute__((noinline))
#ifdef MOVED
NI void moved_padding() { __asm__ volatile(".skip 4096"); }
#endif

volatile int sink;
NI int lookup_price(std::vector<int> &v, std::size_t i) { return v.at(i); }
NI int lookup_stock(std::vector<int> &v, std::size_t i) { return v.at(i) * 2; }
NI void connect_db() { throw std::runtime_error("db down"); }
NI void connect_cache() { throw std::runtime_error("cache down"); }

static void run(int bug) {
    std::vector<int> v(3);
    switch (bug) {
    case 10: sink = lookup_price(v, 7); break;
    case 11: sink = lookup_stock(v, 9); break;
    case 12: connect_db(); break;
    case 13: connect_cache(); break;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int bug = std::atoi(argv[1]);
#ifdef MOVED
    if (argc > 5) moved_padding();
#endif
    if (argc > 2 && std::strcmp(argv[2], "thread") == 0) {
        std::thread t(run, bug);
        t.join();
    } else {
        run(bug);
    }
    return 0;
}
