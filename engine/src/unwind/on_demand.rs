//! A binary's unwind rules built only where the walk looks: one `.eh_frame` FDE at a time,
//! found through `.eh_frame_hdr`'s binary-search table.
//!
//! `postmortem walk` unwinds one dump and exits. [`build_from_elf`] evaluates every FDE's
//! CFI program of a module (for libc, thousands) to answer for the dozen addresses a walk
//! asks about. [`OnDemandUnwind::new`] reads the ELF headers and the `.eh_frame_hdr`
//! header only; [`OnDemandUnwind::find_rule`] then finds the FDE whose initial location
//! is the greatest at or before the address in the hdr table, builds the table of that
//! one FDE the first time it is asked about with the whole build's own code
//! (`builders::dwarf::add_eh_frame_fde`, the [`TableWriter`]), and keeps it.
//!
//! The answers equal the whole table's at every address when the FDEs' ranges are
//! disjoint and the hdr table lists exactly the FDEs the whole build evaluates: then at
//! most one FDE covers an address, and between FDEs both answer `None`. Rule records are
//! equal except where a slot refers to an expression: its offset is into this FDE's
//! expression area, not the whole table's; [`Rule::expression`] gives the same bytes.
//! - [`OnDemandUnwind::new`] declines what it can see to differ from its headers alone
//!   (see [`OnDemandUnwind::new`]); the caller then builds the whole table.
//! - The first lookup checks the rest once, reading every FDE's header but no CFI
//!   program: hdr entries sorted, one per FDE the builder frames, each at the initial
//!   location its FDE states, no FDE starting inside an earlier one. When that fails,
//!   the whole table is built (once) and answers instead: still equal, just not cheaper.
//! - Not checked (it would mean evaluating every CFI program, the cost this module
//!   avoids): a CFI program advancing past its FDE's end gives rows to the next FDE's
//!   addresses in the whole table and not here (both answers are garbage there).
//!
//! The service keeps building whole tables: it caches them and walks many dumps with them.

use std::sync::OnceLock;

use gimli::BaseAddresses;
use object::{Object, ObjectSection};

use super::builders::dwarf::{
    add_eh_frame_fde, eh_frame_bases, eh_frame_fde_extents, eh_frame_fde_offsets, PreparedEhFrame,
};
use super::builders::{build_from_elf, sframe, TableWriter};
use super::format::MAX_ADDRESS;
use super::lookup::{Rule, UnwindTable};
use super::rule::UnwindSource;
use crate::binary::{self, FileBytes};
use crate::dump::Arch;

/// Why a file is not indexed on demand (the caller then builds whole tables): shared by
/// the on-demand unwind, PDATA and symbol readers and the `.sym` index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined(pub &'static str);

impl std::fmt::Display for Declined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// `DW_EH_PE_datarel | DW_EH_PE_sdata4`: the hdr table encoding every linker writes, and
/// the only one read here (fixed 8-byte entries, binary-searchable in place).
const TABLE_ENC: u8 = 0x3b;
const ENTRY_SIZE: usize = 8;

/// One ELF module's unwind rules, built an FDE at a time (see the module documentation).
struct EhFrameUnwind {
    binary: FileBytes,
    extra: Vec<FileBytes>,
    arch: Arch,
    address_size: u8,
    link_base: u64,
    bases: BaseAddresses,
    /// `.eh_frame`'s bytes in `binary`.
    eh_frame: std::ops::Range<usize>,
    /// `.eh_frame`'s file address.
    eh_frame_addr: u64,
    /// `.eh_frame_hdr`'s file address (the base of its datarel pointers).
    hdr_addr: u64,
    /// The hdr table's entries in `binary`: `fde_count` × 8 bytes.
    table: std::ops::Range<usize>,
    fde_count: usize,
    plan: OnceLock<Plan>,
    inputs: OnceLock<Vec<usize>>,
}

/// How lookups are answered, decided at the first one.
enum Plan {
    /// One table per hdr entry, built when first asked about.
    PerFde {
        prepared: PreparedEhFrame,
        tables: Vec<OnceLock<FdeTable>>,
    },
    /// The whole table (the per-FDE answers could differ); `bytes` empty if the build
    /// failed.
    Whole {
        bytes: Box<[u8]>,
        inputs: Vec<usize>,
    },
}

/// The table of one FDE, its addresses offsets from `base` (the page of the FDE's start):
/// its page index then covers the FDE alone, not everything from the link base.
struct FdeTable {
    base: u64,
    bytes: Box<[u8]>,
    /// The FDE gave the writer a range (so the whole build counts the binary an input).
    pushed: bool,
}

