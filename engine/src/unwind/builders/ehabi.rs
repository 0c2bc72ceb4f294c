//! Builds unwind rows from an arm binary's EHABI tables: `.ARM.exidx` and `.ARM.extab`
//! (the Exception Handling ABI for the Arm Architecture, sections 6 and 9).
//!
//! Why: 32-bit arm code (every Android `armeabi-v7a` library, Debian's armhf libc) often
//! carries no DWARF CFI at all — its unwinder reads these tables. The index holds one
//! pair of words per function, sorted by address: a `prel31` offset to the function, then
//! either `EXIDX_CANTUNWIND` (1), an inline entry (bit 31 set: personality routine 0 with
//! three opcode bytes), or a `prel31` offset to the function's `.ARM.extab` entry. An
//! entry describes its function up to the next entry's start.
//!
//! An extab entry is either the compact model (bit 31 set: personality routine 0, 1 or 2
//! in bits 24–27; routine 0 holds three opcodes, routines 1 and 2 two opcodes plus the
//! count of further opcode words in bits 16–23) or the generic model (a `prel31` offset
//! to a personality routine, then GCC's layout: the count of further words in the top
//! byte, three opcodes). The opcodes are executed here once, into one
//! [`RuleRecord`] per entry: the CFA is the virtual stack pointer at the end
//! (`base register + offset`), and every popped register is saved at an offset from it;
//! the return address is the popped pc, else the popped lr, else lr itself (a leaf).
//!
//! What the rows are not: EHABI describes a function's body (where it calls), not its
//! prologue and epilogue, so a frame 0 stopped in a prologue gets the body's rule, as
//! with every unwinder reading these tables. `EXIDX_CANTUNWIND` and "refuse to unwind"
//! give no rule (the walk falls back to frame pointers and the stack scan: the linker
//! writes `EXIDX_CANTUNWIND` after code without tables, and gdb falls back to prologue
//! analysis there). Entries whose opcodes this table cannot express — popping sp, or
//! taking vsp from a register after popping — are skipped and counted.
//!
//! A binary without section headers (`llvm-objcopy --strip-sections`, `sstrip`, a
//! library rebuilt from a core's memory) still has the index: the ABI's `PT_ARM_EXIDX`
//! program header (`0x70000001`) maps it. Then the index is that segment, `.ARM.extab` is
//! read within the loadable segment holding the index (the linker puts both in the
//! read-only segment; a reference outside it is an error, as one outside `.ARM.extab`
//! is), and the code ranges are the executable loadable segments.

use object::{Object, ObjectSection, SectionKind};

use super::TableWriter;
use crate::arch::arm::{LR, PC, SP};
use crate::binary;
use crate::dump::Arch;
use crate::unwind::rule::{RuleRecord, Slot, UnwindSource};

/// Priority of EHABI rows: after `.eh_frame` (0) and `.debug_frame` (1), which describe
/// every instruction where EHABI describes call sites only.
pub const EHABI_PRIORITY: u8 = 2;

/// `EXIDX_CANTUNWIND`: the function cannot be unwound.
const CANT_UNWIND: u32 = 1;
/// Bit 31 of an index or table word: the compact model.
const COMPACT: u32 = 1 << 31;
/// Most opcode words a personality 1/2 or generic entry may have after its first (the
/// count is one byte).
const MAX_EXTRA_WORDS: u32 = 255;

/// Why an index entry or its opcodes could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EhabiError {
    #[error("the .ARM.extab entry at {0:#x} is outside .ARM.extab")]
    ExtabOutOfBounds(u64),
    #[error("compact personality routine {0} is not defined (only 0, 1 and 2 are)")]
    UnknownPersonality(u8),
    #[error("opcode {0:#04x} is reserved or spare")]
    ReservedOpcode(u8),
    #[error("the opcodes end in the middle of opcode {0:#04x}")]
    TruncatedOpcode(u8),
    #[error("the opcodes pop sp")]
    PopsSp,
    #[error("the opcodes set vsp from r{0} after popping registers")]
    VspAfterPop(u8),
    #[error("the virtual stack pointer's offset does not fit")]
    OffsetOverflow,
}

