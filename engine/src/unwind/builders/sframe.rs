//! Builds unwind-table rows from an SFrame section (`.sframe` or the `PT_GNU_SFRAME`
//! segment).
//!
//! Each FRE becomes one [`RuleRecord`] over its pc range, tagged
//! [`UnwindSource::Sframe`] and pushed with [`SFRAME_PRIORITY`], after `.eh_frame` (0) and
//! `.debug_frame` (1): SFrame is used only where nothing richer describes an address.
//! MASK FDEs (repeating PLT blocks) are expanded into one range per repetition, within
//! the function's size and a global budget, so a hostile section cannot make the table
//! grow without bound.
//!
//! A section that fails to decode, or whose FDEs are unsorted despite the SORTED flag or
//! overlap, adds no rows and is reported once through [`BuildStats::skip`](super::BuildStats::skip);
//! an FDE whose rows cannot be represented is skipped and counted alone.

use object::read::elf::{FileHeader, ProgramHeader};
use object::{Object, ObjectSection};

use super::TableWriter;
use crate::binary;
use crate::dump::Arch;
use crate::unwind::rule::{
    RuleRecord, Slot, UnwindSource, FLAG_RA_KEY_B, FLAG_RA_SIGNED, FLAG_SIGNAL_FRAME,
};
use crate::unwind::sframe::{
    Abi, Base, Fde, Fre, FreRule, Header, Loc, PcType, RegRule, Sframe, SframeError,
};

/// Priority of SFrame rows in the [`TableWriter`]: after `.eh_frame` and `.debug_frame`.
pub const SFRAME_PRIORITY: u8 = 2;
/// At most this many ranges are produced by expanding MASK FDEs, per section. Real PLTs
/// have a few thousand entries of one or two rows.
const MAX_MASK_RANGES: u64 = 1 << 20;

/// `DW_OP_breg0`; `DW_OP_breg0 + n` for registers 0..=31.
const DW_OP_BREG0: u8 = 0x70;
/// `DW_OP_bregx`: register number as ULEB128, then the offset.
const DW_OP_BREGX: u8 = 0x92;

/// Adds the rows of an ELF file's SFrame data: the `.sframe` section, or where section
/// headers are missing, the `PT_GNU_SFRAME` segment. Problems are counted in the
/// writer's stats, never fatal: the other sources still describe the binary.
pub fn add_elf_sframe(w: &mut TableWriter, file: &object::File<'_>, data: &[u8]) {
    let link_base = binary::link_base(file);
    let found = match file.section_by_name(".sframe") {
        Some(sec) => sec
            .data()
            .ok()
            .map(|d| (d.to_vec(), sec.address()))
            .filter(|(d, _)| !d.is_empty()),
        // An empty segment (left behind when `objcopy --remove-section .sframe` drops
        // the section) means "no SFrame data", not a corrupt section.
        None => sframe_segment(file, data)
            .filter(|(d, _)| !d.is_empty())
            .map(|(d, a)| (d.to_vec(), a)),
    };
    let Some((bytes, addr)) = found else {
        return;
    };
    if let Err(e) = add_sframe_section(w, &bytes, addr, link_base) {
        w.stats.skip(|| format!(".sframe: {} ({})", e, e.code()));
    }
}

/// The bytes and address of the `PT_GNU_SFRAME` segment, if any.
fn sframe_segment<'a>(file: &object::File<'a>, data: &'a [u8]) -> Option<(&'a [u8], u64)> {
    fn find<'a, Elf: FileHeader>(
        f: &object::read::elf::ElfFile<'a, Elf>,
        data: &'a [u8],
    ) -> Option<(&'a [u8], u64)> {
        let e = f.endian();
        f.elf_program_headers().iter().find_map(|ph| {
            if ph.p_type(e) != object::elf::PT_GNU_SFRAME {
                return None;
            }
            let bytes = ph.data(e, data).ok()?;
            Some((bytes, ph.p_vaddr(e).into()))
        })
    }
    match file {
        object::File::Elf64(f) => find(f, data),
        object::File::Elf32(f) => find(f, data),
        _ => None,
    }
}

