//! x86_64: registers by their System V DWARF numbers, and the architecture's description.

use super::{dwarf_registers, ArchInfo};

dwarf_registers! {
    /// An x86_64 register by DWARF number (System V AMD64 ABI, figure 3.36).
    Reg {
        Rax = 0,
        Rdx = 1,
        Rcx = 2,
        Rbx = 3,
        Rsi = 4,
        Rdi = 5,
        Rbp = 6,
        Rsp = 7,
        R8 = 8,
        R9 = 9,
        R10 = 10,
        R11 = 11,
        R12 = 12,
        R13 = 13,
        R14 = 14,
        R15 = 15,
        /// The return-address column, which holds the instruction pointer.
        Rip = 16,
        Rflags = 49,
        Es = 50,
        Cs = 51,
        Ss = 52,
        Ds = 53,
        Fs = 54,
        Gs = 55,
        FsBase = 58,
        GsBase = 59,
    }
}

use Reg::*;

/// The callee-saved registers: rbp, rbx, r12–r15 (System V), then rsi and rdi, which
/// the Windows x64 ABI adds (its `.pdata` saves them). Positions are the unwind table's
/// slots, so new ones only go at the end.
pub const CALLEE_SAVED: &[u16] = &[
    Rbp.dwarf(),
    Rbx.dwarf(),
    R12.dwarf(),
    R13.dwarf(),
    R14.dwarf(),
    R15.dwarf(),
    Rsi.dwarf(),
    Rdi.dwarf(),
];

/// Registers reported, in report order: (DWARF number, name).
pub const REGISTER_NAMES: &[(u16, &str)] = &[
    (Rax.dwarf(), "rax"),
    (Rbx.dwarf(), "rbx"),
    (Rcx.dwarf(), "rcx"),
    (Rdx.dwarf(), "rdx"),
    (Rsi.dwarf(), "rsi"),
    (Rdi.dwarf(), "rdi"),
    (Rbp.dwarf(), "rbp"),
    (Rsp.dwarf(), "rsp"),
    (R8.dwarf(), "r8"),
    (R9.dwarf(), "r9"),
    (R10.dwarf(), "r10"),
    (R11.dwarf(), "r11"),
    (R12.dwarf(), "r12"),
    (R13.dwarf(), "r13"),
    (R14.dwarf(), "r14"),
    (R15.dwarf(), "r15"),
    (Rip.dwarf(), "rip"),
    (Rflags.dwarf(), "eflags"),
    (Es.dwarf(), "es"),
    (Cs.dwarf(), "cs"),
    (Ss.dwarf(), "ss"),
    (Ds.dwarf(), "ds"),
    (Fs.dwarf(), "fs"),
    (Gs.dwarf(), "gs"),
    (FsBase.dwarf(), "fs_base"),
    (GsBase.dwarf(), "gs_base"),
];

pub const INFO: ArchInfo = ArchInfo {
    name: "x86_64",
    pointer_size: 8,
    pc: Rip.dwarf(),
    sp: Rsp.dwarf(),
    fp: Rbp.dwarf(),
    ra: Rip.dwarf(),
    // the last byte of the call
    call_back: 1,
    callee_saved: CALLEE_SAVED,
    register_names: REGISTER_NAMES,
    pointer_authentication: false,
    glibc_interpreter: "/lib64/ld-linux-x86-64.so.2",
};
