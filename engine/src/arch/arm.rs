//! 32-bit arm: registers by their AAPCS DWARF numbers, and the architecture's
//! description. Dumps of it are read (registers, modules) but not walked.

use super::{dwarf_registers, ArchInfo};

dwarf_registers! {
    /// An arm register by DWARF number (DWARF for the Arm Architecture, 4.1).
    Reg {
        R0 = 0,
        R1 = 1,
        R2 = 2,
        R3 = 3,
        R4 = 4,
        R5 = 5,
        R6 = 6,
        R7 = 7,
        R8 = 8,
        R9 = 9,
        R10 = 10,
        /// The frame pointer of arm code (Thumb code uses r7).
        R11 = 11,
        R12 = 12,
        /// The stack pointer.
        R13 = 13,
        /// The link register.
        R14 = 14,
        /// The program counter.
        R15 = 15,
    }
}

use Reg::*;

/// The stack pointer (r13).
pub const SP: Reg = R13;
/// The frame pointer (r11).
pub const FP: Reg = R11;
/// The link register (r14).
pub const LR: Reg = R14;
/// The program counter (r15).
pub const PC: Reg = R15;

/// The callee-saved registers an unwind record tracks: r4–r11.
pub const CALLEE_SAVED: &[u16] = &super::consecutive::<8>(R4.dwarf());

pub const INFO: ArchInfo = ArchInfo {
    name: "arm",
    pointer_size: 4,
    pc: PC.dwarf(),
    sp: SP.dwarf(),
    fp: FP.dwarf(),
    ra: LR.dwarf(),
    call_back: 4,
    callee_saved: CALLEE_SAVED,
    // registers of arm dumps are not reported
    register_names: &[],
    pointer_authentication: false,
    glibc_interpreter: "/lib/ld-linux-armhf.so.3",
};