/// A pointer of `.eh_frame_hdr` at `pos` (relative to the section start) with encoding
/// `enc`: absolute, pc-relative or relative to the section; 4- or 8-byte.
fn read_encoded(hdr: &[u8], pos: usize, enc: u8, hdr_addr: u64) -> Option<(u64, usize)> {
    let bytes = |n: usize| hdr.get(pos..pos.checked_add(n)?);
    let (value, len) = match enc & 0x0f {
        0x03 => (u64::from(u32::from_le_bytes(bytes(4)?.try_into().ok()?)), 4),
        0x0b => (
            i32::from_le_bytes(bytes(4)?.try_into().ok()?) as i64 as u64,
            4,
        ),
        0x00 | 0x04 | 0x0c => (u64::from_le_bytes(bytes(8)?.try_into().ok()?), 8),
        _ => return None,
    };
    let base = match enc & 0xf0 {
        0x00 => 0,
        0x10 => hdr_addr.wrapping_add(pos as u64),
        0x30 => hdr_addr,
        _ => return None,
    };
    Some((base.wrapping_add(value), len))
}

/// The uncompressed file range of a section, if it has bytes in the file.
fn file_range(sec: &object::Section<'_, '_>) -> Option<std::ops::Range<usize>> {
    let c = sec.compressed_file_range().ok()?;
    if c.format != object::CompressionFormat::None {
        return None;
    }
    let start = usize::try_from(c.offset).ok()?;
    Some(start..start.checked_add(usize::try_from(c.compressed_size).ok()?)?)
}

/// Whether a file has a `.debug_frame` the whole build would read.
fn has_debug_frame(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_frame")
        .and_then(|s| s.uncompressed_data().ok())
        .is_some_and(|d| !d.is_empty())
}

/// The architecture of `file` (the module's binary, whose bytes are `data`) when the
/// on-demand rules agree with the whole build's for it and its debug files `extra` (see
/// [`EhFrameUnwind::new`]); else why not.
fn whole_build_agrees(
    file: &object::File<'_>,
    data: &[u8],
    extra: &[FileBytes],
) -> Result<Arch, Declined> {
    if file.format() != object::BinaryFormat::Elf {
        return Err(Declined("not ELF"));
    }
    if !file.is_little_endian() {
        return Err(Declined("big-endian"));
    }
    let arch = match binary::arch_of(file) {
        Some(a @ (Arch::X86_64 | Arch::Aarch64)) => a,
        _ => return Err(Declined("an architecture other than x86_64 and aarch64")),
    };
    if !file.is_64() {
        return Err(Declined("a 32-bit ELF"));
    }
    if has_debug_frame(file) {
        return Err(Declined("the binary has a .debug_frame"));
    }
    let sframe_section = file
        .section_by_name(".sframe")
        .and_then(|s| s.data().ok())
        .is_some_and(|d| !d.is_empty());
    if sframe_section {
        return Err(Declined("the binary has SFrame data"));
    }
    // a PT_GNU_SFRAME segment without a section header: whatever the build reads
    let mut probe = TableWriter::new(arch);
    sframe::add_elf_sframe(&mut probe, file, data);
    if probe.ranges_added() > 0 || probe.sources_noted() != 0 {
        return Err(Declined("the binary has SFrame data"));
    }
    for e in extra {
        let Ok(f) = object::File::parse((**e).as_ref()) else {
            continue;
        };
        if binary::arch_of(&f) != Some(arch) {
            continue;
        }
        if !f.is_little_endian() {
            return Err(Declined("a big-endian debug file"));
        }
        if has_debug_frame(&f) {
            return Err(Declined("a debug file has a .debug_frame"));
        }
    }
    Ok(arch)
}

