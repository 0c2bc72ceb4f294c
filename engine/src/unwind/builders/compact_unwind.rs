//! Builds unwind-table rows from Apple compact unwind info (`__TEXT,__unwind_info`).
//!
//! Each entry's opcode becomes one [`RuleRecord`] tagged [`UnwindSource::CompactUnwind`]
//! over the entry's whole range, pushed with [`COMPACT_UNWIND_PRIORITY`] (1), after the
//! `__eh_frame` rows (0): where both describe an address, `__eh_frame` is preferred — it
//! is exact in prologues and epilogues, compact unwind describes a function's body only.
//!
//! - x86_64 frame: `CFA = rbp + 16`, RA at `CFA - 8`, rbp at `CFA - 16`, saved register
//!   `i` at `rbp - 8 * stack_offset + 8 * i`.
//! - x86_64 frameless: `CFA = rsp + size`, RA at `CFA - 8`, the saved registers right
//!   below it; for the indirect form `size` is the `sub $imm32, %rsp` immediate read from
//!   the function's code plus `8 * stack_adjust`.
//! - arm64 frameless: `CFA = sp + 16 * size`, the return address still in x30.
//! - arm64 frame: `CFA = x29 + 16`, RA at `CFA - 8`, x29 at `CFA - 16`, register pairs
//!   downwards from `x29 - 8` (x19 at `x29 - 8`, x20 at `x29 - 16`, x21 at `x29 - 24`…),
//!   as libunwind lays them out.
//! - DWARF escape: the FDE at the given `__eh_frame` offset is resolved with gimli; its
//!   rows are already in the table at priority 0, so the range adds nothing. An escape
//!   whose FDE cannot be read or does not cover the entry is counted as skipped.
//! - The null opcode adds nothing (an explicit no-rule row, unless `__eh_frame` has one).
//!
//! A section that cannot be read adds no rows and is reported once through
//! [`BuildStats::skip`](super::BuildStats::skip); an entry whose opcode cannot be used is
//! skipped and counted alone.

use gimli::{BaseAddresses, EhFrame, EhFrameOffset, LittleEndian, UnwindSection};
use object::{Object, ObjectSection, ObjectSegment};

use super::TableWriter;
use crate::arch::{aarch64, x86_64};
use crate::binary;
use crate::dump::Arch;
use crate::unwind::compact::{
    Arm64Opcode, CompactUnwindError, UnwindInfo, X86_64Opcode, X86_64_REGS,
};
use crate::unwind::rule::{RuleRecord, Slot, UnwindSource};

/// Priority of compact unwind rows: after `__eh_frame` (0).
pub const COMPACT_UNWIND_PRIORITY: u8 = 1;

const X86_64_RSP: u8 = x86_64::Reg::Rsp.dwarf() as u8;
const X86_64_RBP: u16 = x86_64::Reg::Rbp.dwarf();
const AARCH64_SP: u8 = aarch64::Reg::Sp.dwarf() as u8;
const AARCH64_FP: u16 = aarch64::FP.dwarf();

/// The `__eh_frame` section of the same binary, for DWARF escapes.
#[derive(Debug, Clone, Copy)]
pub struct EhFrameSection<'a> {
    pub data: &'a [u8],
    /// The section's address (SVMA).
    pub address: u64,
    /// The `__text` section's address, for text-relative pointer encodings.
    pub text_address: Option<u64>,
}

/// Where the section's image offsets land in the table, and what else the builder reads.
pub struct Context<'a> {
    /// SVMA of the image base (the `__TEXT` segment): entry addresses are relative to it.
    pub image_base: u64,
    /// The table's link base ([`binary::link_base`]).
    pub link_base: u64,
    pub eh_frame: Option<EhFrameSection<'a>>,
    /// Reads the little-endian u32 at an SVMA from the binary (function code, for the
    /// indirect stack size); `None` when the bytes are not in the file.
    pub read_u32: &'a dyn Fn(u64) -> Option<u32>,
}

