//! A thread's register context, indexed by DWARF register number.
//!
//! Indexing by the ABI's DWARF numbers means unwind rules address registers directly, with
//! no translation table on the hot path. Every register is either known or unknown: a rule
//! that cannot recover a register makes it unknown for the caller, never guessed.

use super::Arch;

/// Number of register slots: covers x86_64 DWARF 0–16 plus flags/segments (49–59), and
/// aarch64 x0–x30, sp (31), pc (32), with pstate kept in slot 33.
pub const REGISTER_SLOTS: usize = 64;

/// x86_64 registers reported, in report order: (DWARF number, name).
pub const X86_64_REGISTER_NAMES: &[(u16, &str)] = &[
    (0, "rax"),
    (3, "rbx"),
    (2, "rcx"),
    (1, "rdx"),
    (4, "rsi"),
    (5, "rdi"),
    (6, "rbp"),
    (7, "rsp"),
    (8, "r8"),
    (9, "r9"),
    (10, "r10"),
    (11, "r11"),
    (12, "r12"),
    (13, "r13"),
    (14, "r14"),
    (15, "r15"),
    (16, "rip"),
    (49, "eflags"),
    (50, "es"),
    (51, "cs"),
    (52, "ss"),
    (53, "ds"),
    (54, "fs"),
    (55, "gs"),
    (58, "fs_base"),
    (59, "gs_base"),
];

/// aarch64 registers reported, in report order.
pub const AARCH64_REGISTER_NAMES: &[(u16, &str)] = &[
    (0, "x0"),
    (1, "x1"),
    (2, "x2"),
    (3, "x3"),
    (4, "x4"),
    (5, "x5"),
    (6, "x6"),
    (7, "x7"),
    (8, "x8"),
    (9, "x9"),
    (10, "x10"),
    (11, "x11"),
    (12, "x12"),
    (13, "x13"),
    (14, "x14"),
    (15, "x15"),
    (16, "x16"),
    (17, "x17"),
    (18, "x18"),
    (19, "x19"),
    (20, "x20"),
    (21, "x21"),
    (22, "x22"),
    (23, "x23"),
    (24, "x24"),
    (25, "x25"),
    (26, "x26"),
    (27, "x27"),
    (28, "x28"),
    (29, "x29"),
    (30, "x30"),
    (31, "sp"),
    (32, "pc"),
    (33, "pstate"),
];

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
    pub fn get(&self, reg: u16) -> Option<u64> {
        let i = usize::from(reg);
        (i < REGISTER_SLOTS && self.known & (1 << i) != 0).then(|| self.values[i])
    }
    /// Sets DWARF register `reg`; registers outside the slots are ignored.
    #[inline]
    pub fn set(&mut self, reg: u16, value: u64) {
        let i = usize::from(reg);
        if i < REGISTER_SLOTS {
            self.values[i] = value;
            self.known |= 1 << i;
        }
    }
    /// Marks DWARF register `reg` unknown.
    #[inline]
    pub fn clear(&mut self, reg: u16) {
        let i = usize::from(reg);
        if i < REGISTER_SLOTS {
            self.known &= !(1 << i);
        }
    }
    /// Instruction pointer (x86_64 rip = 16, aarch64 pc = 32).
    pub fn pc(&self) -> Option<u64> {
        self.get(self.pc_reg())
    }
    /// Stack pointer (x86_64 rsp = 7, aarch64 sp = 31).
    pub fn sp(&self) -> Option<u64> {
        self.get(self.sp_reg())
    }
    /// DWARF number of the program counter.
    pub fn pc_reg(&self) -> u16 {
        match self.arch {
            Arch::X86_64 => 16,
            Arch::Aarch64 => 32,
            Arch::X86 => 8,
            Arch::Arm => 15,
        }
    }
    /// DWARF number of the stack pointer.
    pub fn sp_reg(&self) -> u16 {
        match self.arch {
            Arch::X86_64 => 7,
            Arch::Aarch64 => 31,
            Arch::X86 => 4,
            Arch::Arm => 13,
        }
    }
    /// The names of this architecture's reported registers.
    pub fn name_table(&self) -> &'static [(u16, &'static str)] {
        match self.arch {
            Arch::X86_64 => X86_64_REGISTER_NAMES,
            Arch::Aarch64 => AARCH64_REGISTER_NAMES,
            Arch::X86 | Arch::Arm => &[],
        }
    }
    /// Known registers with their names, in report order.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.name_table()
            .iter()
            .filter_map(|&(reg, name)| self.get(reg).map(|v| (name, v)))
    }
}
