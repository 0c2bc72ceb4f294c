//! Builds unwind tables from DWARF CFI: `.eh_frame` and `.debug_frame`, through gimli.
//!
//! Every FDE's CFI program is evaluated once with one reused `UnwindContext`; each row
//! becomes a [`RuleRecord`]. Expressions (PLT entries, glibc's `__restore_rt`) are copied
//! into the table's expression area. A bad FDE is skipped and counted, never fatal:
//! the rest of the binary still unwinds.
//!
//! On aarch64 the sections first pass through [`super::aarch64_cfi::prepare`], which
//! makes the ABI's vendor extensions gimli does not know (`DW_CFA_AARCH64_negate_ra_state_with_pc`,
//! the `B` and `G` augmentations) readable. The RA_SIGN_STATE pseudo-register becomes
//! [`FLAG_RA_SIGNED`] (and [`FLAG_RA_KEY_B`] for a `B` CIE). As the ABI asks of consumers,
//! a register a CIE does not mention defaults to same-value: callee-saved registers stay
//! unchanged, and x30 with no rule is the leaf's live link register.

use std::collections::HashMap;

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection};
use rustc_hash::FxBuildHasher;

use super::aarch64_cfi::{self, CieFlags};
use super::{BuiltTable, TableWriter};
use crate::arch::aarch64::RA_SIGN_STATE as AARCH64_RA_SIGN_STATE;
use crate::binary;
use crate::dump::Arch;
use crate::unwind::error::UnwindError;
use crate::unwind::rule::{
    RuleRecord, Slot, UnwindSource, FLAG_RA_KEY_B, FLAG_RA_SIGNED, FLAG_SIGNAL_FRAME,
};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// Builds the unwind table of one ELF binary from its `.eh_frame`, `.debug_frame` and
/// `.sframe` (see [`super::sframe`]), an arm binary's also from its EHABI tables (see
/// [`super::ehabi`]),
/// plus the `.debug_frame` of any separate debug files in `extra` (same build-id); of a
/// Mach-O binary also from `__unwind_info`; of a Windows x64 or ARM64 image from `.pdata`
/// (and `.xdata`) alone.
pub fn build_from_elf(data: &[u8], extra: &[&[u8]]) -> Result<BuiltTable, UnwindError> {
    let file = object::File::parse(data).map_err(|e| UnwindError::Object(e.to_string()))?;
    let arch = binary::arch_of(&file)
        .ok_or_else(|| UnwindError::UnsupportedArch(format!("{:?}", file.architecture())))?;
    let mut w = TableWriter::new(arch);
    let mut inputs = Vec::new();
    // a Windows x64 or ARM64 image unwinds from its .pdata alone, as Windows and its
    // debuggers do (mingw-w64 images also carry DWARF CFI: the same prologues, described
    // twice)
    let x64 = super::pe_x64::pdata_of(&file).is_some();
    if x64 || super::pe_arm64::pdata_of(&file).is_some() {
        if x64 {
            super::pe_x64::add_pe_pdata(&mut w, &file);
        } else {
            super::pe_arm64::add_pe_pdata(&mut w, &file);
        }
        if w.ranges_added() > 0 {
            inputs.push(0);
        }
        let mut built = w.finish();
        built.inputs = inputs;
        return Ok(built);
    }
    add_elf_sections(&mut w, &file, true)?;
    super::sframe::add_elf_sframe(&mut w, &file, data);
    super::ehabi::add_arm_exidx(&mut w, &file);
    if file.format() == object::BinaryFormat::MachO {
        super::compact_unwind::add_macho_compact_unwind(&mut w, &file);
    }
    if file.format() == object::BinaryFormat::Pe {
        super::pe_x64::add_pe_pdata(&mut w, &file);
    }
    if w.ranges_added() > 0 {
        inputs.push(0);
    }
    for (i, extra) in extra.iter().enumerate() {
        // a 32-bit Windows image's PDB: its FPO and FrameData streams
        if arch == Arch::X86 && crate::binary::is_pdb(extra) {
            if super::pdb_frame_data::add_pdb_frame_data(&mut w, extra) > 0 {
                inputs.push(i + 1);
            }
            continue;
        }
        if let Ok(f) = object::File::parse(*extra) {
            if binary::arch_of(&f) == Some(arch) {
                let before = w.ranges_added();
                add_elf_sections(&mut w, &f, false)?;
                if w.ranges_added() > before {
                    inputs.push(i + 1);
                }
            }
        }
    }
    let mut built = w.finish();
    built.inputs = inputs;
    Ok(built)
}

