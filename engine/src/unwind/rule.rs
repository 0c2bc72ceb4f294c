//! The rule palette's record: how to recover the caller's CFA, return address and
//! callee-saved registers at one code address.
//!
//! A [`RuleRecord`] is a fixed-size, plain-old-data record so the serialized table can hold
//! an array of them and a lookup can read one straight from the bytes. Registers are held
//! in positional [`Slot`]s; which DWARF register each position means is per architecture
//! ([`callee_saved`]). DWARF expressions live in the table's expression area and a slot
//! refers to them by offset and length, so the rare expression never widens every record.

use bytemuck::{Pod, Zeroable};

use crate::dump::Arch;

/// How a CFA slot or register slot is recovered. Stored as the slot's `kind` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotKind {
    /// Register: unchanged from the callee (same value). CFA: no rule.
    Unchanged = 0,
    /// No recoverable value. For the return address: this is the outermost frame.
    Undefined = 1,
    /// CFA: `reg + value`. Register: saved at address `CFA + value`.
    Offset = 2,
    /// Register: the value is `CFA + value`.
    ValOffset = 3,
    /// Register: the value is in register `reg`.
    Register = 4,
    /// CFA: the value of the expression. Register: saved at the address the expression
    /// computes (the CFA pushed first). `value` is the offset in the expression area,
    /// `expr_len` its length.
    Expression = 5,
    /// Register: the value is the expression's result (CFA pushed first).
    ValExpression = 6,
    /// CFA only: `*(reg + value)` — used by SFrame/compact unwind formats that dereference.
    DerefOffset = 7,
    /// CFA only: a Windows x86 frame-data record (a Breakpad `STACK WIN` record) in the
    /// expression area, encoded as [`crate::unwind::win_frame::WinFrame::encode`] says
    /// (`value` the offset, `expr_len` the length). It gives the caller's registers all
    /// at once, as Breakpad's x86 walker evaluates it; the record's other slots are unused.
    WinFrame = 8,
}

impl SlotKind {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => SlotKind::Unchanged,
            1 => SlotKind::Undefined,
            2 => SlotKind::Offset,
            3 => SlotKind::ValOffset,
            4 => SlotKind::Register,
            5 => SlotKind::Expression,
            6 => SlotKind::ValExpression,
            7 => SlotKind::DerefOffset,
            8 => SlotKind::WinFrame,
            _ => return None,
        })
    }
}

/// One register's (or the CFA's) recovery rule: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Pod, Zeroable, Default)]
#[repr(C)]
pub struct Slot {
    pub kind: u8,
    /// DWARF register number for `Offset` (CFA), `DerefOffset` and `Register`.
    pub reg: u8,
    /// Length of the expression for `Expression`/`ValExpression`.
    pub expr_len: u16,
    /// Offset (bytes) or expression-area offset.
    pub value: i32,
}

impl Slot {
    pub const UNCHANGED: Slot = Slot {
        kind: SlotKind::Unchanged as u8,
        reg: 0,
        expr_len: 0,
        value: 0,
    };
    pub const UNDEFINED: Slot = Slot {
        kind: SlotKind::Undefined as u8,
        reg: 0,
        expr_len: 0,
        value: 0,
    };
    /// `reg + offset` for the CFA; "saved at CFA + offset" for a register (reg ignored).
    pub fn offset(reg: u8, offset: i32) -> Slot {
        Slot {
            kind: SlotKind::Offset as u8,
            reg,
            expr_len: 0,
            value: offset,
        }
    }
    pub fn val_offset(offset: i32) -> Slot {
        Slot {
            kind: SlotKind::ValOffset as u8,
            reg: 0,
            expr_len: 0,
            value: offset,
        }
    }
    pub fn register(reg: u8) -> Slot {
        Slot {
            kind: SlotKind::Register as u8,
            reg,
            expr_len: 0,
            value: 0,
        }
    }
    /// A Windows x86 frame-data record stored at `area_offset` in the expression area.
    pub fn win_frame(area_offset: u32, len: u16) -> Slot {
        Slot {
            kind: SlotKind::WinFrame as u8,
            reg: 0,
            expr_len: len,
            value: area_offset as i32,
        }
    }
    pub fn deref_offset(reg: u8, offset: i32) -> Slot {
        Slot {
            kind: SlotKind::DerefOffset as u8,
            reg,
            expr_len: 0,
            value: offset,
        }
    }
    /// An expression stored at `area_offset` in the expression area.
    pub fn expression(val: bool, area_offset: u32, len: u16) -> Slot {
        Slot {
            kind: if val {
                SlotKind::ValExpression as u8
            } else {
                SlotKind::Expression as u8
            },
            reg: 0,
            expr_len: len,
            value: area_offset as i32,
        }
    }
    /// The kind, or `None` for a byte no builder writes (a corrupt table).
    pub fn kind(&self) -> Option<SlotKind> {
        SlotKind::from_u8(self.kind)
    }
}

/// Number of callee-saved register slots per record.
pub const REG_SLOTS: usize = 12;

/// Which DWARF register each of a record's `regs` slots describes.
/// (The architecture's own list, [`Arch::callee_saved`].)
pub fn callee_saved(arch: Arch) -> &'static [u16] {
    arch.callee_saved()
}

