/* Not a case of its own: linked into every Windows crash program. Installs an unhandled
 * exception filter that writes a minidump of the crash with dbghelp's MiniDumpWriteDump
 * (MiniDumpNormal: every thread's context and stack, the module list, the exception
 * record and context of the crashed thread) and lets the process die of the exception
 * (under wine the exit status is the exception code's low byte: 5 for an access
 * violation). The dump goes to the path the program's first argument names, else to
 * $POSTMORTEM_DUMP, else to crash.dmp in the working directory. */
#include <windows.h>
#include <dbghelp.h>
#include <stdio.h>
#include <stdlib.h>

#include "dump_on_crash.h"

static char dump_path[MAX_PATH] = "crash.dmp";

static LONG WINAPI write_dump(EXCEPTION_POINTERS *ep) {
    HANDLE file = CreateFileA(dump_path, GENERIC_READ | GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
                              FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        fprintf(stderr, "dump_on_crash: cannot create %s (error %lu)\n", dump_path,
                GetLastError());
        return EXCEPTION_EXECUTE_HANDLER;
    }
    MINIDUMP_EXCEPTION_INFORMATION mei = {GetCurrentThreadId(), ep, FALSE};
    if (!MiniDumpWriteDump(GetCurrentProcess(), GetCurrentProcessId(), file, MiniDumpNormal,
                           &mei, NULL, NULL))
        fprintf(stderr, "dump_on_crash: MiniDumpWriteDump failed (error %lu)\n",
                GetLastError());
    CloseHandle(file);
    fprintf(stderr, "dump_on_crash: wrote %s\n", dump_path);
    return EXCEPTION_EXECUTE_HANDLER;
}

void dump_on_crash(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("POSTMORTEM_DUMP");
    if (path && *path)
        snprintf(dump_path, sizeof dump_path, "%s", path);
    SetUnhandledExceptionFilter(write_dump);
}
