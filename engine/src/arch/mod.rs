//! What the engine knows about each CPU architecture, one module per architecture.
//!
//! Each module names its registers by DWARF number — a `Reg` enum that converts to and
//! from the number unwind rules and [`RegisterSet`](crate::dump::RegisterSet) index by —
//! and describes itself in an [`ArchInfo`]: the stack-pointer, frame-pointer,
//! return-address and pc registers, the pointer size, how far before a return address
//! the call instruction lies, the callee-saved registers an unwind record tracks, and the
//! register names of the report. [`Arch::info`] is the one match from an [`Arch`] to its
//! description, so a new architecture is mostly a new module here (plus its walker in
//! `walk/`). What stays elsewhere is each file format's own spelling of an architecture:
//! ELF machine numbers, minidump CPU types and contexts, Breakpad register names, the
//! unwind table's arch code.

pub mod aarch64;
pub mod arm;
pub mod x86;
pub mod x86_64;

/// The CPU architecture of a dump or binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum Arch {
    X86_64,
    Aarch64,
    X86,
    Arm,
}

/// One architecture's description (see the module documentation).
#[derive(Debug)]
pub struct ArchInfo {
    /// The name used in reports (`x86_64`, `aarch64`, `x86`, `arm`).
    pub name: &'static str,
    /// Pointer size in bytes.
    pub pointer_size: u64,
    /// DWARF number of the program counter.
    pub pc: u16,
    /// DWARF number of the stack pointer.
    pub sp: u16,
    /// DWARF number of the frame pointer.
    pub fp: u16,
    /// DWARF number of the column holding the return address in unwind rules.
    pub ra: u16,
    /// How far before a return address the call instruction's last byte lies: the
    /// lookup address of a caller frame is `pc - call_back`.
    pub call_back: u64,
    /// The callee-saved registers an unwind record keeps a slot for, in slot order.
    pub callee_saved: &'static [u16],
    /// The registers a report shows, in report order: (DWARF number, name).
    pub register_names: &'static [(u16, &'static str)],
    /// Whether return addresses may carry a pointer-authentication code in their top
    /// bits, which the walker strips (with the dump's mask, else an inferred one).
    pub pointer_authentication: bool,
    /// glibc's standard dynamic linker path (`PT_INTERP`) on Linux.
    pub glibc_interpreter: &'static str,
}

impl Arch {
    /// This architecture's description.
    pub fn info(self) -> &'static ArchInfo {
        match self {
            Arch::X86_64 => &x86_64::INFO,
            Arch::Aarch64 => &aarch64::INFO,
            Arch::X86 => &x86::INFO,
            Arch::Arm => &arm::INFO,
        }
    }
    /// The name used in reports (`x86_64`, `aarch64`, `x86`, `arm`).
    pub fn as_str(self) -> &'static str {
        self.info().name
    }
    /// Pointer size in bytes.
    pub fn pointer_size(self) -> u64 {
        self.info().pointer_size
    }
    /// DWARF number of the program counter.
    pub fn pc_reg(self) -> u16 {
        self.info().pc
    }
    /// DWARF number of the stack pointer.
    pub fn sp_reg(self) -> u16 {
        self.info().sp
    }
    /// DWARF number of the frame pointer.
    pub fn fp_reg(self) -> u16 {
        self.info().fp
    }
    /// DWARF number of the return-address column of unwind rules.
    pub fn ra_reg(self) -> u16 {
        self.info().ra
    }
    /// How far before a return address the call instruction lies (see [`ArchInfo::call_back`]).
    pub fn call_back(self) -> u64 {
        self.info().call_back
    }
    /// The callee-saved registers an unwind record keeps a slot for.
    pub fn callee_saved(self) -> &'static [u16] {
        self.info().callee_saved
    }
    /// The registers a report shows, in report order.
    pub fn register_names(self) -> &'static [(u16, &'static str)] {
        self.info().register_names
    }
}

/// `N` consecutive DWARF numbers from `first` (a run of callee-saved registers).
const fn consecutive<const N: usize>(first: u16) -> [u16; N] {
    let mut out = [0u16; N];
    let mut i = 0;
    while i < N {
        out[i] = first + i as u16;
        i += 1;
    }
    out
}

/// A register as [`RegisterSet`](crate::dump::RegisterSet) and unwind rules address it:
/// a DWARF number, or an architecture's `Reg` naming one. (Implemented for `u16` and no
/// other integer, so a bare literal still means a DWARF number.)
pub trait DwarfRegister: Copy {
    /// The DWARF register number.
    fn dwarf_number(self) -> u16;
}

impl DwarfRegister for u16 {
    fn dwarf_number(self) -> u16 {
        self
    }
}

/// Declares an architecture's `Reg` enum: each variant's discriminant is its DWARF
/// number, with conversions to and from that number.
macro_rules! dwarf_registers {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum $name {
            $($(#[$vm])* $v = $n,)*
        }

        impl $name {
            /// The DWARF register number.
            pub const fn dwarf(self) -> u16 {
                self as u16
            }
            /// The register with DWARF number `n`, if this architecture names it.
            pub const fn from_dwarf(n: u16) -> Option<Self> {
                match n {
                    $($n => Some(Self::$v),)*
                    _ => None,
                }
            }
        }

        impl $crate::arch::DwarfRegister for $name {
            fn dwarf_number(self) -> u16 {
                self.dwarf()
            }
        }

        impl From<$name> for u16 {
            fn from(r: $name) -> u16 {
                r.dwarf()
            }
        }

        impl TryFrom<u16> for $name {
            type Error = u16;
            fn try_from(n: u16) -> Result<Self, u16> {
                Self::from_dwarf(n).ok_or(n)
            }
        }
    };
}
use dwarf_registers;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_convert_to_and_from_dwarf_numbers() {
        assert_eq!(u16::from(x86_64::Reg::Rip), 16);
        assert_eq!(x86_64::Reg::try_from(7), Ok(x86_64::Reg::Rsp));
        assert_eq!(x86_64::Reg::try_from(17), Err(17));
        assert_eq!(aarch64::Reg::from_dwarf(30), Some(aarch64::Reg::X30));
        assert_eq!(aarch64::Reg::Pc.dwarf(), 32);
        assert_eq!(
            aarch64::CALLEE_SAVED,
            &[19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
        );
        assert_eq!(arm::CALLEE_SAVED, &[4, 5, 6, 7, 8, 9, 10, 11]);
        for arch in [Arch::X86_64, Arch::Aarch64, Arch::X86, Arch::Arm] {
            let info = arch.info();
            assert!(info.callee_saved.len() <= crate::unwind::rule::REG_SLOTS);
            for &(n, _) in info.register_names {
                assert!(usize::from(n) < crate::dump::REGISTER_SLOTS, "{n}");
            }
        }
    }
}
