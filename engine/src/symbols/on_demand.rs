//! A binary's symbol table built only where a walk looks: from the DWARF units whose
//! address ranges hold the walk's addresses.
//!
//! `postmortem walk` builds a module's symbol table, walks one dump and exits. For libc
//! with its libc6-dbg debug file (compressed sections, 4,000 units) the whole table
//! ([`build_symbol_table`]) costs far more than the walk, which asks about a dozen
//! addresses. [`OnDemandSymbols::new`] parses the files once and indexes the DWARF units
//! by address — from `.debug_aranges`, else from each unit's root DIE
//! (`DW_AT_low_pc`/`DW_AT_high_pc`/`DW_AT_ranges`), widened by the ranges of the unit's
//! line sequences (glibc's reach past its aranges); no other DIE is read — and
//! [`OnDemandSymbols::symbols_for`] then builds a table, with the whole builder's own
//! code ([`builders`]), from the units an address needs plus the `.symtab`/`.dynsym`
//! functions (all of them, as the whole build reads them; they are cheap). Inflated
//! sections are kept, so later calls do not inflate them again; the pages of their
//! compressed bytes in a mapped file are given back ([`FileBytes::release`]).
//!
//! # Why the answers are the whole table's
//! A lookup at `rel` reads, per kind of record (functions, line rows, inline records of
//! each depth), the record with the greatest start at or before `rel`. A unit's records
//! lie inside its address ranges (merged where they touch), so every record that covers
//! `rel` comes from a unit with a range holding `rel`. Let `low` be the least start of the
//! ranges holding `rel` (`rel` if none), lowered to the start of the `.symtab`/`.dynsym`
//! function holding `rel` and to the least start of the ranges holding *that* address
//! (whether DWARF covers a symbol's start and where the next DWARF function starts decide
//! where a symbol's range ends). Reading every unit with a range that meets `low..=rel`
//! reads every record starting in `low..=rel` and every line sequence ending there.
//! Either the whole table's record before `rel` starts at or after `low`, and the same
//! records compete here (all of those at that start, in the same unit order, so ties go
//! the same way), or it starts before `low` and covers nothing at `rel` — and nor does
//! any record here, which the whole table also holds. Names follow
//! `DW_AT_abstract_origin`/`DW_AT_specification` into units not picked: those units' DIEs
//! are read too (names only). Units with no range information are always read, but for
//! one whose abbreviation table has no entry for a function or an inlined call with an
//! address: no record of it can come from a DIE, so its line sequences are its ranges.
//!
//! Every picked unit is checked against that premise: if a function, inline record or line
//! sequence of it lies outside its ranges, the index stops trusting the ranges and every
//! call builds the whole table from then on (units never picked are not checked: reading
//! them is the cost avoided). [`OnDemandSymbols::new`] declines (the caller builds the
//! whole table) split DWARF (skeleton units, `.dwo` references), DWARF 4 type units
//! (`.debug_types`), unreadable `.debug_aranges` or entries naming no unit, and files where
//! many units have no ranges (nothing would be saved).
//!
//! [`OnDemandSymbols::inputs`] and [`OnDemandSymbols::sources`] say which files and
//! sources the whole table's functions come from, from the index and a few small tables;
//! when those cannot settle it they build the whole table once.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use object::{Object, ObjectSection};

use super::builders::dwarf::{self as dwarf_builder, UnitPlan, R};
use super::builders::{self, Collector, RawFunction};
use super::format::MAX_ADDRESS;
use super::line_sequences::Sequences;
use super::{build_symbol_table, BuiltSymbols, SymbolSource, SymbolTable, SymbolsError};
use crate::binary::{self, FileBytes};
use crate::unwind::on_demand::Declined;

/// Units without address ranges are read for every table: more than this many, and more
/// than a quarter of all units, and the index declines.
const MAX_UNRANGED: usize = 64;

/// Units probed at once for a DWARF function (after a first round of two), and rounds in
/// all, by [`OnDemandSymbols::inputs`].
const DWARF_PROBES: usize = 32;
const DWARF_PROBE_ROUNDS: usize = 4;

/// Symbols probed per (file, source) by [`OnDemandSymbols::inputs`].
const SYMBOL_PROBES: usize = 64;

/// The sections read: the whole builder's ([`dwarf_builder::READ_SECTIONS`]) and
/// `.debug_aranges`, in one fixed order (others read as empty).
const SECTION_IDS: [gimli::SectionId; 10] = {
    let mut ids = [gimli::SectionId::DebugAranges; 10];
    let mut i = 0;
    while i < dwarf_builder::READ_SECTIONS.len() {
        ids[i] = dwarf_builder::READ_SECTIONS[i];
        i += 1;
    }
    ids
};

fn bytes(f: &FileBytes) -> &[u8] {
    (**f).as_ref()
}

/// A section's data: where it lies in the file, or inflated.
enum Inflated {
    InFile(Range<usize>),
    Owned(Box<[u8]>),
}

/// The DWARF sections of one file, each read (and inflated) the first time it is needed.
struct Sections {
    file: FileBytes,
    endian: gimli::RunTimeEndian,
    /// The file's address size (bytes), which line programs before DWARF 5 assume.
    address_size: u8,
    cells: [OnceLock<Inflated>; SECTION_IDS.len()],
}

impl Sections {
    fn get(&self, id: gimli::SectionId) -> &[u8] {
        let Some(i) = SECTION_IDS.iter().position(|&s| s == id) else {
            return &[];
        };
        let Some(cell) = self.cells.get(i) else {
            return &[];
        };
        match cell.get_or_init(|| self.inflate(id)) {
            Inflated::InFile(r) => bytes(&self.file).get(r.clone()).unwrap_or(&[]),
            Inflated::Owned(b) => b,
        }
    }