/// Builds the unwind table of a Mach-O image already parsed (a dyld shared cache's image,
/// whose sections `object` reads through the cache's mappings): `__eh_frame` (priority 0)
/// and `__unwind_info` (priority 1, its DWARF escapes checked against `__eh_frame`), as
/// [`build_from_elf`] builds a standalone Mach-O's.
pub fn build_from_macho(file: &object::File<'_>) -> Result<BuiltTable, UnwindError> {
    let arch = binary::arch_of(file)
        .ok_or_else(|| UnwindError::UnsupportedArch(format!("{:?}", file.architecture())))?;
    let mut w = TableWriter::new(arch);
    add_elf_sections(&mut w, file, true)?;
    super::compact_unwind::add_macho_compact_unwind(&mut w, file);
    Ok(w.finish())
}

/// Adds `.eh_frame` (priority 0) and `.debug_frame` (priority 1) rows of one file.
pub fn add_elf_sections(
    w: &mut TableWriter,
    file: &object::File<'_>,
    with_eh_frame: bool,
) -> Result<(), UnwindError> {
    if !file.is_little_endian() {
        return Err(UnwindError::UnsupportedArch("big-endian".into()));
    }
    let link_base = binary::link_base(file);
    let address_size = if file.is_64() { 8 } else { 4 };
    if with_eh_frame {
        if let Some(sec) = binary::eh_frame_section(file) {
            if let Ok(data) = sec.uncompressed_data() {
                let bases = eh_frame_bases(file, sec.address());
                add_eh_frame(w, &data, address_size, &bases, link_base);
            }
        }
    }
    if let Some(sec) = file.section_by_name(".debug_frame") {
        if let Ok(data) = sec.uncompressed_data() {
            let data: &[u8] = &data;
            if !data.is_empty() {
                w.stats.source_bytes += data.len();
                w.note_source(UnwindSource::DebugFrame);
                let prepared = prepare(w.arch(), data, false, address_size);
                let data: &[u8] = &prepared.data;
                let mut df = DebugFrame::new(data, LittleEndian);
                df.set_address_size(address_size);
                if w.arch() == Arch::Aarch64 {
                    df.set_vendor(gimli::Vendor::AArch64);
                }
                add_section(
                    w,
                    &df,
                    &BaseAddresses::default(),
                    link_base,
                    UnwindSource::DebugFrame,
                    1,
                    &prepared.cies,
                );
            }
        }
    }
    Ok(())
}

/// The bases `DW_EH_PE_*` pointers of a file's `.eh_frame` (at file address `eh_frame`)
/// are relative to.
pub(crate) fn eh_frame_bases(file: &object::File<'_>, eh_frame: u64) -> BaseAddresses {
    let section_addr = |name: &str| file.section_by_name(name).map(|s| s.address());
    let mut bases = BaseAddresses::default().set_eh_frame(eh_frame);
    if let Some(a) = section_addr(".text") {
        bases = bases.set_text(a);
    }
    if let Some(a) = section_addr(".got") {
        bases = bases.set_got(a);
    }
    if let Some(a) = section_addr(".eh_frame_hdr") {
        bases = bases.set_eh_frame_hdr(a);
    }
    bases
}

/// Adds the rows of one `.eh_frame` section given as bytes (priority 0): `section_addr` is
/// the section's file address (the base of `DW_EH_PE_pcrel` pointers) and `link_base` the
/// binary's link base. The entry point for tests and fuzzing that have section bytes but no
/// ELF file around them; [`build_from_elf`] goes through the same path.
pub fn add_eh_frame_section(w: &mut TableWriter, data: &[u8], section_addr: u64, link_base: u64) {
    let address_size = w.arch().pointer_size() as u8;
    let bases = BaseAddresses::default().set_eh_frame(section_addr);
    add_eh_frame(w, data, address_size, &bases, link_base);
}

