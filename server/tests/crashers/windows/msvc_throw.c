/* Windows x64: an uncaught C++ exception thrown the way MSVC's `throw` does it, built
 * with mingw (there is no MSVC here). `throw std::runtime_error("...")` compiles to a call
 * of the MSVC runtime's _CxxThrowException(object, ThrowInfo), which raises 0xE06D7363
 * with four parameters: the magic number 0x19930520, the object, the ThrowInfo and the
 * module's image base. The ThrowInfo, its CatchableTypeArray, the CatchableTypes and the
 * TypeDescriptors are the static data the compiler emits in .rdata, linked to each other
 * by offsets from the image base (image-relative relocations: `.rva`), laid out as the
 * MSVC runtime's ehdata.h declares them; this program emits them so in assembly below.
 *
 * THROWN (-DTHROWN=...) is the thrown type's decorated name, as MSVC's type_info holds it
 * (default ".?AVruntime_error@std@@"); its base std::exception is catchable too. The
 * object is laid out as MSVC's std::runtime_error: a vtable pointer, then the what()
 * text (__std_exception_data::_What), here a string literal. Frame 0 is kernelbase's
 * RaiseException, then throw_it and main. The minidump is written by dump_on_crash.c's
 * filter. */
#include <windows.h>
#include <stdio.h>

#include "dump_on_crash.h"

#ifndef THROWN
#define THROWN ".?AVruntime_error@std@@"
#endif

/* ehdata.h, x64: every pointer between these structures is an image-relative offset */
__asm__(".section .rdata,\"dr\"\n"
        ".balign 8\n"
        "thrown_descriptor:\n"     /* TypeDescriptor */
        "  .quad 0, 0\n"           /* pVFTable (type_info's vtable), spare */
        "  .asciz \"" THROWN "\"\n" /* name */
        ".balign 8\n"
        "exception_descriptor:\n"
        "  .quad 0, 0\n"
        "  .asciz \".?AVexception@std@@\"\n"
        ".balign 4\n"
        "thrown_catchable:\n"      /* CatchableType */
        "  .long 0\n"              /* properties */
        "  .rva thrown_descriptor\n" /* pType */
        "  .long 0, -1, 0\n"       /* thisDisplacement (mdisp, pdisp, vdisp) */
        "  .long 24\n"             /* sizeOrOffset */
        "  .long 0\n"              /* copyFunction */
        "exception_catchable:\n"
        "  .long 0\n"
        "  .rva exception_descriptor\n"
        "  .long 0, -1, 0\n"
        "  .long 24\n"
        "  .long 0\n"
        "catchable_types:\n"       /* CatchableTypeArray */
        "  .long 2\n"              /* nCatchableTypes */
        "  .rva thrown_catchable\n"
        "  .rva exception_catchable\n"
        ".globl throw_info\n"
        "throw_info:\n"            /* ThrowInfo */
        "  .long 0\n"              /* attributes */
        "  .long 0\n"              /* pmfnUnwind (the destructor) */
        "  .long 0\n"              /* pForwardCompat */
        "  .rva catchable_types\n" /* pCatchableTypeArray */
        ".text\n");

extern const char throw_info[];
extern IMAGE_DOS_HEADER __ImageBase;

/* MSVC's std::runtime_error: vfptr, _What, _DoFree */
struct runtime_error {
    const void *vfptr;
    const char *what;
    int do_free;
};

static const char message[] = "config file has no [server] section";

volatile int sink;

__attribute__((noinline)) void throw_it(struct runtime_error *object) {
    ULONG_PTR params[4] = {0x19930520, (ULONG_PTR)object, (ULONG_PTR)throw_info,
                           (ULONG_PTR)&__ImageBase};
    RaiseException(0xE06D7363, EXCEPTION_NONCONTINUABLE, 4, params);
    sink++;
}

int main(int argc, char **argv) {
    dump_on_crash(argc, argv);
    struct runtime_error object = {0, message, 0};
    printf("what %s\n", message);
    fflush(stdout);
    throw_it(&object);
    printf("%d\n", sink);
    return 0;
}