/// Adds the rows of a Mach-O file's `__TEXT,__unwind_info`, if it has one. Problems are
/// counted in the writer's stats, never fatal: `__eh_frame` still describes the binary.
pub fn add_macho_compact_unwind(w: &mut TableWriter, file: &object::File<'_>) {
    let Some(sec) = file
        .sections()
        .find(|s| s.name() == Ok("__unwind_info") && s.segment_name() == Ok(Some("__TEXT")))
    else {
        return;
    };
    let Ok(data) = sec.data() else {
        w.stats
            .skip(|| "__unwind_info: section data is outside the file".to_string());
        return;
    };
    if data.is_empty() {
        return;
    }
    let image_base = file
        .segments()
        .find(|s| s.name() == Ok(Some("__TEXT")))
        .map_or(0, |s| s.address());
    let text_address = file
        .sections()
        .find(|s| s.name() == Ok("__text"))
        .map(|s| s.address());
    let eh_frame = file
        .sections()
        .find(|s| s.name() == Ok("__eh_frame"))
        .and_then(|s| Some((s.data().ok()?, s.address())))
        .map(|(data, address)| EhFrameSection {
            data,
            address,
            text_address,
        });
    let read_u32 = |svma: u64| -> Option<u32> {
        file.sections().find_map(|s| {
            let b = s.data_range(svma, 4).ok()??;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        })
    };
    let ctx = Context {
        image_base,
        link_base: binary::link_base(file),
        eh_frame,
        read_u32: &read_u32,
    };
    w.stats.source_bytes += data.len();
    if let Err(e) = add_unwind_info(w, data, &ctx) {
        w.stats.skip(|| format!("{e} ({})", e.code()));
    }
}

/// Adds the rows of one `__unwind_info` section. A structural error adds nothing.
pub fn add_unwind_info(
    w: &mut TableWriter,
    data: &[u8],
    ctx: &Context<'_>,
) -> Result<(), CompactUnwindError> {
    let info = UnwindInfo::parse(data)?;
    let entries = info.entries()?;
    w.note_source(UnwindSource::CompactUnwind);
    w.reserve(entries.len());
    let arch = w.arch();
    for e in &entries {
        let svma = ctx.image_base.checked_add(u64::from(e.start));
        let span = u64::from(e.end - e.start);
        let Some((start, end)) = svma
            .and_then(|a| binary::svma_to_offset(a, ctx.link_base))
            .and_then(|s| Some((s, s.checked_add(span)?)))
        else {
            w.stats.ranges_dropped += 1;
            continue;
        };
        // the function's first byte, as an SVMA (its computation was checked above)
        let func = ctx.image_base.wrapping_add(u64::from(e.start));
        let rule = match arch {
            Arch::X86_64 => match X86_64Opcode::decode(e.opcode) {
                X86_64Opcode::Null => Ok(None),
                X86_64Opcode::Dwarf { fde_offset } => check_fde(ctx, fde_offset, func),
                op => x86_64_rule(&op, |off| {
                    func.checked_add(u64::from(off))
                        .and_then(|a| (ctx.read_u32)(a))
                })
                .map(Some),
            },
            Arch::Aarch64 => match Arm64Opcode::decode(e.opcode) {
                Arm64Opcode::Null => Ok(None),
                Arm64Opcode::Dwarf { fde_offset } => check_fde(ctx, fde_offset, func),
                op => arm64_rule(&op).map(Some),
            },
            other => Err(format!("compact unwind for {other:?} is not decoded")),
        };
        match rule {
            Ok(Some(rule)) => {
                w.stats.entries += 1;
                w.push(start, end, &rule, COMPACT_UNWIND_PRIORITY);
            }
            Ok(None) => w.stats.entries += 1,
            Err(why) => w.stats.skip(|| {
                format!(
                    "__unwind_info: entry at {:#x} (opcode {:#010x}): {why}",
                    e.start, e.opcode
                )
            }),
        }
    }
    Ok(())
}

/// A DWARF escape: the FDE must exist and cover the entry; its rows come from the
/// `__eh_frame` pass at priority 0, so nothing is added here.
fn check_fde(ctx: &Context<'_>, fde_offset: u32, func: u64) -> Result<Option<RuleRecord>, String> {
    let Some(eh) = ctx.eh_frame else {
        return Err("DWARF escape but the binary has no __eh_frame".into());
    };
    let mut section = EhFrame::new(eh.data, LittleEndian);
    section.set_address_size(8);
    let mut bases = BaseAddresses::default().set_eh_frame(eh.address);
    if let Some(t) = eh.text_address {
        bases = bases.set_text(t);
    }
    let fde = section
        .fde_from_offset(
            &bases,
            EhFrameOffset(fde_offset as usize),
            EhFrame::cie_from_offset,
        )
        .map_err(|e| format!("FDE at __eh_frame+{fde_offset:#x}: {e}"))?;
    if fde.contains(func) {
        Ok(None)
    } else {
        Err(format!(
            "FDE at __eh_frame+{fde_offset:#x} covers {:#x}..{:#x}, not the entry",
            fde.initial_address(),
            fde.end_address()
        ))
    }
}