/// The binary-search table of the `.eh_frame_hdr` bytes `hdr` (at `hdr_addr`), which
/// must describe the `.eh_frame` at `eh_addr`: its offset in `hdr`, its entry count and
/// its length; declined unless version 1 with a table in the usual encoding.
fn search_table(
    hdr: &[u8],
    hdr_addr: u64,
    eh_addr: u64,
) -> Result<(usize, usize, usize), Declined> {
    let (version, ptr_enc, count_enc, table_enc) = match hdr {
        [v, p, c, t, ..] => (*v, *p, *c, *t),
        _ => return Err(Declined("a truncated .eh_frame_hdr")),
    };
    if version != 1 {
        return Err(Declined("an .eh_frame_hdr version other than 1"));
    }
    let (eh_ptr, ptr_len) =
        read_encoded(hdr, 4, ptr_enc, hdr_addr).ok_or(Declined("an unreadable eh_frame_ptr"))?;
    if eh_ptr != eh_addr {
        return Err(Declined(".eh_frame_hdr describes another .eh_frame"));
    }
    if count_enc == 0xff || table_enc == 0xff {
        return Err(Declined("an .eh_frame_hdr without a search table"));
    }
    if table_enc != TABLE_ENC || count_enc & 0xf0 != 0 {
        return Err(Declined("an .eh_frame_hdr table in an unusual encoding"));
    }
    let (count, count_len) = read_encoded(hdr, 4 + ptr_len, count_enc, hdr_addr)
        .ok_or(Declined("an unreadable fde_count"))?;
    let table_at = 4 + ptr_len + count_len;
    let fde_count = usize::try_from(count).map_err(|_| Declined("a huge fde_count"))?;
    let table_len = fde_count
        .checked_mul(ENTRY_SIZE)
        .filter(|&n| table_at.checked_add(n).is_some_and(|end| end <= hdr.len()))
        .ok_or(Declined("the hdr table runs past its section"))?;
    Ok((table_at, fde_count, table_len))
}

impl EhFrameUnwind {
    /// Reads the headers of `binary` (the module's binary file) and of `extra` (its
    /// separate debug files: the same inputs as [`build_from_elf`]), or declines when the
    /// answers could differ from that whole build's, so the caller builds the whole
    /// table: a file `object` cannot read or not ELF (Mach-O: compact unwind), big-endian,
    /// neither x86_64 nor aarch64; no `.eh_frame` (or compressed, or empty); an `.sframe`;
    /// a `.debug_frame` in the binary or in an extra file of the same architecture
    /// (its rows merge with `.eh_frame`'s); no `.eh_frame_hdr`, or one without a
    /// binary-search table in the usual encoding, or pointing at another `.eh_frame`.
    /// No CFI is evaluated and no FDE read.
    fn new(binary: FileBytes, extra: &[FileBytes]) -> Result<EhFrameUnwind, Declined> {
        let data: &[u8] = (*binary).as_ref();
        let file = object::File::parse(data).map_err(|_| Declined("not an object file"))?;
        let arch = whole_build_agrees(&file, data, extra)?;
        let eh = file
            .section_by_name(".eh_frame")
            .ok_or(Declined("no .eh_frame"))?;
        let eh_frame = file_range(&eh).ok_or(Declined("no .eh_frame bytes in the file"))?;
        if eh_frame.is_empty() || data.get(eh_frame.clone()).is_none() {
            return Err(Declined("an empty or truncated .eh_frame"));
        }
        let hdr_sec = file
            .section_by_name(".eh_frame_hdr")
            .ok_or(Declined("no .eh_frame_hdr"))?;
        let hdr_range = file_range(&hdr_sec).ok_or(Declined("no .eh_frame_hdr bytes"))?;
        let hdr = data
            .get(hdr_range.clone())
            .ok_or(Declined("a truncated .eh_frame_hdr"))?;
        let hdr_addr = hdr_sec.address();
        let (table_at, fde_count, table_len) = search_table(hdr, hdr_addr, eh.address())?;
        let table_start = hdr_range.start + table_at;
        Ok(EhFrameUnwind {
            arch,
            address_size: 8,
            link_base: binary::link_base(&file),
            bases: eh_frame_bases(&file, eh.address()),
            eh_frame,
            eh_frame_addr: eh.address(),
            hdr_addr,
            table: table_start..table_start + table_len,
            fde_count,
            plan: OnceLock::new(),
            inputs: OnceLock::new(),
            extra: extra.to_vec(),
            binary,
        })
    }

