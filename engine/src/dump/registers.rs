//! A thread's register context, indexed by DWARF register number.
//!
//! Indexing by the ABI's DWARF numbers means unwind rules address registers directly, with
//! no translation table on the hot path. Every register is either known or unknown: a rule
//! that cannot recover a register makes it unknown for the caller, never guessed.

use smallvec::SmallVec;

use super::Arch;
use crate::arch::DwarfRegister;

/// Number of register slots: covers x86_64 DWARF 0–16 plus flags/segments (49–59), and
/// aarch64 x0–x30, sp (31), pc (32), with pstate kept in slot 33 (see [`crate::arch`]).
pub const REGISTER_SLOTS: usize = 64;

/// Register values by DWARF number, each known or unknown.
#[derive(Clone, PartialEq, Eq)]
pub struct RegisterSet {
    arch: Arch,
    values: [u64; REGISTER_SLOTS],
    known: u64,
}

impl std::fmt::Debug for RegisterSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (name, v) in self.named() {
            m.entry(&name, &format_args!("{v:#x}"));
        }
        m.finish()
    }
}

impl RegisterSet {
    /// All registers unknown.
    pub fn new(arch: Arch) -> Self {
        RegisterSet {
            arch,
            values: [0; REGISTER_SLOTS],
            known: 0,
        }
    }
    pub fn arch(&self) -> Arch {
        self.arch
    }
    /// The value of DWARF register `reg`, if known.
    #[inline]
    pub fn get(&self, reg: impl DwarfRegister) -> Option<u64> {
        let i = usize::from(reg.dwarf_number());
        (i < REGISTER_SLOTS && self.known & (1 << i) != 0).then(|| self.values[i])
    }
    /// Sets the register a crash report names `name` (the report's own spelling: the
    /// architecture's names, or the aliases Apple's and Android's reports use — `fp`, `lr`,
    /// `cpsr`/`pst` on arm64; `ip`, `fp` and `sl` on arm, the APCS names of r12, r11 and
    /// r10 that older debuggerd tombstones print); a name it does not know is skipped.
    pub(crate) fn set_named(&mut self, name: &str, value: u64) {
        let arch = self.arch;
        let name = match (arch, name) {
            (Arch::Aarch64, "fp") => "x29",
            (Arch::Aarch64, "lr") => "x30",
            (Arch::Aarch64, "cpsr" | "pst") => "pstate",
            (Arch::Arm, "ip") => "r12",
            (Arch::Arm, "fp") => "r11",
            (Arch::Arm, "sl") => "r10",
            (_, n) => n,
        };
        if let Some(&(reg, _)) = arch.register_names().iter().find(|(_, n)| *n == name) {
            self.set(reg, value);
        }
    }

    /// Sets DWARF register `reg`; registers outside the slots are ignored.
    #[inline]
    pub fn set(&mut self, reg: impl DwarfRegister, value: u64) {
        let i = usize::from(reg.dwarf_number());
        if i < REGISTER_SLOTS {
            self.values[i] = value;
            self.known |= 1 << i;
        }
    }
    /// Marks DWARF register `reg` unknown.
    #[inline]
    pub fn clear(&mut self, reg: impl DwarfRegister) {
        let i = usize::from(reg.dwarf_number());
        if i < REGISTER_SLOTS {
            self.known &= !(1 << i);
        }
    }
    /// Instruction pointer (x86_64 rip, aarch64 pc).
    pub fn pc(&self) -> Option<u64> {
        self.get(self.pc_reg())
    }
    /// Stack pointer (x86_64 rsp, aarch64 sp).
    pub fn sp(&self) -> Option<u64> {
        self.get(self.sp_reg())
    }
    /// DWARF number of the program counter.
    pub fn pc_reg(&self) -> u16 {
        self.arch.pc_reg()
    }
    /// DWARF number of the stack pointer.
    pub fn sp_reg(&self) -> u16 {
        self.arch.sp_reg()
    }
    /// The names of this architecture's reported registers.
    pub fn name_table(&self) -> &'static [(u16, &'static str)] {
        self.arch.register_names()
    }
    /// Known registers with their names, in report order.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.name_table()
            .iter()
            .filter_map(|&(reg, name)| self.get(reg).map(|v| (name, v)))
    }
}

/// A walked frame's registers as the walk keeps them: the known ones only, in slot order.
///
/// A [`RegisterSet`] is 528 bytes whichever registers it knows, and a walked frame knows
/// a handful (x86_64's pc, sp and callee-saved registers: ten of 64 slots). A thread of
/// 8,192 frames kept 4.3 MB of full sets that nothing read after its walk; their fresh
/// pages were a third of a deep walk's page faults (issue 40). The walk computes with
/// full sets and keeps this form of each frame, its values inline up to sixteen (an
/// x86_64 frame walked by its rules knows ten, an aarch64 one up to fourteen: no
/// allocation per frame); reading a register is one population count more.
#[derive(Clone, PartialEq, Eq)]
pub struct FrameRegisters {
    arch: Arch,
    known: u64,
    /// The known registers' values, lowest slot first.
    values: SmallVec<[u64; 16]>,
}