    /// Reads a section as the whole builder does (missing or unreadable: empty).
    fn inflate(&self, id: gimli::SectionId) -> Inflated {
        let data = bytes(&self.file);
        let empty = || Inflated::Owned(Box::default());
        let Ok(file) = object::File::parse(data) else {
            return empty();
        };
        let Some(section) = file.section_by_name(id.name()) else {
            return empty();
        };
        match section.uncompressed_data() {
            Ok(std::borrow::Cow::Borrowed(s)) => {
                let at = (s.as_ptr() as usize).checked_sub(data.as_ptr() as usize);
                match at.and_then(|a| Some(a..a.checked_add(s.len())?)) {
                    Some(r) if data.get(r.clone()).is_some() => Inflated::InFile(r),
                    _ => Inflated::Owned(s.into()),
                }
            }
            Ok(std::borrow::Cow::Owned(v)) => {
                // inflated: its compressed bytes are not read again (a mapped file's pages
                // leave memory; the inflated copy is what stays)
                if let Ok(c) = section.compressed_file_range() {
                    let start = usize::try_from(c.offset).unwrap_or(usize::MAX);
                    let size = usize::try_from(c.compressed_size).unwrap_or(0);
                    self.file.release(start..start.saturating_add(size));
                }
                Inflated::Owned(v.into_boxed_slice())
            }
            Err(_) => empty(),
        }
    }

    fn dwarf(&self) -> gimli::Dwarf<R<'_>> {
        let endian = self.endian;
        gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
            Ok(gimli::EndianSlice::new(self.get(id), endian))
        })
        .unwrap_or_default()
    }
}

/// One unit of `.debug_info`.
#[derive(Debug, Clone)]
struct UnitInfo {
    /// Its `.debug_info` offset and end.
    offset: usize,
    end: usize,
    /// Its address ranges (table offsets, merged where they touch), in `UnitIndex::ranges`.
    ranges: Range<usize>,
    /// Its root DIE has no children: no function of it is described (an assembler's
    /// unit), so the symbol-table functions in its ranges are what the whole table
    /// names there. Only steers which functions [`OnDemandSymbols::inputs`] probes.
    childless: bool,
}

/// One address range of a unit.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: u64,
    end: u64,
    unit: usize,
}

/// The units of the DWARF file by address.
struct UnitIndex {
    /// In `.debug_info` order, which is the whole builder's.
    units: Vec<UnitInfo>,
    ranges: Vec<(u64, u64)>,
    /// Every unit's ranges, sorted by start.
    pieces: Vec<Piece>,
    /// `reach[i]`: the greatest end of `pieces[..=i]`.
    reach: Vec<u64>,
    /// Units with no range information (read for every table).
    unranged: Vec<usize>,
    /// Every unit's line sequences, merged. Only steers which functions
    /// [`OnDemandSymbols::inputs`] probes: code without line rows (an `asm` block at a C
    /// file's top level, glibc's `__restore_rt`) is where DWARF describes no function.
    lines: Vec<(u64, u64)>,
}

/// A range of file addresses as table offsets, clamped to what the table can hold.
fn table_range(begin: u64, end: u64, link_base: u64) -> Option<(u64, u64)> {
    let start = begin.saturating_sub(link_base);
    let end = end.saturating_sub(link_base).min(MAX_ADDRESS);
    (start < end).then_some((start, end))
}

/// The `.debug_aranges` ranges of each unit offset.
fn aranges(
    dwarf: &gimli::Dwarf<R<'_>>,
    link_base: u64,
) -> Result<rustc_hash::FxHashMap<usize, Vec<(u64, u64)>>, Declined> {
    let bad = |_| Declined("unreadable .debug_aranges");
    let mut map: rustc_hash::FxHashMap<usize, Vec<(u64, u64)>> = Default::default();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(h) = headers.next().map_err(bad)? {
        let list = map.entry(h.debug_info_offset().0).or_default();
        let mut entries = h.entries();
        while let Some(e) = entries.next().map_err(bad)? {
            let r = e.range();
            list.extend(table_range(r.begin, r.end, link_base));
        }
    }
    map.retain(|_, v| !v.is_empty());
    Ok(map)
}

