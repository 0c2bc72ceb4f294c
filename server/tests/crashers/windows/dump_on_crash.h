/* dump_on_crash.c: the minidump-writing unhandled exception filter of the Windows crash
 * programs. */
#ifndef DUMP_ON_CRASH_H
#define DUMP_ON_CRASH_H

/* Writes a minidump of the first unhandled exception to argv[1], $POSTMORTEM_DUMP or
 * crash.dmp, in that order. */
void dump_on_crash(int argc, char **argv);

#endif
