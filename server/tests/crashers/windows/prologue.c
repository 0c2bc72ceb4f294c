/* Windows x64: a fault inside a function's prologue (prologue.S, written with .seh_*
 * directives): after its `push rbx`, before its `sub rsp`. Only the unwind codes of the
 * instructions already run apply there: the walk must not undo the allocation that has
 * not happened. */
#include <stdio.h>

#include "dump_on_crash.h"

void fault_in_prologue(int *p);

volatile int sink;

__attribute__((noinline)) int caller(int *p) {
    fault_in_prologue(p);
    return sink;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    int *p = argc > 100 ? &argc : NULL;
    printf("%d\n", caller(p));
    return 0;
}