fn add_eh_frame(
    w: &mut TableWriter,
    data: &[u8],
    address_size: u8,
    bases: &BaseAddresses,
    link_base: u64,
) {
    if data.is_empty() {
        return;
    }
    w.stats.source_bytes += data.len();
    let prepared = prepare(w.arch(), data, true, address_size);
    let data: &[u8] = &prepared.data;
    // about one row per 5 bytes of CFI in real binaries
    w.reserve(data.len() / 5);
    w.note_source(UnwindSource::EhFrame);
    let mut eh = EhFrame::new(data, LittleEndian);
    eh.set_address_size(address_size);
    if w.arch() == Arch::Aarch64 {
        eh.set_vendor(gimli::Vendor::AArch64);
    }
    add_section(
        w,
        &eh,
        bases,
        link_base,
        UnwindSource::EhFrame,
        0,
        &prepared.cies,
    );
}

/// The section as gimli should read it: on aarch64 through [`aarch64_cfi::prepare`].
fn prepare(arch: Arch, data: &[u8], eh: bool, address_size: u8) -> aarch64_cfi::Prepared<'_> {
    if arch == Arch::Aarch64 {
        aarch64_cfi::prepare(data, eh, address_size)
    } else {
        aarch64_cfi::Prepared {
            data: std::borrow::Cow::Borrowed(data),
            cies: HashMap::new(),
        }
    }
}

/// Reads every FDE of one section and pushes its rows. `cie_flags`: the real flags of
/// the CIEs whose augmentation the aarch64 pass rewrote.
#[allow(clippy::too_many_arguments)]
fn add_section<'a, S: UnwindSection<R<'a>>>(
    w: &mut TableWriter,
    section: &S,
    bases: &BaseAddresses,
    link_base: u64,
    source: UnwindSource,
    priority: u8,
    cie_flags: &HashMap<usize, CieFlags>,
) {
    let mut ctx: Box<UnwindContext<usize>> = Box::new(UnwindContext::new());
    let mut cies = CieCache::default();
    let debug_frame = matches!(source, UnwindSource::DebugFrame);
    let section_name = if debug_frame {
        ".debug_frame"
    } else {
        ".eh_frame"
    };
    // Entries are framed here, not by gimli's iterator: that iterator gives up on the
    // whole rest of the section at the first FDE whose CIE pointer is unusable, while
    // the entry's own length still says where the next one starts.
    let data: &[u8] = section.section().slice();
    let mut off = 0usize;
    while off < data.len() {
        let (fde_at, next) = match frame_entry(data, off, debug_frame) {
            Framed::Fde { next } => (off, next),
            Framed::Cie { next } => {
                off = next;
                continue;
            }
            Framed::End => break,
            Framed::Skip { next, why } => {
                w.stats
                    .skip(|| format!("{section_name}: entry at {off:#x}: {why}"));
                off = next;
                continue;
            }
            Framed::Bad(why) => {
                // the entry's length is unusable: nothing after it can be found
                w.stats
                    .skip(|| format!("{section_name}: entry at {off:#x}: {why}"));
                break;
            }
        };
        off = next;
        add_fde_at(
            w,
            section,
            bases,
            link_base,
            (source, priority),
            cie_flags,
            &mut ctx,
            &mut cies,
            fde_at,
        );
    }
}

/// The CIEs an [`add_fde_at`] caller has read, by section offset.
type CieCache<'a> = HashMap<usize, gimli::CommonInformationEntry<R<'a>>, FxBuildHasher>;