    /// The architecture of the binary.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The rule for table offset `rel`: the one the whole table
    /// (`UnwindTable::open(&build_from_elf(..).bytes)`) gives there.
    pub fn find_rule(&self, rel: u64) -> Option<Rule<'_>> {
        if rel >= MAX_ADDRESS {
            return None;
        }
        match self.plan() {
            Plan::Whole { bytes, .. } => UnwindTable::open(bytes).ok()?.find(rel),
            Plan::PerFde { prepared, tables } => {
                let svma = rel.checked_add(self.link_base)?;
                let i = self.entry_at_or_before(svma)?;
                let t = tables.get(i)?.get_or_init(|| self.build_fde(prepared, i));
                UnwindTable::open(&t.bytes)
                    .ok()?
                    .find(rel.checked_sub(t.base)?)
            }
        }
    }

    /// The unwind sources of the whole table: `.eh_frame` (the only one accepted).
    pub fn sources(&self) -> Vec<UnwindSource> {
        vec![UnwindSource::EhFrame]
    }

    /// The whole build's `inputs`: `[0]` when some FDE of the binary gives a row (no extra
    /// file can: none has a `.debug_frame`). May build FDEs until one does (usually the
    /// first).
    pub fn inputs(&self) -> Vec<usize> {
        self.inputs
            .get_or_init(|| match self.plan() {
                Plan::Whole { inputs, .. } => inputs.clone(),
                Plan::PerFde { prepared, tables } => {
                    let any = tables
                        .iter()
                        .enumerate()
                        .any(|(i, t)| t.get_or_init(|| self.build_fde(prepared, i)).pushed);
                    if any {
                        vec![0]
                    } else {
                        Vec::new()
                    }
                }
            })
            .clone()
    }

    /// Whether lookups are answered FDE by FDE (`false`: the first lookup found the FDEs
    /// laid out so that only the whole table is sure to answer the same, and built it).
    pub fn per_fde(&self) -> bool {
        matches!(self.plan(), Plan::PerFde { .. })
    }

    fn bytes(&self) -> &[u8] {
        (*self.binary).as_ref()
    }

    /// Hdr entry `i`: (initial location, FDE address), file addresses.
    fn entry(&self, i: usize) -> Option<(u64, u64)> {
        let at = self.table.start.checked_add(i.checked_mul(ENTRY_SIZE)?)?;
        let e = self.bytes().get(at..at.checked_add(ENTRY_SIZE)?)?;
        let word = |b: &[u8]| -> Option<u64> {
            let v = i32::from_le_bytes(b.try_into().ok()?);
            Some(self.hdr_addr.wrapping_add(v as i64 as u64))
        };
        Some((word(e.get(..4)?)?, word(e.get(4..)?)?))
    }

    /// The last hdr entry whose initial location is at or before `svma`.
    fn entry_at_or_before(&self, svma: u64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.fde_count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)?.0 <= svma {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    fn plan(&self) -> &Plan {
        self.plan.get_or_init(|| {
            let prepared = PreparedEhFrame::new(
                self.arch,
                self.bytes().get(self.eh_frame.clone()).unwrap_or_default(),
                self.address_size,
            );
            if self.fdes_disjoint(&prepared) {
                Plan::PerFde {
                    prepared,
                    tables: (0..self.fde_count).map(|_| OnceLock::new()).collect(),
                }
            } else {
                let extra: Vec<&[u8]> = self.extra.iter().map(|e| (**e).as_ref()).collect();
                match build_from_elf(self.bytes(), &extra) {
                    Ok(b) => Plan::Whole {
                        bytes: b.bytes.into_boxed_slice(),
                        inputs: b.inputs,
                    },
                    Err(_) => Plan::Whole {
                        bytes: Box::default(),
                        inputs: Vec::new(),
                    },
                }
            }
        })
    }

    /// The FDE offset in `.eh_frame` of hdr entry `i`.
    fn fde_offset(&self, fde_addr: u64) -> Option<usize> {
        usize::try_from(fde_addr.checked_sub(self.eh_frame_addr)?).ok()
    }

    /// Whether per-FDE answers equal the whole table's (see the module documentation):
    /// the hdr table sorted, listing each FDE the builder frames once, each readable and
    /// at the initial location its FDE states, none starting inside an earlier one.
    fn fdes_disjoint(&self, prepared: &PreparedEhFrame) -> bool {
        let Some(original) = self.bytes().get(self.eh_frame.clone()) else {
            return false;
        };
        let data = prepared.data(original);
        let mut entries = Vec::with_capacity(self.fde_count);
        for i in 0..self.fde_count {
            let Some((start, fde_addr)) = self.entry(i) else {
                return false;
            };
            let Some(off) = self.fde_offset(fde_addr) else {
                return false;
            };
            entries.push((start, off));
        }
        if !entries.windows(2).all(|w| w[0].0 <= w[1].0) {
            return false;
        }
        let mut listed: Vec<usize> = entries.iter().map(|e| e.1).collect();
        listed.sort_unstable();
        if listed != eh_frame_fde_offsets(data) {
            return false;
        }
        let extents = eh_frame_fde_extents(
            self.arch,
            data,
            self.address_size,
            &self.bases,
            entries.iter().map(|e| e.1),
        );
        let mut covered_until = 0u64;
        for (&(start, _), extent) in entries.iter().zip(&extents) {
            if start < covered_until {
                return false;
            }
            // an FDE the builder cannot read is one the whole build skips and reports
            // (`unwind-table-corrupt`): only the whole build says so
            let Some((initial, len)) = *extent else {
                return false;
            };
            if initial != start {
                return false;
            }
            let Some(end) = initial.checked_add(len) else {
                return false;
            };
            covered_until = end;
        }
        true
    }

    /// The table of hdr entry `i`'s FDE alone.
    fn build_fde(&self, prepared: &PreparedEhFrame, i: usize) -> FdeTable {
        let mut w = TableWriter::new(self.arch);
        let original = self.bytes().get(self.eh_frame.clone()).unwrap_or_default();
        let entry = self.entry(i);
        // rows start at the FDE's initial location or after it
        let base = entry
            .and_then(|(start, _)| start.checked_sub(self.link_base))
            .map_or(0, |rel| rel & !0xfff);
        if let Some(off) = entry.and_then(|(_, a)| self.fde_offset(a)) {
            add_eh_frame_fde(
                &mut w,
                prepared.data(original),
                prepared,
                self.address_size,
                &self.bases,
                self.link_base,
                off,
            );
        }
        let pushed = w.ranges_added() > 0;
        w.rebase(base);
        FdeTable {
            base,
            bytes: w.finish().bytes.into_boxed_slice(),
            pushed,
        }
    }
}

