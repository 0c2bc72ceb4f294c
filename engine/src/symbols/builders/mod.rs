//! Building a symbol table from a binary and its debug files.
//!
//! [`dwarf`] contributes functions, line rows and inline records (or [`pdb`], for a
//! Windows image whose PDB is given); [`symtab`] contributes `.symtab` then `.dynsym`
//! functions (COFF symbols and exports for PE) for the addresses DWARF leaves uncovered. This module
//! holds the shared [`Collector`] (string and file interning, address conversion) and the
//! final merge that makes function ranges disjoint and sorts everything for [`format`].
//! A bad unit or symbol is skipped with a warning, never fatal.

pub(crate) mod dwarf;
pub(crate) mod pdb;
pub(crate) mod symtab;

use rustc_hash::FxHashMap;

use super::format::{self, FunctionRecord, InlineRecord, LineRecord, TableParts, MAX_ADDRESS};
use super::{SymbolSource, SymbolsError};
use crate::binary;

/// A built table and what went into it.
#[derive(Debug, Clone)]
pub struct BuiltSymbols {
    /// The serialized table, to open with [`super::SymbolTable::open`].
    pub bytes: Vec<u8>,
    /// The sources that contributed at least one function.
    pub sources: Vec<SymbolSource>,
    /// The input files that contributed at least one function, by index in the builder's
    /// order (the binary, if given, then the debug files): which files gave symbols.
    pub inputs: Vec<usize>,
    pub functions: usize,
    pub line_rows: usize,
    pub inline_records: usize,
    /// Skipped units, sections and ranges, one sentence each.
    pub warnings: Vec<String>,
}

/// At most this many warnings are kept; further ones are only counted.
const MAX_WARNINGS: usize = 64;

/// A function range before the final merge.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawFunction {
    pub start: u32,
    pub end: u32,
    pub name: u32,
    pub source: SymbolSource,
    /// Which input file it came from (the builder's order: the binary, then debug files).
    pub input: u16,
}

/// Accumulates the parts of a table while the sources are read.
pub(crate) struct Collector {
    link_base: u64,
    strings: Vec<u8>,
    string_ids: FxHashMap<Box<str>, u32>,
    files: Vec<u32>,
    file_ids: FxHashMap<u32, u32>,
    pub functions: Vec<RawFunction>,
    pub lines: Vec<LineRecord>,
    /// (depth, record)
    pub inlines: Vec<(u32, InlineRecord)>,
    warnings: Vec<String>,
    dropped_warnings: usize,
    too_large: bool,
}

impl Collector {
    pub(crate) fn new(link_base: u64) -> Self {
        Collector {
            link_base,
            strings: Vec::new(),
            string_ids: FxHashMap::default(),
            files: Vec::new(),
            file_ids: FxHashMap::default(),
            functions: Vec::new(),
            lines: Vec::new(),
            inlines: Vec::new(),
            warnings: Vec::new(),
            dropped_warnings: 0,
            too_large: false,
        }
    }

    pub fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        } else {
            self.dropped_warnings += 1;
        }
    }

    /// A file address as a table address (offset from the link base), if representable.
    pub fn offset(&self, svma: u64) -> Option<u32> {
        let off = binary::svma_to_offset(svma, self.link_base)?;
        if off >= MAX_ADDRESS {
            return None;
        }
        u32::try_from(off).ok()
    }

    /// A range of file addresses as table addresses; `end` may equal [`MAX_ADDRESS`].
    pub fn range(&self, begin: u64, end: u64) -> Option<(u32, u32)> {
        let start = self.offset(begin)?;
        let end = binary::svma_to_offset(end, self.link_base)?;
        let end = u32::try_from(end.min(MAX_ADDRESS - 1)).ok()?;
        (start < end).then_some((start, end))
    }

    /// The string offset of `s`, interned.
    pub fn string(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let (Ok(id), Ok(len)) = (u32::try_from(self.strings.len()), u32::try_from(s.len())) else {
            self.too_large = true;
            return format::NONE;
        };
        if id == format::NONE {
            self.too_large = true;
            return format::NONE;
        }
        self.strings.extend_from_slice(&len.to_le_bytes());
        self.strings.extend_from_slice(s.as_bytes());
        self.string_ids.insert(s.into(), id);
        id
    }

    /// The file-table index of a path, interned.
    pub fn file(&mut self, path: &str) -> u32 {
        let s = self.string(path);
        if let Some(&id) = self.file_ids.get(&s) {
            return id;
        }
        let Ok(id) = u32::try_from(self.files.len()) else {
            self.too_large = true;
            return format::NONE;
        };
        self.files.push(s);
        self.file_ids.insert(s, id);
        id
    }
}