/// What one index entry says about its function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// `EXIDX_CANTUNWIND`.
    CantUnwind,
    /// The compact model: personality routine 0, 1 or 2, its opcodes gathered (those of
    /// an inline entry from the index word itself).
    Compact {
        personality: u8,
        inline: bool,
        opcodes: Vec<u8>,
    },
    /// The generic model: the personality routine at file address `personality`, its
    /// opcodes in GCC's layout.
    Generic { personality: u64, opcodes: Vec<u8> },
}

/// One index entry: the function's start (file address, Thumb bit cleared) and what
/// the entry says, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub start: u64,
    pub kind: Result<EntryKind, EhabiError>,
}

/// A section's bytes and file address.
#[derive(Debug, Clone, Copy)]
pub struct Section<'a> {
    pub bytes: &'a [u8],
    pub address: u64,
}

impl Section<'_> {
    /// The little-endian word at file address `addr`.
    fn word_at(&self, addr: u64) -> Option<u32> {
        let off = usize::try_from(addr.checked_sub(self.address)?).ok()?;
        let b = self.bytes.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The address a `prel31` word at `place` points to: its low 31 bits, sign-extended,
/// added to the word's own address.
fn prel31(word: u32, place: u64) -> u64 {
    let offset = i64::from(((word << 1) as i32) >> 1);
    place.wrapping_add(offset as u64) & 0xffff_ffff
}

/// Reads every entry of the index `exidx`, following its extab references into
/// `extab`. Entries are returned in index order.
pub fn read_index(exidx: Section<'_>, extab: Section<'_>) -> Vec<IndexEntry> {
    exidx
        .bytes
        .chunks_exact(8)
        .enumerate()
        .map(|(i, pair)| {
            let place = exidx.address.wrapping_add(8 * i as u64);
            let first = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]);
            let second = u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
            let start = prel31(first, place) & !1;
            let kind = if second == CANT_UNWIND {
                Ok(EntryKind::CantUnwind)
            } else if second & COMPACT != 0 {
                compact(second, &[], true)
            } else {
                table_entry(extab, prel31(second, place.wrapping_add(4)))
            };
            IndexEntry { start, kind }
        })
        .collect()
}

/// The extab entry at file address `at`.
fn table_entry(extab: Section<'_>, at: u64) -> Result<EntryKind, EhabiError> {
    let out = EhabiError::ExtabOutOfBounds(at);
    let first = extab.word_at(at).ok_or(out)?;
    let words = |from: u64, count: u32| -> Result<Vec<u32>, EhabiError> {
        (0..u64::from(count))
            .map(|k| {
                from.checked_add(4 * k)
                    .and_then(|a| extab.word_at(a))
                    .ok_or(out)
            })
            .collect()
    };
    if first & COMPACT != 0 {
        let extra = if (first >> 24) & 0xf == 0 {
            Vec::new()
        } else {
            words(at.wrapping_add(4), (first >> 16) & 0xff)?
        };
        return compact(first, &extra, false);
    }
    // generic model: personality routine, then GCC's layout
    let personality = prel31(first, at);
    let data_at = at.wrapping_add(4);
    let data = extab.word_at(data_at).ok_or(out)?;
    let count = (data >> 24).min(MAX_EXTRA_WORDS);
    let extra = words(data_at.wrapping_add(4), count)?;
    let mut opcodes = data.to_be_bytes()[1..].to_vec();
    opcodes.extend(extra.iter().flat_map(|w| w.to_be_bytes()));
    Ok(EntryKind::Generic {
        personality,
        opcodes,
    })
}