/// Reads the FDE at `fde_at` and pushes its rows, or counts it skipped: one FDE of
/// [`add_section`]'s loop, and all of an on-demand table ([`add_eh_frame_fde`]).
#[allow(clippy::too_many_arguments)]
fn add_fde_at<'a, S: UnwindSection<R<'a>>>(
    w: &mut TableWriter,
    section: &S,
    bases: &BaseAddresses,
    link_base: u64,
    (source, priority): (UnwindSource, u8),
    cie_flags: &HashMap<usize, CieFlags>,
    ctx: &mut UnwindContext<usize>,
    cies: &mut CieCache<'a>,
    fde_at: usize,
) {
    let section_name = if matches!(source, UnwindSource::DebugFrame) {
        ".debug_frame"
    } else {
        ".eh_frame"
    };
    let fde = read_fde(section, bases, cies, fde_at);
    let fde = match fde {
        Ok(f) => f,
        Err(e) => {
            w.stats
                .skip(|| format!("{section_name}: FDE at {fde_at:#x}: {e}"));
            return;
        }
    };
    let flags = cie_flags.get(&fde.cie().offset()).copied();
    match add_fde(
        w, section, bases, ctx, &fde, link_base, source, priority, flags,
    ) {
        Ok(()) => w.stats.entries += 1,
        Err(e) => w
            .stats
            .skip(|| format!("{section_name}: FDE for {:#x}: {e}", fde.initial_address())),
    }
}

/// The FDE at `fde_at`, its CIE read through `cies`.
fn read_fde<'a, S: UnwindSection<R<'a>>>(
    section: &S,
    bases: &BaseAddresses,
    cies: &mut CieCache<'a>,
    fde_at: usize,
) -> gimli::Result<gimli::FrameDescriptionEntry<R<'a>>> {
    section.fde_from_offset(bases, S::Offset::from(fde_at), |section, bases, offset| {
        let key: usize = gimli::UnwindOffset::into(offset);
        if let Some(cie) = cies.get(&key) {
            return Ok(cie.clone());
        }
        let cie = section.cie_from_offset(bases, offset)?;
        cies.insert(key, cie.clone());
        Ok(cie)
    })
}

/// An `.eh_frame` section as [`add_section`] reads it — on aarch64 after
/// [`aarch64_cfi::prepare`] — owned, for building one FDE at a time
/// ([`crate::unwind::on_demand`]).
pub(crate) struct PreparedEhFrame {
    /// The rewritten bytes; `None` when the pass changed nothing (read the original).
    pub rewritten: Option<Box<[u8]>>,
    /// The real flags of the CIEs whose augmentation was rewritten.
    pub cie_flags: HashMap<usize, CieFlags>,
}

impl PreparedEhFrame {
    pub fn new(arch: Arch, data: &[u8], address_size: u8) -> Self {
        let prepared = prepare(arch, data, true, address_size);
        PreparedEhFrame {
            rewritten: match prepared.data {
                std::borrow::Cow::Owned(v) => Some(v.into_boxed_slice()),
                std::borrow::Cow::Borrowed(_) => None,
            },
            cie_flags: prepared.cies,
        }
    }

    /// The bytes to read: the rewritten ones, or `original` (the section it was made from).
    pub fn data<'a>(&'a self, original: &'a [u8]) -> &'a [u8] {
        self.rewritten.as_deref().unwrap_or(original)
    }
}

/// The section offsets of the FDEs [`add_section`] evaluates in an `.eh_frame` (framing
/// alone: the entries before the terminator or an unusable length).
pub(crate) fn eh_frame_fde_offsets(data: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < data.len() {
        match frame_entry(data, off, false) {
            Framed::Fde { next } => {
                out.push(off);
                off = next;
            }
            Framed::Cie { next } | Framed::Skip { next, .. } => off = next,
            Framed::End | Framed::Bad(_) => break,
        }
    }
    out
}

fn eh_frame_section(arch: Arch, data: &[u8], address_size: u8) -> EhFrame<R<'_>> {
    let mut eh = EhFrame::new(data, LittleEndian);
    eh.set_address_size(address_size);
    if arch == Arch::Aarch64 {
        eh.set_vendor(gimli::Vendor::AArch64);
    }
    eh
}