/// A unit's ranges from its root DIE; `None` when it has none (or they are unreadable).
fn root_ranges(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    link_base: u64,
) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut entries = unit.entries();
    let Ok(Some(root)) = entries.next_dfs() else {
        return None;
    };
    if dwarf_builder::pc_range_overflows(unit.unit_ref(dwarf), root) {
        return None;
    }
    let Ok(mut ranges) = dwarf.die_ranges(unit, root) else {
        return None;
    };
    loop {
        match ranges.next() {
            Ok(Some(r)) => out.extend(table_range(r.begin, r.end, link_base)),
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The address ranges of a unit's line sequences (glibc's units have sequences reaching
/// past their `.debug_aranges` ranges); `None` when the line program is unreadable.
fn line_sequences(unit: &gimli::Unit<R<'_>>, link_base: u64) -> Option<Vec<(u64, u64)>> {
    let Some(program) = unit.line_program.clone() else {
        return Some(Vec::new());
    };
    let (_, sequences) = program.sequences().ok()?;
    Some(
        sequences
            .iter()
            .filter_map(|s| table_range(s.start, s.end, link_base))
            .collect(),
    )
}

/// Line programs' sequences read ahead of the units ([`all_sequences`]).
struct ReadAhead {
    /// By `.debug_line` offset; `None` for unreadable opcodes.
    programs: rustc_hash::FxHashMap<usize, Option<Vec<(u64, u64)>>>,
    /// The address size they were read with.
    address_size: u8,
}

/// The line sequences of every line program in `.debug_line`, by offset, read one after
/// the other from the section's start with `address_size` (DWARF 5 headers give their
/// own), without building rows (`super::line_sequences`). `None` for a program whose opcodes
/// gimli cannot read. This needs nothing of `.debug_info`, so it runs while another
/// thread inflates that; a unit whose program is not here is read by [`line_sequences`].
fn all_sequences(debug_line: R<'_>, address_size: u8, link_base: u64) -> ReadAhead {
    let mut out = ReadAhead {
        programs: Default::default(),
        address_size,
    };
    for program in super::line_sequences::all_programs(debug_line, address_size) {
        let sequences = match program.sequences {
            Sequences::Read(s) => Some(
                s.iter()
                    .filter_map(|&(start, end)| table_range(start, end, link_base))
                    .collect(),
            ),
            Sequences::Unreadable => None,
            // left to gimli, by the unit
            Sequences::Skipped => continue,
        };
        out.programs.insert(program.offset, sequences);
    }
    out
}

/// A unit's ranges: `.debug_aranges`' (else its root DIE's) and its line sequences'
/// (from `sequences`, read ahead by [`all_sequences`] with `address_size`, where it has
/// the unit's program, and added to `lines` too); `None` when they are unknown.
fn unit_ranges(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    aranges: Option<Vec<(u64, u64)>>,
    read_ahead: &ReadAhead,
    link_base: u64,
    lines: &mut Vec<(u64, u64)>,
) -> Option<Vec<(u64, u64)>> {
    let mut ranges = match aranges {
        Some(r) => r,
        None => match root_ranges(dwarf, unit, link_base) {
            Some(r) => r,
            // a unit that cannot hold a function or an inlined call (types only, as a
            // header's every includer repeats them) has only its line sequences' ranges
            None if codeless(dwarf, &unit.header) => Vec::new(),
            None => return None,
        },
    };
    let ahead = unit
        .line_program
        .as_ref()
        .filter(|_| unit.header.address_size() == read_ahead.address_size)
        .and_then(|p| read_ahead.programs.get(&p.header().offset().0));
    let from = ranges.len();
    match ahead {
        Some(lines) => ranges.extend(lines.as_ref()?.iter().copied()),
        None => ranges.extend(line_sequences(unit, link_base)?),
    }
    lines.extend(ranges.get(from..).unwrap_or(&[]).iter().copied());
    Some(ranges)
}

/// Whether no DIE of the unit of `header` can be a function or an inlined call with an
/// address: its abbreviation table has no `DW_TAG_subprogram` or
/// `DW_TAG_inlined_subroutine` entry carrying `DW_AT_low_pc`, `DW_AT_high_pc`,
/// `DW_AT_ranges` or `DW_AT_entry_pc` (every DIE is laid out by an entry of that table, and
/// the builder takes records from those DIEs only, `builders::dwarf::read_dies`). A unit
/// of types alone has no root ranges and no `.debug_aranges` entries: without this proof
/// it would be read for every table, and a debug file of thousands of such units (a C++
/// header's types repeated in every unit that includes it) declined whole.
fn codeless(dwarf: &gimli::Dwarf<R<'_>>, header: &gimli::UnitHeader<R<'_>>) -> bool {
    use gimli::Section;
    table_without_code(*dwarf.debug_abbrev.reader(), header.debug_abbrev_offset().0) == Some(true)
}

/// Reads the abbreviation table at `at` in `section` to its end ([`table_entries`]):
/// `Some(true)` when no entry is a code DIE with an address attribute (see [`codeless`]),
/// `None` when the table is cut short or unreadable.
fn table_without_code(section: R<'_>, at: usize) -> Option<bool> {
    let mut without = true;
    table_entries(section, at, |entry| {
        let code = entry.tag == u64::from(gimli::DW_TAG_subprogram.0)
            || entry.tag == u64::from(gimli::DW_TAG_inlined_subroutine.0);
        without &= !(code && entry.address);
    })?;
    Some(without)
}

/// One entry of an abbreviation table, as [`table_entries`] reads it.
struct TableEntry {
    code: u64,
    tag: u64,
    /// Where it lies in the section.
    place: Range<usize>,
    /// Whether it has `DW_AT_low_pc`, `DW_AT_high_pc`, `DW_AT_ranges` or `DW_AT_entry_pc`.
    address: bool,
}

/// Calls `each` on every entry of the abbreviation table at `at` in `section`, in order,
/// skipping through it without building anything; `None` when the table is cut short
/// (read to its end, as gimli would) or unreadable.
fn table_entries(section: R<'_>, at: usize, mut each: impl FnMut(TableEntry)) -> Option<()> {
    use gimli::Reader;
    const ADDRESSES: [gimli::DwAt; 4] = [
        gimli::DW_AT_low_pc,
        gimli::DW_AT_high_pc,
        gimli::DW_AT_ranges,
        gimli::DW_AT_entry_pc,
    ];
    let mut table = section;
    table.skip(at).ok()?;
    loop {
        let start = table.offset_from(section);
        let code = table.read_uleb128().ok()?;
        if code == 0 {
            return Some(());
        }
        let tag = table.read_uleb128().ok()?;
        table.read_u8().ok()?; // children
        let mut address = false;
        loop {
            let name = table.read_uleb128().ok()?;
            let form = table.read_uleb128().ok()?;
            if form == u64::from(gimli::DW_FORM_implicit_const.0) {
                table.read_sleb128().ok()?;
            }
            if name == 0 && form == 0 {
                break;
            }
            address |= ADDRESSES.iter().any(|a| u64::from(a.0) == name);
        }
        let place = start..table.offset_from(section);
        each(TableEntry {
            code,
            tag,
            place,
            address,
        });
    }
}

/// Sorts ranges and merges those that overlap or touch.
fn merge(ranges: &mut Vec<(u64, u64)>) {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *ranges = out;
}

/// One unit as the index reads it.
struct ReadUnit {
    offset: usize,
    end: usize,
    /// Its ranges, merged later; `None` when unknown.
    ranges: Option<Vec<(u64, u64)>>,
    childless: bool,
    /// Its line sequences.
    lines: Vec<(u64, u64)>,
}

/// The abbreviation of each unit's root DIE, alone: all the index reads of a unit is its
/// root, and gimli parsing libc's 1,600 tables whole (each entry's attributes into a
/// vector, each code into a map) was a sixth of a cold walk. A unit's table is skipped
/// through without building anything, to learn where the root's entry lies (gcc orders
/// entries by use, so the unit's own comes last), and that entry is parsed alone. Only
/// that place is kept, by table and code: a map of every table's codes held 2.7 MB at the
/// cold walk's peak (issue 40).
struct RootAbbreviations<'d> {
    debug_abbrev: R<'d>,
    /// By table offset and root code: where the code's entry lies in `.debug_abbrev`, or
    /// `None` for a table that cannot be skipped through or lacks it.
    roots: rustc_hash::FxHashMap<(usize, u64), Option<Range<usize>>>,
}

impl<'d> RootAbbreviations<'d> {
    fn new(dwarf: &gimli::Dwarf<R<'d>>) -> Self {
        use gimli::Section;
        RootAbbreviations {
            debug_abbrev: *dwarf.debug_abbrev.reader(),
            roots: Default::default(),
        }
    }

    /// `header`'s root abbreviation alone. `None` when its table ends first or gimli
    /// refuses the entry: then the caller parses the whole table. A unit whose other
    /// entries are malformed is read here though the builder skips it: its ranges only
    /// make the index read more, never answer otherwise.
    fn of(&mut self, header: &gimli::UnitHeader<R<'d>>) -> Option<gimli::Abbreviations> {
        use gimli::Reader;
        let mut root = header.range_from(header.root_offset()..).ok()?;
        let code = root.read_uleb128().ok()?;
        let at = header.debug_abbrev_offset().0;
        let section = self.debug_abbrev;
        let place = self
            .roots
            .entry((at, code))
            .or_insert_with(|| entry_of(section, at, code))
            .clone()?;
        let entry = section.slice().get(place)?;
        let mut alone = Vec::with_capacity(entry.len().saturating_add(1));
        alone.extend_from_slice(entry);
        alone.push(0);
        gimli::DebugAbbrev::new(&alone, section.endian())
            .abbreviations(gimli::DebugAbbrevOffset(0))
            .ok()
    }
}

/// Where the entry of `code` in the abbreviation table at `at` lies in `section` (the
/// first of that code, as gimli refuses a table with two). `None` when the table is cut
/// short (read to its end, as gimli would) or has no such entry.
fn entry_of(section: R<'_>, at: usize, code: u64) -> Option<Range<usize>> {
    let mut found = None;
    table_entries(section, at, |entry| {
        if entry.code == code && found.is_none() {
            found = Some(entry.place);
        }
    })?;
    found
}

/// Reads the roots and ranges of the units of `headers` (in order).
fn read_units(
    dwarf: &gimli::Dwarf<R<'_>>,
    headers: &[gimli::UnitHeader<R<'_>>],
    by_aranges: &rustc_hash::FxHashMap<usize, Vec<(u64, u64)>>,
    read_ahead: &ReadAhead,
    link_base: u64,
) -> Result<Vec<ReadUnit>, Declined> {
    let mut out = Vec::with_capacity(headers.len());
    let mut roots = RootAbbreviations::new(dwarf);
    for header in headers {
        let offset = header.offset().0;
        let mut read = ReadUnit {
            offset,
            end: offset.saturating_add(header.length_including_self()),
            ranges: Some(Vec::new()),
            childless: false,
            lines: Vec::new(),
        };
        let unit = match roots.of(header) {
            Some(abbreviations) => {
                gimli::Unit::new_with_abbreviations(dwarf, *header, Arc::new(abbreviations))
            }
            None => dwarf.unit(*header),
        };
        match unit {
            Ok(unit) if unit.dwo_id.is_some() => {
                return Err(Declined("split DWARF: a unit refers to a .dwo file"));
            }
            Ok(unit) => {
                let mut entries = unit.entries();
                read.childless =
                    matches!(entries.next_dfs(), Ok(Some(root)) if !root.has_children());
                let listed = by_aranges.get(&offset).cloned();
                read.ranges =
                    unit_ranges(dwarf, &unit, listed, read_ahead, link_base, &mut read.lines);
            }
            // the builder skips it too: no records
            Err(_) => {}
        }
        out.push(read);
    }
    Ok(out)
}

impl UnitIndex {
    /// Indexes the units of `sections`. Two threads: this one inflates `.debug_info` and
    /// reads each unit's root, another inflates the other sections and runs every line
    /// program ([`all_sequences`]) meanwhile — together most of a cold walk's time.
    fn build(sections: &Sections, link_base: u64) -> Result<UnitIndex, Declined> {
        let address_size = sections.address_size;
        let read_lines = || {
            for id in SECTION_IDS {
                if id != gimli::SectionId::DebugInfo {
                    sections.get(id);
                }
            }
            let line =
                gimli::EndianSlice::new(sections.get(gimli::SectionId::DebugLine), sections.endian);
            all_sequences(line, address_size, link_base)
        };
        let (dwarf, sequences) = std::thread::scope(|s| {
            let lines = std::thread::Builder::new()
                .name("line-programs".into())
                .spawn_scoped(s, read_lines);
            sections.get(gimli::SectionId::DebugInfo);
            let dwarf = sections.dwarf();
            let sequences = match lines {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => read_lines(),
            };
            (dwarf, sequences)
        });
        UnitIndex::of(&dwarf, &sequences, link_base)
    }

    fn of(
        dwarf: &gimli::Dwarf<R<'_>>,
        read_ahead: &ReadAhead,
        link_base: u64,
    ) -> Result<UnitIndex, Declined> {
        let by_aranges = aranges(dwarf, link_base)?;
        // The units the builder reads: up to the first unreadable header.
        let mut headers = Vec::new();
        let mut iter = dwarf.units();
        while let Ok(Some(header)) = iter.next() {
            if matches!(
                header.type_(),
                gimli::UnitType::Skeleton(_)
                    | gimli::UnitType::SplitCompilation(_)
                    | gimli::UnitType::SplitType { .. }
            ) {
                return Err(Declined("split DWARF: skeleton or split units"));
            }
            headers.push(header);
        }
        // Their roots (each unit's abbreviations parsed whole, by gimli) on two threads.
        let (first, second) = headers.split_at(headers.len() / 2);
        let read = |part: &[gimli::UnitHeader<R<'_>>]| {
            read_units(dwarf, part, &by_aranges, read_ahead, link_base)
        };
        let (a, b) = std::thread::scope(|s| {
            let other = std::thread::Builder::new()
                .name("unit-roots".into())
                .spawn_scoped(s, || read(second));
            let a = read(first);
            let b = match other {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => read(second),
            };
            (a, b)
        });
        let mut index = UnitIndex {
            units: Vec::new(),
            ranges: Vec::new(),
            pieces: Vec::new(),
            reach: Vec::new(),
            unranged: Vec::new(),
            lines: Vec::new(),
        };
        for unit in a?.into_iter().chain(b?) {
            let i = index.units.len();
            let from = index.ranges.len();
            match unit.ranges {
                Some(mut r) => {
                    merge(&mut r);
                    index.ranges.extend(r);
                }
                None => index.unranged.push(i),
            }
            index.lines.extend(unit.lines);
            index.units.push(UnitInfo {
                offset: unit.offset,
                end: unit.end,
                ranges: from..index.ranges.len(),
                childless: unit.childless,
            });
        }
        let named = |at: &usize| index.units.binary_search_by_key(at, |u| u.offset).is_ok();
        if !by_aranges.keys().all(named) {
            return Err(Declined(".debug_aranges names a unit that is not there"));
        }
        if index.unranged.len() > MAX_UNRANGED
            && index.unranged.len().saturating_mul(4) > index.units.len()
        {
            return Err(Declined("many units have no address ranges"));
        }
        index.sort_pieces();
        merge(&mut index.lines);
        Ok(index)
    }

    fn sort_pieces(&mut self) {
        for (i, u) in self.units.iter().enumerate() {
            for &(start, end) in self.ranges.get(u.ranges.clone()).unwrap_or(&[]) {
                self.pieces.push(Piece {
                    start,
                    end,
                    unit: i,
                });
            }
        }
        self.pieces
            .sort_unstable_by_key(|p| (p.start, p.end, p.unit));
        let mut reach = 0u64;
        self.reach = self
            .pieces
            .iter()
            .map(|p| {
                reach = reach.max(p.end);
                reach
            })
            .collect();
    }

    /// The least start of the ranges holding `x`.
    fn lowest_holding(&self, x: u64) -> Option<u64> {
        let i = self.reach.partition_point(|&r| r <= x);
        self.pieces.get(i).filter(|p| p.start <= x).map(|p| p.start)
    }

    /// Whether a unit whose root DIE has no children holds `x` in its ranges.
    fn in_childless_unit(&self, x: u64) -> bool {
        let first = self.reach.partition_point(|&r| r <= x);
        let last = self.pieces.partition_point(|p| p.start <= x);
        self.pieces
            .get(first..last)
            .unwrap_or(&[])
            .iter()
            .any(|p| p.end > x && self.units.get(p.unit).is_some_and(|u| u.childless))
    }

    /// Whether no unit's line sequence holds `x`.
    fn without_lines(&self, x: u64) -> bool {
        let i = self.lines.partition_point(|&(_, end)| end <= x);
        self.lines.get(i).is_none_or(|&(start, _)| start > x)
    }

    /// The index of the unit holding `.debug_info` offset `at`.
    fn unit_at(&self, at: usize) -> Option<usize> {
        let i = self
            .units
            .partition_point(|u| u.offset <= at)
            .checked_sub(1)?;
        self.units.get(i).filter(|u| at < u.end).map(|_| i)
    }

    /// Whether `start..=end` lies within one range of the unit at `.debug_info` offset
    /// `at` (always, for a unit without ranges: it is read for every table).
    fn inside(&self, at: usize, start: u32, end: u32) -> bool {
        let Some(u) = self.unit_at(at).and_then(|i| self.units.get(i)) else {
            return false;
        };
        if u.ranges.is_empty() {
            // read for every table (or unreadable: no records)
            return true;
        }
        let (s, e) = (u64::from(start), u64::from(end));
        self.ranges
            .get(u.ranges.clone())
            .unwrap_or(&[])
            .iter()
            .any(|&(a, b)| a <= s && e <= b)
    }

    /// The `.debug_info` offsets of the units the table offsets `rels` need (see the
    /// module documentation), ascending. `symbols`: the symbol-table functions, sorted and
    /// disjoint.
    fn choose(&self, rels: &[u64], symbols: &[RawFunction]) -> Vec<usize> {
        let mut pick = vec![false; self.units.len()];
        for &u in &self.unranged {
            if let Some(p) = pick.get_mut(u) {
                *p = true;
            }
        }
        for &rel in rels {
            if rel >= MAX_ADDRESS {
                continue;
            }
            let mut low = self.lowest_holding(rel).unwrap_or(rel);
            let i = symbols.partition_point(|s| u64::from(s.start) <= rel);
            if let Some(s) = i.checked_sub(1).and_then(|i| symbols.get(i)) {
                let start = u64::from(s.start);
                if rel < u64::from(s.end) {
                    low = low
                        .min(start)
                        .min(self.lowest_holding(start).unwrap_or(start));
                }
            }
            let first = self.reach.partition_point(|&r| r < low);
            let last = self.pieces.partition_point(|p| p.start <= rel);
            for p in self.pieces.get(first..last).unwrap_or(&[]) {
                if p.end >= low {
                    if let Some(x) = pick.get_mut(p.unit) {
                        *x = true;
                    }
                }
            }
        }
        self.units
            .iter()
            .zip(pick)
            .filter(|(_, p)| *p)
            .map(|(u, _)| u.offset)
            .collect()
    }
}

/// The DWARF file of the inputs, indexed.
struct DwarfIndex {
    /// Which input it is.
    input: usize,
    sections: Sections,
    units: UnitIndex,
}

/// See the module documentation.
pub struct OnDemandSymbols {
    /// The binary (if given), then the debug files: the whole builder's input order.
    files: Vec<FileBytes>,
    has_binary: bool,
    link_base: u64,
    dwarf: Option<DwarfIndex>,
    /// The symbol-table functions, read once.
    symbols: OnceLock<builders::SymbolSets>,
    /// Set when a unit's records lie outside its ranges: every table is then the whole.
    distrust: AtomicBool,
    whole: OnceLock<Result<BuiltSymbols, SymbolsError>>,
    facts: OnceLock<(Vec<usize>, Vec<SymbolSource>)>,
}

impl std::fmt::Debug for OnDemandSymbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.dwarf.as_ref();
        f.debug_struct("OnDemandSymbols")
            .field("files", &self.files.len())
            .field("units", &d.map_or(0, |d| d.units.units.len()))
            .field("unranged", &d.map_or(0, |d| d.units.unranged.len()))
            .finish()
    }
}