impl FrameRegisters {
    /// None known (a frame a crash report lists without its registers).
    pub fn none(arch: Arch) -> FrameRegisters {
        FrameRegisters {
            arch,
            known: 0,
            values: SmallVec::new(),
        }
    }
    /// The value of DWARF register `reg`, if known.
    #[inline]
    pub fn get(&self, reg: impl DwarfRegister) -> Option<u64> {
        let i = usize::from(reg.dwarf_number());
        if i >= REGISTER_SLOTS || self.known & (1 << i) == 0 {
            return None;
        }
        let below = (self.known & ((1u64 << i) - 1)).count_ones() as usize;
        self.values.get(below).copied()
    }
    pub fn arch(&self) -> Arch {
        self.arch
    }
    /// Instruction pointer.
    pub fn pc(&self) -> Option<u64> {
        self.get(self.arch.pc_reg())
    }
    /// Stack pointer.
    pub fn sp(&self) -> Option<u64> {
        self.get(self.arch.sp_reg())
    }
    /// The full set, for the rules that compute a caller from these registers.
    pub fn to_set(&self) -> RegisterSet {
        let mut set = RegisterSet::new(self.arch);
        let mut known = self.known;
        for &v in self.values.iter() {
            let i = known.trailing_zeros() as usize;
            set.values[i] = v;
            known &= known - 1;
        }
        set.known = self.known;
        set
    }
}

impl From<&RegisterSet> for FrameRegisters {
    fn from(set: &RegisterSet) -> FrameRegisters {
        let mut values = SmallVec::with_capacity(set.known.count_ones() as usize);
        let mut known = set.known;
        while known != 0 {
            values.push(set.values[known.trailing_zeros() as usize]);
            known &= known - 1;
        }
        FrameRegisters {
            arch: set.arch,
            known: set.known,
            values,
        }
    }
}

impl std::fmt::Debug for FrameRegisters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_set().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The APCS names of arm's r10–r12 (`sl`, `fp`, `ip`, as older debuggerd tombstones and
    /// gdb's `info registers` print them) and arm64's `fp`/`lr` land on the registers the
    /// architecture numbers r10–r12 and x29/x30.
    #[test]
    fn report_aliases_name_the_architectures_registers() {
        let mut arm = RegisterSet::new(Arch::Arm);
        for (name, v) in [("sl", 10), ("fp", 11), ("ip", 12), ("nonsense", 99)] {
            arm.set_named(name, v);
        }
        let named: Vec<(&str, u64)> = arm.named().collect();
        assert_eq!(named, [("r10", 10), ("r11", 11), ("r12", 12)]);
        let mut a64 = RegisterSet::new(Arch::Aarch64);
        a64.set_named("fp", 29);
        a64.set_named("lr", 30);
        let named: Vec<(&str, u64)> = a64.named().collect();
        assert_eq!(named, [("x29", 29), ("x30", 30)]);
    }

    /// The kept form answers every register as the full set does, on every slot, for
    /// sets with none, some and all slots known, and turns back into the same set.
    #[test]
    fn a_frames_kept_registers_read_as_the_full_set() {
        assert!(FrameRegisters::none(Arch::Arm).to_set() == RegisterSet::new(Arch::Arm));
        let mut sets = vec![RegisterSet::new(Arch::X86_64)];
        let mut some = RegisterSet::new(Arch::X86_64);
        for (reg, v) in [
            (0u16, 1u64),
            (6, 0x66),
            (7, 0x77),
            (16, 0x1616),
            (49, 0x49),
            (63, 9),
        ] {
            some.set(reg, v);
        }
        sets.push(some);
        let mut all = RegisterSet::new(Arch::Aarch64);
        for reg in 0..REGISTER_SLOTS as u16 {
            all.set(reg, u64::from(reg) * 3 + 1);
        }
        sets.push(all);
        for set in sets {
            let kept = FrameRegisters::from(&set);
            for reg in 0..(REGISTER_SLOTS as u16 + 2) {
                assert_eq!(kept.get(reg), set.get(reg), "slot {reg}");
            }
            assert_eq!((kept.pc(), kept.sp()), (set.pc(), set.sp()));
            assert_eq!(kept.arch(), set.arch());
            assert!(kept.to_set() == set);
        }
    }
}