/// A compact-model entry whose first word is `word` and whose further opcode words
/// (personality routines 1 and 2) are `extra`.
fn compact(word: u32, extra: &[u32], inline: bool) -> Result<EntryKind, EhabiError> {
    let personality = ((word >> 24) & 0xf) as u8;
    let bytes = word.to_be_bytes();
    let mut opcodes = match personality {
        0 => bytes[1..].to_vec(),
        1 | 2 => bytes[2..].to_vec(),
        p => return Err(EhabiError::UnknownPersonality(p)),
    };
    opcodes.extend(extra.iter().flat_map(|w| w.to_be_bytes()));
    Ok(EntryKind::Compact {
        personality,
        inline,
        opcodes,
    })
}

/// The virtual unwinder's state while opcodes run: `vsp = r[base] + offset`, and where
/// each popped core register was saved (as an offset in the same terms).
struct Virtual {
    base: u8,
    offset: i64,
    saved: [Option<i64>; 16],
}

impl Virtual {
    fn add(&mut self, n: i64) -> Result<(), EhabiError> {
        self.offset = self
            .offset
            .checked_add(n)
            .ok_or(EhabiError::OffsetOverflow)?;
        Ok(())
    }

    /// Pops the core registers of `mask` (bit n: rn), lowest first.
    fn pop(&mut self, mask: u16) -> Result<(), EhabiError> {
        if mask & (1 << SP.dwarf()) != 0 {
            return Err(EhabiError::PopsSp);
        }
        for r in 0..16 {
            if mask & (1 << r) != 0 {
                self.saved[r] = Some(self.offset);
                self.add(4)?;
            }
        }
        Ok(())
    }

    /// `vsp = r[n]`: only before anything was popped, whose addresses are then relative
    /// to sp (a register popped earlier would hold its restored value, in memory).
    fn set_base(&mut self, n: u8) -> Result<(), EhabiError> {
        if self.saved.iter().any(Option::is_some) {
            return Err(EhabiError::VspAfterPop(n));
        }
        self.base = n;
        self.offset = 0;
        Ok(())
    }
}