impl OnDemandSymbols {
    /// Same inputs as [`build_symbol_table`]`(binary, debug_files)`. `Err(Declined(reason))`
    /// when on-demand answers could differ, so the caller builds the whole table.
    pub fn new(
        binary: Option<FileBytes>,
        debug_files: &[FileBytes],
    ) -> Result<OnDemandSymbols, Declined> {
        let has_binary = binary.is_some();
        let files: Vec<FileBytes> = binary
            .into_iter()
            .chain(debug_files.iter().cloned())
            .collect();
        let parsed = files
            .iter()
            .map(|f| builders::parse(bytes(f)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Declined("a file is not one the builder reads"))?;
        let first = parsed
            .first()
            .ok_or(Declined("no binary and no debug file"))?;
        let link_base = binary::link_base(first);
        let all: Vec<&object::File<'_>> = parsed.iter().collect();
        let dwarf = match builders::dwarf_input(&all, has_binary) {
            Some(input) => {
                let (Some(file), Some(bytes)) = (all.get(input), files.get(input)) else {
                    return Err(Declined("no such input"));
                };
                if file.section_by_name(".debug_types").is_some() {
                    return Err(Declined("DWARF 4 type units (.debug_types)"));
                }
                let sections = Sections {
                    file: bytes.clone(),
                    endian: dwarf_builder::endian(file),
                    address_size: if file.is_64() { 8 } else { 4 },
                    cells: std::array::from_fn(|_| OnceLock::new()),
                };
                let units = UnitIndex::build(&sections, link_base)?;
                Some(DwarfIndex {
                    input,
                    sections,
                    units,
                })
            }
            None => None,
        };
        Ok(OnDemandSymbols {
            files,
            has_binary,
            link_base,
            dwarf,
            symbols: OnceLock::new(),
            distrust: AtomicBool::new(false),
            whole: OnceLock::new(),
            facts: OnceLock::new(),
        })
    }

    fn parse_all(&self) -> Result<Vec<object::File<'_>>, SymbolsError> {
        self.files
            .iter()
            .map(|f| builders::parse(bytes(f)))
            .collect()
    }