impl std::fmt::Debug for EhFrameUnwind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EhFrameUnwind")
            .field("arch", &self.arch)
            .field("fde_count", &self.fde_count)
            .finish()
    }
}

/// A module's unwind rules built where the walk looks: an ELF binary's `.eh_frame` FDE by
/// FDE (this module's documentation), or a Windows x64 image's `.pdata` function by
/// function ([`super::on_demand_pdata`]).
pub struct OnDemandUnwind(Inner);

enum Inner {
    EhFrame(EhFrameUnwind),
    Pdata(super::on_demand_pdata::PdataUnwind),
}

impl OnDemandUnwind {
    /// For an ELF binary as [`EhFrameUnwind`] reads it, for a PE image as
    /// [`super::on_demand_pdata::PdataUnwind::new`]; `Err` where the answers could differ
    /// from the whole table's (the caller builds that).
    pub fn new(binary: FileBytes, extra: &[FileBytes]) -> Result<OnDemandUnwind, Declined> {
        let pe = AsRef::<[u8]>::as_ref(&*binary).starts_with(b"MZ");
        if pe {
            super::on_demand_pdata::PdataUnwind::new(binary, extra)
                .map(|p| OnDemandUnwind(Inner::Pdata(p)))
        } else {
            EhFrameUnwind::new(binary, extra).map(|e| OnDemandUnwind(Inner::EhFrame(e)))
        }
    }

    /// The architecture of the binary.
    pub fn arch(&self) -> Arch {
        match &self.0 {
            Inner::EhFrame(e) => e.arch(),
            Inner::Pdata(_) => Arch::X86_64,
        }
    }

    /// The rule for table offset `rel`: the one the whole table
    /// (`UnwindTable::open(&build_from_elf(..).bytes)`) gives there.
    pub fn find_rule(&self, rel: u64) -> Option<Rule<'_>> {
        match &self.0 {
            Inner::EhFrame(e) => e.find_rule(rel),
            Inner::Pdata(p) => p.find_rule(rel),
        }
    }

    /// The unwind sources of the whole table.
    pub fn sources(&self) -> Vec<UnwindSource> {
        match &self.0 {
            Inner::EhFrame(e) => e.sources(),
            Inner::Pdata(p) => p.sources(),
        }
    }

    /// The whole build's `inputs`.
    pub fn inputs(&self) -> Vec<usize> {
        match &self.0 {
            Inner::EhFrame(e) => e.inputs(),
            Inner::Pdata(p) => p.inputs(),
        }
    }

    /// Whether lookups are answered piece by piece (`false`: the whole table was built
    /// because the pieces could answer otherwise).
    pub fn per_fde(&self) -> bool {
        match &self.0 {
            Inner::EhFrame(e) => e.per_fde(),
            Inner::Pdata(p) => p.per_function(),
        }
    }
}

impl std::fmt::Debug for OnDemandUnwind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Inner::EhFrame(e) => e.fmt(f),
            Inner::Pdata(p) => p.fmt(f),
        }
    }
}