/// Decodes `data` (an SFrame section at file address `section_addr`) and pushes its rows.
/// Returns the error that made the whole section unusable, if any.
pub fn add_sframe_section(
    w: &mut TableWriter,
    data: &[u8],
    section_addr: u64,
    link_base: u64,
) -> Result<(), SframeError> {
    let section = Sframe::parse(data, section_addr)?;
    section.check_layout()?;
    let arch_ok = match section.header.abi {
        Abi::Amd64 => w.arch() == Arch::X86_64,
        Abi::Aarch64LittleEndian | Abi::Aarch64BigEndian => w.arch() == Arch::Aarch64,
        Abi::S390x => false,
    };
    if !arch_ok {
        return Err(SframeError::AbiMismatch {
            abi: section.header.abi as u8,
        });
    }
    w.stats.source_bytes += data.len();
    w.note_source(UnwindSource::Sframe);
    let mut mask_budget = MAX_MASK_RANGES;
    let mut rows: Vec<(u64, u64, RuleRecord)> = Vec::new();
    for (i, fde) in section.fdes.iter().enumerate() {
        rows.clear();
        match fde_rows(
            w,
            &section.header,
            fde,
            link_base,
            &mut mask_budget,
            &mut rows,
        ) {
            Ok(()) => {
                w.stats.entries += 1;
                for (start, end, rule) in &rows {
                    w.push(*start, *end, rule, SFRAME_PRIORITY);
                }
            }
            Err(why) => w
                .stats
                .skip(|| format!(".sframe: FDE {i} at {:#x}: {why}", fde.func_start)),
        }
    }
    Ok(())
}

/// The ranges of one FDE, or why it cannot be used.
fn fde_rows(
    w: &mut TableWriter,
    header: &Header,
    fde: &Fde,
    link_base: u64,
    mask_budget: &mut u64,
    rows: &mut Vec<(u64, u64, RuleRecord)>,
) -> Result<(), &'static str> {
    if fde.func_size == 0 || fde.fres.is_empty() {
        return Ok(());
    }
    let start = binary::svma_to_offset(fde.func_start, link_base).ok_or("below the link base")?;
    let size = u64::from(fde.func_size);
    let end = start.checked_add(size).ok_or("address overflow")?;
    let records: Vec<RuleRecord> = fde
        .fres
        .iter()
        .map(|fre| record(w, header, fde, fre).ok_or("a row cannot be represented"))
        .collect::<Result<_, _>>()?;
    let block = match fde.pc_type {
        PcType::Inc => size,
        PcType::Mask => u64::from(fde.rep_size),
    };
    if block == 0 {
        return Err("MASK FDE with rep_size 0");
    }
    for pair in fde.fres.windows(2) {
        if pair[1].start <= pair[0].start {
            return Err("FRE start offsets not ascending");
        }
    }
    if u64::from(fde.fres[0].start) >= block {
        return Err("FRE starts outside the function or block");
    }
    let reps = size.div_ceil(block);
    if fde.pc_type == PcType::Mask {
        let ranges = reps.saturating_mul(fde.fres.len() as u64);
        if ranges > *mask_budget {
            return Err("too many PLT repetitions");
        }
        *mask_budget -= ranges;
    }
    for k in 0..reps {
        let base = start + k * block;
        for (j, (fre, rec)) in fde.fres.iter().zip(&records).enumerate() {
            let s = base + u64::from(fre.start);
            let e = match fde.fres.get(j + 1) {
                Some(next) => base + u64::from(next.start),
                None => base + block,
            }
            .min(end);
            if s >= e {
                break;
            }
            rows.push((s, e, *rec));
        }
    }
    Ok(())
}