/// What the opcodes come to: a rule, or "refuse to unwind" (`None`).
pub fn execute(opcodes: &[u8]) -> Result<Option<RuleRecord>, EhabiError> {
    let mut v = Virtual {
        base: SP.dwarf() as u8,
        offset: 0,
        saved: [None; 16],
    };
    let mut ops = opcodes.iter().copied();
    while let Some(op) = ops.next() {
        let mut next = || ops.next().ok_or(EhabiError::TruncatedOpcode(op));
        match op {
            0x00..=0x3f => v.add((i64::from(op & 0x3f) << 2) + 4)?,
            0x40..=0x7f => v.add(-(i64::from(op & 0x3f) << 2) - 4)?,
            0x80..=0x8f => {
                let mask = (u16::from(op & 0xf) << 8) | u16::from(next()?);
                if mask == 0 {
                    return Ok(None); // refuse to unwind
                }
                v.pop(mask << 4)?;
            }
            0x90..=0x9f => match op & 0xf {
                13 | 15 => return Err(EhabiError::ReservedOpcode(op)),
                n => v.set_base(n)?,
            },
            0xa0..=0xaf => {
                let last = 4 + u16::from(op & 0x7);
                let mut mask: u16 = ((1u16 << (last + 1)) - 1) & !0xf;
                if op & 0x8 != 0 {
                    mask |= 1 << LR.dwarf();
                }
                v.pop(mask)?;
            }
            0xb0 => break, // finish
            0xb1 => match next()? {
                m @ 0x01..=0x0f => v.pop(u16::from(m))?,
                _ => return Err(EhabiError::ReservedOpcode(op)),
            },
            0xb2 => {
                let mut value: u64 = 0;
                let mut shift = 0u32;
                loop {
                    let b = next()?;
                    if shift < 64 {
                        value |= u64::from(b & 0x7f) << shift;
                    }
                    shift += 7;
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                let n = i64::try_from(value)
                    .ok()
                    .and_then(|x| x.checked_mul(4))
                    .and_then(|x| x.checked_add(0x204))
                    .ok_or(EhabiError::OffsetOverflow)?;
                v.add(n)?;
            }
            // FSTMFDX: D[ssss]..D[ssss+cccc] plus a pad word
            0xb3 => v.add(8 * (i64::from(next()? & 0xf) + 1) + 4)?,
            0xb8..=0xbf => v.add(8 * (i64::from(op & 0x7) + 1) + 4)?,
            // iWMMXt wR[10]..wR[10+nnn]
            0xc0..=0xc5 => v.add(8 * (i64::from(op & 0x7) + 1))?,
            0xc6 => v.add(8 * (i64::from(next()? & 0xf) + 1))?,
            0xc7 => match next()? {
                m @ 0x01..=0x0f => v.add(4 * i64::from(m.count_ones()))?,
                _ => return Err(EhabiError::ReservedOpcode(op)),
            },
            // VPUSH: D[16+ssss].. / D[ssss]..D[ssss+cccc], and D[8]..D[8+nnn]
            0xc8 | 0xc9 => v.add(8 * (i64::from(next()? & 0xf) + 1))?,
            0xd0..=0xd7 => v.add(8 * (i64::from(op & 0x7) + 1))?,
            _ => return Err(EhabiError::ReservedOpcode(op)),
        }
    }
    rule_of(&v).map(Some)
}

/// The rule a finished virtual unwind gives.
fn rule_of(v: &Virtual) -> Result<RuleRecord, EhabiError> {
    let fits = |n: i64| i32::try_from(n).map_err(|_| EhabiError::OffsetOverflow);
    let saved_at = |r: u16| -> Result<Option<Slot>, EhabiError> {
        match v.saved.get(usize::from(r)).copied().flatten() {
            Some(at) => Ok(Some(Slot::offset(0, fits(at - v.offset)?))),
            None => Ok(None),
        }
    };
    let cfa = Slot::offset(v.base, fits(v.offset)?);
    // the return address: a popped pc, else lr (popped, or still live in a leaf)
    let ra = match (saved_at(PC.dwarf())?, saved_at(LR.dwarf())?) {
        (Some(pc), _) => pc,
        (None, Some(lr)) => lr,
        (None, None) => Slot::UNCHANGED,
    };
    let mut rec = RuleRecord::new(UnwindSource::ArmExidx, cfa, ra);
    for &r in Arch::Arm.callee_saved() {
        if let Some(slot) = saved_at(r)? {
            rec.set_reg(Arch::Arm, r, slot);
        }
    }
    Ok(rec)
}

/// The rule of one entry (`None`: no rule — cannot unwind, or refuses to).
pub fn entry_rule(kind: &EntryKind) -> Result<Option<RuleRecord>, EhabiError> {
    match kind {
        EntryKind::CantUnwind => Ok(None),
        EntryKind::Compact { opcodes, .. } | EntryKind::Generic { opcodes, .. } => execute(opcodes),
    }
}

/// Adds the rows of an arm ELF file's `.ARM.exidx` (with its `.ARM.extab`), priority
/// [`EHABI_PRIORITY`]. Nothing for other architectures or a file without the index.
pub fn add_arm_exidx(w: &mut TableWriter, file: &object::File<'_>) {
    if w.arch() != Arch::Arm {
        return;
    }
    let section = |name: &str| {
        let s = file.section_by_name(name)?;
        Some(Section {
            bytes: s.data().ok()?,
            address: s.address(),
        })
    };
    let Some(exidx) = section(".ARM.exidx") else {
        if let Some((exidx, extab, code)) = from_segments(file) {
            add_index(w, exidx, extab, binary::link_base(file), &code);
        }
        return;
    };
    let extab = section(".ARM.extab").unwrap_or(Section {
        bytes: &[],
        address: 0,
    });
    // the end of the code each function's range may reach: its executable section's
    let code: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    add_index(w, exidx, extab, binary::link_base(file), &code);
}

/// `PT_ARM_EXIDX`: the program header type of the index (ELF for the Arm Architecture,
/// "Platform-specific program header types").
const PT_ARM_EXIDX: u32 = 0x7000_0001;

/// The index, the extab to read its references in and the code ranges of a 32-bit arm
/// ELF file from its program headers (see the module documentation); `None` when it has
/// no `PT_ARM_EXIDX` or its bytes are not in the file.
#[allow(clippy::type_complexity)]
fn from_segments<'a>(
    file: &object::File<'a>,
) -> Option<(Section<'a>, Section<'a>, Vec<(u64, u64)>)> {
    use object::read::elf::ProgramHeader;
    let object::File::Elf32(elf) = file else {
        return None;
    };
    let (endian, data) = (elf.endian(), elf.data());
    let headers = elf.elf_program_headers();
    let bytes_of = |ph: &object::elf::ProgramHeader32<object::Endianness>| -> Option<Section<'a>> {
        Some(Section {
            bytes: ph.data(endian, data).ok()?,
            address: u64::from(ph.p_vaddr(endian)),
        })
    };
    let exidx = headers
        .iter()
        .find(|ph| ph.p_type(endian).0 == PT_ARM_EXIDX)
        .and_then(bytes_of)?;
    let loads = || {
        headers
            .iter()
            .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
    };
    let extab = loads()
        .filter_map(bytes_of)
        .find(|seg| {
            let end = seg.address.saturating_add(seg.bytes.len() as u64);
            seg.address <= exidx.address && exidx.address < end
        })
        .unwrap_or(Section {
            bytes: &[],
            address: 0,
        });
    let code = loads()
        .filter(|ph| ph.p_flags(endian).0 & object::elf::PF_X.0 != 0)
        .map(|ph| {
            let start = u64::from(ph.p_vaddr(endian));
            (start, start.saturating_add(u64::from(ph.p_memsz(endian))))
        })
        .collect();
    Some((exidx, extab, code))
}