/// `(initial address, length)` of each `.eh_frame` FDE at `offsets` as [`add_section`]
/// reads it (`None`: it cannot be read, and gives no rows). Reads headers only, no CFI.
/// `data` as [`PreparedEhFrame::data`] gives it.
pub(crate) fn eh_frame_fde_extents(
    arch: Arch,
    data: &[u8],
    address_size: u8,
    bases: &BaseAddresses,
    offsets: impl Iterator<Item = usize>,
) -> Vec<Option<(u64, u64)>> {
    let eh = eh_frame_section(arch, data, address_size);
    let mut cies = CieCache::default();
    offsets
        .map(|at| {
            read_fde(&eh, bases, &mut cies, at)
                .ok()
                .map(|f| (f.initial_address(), f.len()))
        })
        .collect()
}

/// Pushes the rows of the one `.eh_frame` FDE at `fde_at` (priority 0) exactly as
/// [`build_from_elf`] does for it. `data` as [`PreparedEhFrame::data`] gives it.
pub(crate) fn add_eh_frame_fde(
    w: &mut TableWriter,
    data: &[u8],
    prepared: &PreparedEhFrame,
    address_size: u8,
    bases: &BaseAddresses,
    link_base: u64,
    fde_at: usize,
) {
    let eh = eh_frame_section(w.arch(), data, address_size);
    let mut ctx: Box<UnwindContext<usize>> = Box::new(UnwindContext::new());
    add_fde_at(
        w,
        &eh,
        bases,
        link_base,
        (UnwindSource::EhFrame, 0),
        &prepared.cie_flags,
        &mut ctx,
        &mut CieCache::default(),
        fde_at,
    );
}

