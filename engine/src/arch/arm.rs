//! 32-bit arm: registers by their AAPCS DWARF numbers, and the architecture's
//! description (walked by `walk/arm.rs`; see `docs/arm.md`).

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

/// The register slot holding `cpsr` (not a DWARF number: DWARF for the Arm Architecture
/// gives it none; 16–23 were the obsolete FPA registers, which no unwind rule names).
pub const CPSR_SLOT: u16 = 16;

/// `cpsr`'s T bit: the thread was executing Thumb code.
pub const CPSR_THUMB: u64 = 1 << 5;

/// Registers reported, in report order: (DWARF number or slot, name).
pub const REGISTER_NAMES: &[(u16, &str)] = &[
    (R0.dwarf(), "r0"),
    (R1.dwarf(), "r1"),
    (R2.dwarf(), "r2"),
    (R3.dwarf(), "r3"),
    (R4.dwarf(), "r4"),
    (R5.dwarf(), "r5"),
    (R6.dwarf(), "r6"),
    (R7.dwarf(), "r7"),
    (R8.dwarf(), "r8"),
    (R9.dwarf(), "r9"),
    (R10.dwarf(), "r10"),
    (R11.dwarf(), "r11"),
    (R12.dwarf(), "r12"),
    (R13.dwarf(), "sp"),
    (R14.dwarf(), "lr"),
    (R15.dwarf(), "pc"),
    (CPSR_SLOT, "cpsr"),
];

pub const INFO: ArchInfo = ArchInfo {
    name: "arm",
    pointer_size: 4,
    pc: PC.dwarf(),
    sp: SP.dwarf(),
    fp: FP.dwarf(),
    ra: LR.dwarf(),
    // a return address is 2 or 4 bytes past its call (Thumb's `blx rN` is 2 bytes): 2
    // back is inside the call in every case
    call_back: 2,
    callee_saved: CALLEE_SAVED,
    register_names: REGISTER_NAMES,
    pointer_authentication: false,
    glibc_interpreter: "/lib/ld-linux-armhf.so.3",
};
