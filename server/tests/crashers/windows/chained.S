/* split_function(int *p): one function in two parts, the second described by chained
 * unwind info (UNW_FLAG_CHAININFO), written here byte by byte: neither gcc nor clang emits
 * it for mingw, MSVC does for code it moves out of line. See chained.c.
 *
 * Part 1 [split_function, .Lpart1_end): push rbx; push rsi; sub rsp, 40; when p is null
 * it jumps to part 2, else it returns.
 * Part 2 [split_function_cold, .Lpart2_end): sub rsp, 32; mov [rsp + 96], rdi (the
 * caller's home space); then the store through p faults. Its unwind info holds its own two
 * codes and chains to part 1's RUNTIME_FUNCTION: at the fault the unwinder undoes part 2's
 * prologue, then all of part 1's. */
    .text
    .globl split_function
    .def split_function; .scl 2; .type 32; .endef
split_function:
    push %rbx
.Lpush_rbx:
    push %rsi
.Lpush_rsi:
    sub $40, %rsp
.Lalloc40:
    mov %rcx, %rbx
    test %rcx, %rcx
    jz split_function_cold
.Lpart1_epilogue:
    add $40, %rsp
    pop %rsi
    pop %rbx
    ret
.Lpart1_end:

    .def split_function_cold; .scl 3; .type 32; .endef
split_function_cold:
    sub $32, %rsp
.Lalloc32:
    mov %rdi, 96(%rsp)
.Lsave_rdi:
    xor %edi, %edi
    movl $1, (%rbx) /* access violation: rbx is p, null */
    mov 96(%rsp), %rdi
    add $32, %rsp
    jmp .Lpart1_epilogue
.Lpart2_end:

/* UNWIND_INFO: version 1 | flags << 3, prologue size, count of code slots, frame
 * register; the codes last instruction first (offset in the prologue, op | info << 4),
 * padded to an even count; then, with UNW_FLAG_CHAININFO (4), the parent's
 * RUNTIME_FUNCTION. */
    .section .xdata,"dr"
    .p2align 2
.Lpart1_info:
    .byte 1, .Lalloc40 - split_function, 3, 0
    .byte .Lalloc40 - split_function, 0x42 /* UWOP_ALLOC_SMALL: (40 - 8) / 8 = 4 */
    .byte .Lpush_rsi - split_function, 0x60 /* UWOP_PUSH_NONVOL rsi (6) */
    .byte .Lpush_rbx - split_function, 0x30 /* UWOP_PUSH_NONVOL rbx (3) */
    .byte 0, 0
    .p2align 2
.Lpart2_info:
    .byte 1 | (4 << 3), .Lsave_rdi - split_function_cold, 3, 0
    .byte .Lsave_rdi - split_function_cold, 0x74 /* UWOP_SAVE_NONVOL rdi (7) */
    .short 96 / 8
    .byte .Lalloc32 - split_function_cold, 0x32 /* UWOP_ALLOC_SMALL: (32 - 8) / 8 = 3 */
    .byte 0, 0
    .rva split_function, .Lpart1_end, .Lpart1_info

/* RUNTIME_FUNCTION: begin, end, unwind info (RVAs). */
    .section .pdata,"dr"
    .p2align 2
    .rva split_function, .Lpart1_end, .Lpart1_info
    .rva split_function_cold, .Lpart2_end, .Lpart2_info
