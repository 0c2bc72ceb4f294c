//! An unwind table written back as Breakpad `STACK CFI INIT` records: what `dump_syms`
//! writes for a Mach-O from its `__unwind_info` and `__eh_frame`, for tables built here
//! from files that are not kept (a dyld shared cache's images, whose `.sym` file is all
//! the service stores of them: [`dyld_image_stack_cfi`]).
//!
//! One `INIT` record per table row (the row's range and its rules, no deltas), in the
//! spelling [`super::unwind`] reads and dump_syms writes: `.cfa: $rsp 16 +`,
//! `.ra: .cfa -8 + ^`, `$rbp: .cfa -16 + ^` on x86_64; `.cfa: sp 16 +`, `x29: .cfa -16 +
//! ^`, `.ra: x30` (a leaf's return address still in the link register) on arm64. A row
//! whose rules Breakpad's postfix cannot say (a DWARF expression, a dereferenced CFA) is
//! left out and counted: the walker falls back to frame pointers there, as for any
//! `.sym` file. What the text cannot carry either: the signal-frame flag and the
//! pointer-authentication flag (the walker strips an arm64 return address's PAC bits
//! anyway).

use std::fmt::Write;

use crate::dump::Arch;
use crate::dyld_cache;
use crate::unwind::builders::dwarf::build_from_macho;
use crate::unwind::rule::{RuleRecord, Slot, SlotKind};
use crate::unwind::UnwindTable;

/// Most rows written for one table (CoreFoundation's tables have some tens of
/// thousands).
pub const MAX_ROWS: usize = 2_000_000;

/// The records written and the rows left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CfiText {
    /// `STACK CFI INIT …` lines, each ending with a newline.
    pub text: String,
    pub rows: usize,
    /// Rows whose rules the postfix language cannot say.
    pub skipped: usize,
}

/// The `STACK CFI INIT` records of every row of `table` that has a rule. Addresses are the
/// table's (offsets from the module's link base, as a `.sym` file's are).
pub fn stack_cfi(table: &UnwindTable<'_>) -> CfiText {
    let arch = table.arch();
    let mut out = CfiText::default();
    let mut rows = table.rows().take(MAX_ROWS + 1).peekable();
    while let Some((start, rule)) = rows.next() {
        let Some(rule) = rule else { continue };
        let Some(end) = rows.peek().map(|r| r.0) else {
            break;
        };
        let Some(size) = end.checked_sub(start).filter(|&s| s > 0) else {
            continue;
        };
        match rules(arch, &rule) {
            Some(rules) => {
                let _ = writeln!(out.text, "STACK CFI INIT {start:x} {size:x} {rules}");
                out.rows += 1;
            }
            None => out.skipped += 1,
        }
    }
    out
}

/// The unwind rules of image `index` of a dyld shared cache (`main` and its
/// `subcaches`), as `STACK CFI` records: its `__eh_frame` and `__unwind_info` (every
/// compact-unwind encoding; DWARF escapes are the `__eh_frame` rows), read through the
/// cache's mappings ([`dyld_cache::image_object`]) and built into a table as a
/// standalone Mach-O's are, each row then written out. An image with neither section
/// gives no record; a bad entry is skipped (counted in the build's stats), never fatal.
pub fn dyld_image_stack_cfi(
    main: &[u8],
    subcaches: &[&[u8]],
    index: usize,
) -> Result<CfiText, String> {
    let file = dyld_cache::image_object(main, subcaches, index).map_err(|e| e.to_string())?;
    let built = build_from_macho(&file).map_err(|e| e.to_string())?;
    let table = UnwindTable::open(&built.bytes).map_err(|e| e.to_string())?;
    Ok(stack_cfi(&table))
}

/// Breakpad's name of DWARF register `reg`.
fn reg_name(arch: Arch, reg: u16) -> Option<String> {
    match arch {
        Arch::X86_64 => arch
            .register_names()
            .iter()
            .find(|(n, _)| *n == reg)
            .map(|(_, name)| format!("${name}")),
        Arch::Aarch64 => match reg {
            0..=30 => Some(format!("x{reg}")),
            31 => Some("sp".into()),
            _ => None,
        },
        _ => None,
    }
}

/// A register's (or the return address's) rule as postfix; `Ok(None)` for no rule
/// (unchanged, or undefined).
fn slot_rule(arch: Arch, s: Slot) -> Result<Option<String>, ()> {
    match s.kind() {
        Some(SlotKind::Unchanged | SlotKind::Undefined) => Ok(None),
        Some(SlotKind::Offset) => Ok(Some(format!(".cfa {} + ^", s.value))),
        Some(SlotKind::ValOffset) => Ok(Some(format!(".cfa {} +", s.value))),
        Some(SlotKind::Register) => reg_name(arch, u16::from(s.reg)).map(Some).ok_or(()),
        _ => Err(()),
    }
}

