/* Three functions written with .seh_* directives whose epilogues the threads of epilogue.c
 * are caught in (see there). Each takes a pointer in rcx and stores there the address of
 * its return address (the stack pointer at entry): the program's ground truth for the
 * caller's frame, known without unwinding. Each clobbers the non-volatile registers it
 * saved, so that a walk which restores them from the wrong slots is wrong.
 *
 * epi_ret:  push rbx; push rsi; sub rsp,40 ... add rsp,40; pop rsi; pop rbx; ret
 * epi_jmp:  the same, its epilogue ending in `jmp epi_tail` (a tail call out of the
 *           function) instead of `ret`
 * epi_lea:  push rbp; push rdi; sub rsp,48; lea rbp,[rsp+32] (a frame register) ...
 *           lea rsp,[rbp+16]; pop rdi; pop rbp; ret
 *
 * epi_points lists, for each function, the address of each instruction of its epilogue
 * after the one that releases the allocation (there the stack is half unwound: the walk
 * must read the code to know it), NULL-terminated per function. */
    .text

/* epi_ret's and epi_jmp's prologue and body: rbx and rsi pushed, 40 bytes allocated, the
 * entry stack pointer stored at (rcx), rbx and rsi clobbered with the values given. */
.macro PUSH_ALLOC_BODY rbx_value, rsi_value
    push %rbx
    .seh_pushreg %rbx
    push %rsi
    .seh_pushreg %rsi
    sub $40, %rsp
    .seh_stackalloc 40
    .seh_endprologue
    lea 56(%rsp), %rax
    mov %rax, (%rcx)
    mov $\rbx_value, %ebx
    mov $\rsi_value, %esi
.endm

    .globl epi_ret
    .def epi_ret; .scl 2; .type 32; .endef
    .seh_proc epi_ret
epi_ret:
    PUSH_ALLOC_BODY 0x1111, 0x2222
    add $40, %rsp
.Lret_pop_rsi:
    pop %rsi
.Lret_pop_rbx:
    pop %rbx
.Lret_ret:
    ret
    .seh_endproc

    .globl epi_jmp
    .def epi_jmp; .scl 2; .type 32; .endef
    .seh_proc epi_jmp
epi_jmp:
    PUSH_ALLOC_BODY 0x3333, 0x4444
    add $40, %rsp
.Ljmp_pop_rsi:
    pop %rsi
.Ljmp_pop_rbx:
    pop %rbx
.Ljmp_jmp:
    jmp epi_tail
    .seh_endproc

    .globl epi_lea
    .def epi_lea; .scl 2; .type 32; .endef
    .seh_proc epi_lea
epi_lea:
    push %rbp
    .seh_pushreg %rbp
    push %rdi
    .seh_pushreg %rdi
    sub $48, %rsp
    .seh_stackalloc 48
    lea 32(%rsp), %rbp
    .seh_setframe %rbp, 32
    .seh_endprologue
    lea 32(%rbp), %rax
    mov %rax, (%rcx)
    mov $0x5555, %edi
    xor %eax, %eax
    mov %rax, (%rbp)
    lea 16(%rbp), %rsp
.Llea_pop_rdi:
    pop %rdi
.Llea_pop_rbp:
    pop %rbp
.Llea_ret:
    ret
    .seh_endproc

/* The tail call's target: a leaf (no unwind info), another function. */
    .globl epi_tail
    .def epi_tail; .scl 2; .type 32; .endef
epi_tail:
    ret

    .data
    .globl epi_points
    .p2align 3
epi_points:
    .quad .Lret_pop_rsi, .Lret_pop_rbx, .Lret_ret, 0
    .quad .Ljmp_pop_rsi, .Ljmp_pop_rbx, .Ljmp_jmp, 0
    .quad .Llea_pop_rdi, .Llea_pop_rbp, .Llea_ret, 0
