// Windows x64: a crash in a lambda comparator called by std::sort (a template
// instantiation chain: std::sort -> std::__introsort_loop / std::__insertion_sort ->
// the lambda's operator()). One record's key pointer is null; the comparator reads
// through it. The minidump is written by dump_on_crash.c's filter (C).
#include <algorithm>
#include <cstdio>
#include <vector>

extern "C" {
#include "dump_on_crash.h"
}

namespace inventory {

struct Item {
    const int *key; // null in one item
    int id;
};

__attribute__((noinline)) void order(std::vector<Item> &items) {
    std::sort(items.begin(), items.end(), [](const Item &a, const Item &b) {
        return *a.key < *b.key; // access violation: a key is null
    });
}

} // namespace inventory

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    static int keys[40];
    std::vector<inventory::Item> items;
    for (int i = 0; i < 40; i++) {
        keys[i] = (i * 7919) % 40;
        items.push_back({&keys[i], i});
    }
    items[argc + 20].key = argc > 100 ? &keys[0] : nullptr;
    inventory::order(items);
    std::printf("%d\n", items[0].id);
    return 0;
}