/// The rules of one record as a `STACK CFI` rule set; `None` when one cannot be said.
fn rules(arch: Arch, r: &RuleRecord) -> Option<String> {
    let mut out = String::new();
    match r.cfa.kind()? {
        SlotKind::Offset => {
            let reg = reg_name(arch, u16::from(r.cfa.reg))?;
            let _ = write!(out, ".cfa: {reg} {} +", r.cfa.value);
        }
        _ => return None,
    }
    match r.ra.kind()? {
        // the outermost frame: no `.ra` rule, as dump_syms writes DW_CFA_undefined
        SlotKind::Undefined => {}
        // the return address never left the link register (an arm64 leaf)
        SlotKind::Unchanged if arch == Arch::Aarch64 => {
            let lr = reg_name(arch, arch.ra_reg())?;
            let _ = write!(out, " .ra: {lr}");
        }
        _ => {
            let rule = slot_rule(arch, r.ra).ok()??;
            let _ = write!(out, " .ra: {rule}");
        }
    }
    for (&reg, &slot) in arch.callee_saved().iter().zip(r.regs.iter()) {
        if let Some(rule) = slot_rule(arch, slot).ok()? {
            let _ = write!(out, " {}: {rule}", reg_name(arch, reg)?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::breakpad::unwind::build_from_breakpad;
    use crate::unwind::rule::UnwindSource;
    use crate::unwind::TableWriter;

    fn table(arch: Arch, rows: &[(u64, u64, RuleRecord)]) -> Vec<u8> {
        let mut w = TableWriter::new(arch);
        for (s, e, r) in rows {
            w.push(*s, *e, r, 0);
        }
        w.finish().bytes
    }

    /// Written and read back by the `.sym` reader: the same rules at the same addresses.
    #[test]
    fn rows_read_back_as_they_were() {
        let mut frame = RuleRecord::new(
            UnwindSource::CompactUnwind,
            Slot::offset(6, 16),
            Slot::offset(0, -8),
        );
        frame.set_reg(Arch::X86_64, 6, Slot::offset(0, -16));
        frame.set_reg(Arch::X86_64, 3, Slot::offset(0, -24));
        let frameless = RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::offset(7, 48),
            Slot::offset(0, -8),
        );
        let bytes = table(
            Arch::X86_64,
            &[(0x100, 0x140, frame), (0x140, 0x150, frameless)],
        );
        let cfi = stack_cfi(&UnwindTable::open(&bytes).unwrap());
        assert_eq!(
            cfi.text,
            "STACK CFI INIT 100 40 .cfa: $rbp 16 + .ra: .cfa -8 + ^ $rbp: .cfa -16 + ^ \
             $rbx: .cfa -24 + ^\n\
             STACK CFI INIT 140 10 .cfa: $rsp 48 + .ra: .cfa -8 + ^\n"
        );
        let sym = format!(
            "MODULE mac x86_64 00000000000000000000000000000000 x\n{}",
            cfi.text
        );
        let back = build_from_breakpad(sym.as_bytes()).unwrap();
        let t = UnwindTable::open(&back.bytes).unwrap();
        for (at, want) in [(0x100, frame), (0x13f, frame), (0x140, frameless)] {
            let got = t.find(at).unwrap().record;
            assert_eq!((got.cfa, got.ra, got.regs), (want.cfa, want.ra, want.regs));
        }
        assert!(t.find(0x150).is_none());
    }

    #[test]
    fn an_arm64_leaf_returns_through_x30() {
        let leaf = RuleRecord::new(
            UnwindSource::CompactUnwind,
            Slot::offset(31, 0),
            Slot::UNCHANGED,
        );
        let bytes = table(Arch::Aarch64, &[(0x10, 0x18, leaf)]);
        let cfi = stack_cfi(&UnwindTable::open(&bytes).unwrap());
        assert_eq!(cfi.text, "STACK CFI INIT 10 8 .cfa: sp 0 + .ra: x30\n");
    }

    #[test]
    fn what_postfix_cannot_say_is_left_out() {
        let deref = RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::deref_offset(7, 8),
            Slot::offset(0, -8),
        );
        let bytes = table(Arch::X86_64, &[(0x10, 0x18, deref)]);
        let cfi = stack_cfi(&UnwindTable::open(&bytes).unwrap());
        assert_eq!((cfi.text.as_str(), cfi.rows, cfi.skipped), ("", 0, 1));
    }
}