pub(crate) fn parse(data: &[u8]) -> Result<object::File<'_>, SymbolsError> {
    object::File::parse(data).map_err(|e| SymbolsError::Object(e.to_string()))
}

/// Builds the symbol table of a binary from the binary itself (its `.symtab`, `.dynsym`
/// and DWARF, if not stripped) and its separate debug files (DWARF and `.symtab`). DWARF is
/// read from the first debug file that has `.debug_info`, else from the binary.
///
/// A debug file that is a PDB (a Windows image's) gives the procedures, lines and inlined
/// calls instead of DWARF, and its public symbols fill the gaps before the image's own
/// COFF symbols and exports do.
pub fn build_symbol_table(
    binary: Option<&[u8]>,
    debug_files: &[&[u8]],
) -> Result<BuiltSymbols, SymbolsError> {
    let has_binary = binary.is_some();
    let binary = binary.map(parse).transpose()?;
    // the builder's order of inputs: the binary, then the debug files
    let first_debug = usize::from(has_binary);
    let pdb_input = debug_files
        .iter()
        .position(|d| pdb::is_pdb(d))
        .map(|i| (first_debug + i, debug_files[i]));
    let mut debug = Vec::new();
    // which input each entry of `all` is
    let mut input_of: Vec<usize> = binary.iter().map(|_| 0).collect();
    for (i, d) in debug_files.iter().enumerate() {
        if !pdb::is_pdb(d) {
            debug.push(parse(d)?);
            input_of.push(first_debug + i);
        }
    }
    let link_base = match binary.as_ref().or(debug.first()) {
        Some(first) => binary::link_base(first),
        // a PDB alone: its addresses are relative to the image
        None if pdb_input.is_some() => 0,
        None => return Err(SymbolsError::NoInput),
    };
    let mut c = Collector::new(link_base);
    let all: Vec<&object::File<'_>> = binary.iter().chain(debug.iter()).collect();
    let mut publics = Vec::new();
    if let Some((input, bytes)) = pdb_input {
        publics = pdb::collect(bytes, &mut c);
        c.set_input(input);
        set_input(&mut publics, input);
        // code the PDB does not describe (a mingw program's C runtime, built by gcc)
        // keeps the names and lines its DWARF gives
        if let Some(i) = dwarf_input(&all, has_binary) {
            dwarf_outside(all[i], &mut c, input_of.get(i).copied().unwrap_or(i));
        }
    } else if let Some(i) = dwarf_input(&all, has_binary) {
        dwarf::collect(all[i], &mut c);
        c.set_input(input_of.get(i).copied().unwrap_or(i));
    }
    let mut symbols = symtab::collect(&all, &mut c);
    for f in &mut symbols {
        f.input = input_of
            .get(usize::from(f.input))
            .and_then(|&i| u16::try_from(i).ok())
            .unwrap_or(u16::MAX);
    }
    // the PDB's publics and the image's own symbols fill the procedures' gaps together
    publics.append(&mut symbols);
    finish(c, publics)?.into_built()
}

/// Adds the DWARF of `file` (input `input`) where the functions collected so far (a PDB's)
/// cover nothing: its functions that overlap none of them, its line rows and inline
/// records outside them.
fn dwarf_outside(file: &object::File<'_>, c: &mut Collector, input: usize) {
    let merged = crate::ranges::merged(c.functions.iter().map(|f| (f.start, f.end)).collect());
    // whether [start, end) meets a covered range
    let overlaps = |start: u32, end: u32| {
        let i = merged.partition_point(|r| r.1 <= start);
        merged.get(i).is_some_and(|r| r.0 < end)
    };
    let (functions, lines, inlines) = (c.functions.len(), c.lines.len(), c.inlines.len());
    dwarf::collect(file, c);
    let mut added = c.functions.split_off(functions);
    added.retain(|f| !overlaps(f.start, f.end));
    set_input(&mut added, input);
    c.functions.append(&mut added);
    let mut added = c.lines.split_off(lines);
    added.retain(|l| !overlaps(l.address, l.address.saturating_add(1)));
    c.lines.append(&mut added);
    let mut added = c.inlines.split_off(inlines);
    added.retain(|(_, r)| !overlaps(r.start, r.end));
    c.inlines.append(&mut added);
}

