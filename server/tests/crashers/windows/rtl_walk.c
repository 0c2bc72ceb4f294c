/* Not a case of its own: linked into the crash programs that take their own stack's
 * reference walk with the system's unwinder, RtlLookupFunctionEntry and
 * RtlVirtualUnwind (wine's ntdll under wine), reading live memory: every byte of the
 * images' unwind info, which a minidump may not hold. */
#include <windows.h>
#include <stdio.h>

#include "rtl_walk.h"

int rtl_walk(CONTEXT c, DWORD64 *out, int max) {
    int n = 0;
    while (n < max && c.Rip) {
        out[2 * n] = c.Rip;
        out[2 * n + 1] = c.Rsp;
        n++;
        DWORD64 base;
        PRUNTIME_FUNCTION f = RtlLookupFunctionEntry(c.Rip, &base, NULL);
        if (!f) {
            /* a leaf: its return address at [rsp] */
            c.Rip = *(DWORD64 *)c.Rsp;
            c.Rsp += 8;
            continue;
        }
        void *data;
        DWORD64 frame;
        RtlVirtualUnwind(UNW_FLAG_NHANDLER, base, c.Rip, f, &c, &data, &frame, NULL);
    }
    return n;
}

void print_rtl_walk(const char *label, const CONTEXT *c) {
    DWORD64 frames[2 * RTL_WALK_MAX];
    int n = rtl_walk(*c, frames, RTL_WALK_MAX);
    printf("%s", label);
    for (int i = 0; i < n; i++)
        printf(" %llx %llx", frames[2 * i], frames[2 * i + 1]);
    printf("\n");
    fflush(stdout);
}
