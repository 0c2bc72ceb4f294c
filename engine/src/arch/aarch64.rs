//! aarch64: registers by their AAPCS64 DWARF numbers, and the architecture's description.
//!
//! x29 is the frame pointer and x30 the link register, which holds the return address
//! until a non-leaf function saves it (so it is the return-address column of unwind
//! rules); sp is 31 and the pc 32.

use super::{dwarf_registers, ArchInfo};

dwarf_registers! {
    /// An aarch64 register by DWARF number (DWARF for the Arm 64-bit Architecture, 4.1).
    Reg {
        X0 = 0,
        X1 = 1,
        X2 = 2,
        X3 = 3,
        X4 = 4,
        X5 = 5,
        X6 = 6,
        X7 = 7,
        X8 = 8,
        X9 = 9,
        X10 = 10,
        X11 = 11,
        X12 = 12,
        X13 = 13,
        X14 = 14,
        X15 = 15,
        X16 = 16,
        X17 = 17,
        X18 = 18,
        X19 = 19,
        X20 = 20,
        X21 = 21,
        X22 = 22,
        X23 = 23,
        X24 = 24,
        X25 = 25,
        X26 = 26,
        X27 = 27,
        X28 = 28,
        /// The frame pointer.
        X29 = 29,
        /// The link register: the return address of a leaf.
        X30 = 30,
        Sp = 31,
        Pc = 32,
        /// `pstate`, which DWARF does not number: [`RegisterSet`](crate::dump::RegisterSet)
        /// keeps it in this otherwise unused slot (DWARF's 33 is ELR_mode, never in a
        /// thread context).
        Pstate = 33,
    }
}

use Reg::*;

/// The frame pointer (x29).
pub const FP: Reg = X29;
/// The link register (x30).
pub const LR: Reg = X30;

/// `RA_SIGN_STATE`, the DWARF pseudo-register whose bit 0 says the return address is
/// signed with a pointer-authentication code (not a register of any context).
pub const RA_SIGN_STATE: u16 = 34;

/// The callee-saved registers x19–x28 (kept by the callee unless it saves and reuses
/// them), without the frame pointer.
pub const CALLEE_SAVED_GENERAL: &[u16] = &super::consecutive::<10>(X19.dwarf());

/// The callee-saved registers an unwind record tracks: x19–x29.
pub const CALLEE_SAVED: &[u16] = &super::consecutive::<11>(X19.dwarf());

/// Registers reported, in report order: (DWARF number, name).
pub const REGISTER_NAMES: &[(u16, &str)] = &[
    (X0.dwarf(), "x0"),
    (X1.dwarf(), "x1"),
    (X2.dwarf(), "x2"),
    (X3.dwarf(), "x3"),
    (X4.dwarf(), "x4"),
    (X5.dwarf(), "x5"),
    (X6.dwarf(), "x6"),
    (X7.dwarf(), "x7"),
    (X8.dwarf(), "x8"),
    (X9.dwarf(), "x9"),
    (X10.dwarf(), "x10"),
    (X11.dwarf(), "x11"),
    (X12.dwarf(), "x12"),
    (X13.dwarf(), "x13"),
    (X14.dwarf(), "x14"),
    (X15.dwarf(), "x15"),
    (X16.dwarf(), "x16"),
    (X17.dwarf(), "x17"),
    (X18.dwarf(), "x18"),
    (X19.dwarf(), "x19"),
    (X20.dwarf(), "x20"),
    (X21.dwarf(), "x21"),
    (X22.dwarf(), "x22"),
    (X23.dwarf(), "x23"),
    (X24.dwarf(), "x24"),
    (X25.dwarf(), "x25"),
    (X26.dwarf(), "x26"),
    (X27.dwarf(), "x27"),
    (X28.dwarf(), "x28"),
    (X29.dwarf(), "x29"),
    (X30.dwarf(), "x30"),
    (Sp.dwarf(), "sp"),
    (Pc.dwarf(), "pc"),
    (Pstate.dwarf(), "pstate"),
];

pub const INFO: ArchInfo = ArchInfo {
    name: "aarch64",
    pointer_size: 8,
    pc: Pc.dwarf(),
    sp: Sp.dwarf(),
    fp: FP.dwarf(),
    ra: LR.dwarf(),
    // one 4-byte instruction
    call_back: 4,
    callee_saved: CALLEE_SAVED,
    register_names: REGISTER_NAMES,
    pointer_authentication: true,
    glibc_interpreter: "/lib/ld-linux-aarch64.so.1",
};