/// What the entry at one offset of a CFI section is, read from its framing alone.
#[derive(Debug, PartialEq, Eq)]
enum Framed {
    Cie {
        next: usize,
    },
    Fde {
        next: usize,
    },
    /// The `.eh_frame` terminator (a zero length), or the end of the bytes.
    End,
    /// An entry too short to hold its id: skipped, framing goes on at `next`.
    Skip {
        next: usize,
        why: &'static str,
    },
    /// The length runs past the section: nothing after it can be framed.
    Bad(&'static str),
}

/// Reads the length and CIE id/pointer of the entry at `off` (32- and 64-bit DWARF).
/// `.debug_frame` marks CIEs with an all-ones id, `.eh_frame` with zero.
fn frame_entry(data: &[u8], off: usize, debug_frame: bool) -> Framed {
    let u32_at = |at: usize| -> Option<u32> {
        let b = data.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| -> Option<u64> {
        let b = data.get(at..at.checked_add(8)?)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    };
    let Some(len32) = u32_at(off) else {
        return if off >= data.len() {
            Framed::End
        } else {
            Framed::Bad("truncated length")
        };
    };
    let (header, length, dwarf64) = if len32 == 0xffff_ffff {
        match u64_at(off + 4) {
            Some(l) => (12usize, l, true),
            None => return Framed::Bad("truncated 64-bit length"),
        }
    } else {
        (4usize, u64::from(len32), false)
    };
    if length == 0 {
        if debug_frame {
            // an empty entry: padding, not an end marker, in .debug_frame
            return Framed::Cie { next: off + header };
        }
        return Framed::End;
    }
    let Some(next) = usize::try_from(length)
        .ok()
        .and_then(|l| (off + header).checked_add(l))
        .filter(|&n| n <= data.len())
    else {
        return Framed::Bad("length runs past the section");
    };
    let id_at = off + header;
    let is_cie = if dwarf64 {
        match u64_at(id_at) {
            Some(id) if id_at + 8 <= next => id == if debug_frame { u64::MAX } else { 0 },
            _ => {
                return Framed::Skip {
                    next,
                    why: "entry too short for its id",
                }
            }
        }
    } else {
        match u32_at(id_at) {
            Some(id) if id_at + 4 <= next => id == if debug_frame { u32::MAX } else { 0 },
            _ => {
                return Framed::Skip {
                    next,
                    why: "entry too short for its id",
                }
            }
        }
    };
    if is_cie {
        Framed::Cie { next }
    } else {
        Framed::Fde { next }
    }
}

#[allow(clippy::too_many_arguments)]
fn add_fde<'a, S: UnwindSection<R<'a>>>(
    w: &mut TableWriter,
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<usize>,
    fde: &gimli::FrameDescriptionEntry<R<'a>>,
    link_base: u64,
    source: UnwindSource,
    priority: u8,
    cie_flags: Option<CieFlags>,
) -> gimli::Result<()> {
    if fde.len() == 0 {
        return Ok(());
    }
    let arch = w.arch();
    let ra_reg = fde.cie().return_address_register().0;
    // A rewritten CIE's `S` may stand for `B`/`G`: its real flags say.
    let signal = match cie_flags {
        Some(f) => f.signal,
        None => fde.cie().is_signal_trampoline(),
    };
    let key_b = cie_flags.is_some_and(|f| f.key_b);
    let mut table = fde.rows(section, bases, ctx)?;
    // A failure midway drops the whole FDE: truncate back to where it started.
    let mark = w.mark();
    loop {
        let row = match table.next_row() {
            Ok(Some(row)) => row,
            Ok(None) => return Ok(()),
            Err(e) => {
                w.rewind(mark);
                return Err(e);
            }
        };
        let (Some(start), Some(end)) = (
            binary::svma_to_offset(row.start_address(), link_base),
            binary::svma_to_offset(row.end_address(), link_base),
        ) else {
            continue;
        };
        let mut rule = translate_row(w, section, arch, ra_reg, signal, source, row);
        if key_b && rule.ra_signed() {
            rule.flags |= FLAG_RA_KEY_B;
        }
        w.push(start, end, &rule, priority);
    }
}

fn translate_row<'a, S: UnwindSection<R<'a>>>(
    w: &mut TableWriter,
    section: &S,
    arch: Arch,
    ra_reg: u16,
    signal: bool,
    source: UnwindSource,
    row: &gimli::UnwindTableRow<usize>,
) -> RuleRecord {
    let expr_slot = |w: &mut TableWriter, e: &gimli::UnwindExpression<usize>, val: bool| {
        let expr = e.get(section).ok()?;
        let (off, len) = w.add_expression(expr.0.slice())?;
        Some(Slot::expression(val, off, len))
    };
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            match (u8::try_from(register.0), i32::try_from(*offset)) {
                (Ok(r), Ok(o)) => Slot::offset(r, o),
                _ => return RuleRecord::NONE,
            }
        }
        CfaRule::Expression(e) => match expr_slot(w, e, true) {
            Some(s) => s,
            None => return RuleRecord::NONE,
        },
    };
    let mut rec = RuleRecord::new(source, cfa, Slot::UNCHANGED);
    if signal {
        rec.flags |= FLAG_SIGNAL_FRAME;
    }
    for (reg, rule) in row.registers() {
        let reg = reg.0;
        if arch == Arch::Aarch64 && reg == AARCH64_RA_SIGN_STATE {
            if let RegisterRule::Constant(v) = rule {
                if v & 1 != 0 {
                    rec.flags |= FLAG_RA_SIGNED;
                }
            }
            continue;
        }
        let slot = match rule {
            RegisterRule::Undefined => Slot::UNDEFINED,
            RegisterRule::SameValue => Slot::UNCHANGED,
            RegisterRule::Offset(n) => match i32::try_from(*n) {
                Ok(n) => Slot::offset(0, n),
                Err(_) => Slot::UNDEFINED,
            },
            RegisterRule::ValOffset(n) => match i32::try_from(*n) {
                Ok(n) => Slot::val_offset(n),
                Err(_) => Slot::UNDEFINED,
            },
            RegisterRule::Register(r) => match u8::try_from(r.0) {
                Ok(r) => Slot::register(r),
                Err(_) => Slot::UNDEFINED,
            },
            RegisterRule::Expression(e) => expr_slot(w, e, false).unwrap_or(Slot::UNDEFINED),
            RegisterRule::ValExpression(e) => expr_slot(w, e, true).unwrap_or(Slot::UNDEFINED),
            RegisterRule::Architectural | RegisterRule::Constant(_) => Slot::UNDEFINED,
        };
        if reg == ra_reg {
            rec.ra = slot;
        } else {
            rec.set_reg(arch, reg, slot);
        }
    }
    rec
}

#[cfg(test)]
#[path = "dwarf_tests.rs"]
mod tests;