fn set_input(functions: &mut [RawFunction], i: usize) {
    let input = u16::try_from(i).unwrap_or(u16::MAX);
    for f in functions {
        f.input = input;
    }
}

/// Which of `all` (the binary first if `has_binary`, then the debug files) DWARF is read
/// from: the first debug file that has `.debug_info`, else the binary.
pub(crate) fn dwarf_input(all: &[&object::File<'_>], has_binary: bool) -> Option<usize> {
    use object::Object;
    let has_dwarf = |f: &object::File<'_>| f.section_by_name(".debug_info").is_some();
    let b = usize::from(has_binary);
    (b..all.len())
        .chain(0..b)
        .find(|&i| all.get(i).is_some_and(|f| has_dwarf(f)))
}

impl Collector {
    /// Marks the functions collected so far as coming from input `i`.
    pub(crate) fn set_input(&mut self, i: usize) {
        set_input(&mut self.functions, i);
    }
}

/// The `.symtab`/`.dynsym` functions of `files`: as [`finish`] merges them (disjoint and
/// sorted, before DWARF's gaps are filled with them), and as [`symtab::collect`] returns
/// them, with their names (to add to a collector with [`Collector::add_symbols`]).
pub(crate) type SymbolSets = (Vec<RawFunction>, Vec<symtab::Unnamed>);

/// See [`SymbolSets`]. Nothing is demangled: the disjoint list's names are all 0 (its
/// starts are unique, as [`symtab::collect`] keeps one symbol per address, so names break
/// no tie in [`make_disjoint`]), and [`Collector::add_symbols`] names what a table needs.
pub(crate) fn symbol_sets(files: &[&object::File<'_>], link_base: u64) -> SymbolSets {
    let mut c = Collector::new(link_base);
    let unnamed = symtab::collect_unnamed(files, &mut c);
    let mut disjoint: Vec<RawFunction> = unnamed.iter().map(|n| n.function).collect();
    make_disjoint(&mut disjoint, &c.strings);
    (disjoint, unnamed)
}

impl Collector {
    /// Symbol-table functions read by [`symbol_sets`], interned here: what
    /// [`symtab::collect`] would return for this collector, except that a function whose
    /// range holds none of the offsets `rels` is left nameless (no lookup at those
    /// offsets can answer with it: a function answers only inside its range, and
    /// [`finish`] only shortens ranges).
    pub(crate) fn add_symbols(
        &mut self,
        named: &[symtab::Unnamed],
        rels: &[u64],
    ) -> Vec<RawFunction> {
        let mut rels = rels.to_vec();
        rels.sort_unstable();
        named
            .iter()
            .map(|n| {
                let f = n.function;
                let i = rels.partition_point(|&r| r < u64::from(f.start));
                let needed = rels.get(i).is_some_and(|&r| r < u64::from(f.end));
                let name = if needed {
                    self.string(&n.name())
                } else {
                    self.string("")
                };
                RawFunction { name, ..f }
            })
            .collect()
    }
}

pub(crate) struct Finished {
    table: TableParts,
    warnings: Vec<String>,
    /// The inputs that gave at least one of the table's functions.
    inputs: Vec<usize>,
}

impl Finished {
    /// The serialized table and what went into it (the sources of its functions).
    pub(crate) fn into_built(self) -> Result<BuiltSymbols, SymbolsError> {
        let Finished {
            table,
            warnings,
            inputs,
        } = self;
        let mut sources: Vec<SymbolSource> = table
            .functions
            .iter()
            .filter_map(|f| SymbolSource::from_code(f.source))
            .collect();
        sources.sort();
        sources.dedup();
        let (functions, line_rows) = (table.functions.len(), table.lines.len());
        let inline_records = table.inlines.iter().map(Vec::len).sum();
        Ok(BuiltSymbols {
            bytes: format::write(&table)?,
            sources,
            inputs,
            functions,
            line_rows,
            inline_records,
            warnings,
        })
    }
}

/// Makes sorted ranges disjoint: where one overlaps the next, it is cut at the next's start;
/// of ranges starting at one address (aliases) the longest wins, then the shortest name
/// (`__sigsetjmp` over `__GI___sigsetjmp`), then the first string.
fn make_disjoint(ranges: &mut Vec<RawFunction>, strings: &[u8]) {
    let name_len = |id: u32| {
        let at = id as usize;
        strings
            .get(at..at.saturating_add(4))
            .and_then(|b| b.try_into().ok())
            .map_or(u32::MAX, u32::from_le_bytes)
    };
    let name = |id: u32| {
        let at = (id as usize).saturating_add(4);
        strings.get(at..at.saturating_add(name_len(id) as usize))
    };
    // Ties between names of one length go to the smaller name, not the one interned first:
    // the choice must not depend on which other records the text holds (a table built
    // from part of a .sym file, see breakpad::index, chooses as the whole one does).
    ranges.sort_by_key(|f| {
        (
            f.start,
            std::cmp::Reverse(f.end),
            name_len(f.name),
            name(f.name),
        )
    });
    ranges.dedup_by_key(|f| f.start);
    for i in 1..ranges.len() {
        let next_start = ranges[i].start;
        let prev = &mut ranges[i - 1];
        if prev.end > next_start {
            prev.end = next_start;
        }
    }
}

/// Merges DWARF functions with symbol-table ones (which only fill DWARF's gaps), sorts
/// line rows and inline records.
pub(crate) fn finish(
    mut c: Collector,
    mut symbols: Vec<RawFunction>,
) -> Result<Finished, SymbolsError> {
    let mut functions = std::mem::take(&mut c.functions);
    make_disjoint(&mut functions, &c.strings);
    make_disjoint(&mut symbols, &c.strings);
    let dwarf_count = functions.len();
    for s in symbols {
        // First DWARF function starting after s.start, and whether the one before covers it.
        let i = functions[..dwarf_count].partition_point(|f| f.start <= s.start);
        if i > 0 && functions[i - 1].end > s.start {
            continue;
        }
        let end = functions[..dwarf_count]
            .get(i)
            .map_or(s.end, |next| s.end.min(next.start));
        if s.start < end {
            functions.push(RawFunction { end, ..s });
        }
    }
    functions.sort_by_key(|f| f.start);
    let mut inputs: Vec<usize> = functions.iter().map(|f| usize::from(f.input)).collect();
    inputs.sort_unstable();
    inputs.dedup();
    let functions: Vec<FunctionRecord> = functions
        .into_iter()
        .map(|f| FunctionRecord {
            start: f.start,
            end: f.end,
            name: f.name,
            source: f.source.code(),
        })
        .collect();

    // Line rows: end-of-sequence rows first at an address, so a real row there wins.
    let mut lines = std::mem::take(&mut c.lines);
    lines.sort_by_key(|l| (l.address, l.file != format::NONE));
    let mut deduped: Vec<LineRecord> = Vec::with_capacity(lines.len());
    for l in lines {
        match deduped.last_mut() {
            Some(last) if last.address == l.address => *last = l,
            _ => deduped.push(l),
        }
    }
    // Merge equal neighbours (same file, line, column): the first covers both.
    deduped.dedup_by(|b, a| a.file == b.file && a.line == b.line && a.column == b.column);

    let mut inlines: Vec<Vec<InlineRecord>> = Vec::new();
    for (depth, r) in std::mem::take(&mut c.inlines) {
        let d = depth as usize;
        if d >= inlines.len() {
            inlines.resize_with(d + 1, Vec::new);
        }
        inlines[d].push(r);
    }
    for level in &mut inlines {
        level.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
        level.dedup_by_key(|r| r.start);
        for i in 1..level.len() {
            let next_start = level[i].start;
            if level[i - 1].end > next_start {
                level[i - 1].end = next_start;
            }
        }
    }
    // An empty depth would end every chain early; the builder never skips one, but
    // trailing empties are harmless to drop.
    while inlines.last().is_some_and(Vec::is_empty) {
        inlines.pop();
    }
    if c.too_large {
        return Err(SymbolsError::TooLarge("strings or files"));
    }
    let mut warnings = std::mem::take(&mut c.warnings);
    if c.dropped_warnings > 0 {
        warnings.push(format!("{} more warnings", c.dropped_warnings));
    }
    let sources = functions
        .iter()
        .filter_map(|f| SymbolSource::from_code(f.source))
        .fold(0u32, |m, s| m | s.bit());
    Ok(Finished {
        table: TableParts {
            sources,
            functions,
            lines: deduped,
            inlines,
            files: c.files,
            strings: c.strings,
        },
        warnings,
        inputs,
    })
}