/// Flag: the frame is a signal trampoline; the next lookup uses the exact pc.
pub const FLAG_SIGNAL_FRAME: u32 = 1 << 0;
/// Flag (aarch64): the return address is signed with pointer authentication.
pub const FLAG_RA_SIGNED: u32 = 1 << 1;
/// Flag (aarch64): signed with key B rather than key A.
pub const FLAG_RA_KEY_B: u32 = 1 << 2;
/// Flag (Windows ARM64, `.xdata`'s `MSFT_OP_MACHINE_FRAME`): a machine frame is at the
/// CFA: the caller's `sp` is the word at the CFA, its pc (the return-address slot, at
/// CFA + 8) the exact pc the frame interrupted.
pub const FLAG_MACHINE_FRAME: u32 = 1 << 3;
/// Flag (Windows ARM64, `.xdata`'s `MSFT_OP_CONTEXT`: ntdll's dispatchers): an
/// `ARM64_NT_CONTEXT` is at the CFA, and the caller's registers are all in it, its pc
/// the exact pc it interrupted.
pub const FLAG_NT_CONTEXT: u32 = 1 << 4;
/// Bits 8..12: the [`UnwindSource`] the rule came from.
pub const SOURCE_SHIFT: u32 = 8;

/// Where a rule came from; reported per frame as `unwind_source`, spelled as
/// [`UnwindSource::as_str`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray, strum::IntoStaticStr)]
#[repr(u8)]
#[strum(serialize_all = "snake_case")]
pub enum UnwindSource {
    EhFrame = 1,
    DebugFrame = 2,
    Sframe = 3,
    CompactUnwind = 4,
    Breakpad = 5,
    /// A Windows x64 image's `.pdata`/`.xdata`.
    Pdata = 6,
    /// A Windows x86 PDB's FPO and FrameData streams (the rules `STACK WIN` records hold).
    PdbFrameData = 7,
    /// An arm binary's `.ARM.exidx`/`.ARM.extab` (EHABI) unwind tables.
    ArmExidx = 8,
    /// A Windows ARM64 image's `.pdata` (packed unwind data) and `.xdata`.
    PeArm64 = 9,
}

crate::names::serde_by_name!(UnwindSource);

impl UnwindSource {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => UnwindSource::EhFrame,
            2 => UnwindSource::DebugFrame,
            3 => UnwindSource::Sframe,
            4 => UnwindSource::CompactUnwind,
            5 => UnwindSource::Breakpad,
            6 => UnwindSource::Pdata,
            7 => UnwindSource::PdbFrameData,
            8 => UnwindSource::ArmExidx,
            9 => UnwindSource::PeArm64,
            _ => return None,
        })
    }
    /// Bit of this source in the table header's `sources` mask.
    pub fn bit(self) -> u32 {
        1 << (self as u8)
    }
}

/// The recovery rule for one address range: 8 + 14 × 8 = 120 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Pod, Zeroable)]
#[repr(C)]
pub struct RuleRecord {
    /// `FLAG_*` bits and the source in bits 8..12.
    pub flags: u32,
    pub _reserved: u32,
    pub cfa: Slot,
    pub ra: Slot,
    /// Callee-saved registers in [`callee_saved`] order; unused slots stay `UNCHANGED`.
    pub regs: [Slot; REG_SLOTS],
}

const _: () = assert!(std::mem::size_of::<RuleRecord>() == 120);
const _: () = assert!(std::mem::size_of::<Slot>() == 8);

impl RuleRecord {
    /// The all-zero record: palette entry 0, "no rule here".
    pub const NONE: RuleRecord = RuleRecord {
        flags: 0,
        _reserved: 0,
        cfa: Slot::UNCHANGED,
        ra: Slot::UNCHANGED,
        regs: [Slot::UNCHANGED; REG_SLOTS],
    };

    /// A record with the given CFA and return-address rules and every register unchanged.
    pub fn new(source: UnwindSource, cfa: Slot, ra: Slot) -> RuleRecord {
        RuleRecord {
            flags: u32::from(source as u8) << SOURCE_SHIFT,
            _reserved: 0,
            cfa,
            ra,
            regs: [Slot::UNCHANGED; REG_SLOTS],
        }
    }
    pub fn source(&self) -> Option<UnwindSource> {
        UnwindSource::from_u8(((self.flags >> SOURCE_SHIFT) & 0xf) as u8)
    }
    pub fn is_signal_frame(&self) -> bool {
        self.flags & FLAG_SIGNAL_FRAME != 0
    }
    pub fn ra_signed(&self) -> bool {
        self.flags & FLAG_RA_SIGNED != 0
    }
    pub fn is_machine_frame(&self) -> bool {
        self.flags & FLAG_MACHINE_FRAME != 0
    }
    pub fn is_nt_context(&self) -> bool {
        self.flags & FLAG_NT_CONTEXT != 0
    }
    /// Sets the slot of DWARF register `reg`, if the architecture tracks it. Returns
    /// whether it was tracked.
    pub fn set_reg(&mut self, arch: Arch, reg: u16, slot: Slot) -> bool {
        match callee_saved(arch).iter().position(|&r| r == reg) {
            Some(i) => {
                self.regs[i] = slot;
                true
            }
            None => false,
        }
    }
    /// The slot of DWARF register `reg`, if tracked.
    pub fn reg(&self, arch: Arch, reg: u16) -> Option<Slot> {
        callee_saved(arch)
            .iter()
            .position(|&r| r == reg)
            .map(|i| self.regs[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_is_pinned() {
        assert_eq!(std::mem::size_of::<RuleRecord>(), 120);
        assert_eq!(std::mem::align_of::<RuleRecord>(), 4);
        assert!(callee_saved(Arch::Aarch64).len() <= REG_SLOTS);
        assert!(callee_saved(Arch::X86_64).len() <= REG_SLOTS);
    }

    #[test]
    fn none_is_all_zero() {
        assert!(bytemuck::bytes_of(&RuleRecord::NONE)
            .iter()
            .all(|&b| b == 0));
    }
}
