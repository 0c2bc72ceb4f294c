/* fault_in_prologue(int *p): a null-pointer store between the prologue's push and its
 * allocation, both described by the unwind codes (see prologue.c). */
    .text
    .globl fault_in_prologue
    .def fault_in_prologue; .scl 2; .type 32; .endef
    .seh_proc fault_in_prologue
fault_in_prologue:
    push %rbx
    .seh_pushreg %rbx
    movl $1, (%rcx)
    sub $32, %rsp
    .seh_stackalloc 32
    .seh_endprologue
    add $32, %rsp
    pop %rbx
    ret
    .seh_endproc