/// Adds the rows of one index (see [`add_arm_exidx`]); `code` lists the executable
/// sections' `[start, end)`, which bound the last entry's range.
pub fn add_index(
    w: &mut TableWriter,
    exidx: Section<'_>,
    extab: Section<'_>,
    link_base: u64,
    code: &[(u64, u64)],
) {
    w.stats.source_bytes += exidx.bytes.len() + extab.bytes.len();
    w.note_source(UnwindSource::ArmExidx);
    let mut entries = read_index(exidx, extab);
    // the ABI sorts the index; a table that is not sorted is read as if it were
    entries.sort_by_key(|e| e.start);
    // each entry's next greater start, found once from the end (entries may repeat a
    // start: a linear search from each would be quadratic on a hostile table)
    let mut next_start: Vec<Option<u64>> = vec![None; entries.len()];
    let mut following: Option<u64> = None;
    for i in (0..entries.len()).rev() {
        let start = entries[i].start;
        if let Some(n) = entries.get(i + 1).map(|e| e.start).filter(|&n| n > start) {
            following = Some(n);
        }
        next_start[i] = following;
    }
    for (entry, next) in entries.iter().zip(next_start) {
        let section_end = code
            .iter()
            .find(|&&(s, e)| s <= entry.start && entry.start < e)
            .map(|&(_, e)| e);
        let end = match (next, section_end) {
            (Some(n), Some(e)) => n.min(e),
            (Some(n), None) => n,
            (None, Some(e)) => e,
            (None, None) => continue,
        };
        let rule = entry.kind.as_ref().map_err(|e| *e).and_then(entry_rule);
        match rule {
            Ok(Some(rule)) => {
                w.stats.entries += 1;
                if let (Some(s), Some(e)) = (
                    binary::svma_to_offset(entry.start, link_base),
                    binary::svma_to_offset(end, link_base),
                ) {
                    w.push(s, e, &rule, EHABI_PRIORITY);
                }
            }
            Ok(None) => w.stats.entries += 1,
            Err(e) => w
                .stats
                .skip(|| format!(".ARM.exidx: entry for {:#x}: {e}", entry.start)),
        }
    }
}

#[cfg(test)]
#[path = "ehabi_tests.rs"]
mod tests;