/// One FRE as a rule record, or `None` if our table cannot express it.
fn record(w: &mut TableWriter, header: &Header, fde: &Fde, fre: &Fre) -> Option<RuleRecord> {
    let arch = w.arch();
    let (_, fp_reg) = header.abi.sp_fp();
    let mut flags = 0;
    if fde.signal {
        flags |= FLAG_SIGNAL_FRAME;
    }
    let rec = match fre.rule(header, fde.fde_type) {
        FreRule::RaUndefined => {
            // Outermost frame: no CFA is given and none is needed, the walk stops.
            RuleRecord::new(UnwindSource::Sframe, Slot::UNDEFINED, Slot::UNDEFINED)
        }
        FreRule::Rule {
            cfa,
            fp,
            ra,
            mangled_ra,
        } => {
            let cfa = cfa_slot(header.abi, cfa?)?;
            let ra = match ra {
                // in the link register (AArch64) or nowhere known (AMD64 without fixed offset)
                RegRule::NotSaved => Slot::UNCHANGED,
                RegRule::Fixed(off) => Slot::offset(0, i32::try_from(off).ok()?),
                RegRule::Padding if header.abi == Abi::Amd64 => {
                    Slot::offset(0, i32::from(header.cfa_fixed_ra_offset))
                }
                RegRule::Padding => Slot::UNCHANGED,
                RegRule::At(loc) => reg_slot(w, header.abi, loc)?,
            };
            let fp = match fp {
                RegRule::NotSaved | RegRule::Padding => Slot::UNCHANGED,
                RegRule::Fixed(off) => Slot::offset(0, i32::try_from(off).ok()?),
                RegRule::At(loc) => reg_slot(w, header.abi, loc)?,
            };
            let mut rec = RuleRecord::new(UnwindSource::Sframe, cfa, ra);
            rec.set_reg(arch, fp_reg, fp);
            if mangled_ra && arch == Arch::Aarch64 {
                flags |= FLAG_RA_SIGNED;
                if fde.pauth_key_b {
                    flags |= FLAG_RA_KEY_B;
                }
            }
            rec
        }
    };
    Some(RuleRecord {
        flags: rec.flags | flags,
        ..rec
    })
}

fn reg_number(abi: Abi, base: Base) -> Option<u8> {
    let (sp, fp) = abi.sp_fp();
    u8::try_from(match base {
        Base::Sp => sp,
        Base::Fp => fp,
        Base::Reg(r) => r,
        Base::Cfa => return None,
    })
    .ok()
}

/// CFA = `reg + off`, or `*(reg + off)` (FLEX deref, e.g. DRAP's `*(rbp - 8)`).
fn cfa_slot(abi: Abi, loc: Loc) -> Option<Slot> {
    let reg = reg_number(abi, loc.base)?;
    let off = i32::try_from(loc.offset).ok()?;
    Some(if loc.deref {
        Slot::deref_offset(reg, off)
    } else {
        Slot::offset(reg, off)
    })
}

/// FP or RA recovery. CFA-based rules map to `Offset`/`ValOffset`; register-based ones to
/// `Register` (offset 0, no deref) or to a one-operation DWARF expression
/// (`DW_OP_breg<n> off`), dereferenced (`Expression`) or not (`ValExpression`).
fn reg_slot(w: &mut TableWriter, abi: Abi, loc: Loc) -> Option<Slot> {
    let off = i32::try_from(loc.offset).ok()?;
    if loc.base == Base::Cfa {
        return Some(if loc.deref {
            Slot::offset(0, off)
        } else {
            Slot::val_offset(off)
        });
    }
    let reg = reg_number(abi, loc.base)?;
    if off == 0 && !loc.deref {
        return Some(Slot::register(reg));
    }
    let mut expr = Vec::with_capacity(8);
    if reg < 32 {
        expr.push(DW_OP_BREG0 + reg);
    } else {
        expr.push(DW_OP_BREGX);
        write_uleb(&mut expr, u64::from(reg));
    }
    write_sleb(&mut expr, i64::from(off));
    let (at, len) = w.add_expression(&expr)?;
    Some(Slot::expression(!loc.deref, at, len))
}

fn write_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn write_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        if done {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