/// The rule of an x86_64 frame or frameless opcode. `read_sub_imm(offset)` reads the u32
/// at `offset` bytes into the function (indirect frame sizes).
pub fn x86_64_rule(
    op: &X86_64Opcode,
    read_sub_imm: impl Fn(u8) -> Option<u32>,
) -> Result<RuleRecord, String> {
    let arch = Arch::X86_64;
    match *op {
        X86_64Opcode::Frame {
            stack_offset_by_8,
            regs,
        } => {
            let mut rec = RuleRecord::new(
                UnwindSource::CompactUnwind,
                Slot::offset(X86_64_RBP as u8, 16),
                Slot::offset(0, -8),
            );
            rec.set_reg(arch, X86_64_RBP, Slot::offset(0, -16));
            // rbp = CFA - 16, so rbp - 8 * off + 8 * i = CFA - 16 - 8 * off + 8 * i
            let base = -16 - 8 * i32::from(stack_offset_by_8);
            for (i, &r) in regs.iter().enumerate() {
                if r == 0 {
                    continue;
                }
                // decode() only yields 1..=5 here; a hand-made opcode gets an error
                let Some(&reg) = X86_64_REGS.get(usize::from(r).wrapping_sub(1)) else {
                    return Err(format!("register number {r} in an rbp frame"));
                };
                rec.set_reg(arch, reg, Slot::offset(0, base + 8 * i as i32));
            }
            Ok(rec)
        }
        X86_64Opcode::FramelessImmediate {
            stack_size_by_8,
            regs,
        } => Ok(frameless(i64::from(stack_size_by_8) * 8, regs.as_slice())?),
        X86_64Opcode::FramelessIndirect {
            sub_imm_offset,
            stack_adjust_by_8,
            regs,
        } => {
            let imm = read_sub_imm(sub_imm_offset).ok_or_else(|| {
                format!(
                    "the sub instruction's immediate at +{sub_imm_offset:#x} is not in the file"
                )
            })?;
            frameless(
                i64::from(imm) + 8 * i64::from(stack_adjust_by_8),
                regs.as_slice(),
            )
        }
        X86_64Opcode::Invalid { mode } => Err(format!("unusable x86_64 opcode (mode {mode})")),
        X86_64Opcode::Null | X86_64Opcode::Dwarf { .. } => {
            Err("no rule for a null or DWARF opcode".into())
        }
    }
}

/// `CFA = rsp + size`, RA at `CFA - 8`, `regs[i]` at `CFA - 8 - 8 * n + 8 * i`.
fn frameless(size: i64, regs: &[u8]) -> Result<RuleRecord, String> {
    let arch = Arch::X86_64;
    let n = regs.len() as i64;
    if size < 8 * (n + 1) {
        return Err(format!(
            "frame size {size} cannot hold the return address and {n} registers"
        ));
    }
    let cfa = i32::try_from(size).map_err(|_| format!("frame size {size} is too large"))?;
    let mut rec = RuleRecord::new(
        UnwindSource::CompactUnwind,
        Slot::offset(X86_64_RSP, cfa),
        Slot::offset(0, -8),
    );
    for (i, &r) in regs.iter().enumerate() {
        let reg = X86_64_REGS[usize::from(r).clamp(1, 6) - 1];
        // i, n <= 6: no overflow
        rec.set_reg(
            arch,
            reg,
            Slot::offset(0, (-8 - 8 * n + 8 * i as i64) as i32),
        );
    }
    Ok(rec)
}

/// The rule of an arm64 frame or frameless opcode.
pub fn arm64_rule(op: &Arm64Opcode) -> Result<RuleRecord, String> {
    let arch = Arch::Aarch64;
    match *op {
        Arm64Opcode::Frameless { stack_size_by_16 } => Ok(RuleRecord::new(
            UnwindSource::CompactUnwind,
            Slot::offset(AARCH64_SP, i32::from(stack_size_by_16) * 16),
            // the return address is still in x30 (the RA column)
            Slot::UNCHANGED,
        )),
        Arm64Opcode::Frame { pairs } => {
            let mut rec = RuleRecord::new(
                UnwindSource::CompactUnwind,
                Slot::offset(AARCH64_FP as u8, 16),
                Slot::offset(0, -8),
            );
            rec.set_reg(arch, AARCH64_FP, Slot::offset(0, -16));
            // x29 = CFA - 16; libunwind reads x19 at x29 - 8, x20 at x29 - 16, then the
            // next pair below
            let mut at = -24;
            // bit k: the pair (x19 + 2k, x20 + 2k)
            let x19 = aarch64::Reg::X19.dwarf();
            for k in 0..5u16 {
                if pairs & (1 << k) != 0 {
                    rec.set_reg(arch, x19 + 2 * k, Slot::offset(0, at));
                    rec.set_reg(arch, x19 + 1 + 2 * k, Slot::offset(0, at - 8));
                    at -= 16;
                }
            }
            Ok(rec)
        }
        Arm64Opcode::Invalid { mode } => Err(format!("unusable arm64 opcode (mode {mode})")),
        Arm64Opcode::Null | Arm64Opcode::Dwarf { .. } => {
            Err("no rule for a null or DWARF opcode".into())
        }
    }
}
