//! 32-bit x86: registers by their System V i386 DWARF numbers, and the architecture's
//! description.

use super::{dwarf_registers, ArchInfo};

dwarf_registers! {
    /// An x86 register by DWARF number (System V i386 ABI, table 2.14).
    Reg {
        Eax = 0,
        Ecx = 1,
        Edx = 2,
        Ebx = 3,
        Esp = 4,
        Ebp = 5,
        Esi = 6,
        Edi = 7,
        /// The return-address column, which holds the instruction pointer.
        Eip = 8,
        Eflags = 9,
    }
}

use Reg::*;

/// The callee-saved registers an unwind record tracks: ebp, ebx, esi, edi.
pub const CALLEE_SAVED: &[u16] = &[Ebp.dwarf(), Ebx.dwarf(), Esi.dwarf(), Edi.dwarf()];

/// Registers reported, in report order: (DWARF number, name).
pub const REGISTER_NAMES: &[(u16, &str)] = &[
    (Eax.dwarf(), "eax"),
    (Ebx.dwarf(), "ebx"),
    (Ecx.dwarf(), "ecx"),
    (Edx.dwarf(), "edx"),
    (Esi.dwarf(), "esi"),
    (Edi.dwarf(), "edi"),
    (Ebp.dwarf(), "ebp"),
    (Esp.dwarf(), "esp"),
    (Eip.dwarf(), "eip"),
    (Eflags.dwarf(), "eflags"),
];

pub const INFO: ArchInfo = ArchInfo {
    name: "x86",
    pointer_size: 4,
    pc: Eip.dwarf(),
    sp: Esp.dwarf(),
    fp: Ebp.dwarf(),
    ra: Eip.dwarf(),
    call_back: 1,
    callee_saved: CALLEE_SAVED,
    register_names: REGISTER_NAMES,
    pointer_authentication: false,
    glibc_interpreter: "/lib/ld-linux.so.2",
};
