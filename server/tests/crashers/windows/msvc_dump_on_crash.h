// Not a case of its own: included by the MSVC-ABI crash programs (testsupport's
// compile_msvc), which have no C runtime: the few Windows functions they call, declared
// here and imported through mingw-w64's import libraries, and an unhandled exception
// filter that writes a minidump of the crash with dbghelp's MiniDumpWriteDump
// (MiniDumpNormal) to the path that is the last word of the command line.
#ifndef MSVC_DUMP_ON_CRASH_H
#define MSVC_DUMP_ON_CRASH_H

typedef void *HANDLE;
typedef unsigned long DWORD;
typedef int BOOL;

extern "C" {
__declspec(dllimport) HANDLE __stdcall CreateFileA(const char *, DWORD, DWORD, void *, DWORD,
                                                   DWORD, HANDLE);
__declspec(dllimport) BOOL __stdcall CloseHandle(HANDLE);
__declspec(dllimport) HANDLE __stdcall GetCurrentProcess(void);
__declspec(dllimport) DWORD __stdcall GetCurrentProcessId(void);
__declspec(dllimport) DWORD __stdcall GetCurrentThreadId(void);
__declspec(dllimport) void *__stdcall SetUnhandledExceptionFilter(long(__stdcall *)(void *));
__declspec(dllimport) char *__stdcall GetCommandLineA(void);
__declspec(dllimport) BOOL __stdcall MiniDumpWriteDump(HANDLE, DWORD, HANDLE, int, void *, void *,
                                                       void *);
}

#pragma pack(push, 4)
struct MinidumpExceptionInformation {
    DWORD thread_id;
    void *exception_pointers;
    BOOL client_pointers;
};
#pragma pack(pop)

static const char *dump_path = "crash.dmp";

static long __stdcall write_dump(void *pointers) {
    HANDLE file = CreateFileA(dump_path, 0xC0000000 /* GENERIC_READ | GENERIC_WRITE */, 0,
                              nullptr, 2 /* CREATE_ALWAYS */, 0x80, nullptr);
    MinidumpExceptionInformation info = {GetCurrentThreadId(), pointers, 0};
    MiniDumpWriteDump(GetCurrentProcess(), GetCurrentProcessId(), file, 0, &info, nullptr,
                      nullptr);
    CloseHandle(file);
    return 1; // EXCEPTION_EXECUTE_HANDLER
}

// Installs write_dump, to write the dump to the last word of the command line.
static void dump_on_crash() {
    char *line = GetCommandLineA();
    char *last = line;
    for (char *c = line; *c; c++)
        if (c[0] == ' ' && c[1] && c[1] != ' ')
            last = c + 1;
    dump_path = last;
    SetUnhandledExceptionFilter(write_dump);
}

#endif
