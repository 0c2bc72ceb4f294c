/* rtl_walk.c: a stack walked with the system's own unwinder. */
#ifndef RTL_WALK_H
#define RTL_WALK_H

#include <windows.h>

#define RTL_WALK_MAX 16

/* The frames from context `c`, (rip, rsp) each, innermost first, into `out` (2 * max
 * words): RtlVirtualUnwind through every function with unwind info, a leaf's return
 * address read at [rsp]; until a pc of 0 or `max` frames. Returns how many. */
int rtl_walk(CONTEXT c, DWORD64 *out, int max);

/* Prints `label`, then " RIP RSP" (hex) for each frame of rtl_walk from `c`, and a new
 * line. */
void print_rtl_walk(const char *label, const CONTEXT *c);

#endif