    fn symbols(&self, all: &[&object::File<'_>]) -> &builders::SymbolSets {
        self.symbols
            .get_or_init(|| builders::symbol_sets(all, self.link_base))
    }

    /// The whole table, built once.
    fn whole(&self) -> Result<BuiltSymbols, SymbolsError> {
        self.whole
            .get_or_init(|| {
                let mut inputs = self.files.iter().map(bytes);
                let binary = if self.has_binary { inputs.next() } else { None };
                let debug: Vec<&[u8]> = inputs.collect();
                build_symbol_table(binary, &debug)
            })
            .clone()
    }

    /// A table built from what the sorted, deduplicated table offsets `rels` need;
    /// `SymbolTable::open(&built.bytes)?.lookup(rel, ..)` equals the whole table's for
    /// every rel in `rels`. Its `sources`, `inputs` and counts are this table's; the whole
    /// table's sources and inputs are [`Self::sources`] and [`Self::inputs`].
    pub fn symbols_for(&self, rels: &[u64]) -> Result<BuiltSymbols, SymbolsError> {
        if self.distrust.load(Ordering::Relaxed) {
            return self.whole();
        }
        let parsed = self.parse_all()?;
        let all: Vec<&object::File<'_>> = parsed.iter().collect();
        let mut c = Collector::new(self.link_base);
        if let Some(d) = &self.dwarf {
            let units = d.units.choose(rels, &self.symbols(&all).0);
            let unit_of = |at: usize| {
                let i = d.units.unit_at(at)?;
                d.units.units.get(i).map(|u| u.offset)
            };
            let inside = |at: usize, s: u32, e: u32| d.units.inside(at, s, e);
            let plan = UnitPlan {
                units: &units,
                unit_of: &unit_of,
                inside: &inside,
            };
            if !dwarf_builder::collect_units(&d.sections.dwarf(), &plan, &mut c) {
                self.distrust.store(true, Ordering::Relaxed);
                return self.whole();
            }
            c.set_input(d.input);
        }
        let symbols = c.add_symbols(&self.symbols(&all).1, rels);
        builders::finish(c, symbols)?.into_built()
    }

    /// Whether tables are still built from the units needed (false once a unit's records
    /// were found outside its ranges: every table is the whole one since). For tests.
    #[doc(hidden)]
    pub fn trusts_ranges(&self) -> bool {
        !self.distrust.load(Ordering::Relaxed)
    }

    /// Whether the whole table was built (to settle [`Self::inputs`], or after a unit's
    /// records were found outside its ranges). For tests.
    #[doc(hidden)]
    pub fn built_whole(&self) -> bool {
        self.whole.get().is_some()
    }

    /// Which inputs the whole build's `BuiltSymbols::inputs` lists (0 = the binary if
    /// given, then the debug files).
    pub fn inputs(&self) -> Vec<usize> {
        self.facts().0.clone()
    }

    /// The whole build's `BuiltSymbols::sources`.
    pub fn sources(&self) -> Vec<SymbolSource> {
        self.facts().1.clone()
    }

    fn facts(&self) -> &(Vec<usize>, Vec<SymbolSource>) {
        self.facts.get_or_init(|| {
            self.contributors().unwrap_or_else(|| {
                self.whole()
                    .map_or_else(|_| Default::default(), |b| (b.inputs, b.sources))
            })
        })
    }

    /// The whole table's (inputs, sources), or `None` when the index cannot settle them.
    fn contributors(&self) -> Option<(Vec<usize>, Vec<SymbolSource>)> {
        let parsed = self.parse_all().ok()?;
        let all: Vec<&object::File<'_>> = parsed.iter().collect();
        let symbols = &self.symbols(&all).0;
        let mut present: BTreeSet<(usize, SymbolSource)> = BTreeSet::new();
        let group = |s: &RawFunction| (usize::from(s.input), s.source);
        match &self.dwarf {
            None => present.extend(symbols.iter().map(group)),
            Some(d) => {
                if self.has_dwarf_function(d)? {
                    present.insert((d.input, SymbolSource::Dwarf));
                }
                self.surviving_symbols(d, symbols, &mut present)?;
            }
        }
        let mut inputs: Vec<usize> = present.iter().map(|g| g.0).collect();
        inputs.dedup();
        let mut sources: Vec<SymbolSource> = present.iter().map(|g| g.1).collect();
        sources.sort_unstable();
        sources.dedup();
        Some((inputs, sources))
    }

    /// Whether the whole table has a DWARF function: tables for the first range of a few
    /// units at a time have one. `None` when the units probed have none but others remain.
    /// Units that describe something (their root has children) come first, smallest
    /// first, and the first round is of two: one such unit almost always settles it, and
    /// each unit probed is read whole.
    fn has_dwarf_function(&self, d: &DwarfIndex) -> Option<bool> {
        let u = &d.units;
        let mut units: Vec<&UnitInfo> = u.units.iter().collect();
        units.sort_by_key(|x| (x.childless, x.end.saturating_sub(x.offset)));
        let mut starts: Vec<u64> = units
            .iter()
            .filter_map(|x| u.ranges.get(x.ranges.clone())?.first().map(|r| r.0))
            .collect();
        if starts.is_empty() {
            // a table for any address reads the units without ranges
            starts.push(0);
        }
        let mut probed = 0;
        for round in 0..DWARF_PROBE_ROUNDS {
            let take = if round == 0 { 2 } else { DWARF_PROBES };
            let Some(chunk) = starts.get(probed..starts.len().min(probed + take)) else {
                break;
            };
            probed += chunk.len();
            let mut rels = chunk.to_vec();
            rels.sort_unstable();
            rels.dedup();
            let built = self.symbols_for(&rels).ok()?;
            if built.sources.contains(&SymbolSource::Dwarf) {
                return Some(true);
            }
        }
        // every unit read: no DWARF function at all
        (probed >= starts.len()).then_some(false)
    }

    /// Adds the (input, source) of the symbol-table functions that DWARF leaves uncovered
    /// in the whole table: one outside every unit's ranges does, else one whose start's
    /// lookup answers with it. `None` when a group with more than [`SYMBOL_PROBES`]
    /// functions inside DWARF's ranges has none of its probes left uncovered.
    fn surviving_symbols(
        &self,
        d: &DwarfIndex,
        symbols: &[RawFunction],
        present: &mut BTreeSet<(usize, SymbolSource)>,
    ) -> Option<()> {
        type Probes = std::collections::BTreeMap<(usize, SymbolSource), (Vec<u32>, bool)>;
        let mut all: Probes = Default::default();
        for s in symbols {
            let g = (usize::from(s.input), s.source);
            if present.contains(&g) {
                continue;
            }
            if d.units.lowest_holding(u64::from(s.start)).is_none() && d.units.unranged.is_empty() {
                present.insert(g);
                continue;
            }
            all.entry(g).or_default().0.push(s.start);
        }
        all.retain(|g, _| !present.contains(g));
        // A group's probes are first those DWARF likely leaves uncovered — outside every
        // unit's ranges (libgcc's soft-float in a libc), in units that describe no
        // function (assembly), or where no line sequence is (top-level `asm` in a C
        // file) — and then, if none of those settles it, some spread over the whole list:
        // one found settles the group. Each probe reads the units around it.
        let mut likely: Probes = Default::default();
        let mut spread: Probes = Default::default();
        for (g, (list, _)) in all {
            if list.len() <= SYMBOL_PROBES {
                spread.insert(g, (list, false));
                continue;
            }
            let (first, rest): (Vec<u32>, Vec<u32>) = list.iter().partition(|&&s| {
                let s = u64::from(s);
                d.units.lowest_holding(s).is_none()
                    || d.units.in_childless_unit(s)
                    || d.units.without_lines(s)
            });
            let first: Vec<u32> = first.into_iter().take(SYMBOL_PROBES / 2).collect();
            let step = (rest.len() / SYMBOL_PROBES.max(1)).max(1);
            let rest: Vec<u32> = rest.into_iter().step_by(step).take(SYMBOL_PROBES).collect();
            if !first.is_empty() {
                likely.insert(g, (first, false));
            }
            spread.insert(g, (rest, true));
        }
        self.keep_found(likely, present)?;
        spread.retain(|g, _| !present.contains(g));
        self.keep_found(spread, present)
    }

    /// Adds to `present` each group of `probes` one of whose probed functions the lookup
    /// at its start answers with. `None` when a group marked as having more functions
    /// than were probed has none.
    fn keep_found(
        &self,
        probes: std::collections::BTreeMap<(usize, SymbolSource), (Vec<u32>, bool)>,
        present: &mut BTreeSet<(usize, SymbolSource)>,
    ) -> Option<()> {
        if probes.is_empty() {
            return Some(());
        }
        let mut rels: Vec<u64> = probes
            .values()
            .flat_map(|(l, _)| l.iter().map(|&s| u64::from(s)))
            .collect();
        rels.sort_unstable();
        rels.dedup();
        let built = self.symbols_for(&rels).ok()?;
        let table = SymbolTable::open(&built.bytes).ok()?;
        let mut frames = Vec::new();
        for (g, (list, more)) in probes {
            let kept = list.iter().any(|&start| {
                frames.clear();
                table.lookup(u64::from(start), &mut frames);
                frames
                    .last()
                    .is_some_and(|f| f.function_start == Some(u64::from(start)) && f.source == g.1)
            });
            if kept {
                present.insert(g);
            } else if more {
                return None;
            }
        }
        Some(())
    }
}

/// As the whole build always gives a table (one without functions when the files name
/// nothing), an on-demand module always has symbols to look in; its sources are the
/// whole table's.
impl super::SymbolIndex for OnDemandSymbols {
    fn symbols_for(&self, rels: &[u64]) -> Result<BuiltSymbols, SymbolsError> {
        OnDemandSymbols::symbols_for(self, rels)
    }
    fn has_symbols(&self) -> bool {
        true
    }
    fn sources(&self) -> Vec<SymbolSource> {
        OnDemandSymbols::sources(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(bytes: &[u8]) -> R<'_> {
        gimli::EndianSlice::new(bytes, gimli::RunTimeEndian::Little)
    }

    #[test]
    fn abbreviation_entries_are_found_by_code_in_one_pass() {
        // at 1: code 2 (DW_TAG_subprogram, no children, DW_AT_name strp), code 1
        // (DW_TAG_compile_unit, children, DW_AT_language implicit_const -7), a second code
        // 2, then the end
        let bytes = [
            0xff, // another table's last byte
            2, 0x2e, 0, 0x03, 0x0e, 0, 0, //
            1, 0x11, 1, 0x13, 0x21, 0x79, 0, 0, //
            2, 0x24, 0, 0, 0, //
            0,
        ];
        let of = |bytes: &[u8], code| entry_of(section(bytes), 1, code);
        assert_eq!(of(&bytes, 2), Some(1..8), "the first entry of a code");
        assert_eq!(of(&bytes, 1), Some(8..16), "with an implicit_const operand");
        assert_eq!(of(&bytes, 3), None, "no such code");
        // cut short: no terminator, or inside an entry (even after the code's entry)
        assert_eq!(of(&bytes[..21], 1), None);
        assert_eq!(of(&bytes[..12], 2), None);
        assert_eq!(entry_of(section(&bytes), 99, 1), None);
        // the entry alone is what gimli parses
        let alone = [&bytes[8..16], &[0][..]].concat();
        let parsed = gimli::DebugAbbrev::new(&alone, gimli::LittleEndian)
            .abbreviations(gimli::DebugAbbrevOffset(0))
            .unwrap_or_default();
        let root = parsed.get(1).map(|a| (a.tag(), a.has_children()));
        assert_eq!(root, Some((gimli::DW_TAG_compile_unit, true)));
    }

    #[test]
    fn a_table_without_code_entries_is_told_from_one_with_them() {
        // at 1: code 1 DW_TAG_compile_unit (DW_AT_name strp), code 2 DW_TAG_structure_type
        // (DW_AT_low_pc addr: an address, but not on a code DIE), code 3 DW_TAG_subprogram
        // (DW_AT_name, DW_AT_declaration flag_present: a declaration, no address)
        let types = [
            0xff, //
            1, 0x11, 1, 0x03, 0x0e, 0, 0, //
            2, 0x13, 1, 0x11, 0x01, 0, 0, //
            3, 0x2e, 0, 0x03, 0x0e, 0x3c, 0x19, 0, 0, //
            0,
        ];
        let without = |bytes: &[u8]| table_without_code(section(bytes), 1);
        assert_eq!(without(&types), Some(true), "types and a declaration");
        for (attr, form) in [(0x11, 0x01), (0x12, 0x06), (0x55, 0x17), (0x52, 0x01)] {
            // the subprogram with DW_AT_low_pc / high_pc / ranges / entry_pc
            let mut code = types.to_vec();
            code.splice(22..22, [attr, form]);
            assert_eq!(without(&code), Some(false), "attribute {attr:#x}");
            // the same on an inlined call (DW_TAG_inlined_subroutine)
            code[16] = 0x1d;
            assert_eq!(without(&code), Some(false), "inlined, attribute {attr:#x}");
        }
        // with an implicit_const operand before the end
        let mut implicit = types.to_vec();
        implicit.splice(22..22, [0x3a, 0x21, 0x7f]);
        assert_eq!(without(&implicit), Some(true));
        // cut short: unknown, never "without"
        assert_eq!(without(&types[..types.len() - 1]), None);
        assert_eq!(without(&types[..10]), None);
        assert_eq!(table_without_code(section(&types), 99), None);
    }
}
