//! Symbols from a Windows PDB: procedures, their line rows and inlined calls (`pdb` source),
//! and the public symbols (`publics` source) that name the code no procedure covers.
//!
//! A PDB names code by section and offset; the address map turns that into the image's
//! relative addresses, which are the table's offsets (a PE image's link base is its image
//! base). The file is read with the `pdb2` crate (the maintained fork of `pdb` that
//! pdb-addr2line and samply read PDBs with).
//!
//! How CodeView describes a procedure: its line block gives, for code inlined into it, the
//! line of the outermost call; each `S_INLINESITE` nested in it carries the inlined
//! function's own lines as binary annotations, relative to the procedure. So the line of an
//! address is the one of the deepest site covering it ([`paint`]), and the call site of a
//! site at depth `d` is the line its parent (the procedure, or the site at depth `d - 1`)
//! gives at the site's first address.
//!
//! Hostile files stay linear: scopes nest at most [`MAX_DEPTH`] deep, line rows are painted
//! by depth with an interval set, and a part that does not read is skipped with a warning.
//! The crate's own integer arithmetic may overflow on hostile offsets; [`collect`] holds
//! any panic that causes and reports the file as unreadable.

use std::collections::BTreeMap;
use std::io::Cursor;

use pdb2::FallibleIterator;
use rustc_hash::FxHashMap;

use super::{Collector, RawFunction};
use crate::symbols::format::{InlineRecord, LineRecord, MAX_ADDRESS, NONE};
use crate::symbols::SymbolSource;

pub(crate) use crate::binary::{is_pdb, pdb_guarded as guarded, PDB_MAGIC as MAGIC};

/// Inline sites nested deeper than this are skipped.
const MAX_DEPTH: usize = 64;

/// What identifies a PDB: its Breakpad debug id (GUID and age, as the PE's CodeView record
/// and a minidump name it) and the architecture of its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PdbIdentity {
    pub debug_id: String,
    pub arch: Option<crate::arch::Arch>,
}

/// Reads a PDB's identity from `source`, which is read only where the streams asked for
/// lie (the file's directory, the information stream, the debug-information stream). The
/// age is the debug-information stream's, which the linker writes into the image, else
/// the information stream's.
pub(crate) fn identity<R>(source: R) -> Result<PdbIdentity, String>
where
    R: std::io::Read + std::io::Seek + std::fmt::Debug + Send,
{
    guarded(|| {
        let mut pdb = pdb2::PDB::open(source).map_err(|e| e.to_string())?;
        let info = pdb.pdb_information().map_err(|e| e.to_string())?;
        let dbi = pdb.debug_information().ok();
        let age = dbi.as_ref().and_then(|d| d.age()).unwrap_or(info.age);
        let arch = match dbi.as_ref().and_then(|d| d.machine_type().ok()) {
            Some(pdb2::MachineType::Amd64) => Some(crate::arch::Arch::X86_64),
            Some(pdb2::MachineType::Arm64) => Some(crate::arch::Arch::Aarch64),
            Some(pdb2::MachineType::X86) => Some(crate::arch::Arch::X86),
            _ => None,
        };
        let (d1, d2, d3, d4) = info.guid.as_fields();
        let mut guid = [0u8; 16];
        guid[..4].copy_from_slice(&d1.to_le_bytes());
        guid[4..6].copy_from_slice(&d2.to_le_bytes());
        guid[6..8].copy_from_slice(&d3.to_le_bytes());
        guid[8..].copy_from_slice(d4);
        Ok(PdbIdentity {
            debug_id: crate::ids::pdb_debug_id(guid, age),
            arch,
        })
    })
}

/// Adds the PDB's procedures, line rows and inline records to `c` (source `pdb`) and
/// returns its public functions (source `publics`), which only fill the procedures' gaps.
pub(crate) fn collect(data: &[u8], c: &mut Collector) -> Vec<RawFunction> {
    let mut warnings = Vec::new();
    let result = guarded(|| read(data, c, &mut warnings));
    for w in warnings {
        c.warn(w);
    }
    match result {
        Ok(publics) => publics,
        Err(e) => {
            c.warn(format!("PDB: {e}"));
            Vec::new()
        }
    }
}

fn read(
    data: &[u8],
    c: &mut Collector,
    warnings: &mut Vec<String>,
) -> Result<Vec<RawFunction>, String> {
    let mut pdb = pdb2::PDB::open(Cursor::new(data)).map_err(|e| e.to_string())?;
    let map = pdb.address_map().map_err(|e| e.to_string())?;
    let strings = pdb.string_table().ok();
    let ids = pdb.id_information().ok();
    let types = pdb.type_information().ok();
    let mut names = Names::new(ids.as_ref(), types.as_ref());
    let dbi = pdb.debug_information().map_err(|e| e.to_string())?;
    let mut modules = dbi.modules().map_err(|e| e.to_string())?;
    // one warning per unreadable module, as many as the collector keeps: a hostile module
    // list can be long
    let mut warn = |message: String| {
        if warnings.len() < super::MAX_WARNINGS {
            warnings.push(message);
        }
    };
    loop {
        let module = match modules.next() {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                warn(format!("PDB: the module list is cut short: {e}"));
                break;
            }
        };
        let info = match pdb.module_info(&module) {
            Ok(Some(info)) => info,
            Ok(None) => continue,
            Err(e) => {
                warn(format!("PDB module {}: {e}", module.module_name()));
                continue;
            }
        };
        let mut reader = ModuleReader {
            map: &map,
            strings: strings.as_ref(),
            names: &mut names,
            c,
        };
        if let Err(e) = reader.module(&info) {
            warn(format!("PDB module {}: {e}", module.module_name()));
        }
    }
    Ok(publics(&mut pdb, &map, c))
}

/// One scope open while a module's symbols are read.
struct Scope {
    /// The symbol index its end marker has.
    end: pdb2::SymbolIndex,
    /// Line spans of the scope's own code, sorted by start: what its nested sites' call
    /// sites are read from.
    spans: Vec<Span>,
    /// 0 for a procedure, `d + 1` for an inline site at depth `d`.
    level: u32,
    /// The procedure's section offset (what inline annotations are relative to).
    proc_offset: pdb2::PdbInternalSectionOffset,
}

/// A line row with its extent, in table offsets.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    end: u32,
    file: u32,
    line: u32,
    column: u32,
    /// 0: the procedure's own rows; `d + 1`: rows of an inline site at depth `d`.
    level: u32,
}

struct ModuleReader<'a, 's, 'n> {
    map: &'a pdb2::AddressMap<'s>,
    strings: Option<&'a pdb2::StringTable<'s>>,
    names: &'a mut Names<'n, 's>,
    c: &'a mut Collector,
}

impl ModuleReader<'_, '_, '_> {
    fn module(&mut self, info: &pdb2::ModuleInfo<'_>) -> Result<(), pdb2::Error> {
        let program = info.line_program().ok();
        let mut inlinees = FxHashMap::default();
        if let Ok(mut it) = info.inlinees() {
            while let Ok(Some(i)) = it.next() {
                inlinees.insert(i.index(), i);
            }
        }
        let mut spans: Vec<Span> = Vec::new();
        let mut stack: Vec<Scope> = Vec::new();
        let mut symbols = info.symbols()?;
        while let Some(symbol) = symbols.next()? {
            let index = symbol.index();
            while stack.last().is_some_and(|s| s.end <= index) {
                stack.pop();
            }
            let Ok(data) = symbol.parse() else { continue };
            match data {
                pdb2::SymbolData::Procedure(p) => {
                    stack.clear();
                    if let Some(scope) = self.procedure(program.as_ref(), &p) {
                        spans.extend_from_slice(&scope.spans);
                        stack.push(scope);
                    }
                }
                pdb2::SymbolData::InlineSite(site) => {
                    let Some(parent) = stack.last() else { continue };
                    if stack.len() > MAX_DEPTH {
                        continue;
                    }
                    let Some(inlinee) = inlinees.get(&site.inlinee) else {
                        continue;
                    };
                    let scope = self.inline_site(program.as_ref(), inlinee, parent, &site);
                    spans.extend_from_slice(&scope.spans);
                    stack.push(scope);
                }
                _ => {}
            }
        }
        for s in paint(spans) {
            self.c.lines.push(LineRecord {
                address: s.start,
                file: s.file,
                line: s.line,
                column: s.column,
            });
            self.c.lines.push(LineRecord {
                address: s.end,
                file: NONE,
                line: 0,
                column: 0,
            });
        }
        Ok(())
    }

    /// A procedure's function and its own line rows, as the scope its inline sites nest in;
    /// `None` for one outside the image.
    fn procedure(
        &mut self,
        program: Option<&pdb2::LineProgram<'_>>,
        p: &pdb2::ProcedureSymbol<'_>,
    ) -> Option<Scope> {
        let (start, end) = self.range(p.offset, p.len)?;
        let name = self.c.string(&p.name.to_string());
        self.c.functions.push(RawFunction {
            start,
            end,
            name,
            source: SymbolSource::Pdb,
            input: 0,
        });
        let own = match program {
            Some(program) => self.procedure_lines(program, p.offset, end),
            None => Vec::new(),
        };
        Some(Scope {
            end: p.end,
            spans: own,
            level: 0,
            proc_offset: p.offset,
        })
    }

    /// An inline site within `parent`: its line rows, and its inline records (the call's
    /// file and line from the parent's rows), as the scope deeper sites nest in.
    fn inline_site(
        &mut self,
        program: Option<&pdb2::LineProgram<'_>>,
        inlinee: &pdb2::Inlinee<'_>,
        parent: &Scope,
        site: &pdb2::InlineSiteSymbol<'_>,
    ) -> Scope {
        let depth = parent.level;
        let mut own = Vec::new();
        let mut lines = inlinee.lines(parent.proc_offset, site);
        while let Ok(Some(l)) = lines.next() {
            let Some(len) = l.length else { continue };
            let Some((start, end)) = self.range(l.offset, len) else {
                continue;
            };
            let file = match program {
                Some(program) => self.file(program, l.file_index),
                None => NONE,
            };
            own.push(Span {
                start,
                end,
                file,
                line: l.line_start,
                column: l.column_start.unwrap_or(0),
                level: depth + 1,
            });
        }
        own.sort_by_key(|s| s.start);
        if let Some(first) = own.first() {
            let call = at(&parent.spans, first.start);
            let name = self.names.inlinee(site.inlinee);
            let name = name.map_or(NONE, |n| self.c.string(&n));
            for (start, end) in merged(&own) {
                self.c.inlines.push((
                    depth,
                    InlineRecord {
                        start,
                        end,
                        name,
                        call_file: call.map_or(NONE, |s| s.file),
                        call_line: call.map_or(0, |s| s.line),
                        call_column: call.map_or(0, |s| s.column),
                    },
                ));
            }
        }
        Scope {
            end: site.end,
            spans: own,
            level: depth + 1,
            proc_offset: parent.proc_offset,
        }
    }

    /// The table range of `len` bytes at a section offset.
    fn range(&self, offset: pdb2::PdbInternalSectionOffset, len: u32) -> Option<(u32, u32)> {
        let start = offset.to_rva(self.map)?.0;
        let end = start.checked_add(len)?;
        (start < end && u64::from(end) <= MAX_ADDRESS).then_some((start, end))
    }

    /// The procedure's own line rows, each lasting until the next (the last until `end`).
    fn procedure_lines(
        &mut self,
        program: &pdb2::LineProgram<'_>,
        offset: pdb2::PdbInternalSectionOffset,
        end: u32,
    ) -> Vec<Span> {
        let mut rows = Vec::new();
        let mut lines = program.lines_for_symbol(offset);
        while let Ok(Some(l)) = lines.next() {
            let Some(start) = l.offset.to_rva(self.map).map(|r| r.0) else {
                continue;
            };
            let row_end = l
                .length
                .and_then(|n| start.checked_add(n))
                .unwrap_or(end)
                .min(end);
            if start >= row_end {
                continue;
            }
            let file = self.file(program, l.file_index);
            rows.push(Span {
                start,
                end: row_end,
                file,
                line: l.line_start,
                column: l.column_start.unwrap_or(0),
                level: 0,
            });
        }
        rows.sort_by_key(|s| s.start);
        // a row without a length lasts until the next one
        for i in 1..rows.len() {
            let next = rows[i].start;
            if rows[i - 1].end > next {
                rows[i - 1].end = next;
            }
        }
        rows.retain(|s| s.start < s.end);
        rows
    }

    /// The file-table index of a module's file.
    fn file(&mut self, program: &pdb2::LineProgram<'_>, index: pdb2::FileIndex) -> u32 {
        let Some(strings) = self.strings else {
            return NONE;
        };
        let Ok(info) = program.get_file_info(index) else {
            return NONE;
        };
        match info.name.to_string_lossy(strings) {
            Ok(name) => self.c.file(&name),
            Err(_) => NONE,
        }
    }
}

/// The span of `spans` (sorted by start, disjoint) that holds `address`.
fn at(spans: &[Span], address: u32) -> Option<Span> {
    let i = spans.partition_point(|s| s.start <= address);
    let s = spans.get(i.checked_sub(1)?)?;
    (address < s.end).then_some(*s)
}

/// Spans merged where they touch or overlap: an inline record's ranges.
fn merged(spans: &[Span]) -> Vec<(u32, u32)> {
    crate::ranges::merged(spans.iter().map(|s| (s.start, s.end)).collect())
}

/// The rows of the deepest span at every address: spans are laid down deepest first, each
/// only where no deeper one lies. `covered` holds the union laid so far, merged, so every
/// span visits each interval it swallows once.
fn paint(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (std::cmp::Reverse(s.level), s.start));
    let mut covered: BTreeMap<u32, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for s in spans {
        // the covered intervals that overlap or touch [start, end)
        let first = covered
            .range(..=s.start)
            .next_back()
            .filter(|(_, &e)| e >= s.start)
            .map(|(&b, _)| b);
        let touching: Vec<(u32, u32)> = covered
            .range(first.unwrap_or(s.start)..=s.end)
            .map(|(&b, &e)| (b, e))
            .collect();
        let mut cursor = s.start;
        for &(b, e) in &touching {
            if b > cursor {
                out.push(Span {
                    start: cursor,
                    end: b.min(s.end),
                    ..s
                });
            }
            cursor = cursor.max(e);
        }
        if cursor < s.end {
            out.push(Span { start: cursor, ..s });
        }
        let mut lo = s.start;
        let mut hi = s.end;
        for (b, e) in touching {
            covered.remove(&b);
            lo = lo.min(b);
            hi = hi.max(e);
        }
        covered.insert(lo, hi);
    }
    out.sort_by_key(|s| s.start);
    out
}

/// The public symbols in code, as functions lasting until the next public (or the end of
/// their section), their decorated names undecorated.
fn publics<'s, S: pdb2::Source<'s> + 's>(
    pdb: &mut pdb2::PDB<'s, S>,
    map: &pdb2::AddressMap<'_>,
    c: &mut Collector,
) -> Vec<RawFunction> {
    let Ok(globals) = pdb.global_symbols() else {
        return Vec::new();
    };
    let sections = pdb.sections().ok().flatten().unwrap_or_default();
    let mut found: Vec<(u32, u16, String)> = Vec::new();
    let mut it = globals.iter();
    while let Ok(Some(symbol)) = it.next() {
        let Ok(pdb2::SymbolData::Public(p)) = symbol.parse() else {
            continue;
        };
        if !(p.function || p.code) {
            continue;
        }
        let Some(rva) = p.offset.to_rva(map) else {
            continue;
        };
        found.push((rva.0, p.offset.section, p.name.to_string().into_owned()));
    }
    // one name an address (the shortest): each public then ends where the next begins
    found.sort_by_key(|(start, _, name)| (*start, name.len()));
    found.dedup_by_key(|f| f.0);
    let section_end = |section: u16| {
        let header = sections.get(usize::from(section).checked_sub(1)?)?;
        header
            .virtual_address
            .checked_add(header.virtual_size.max(header.size_of_raw_data))
    };
    // one deep stack for every long decorated name (see demangle::with_deep_stack)
    crate::symbols::demangle::with_deep_stack(|| {
        let mut out = Vec::with_capacity(found.len());
        for (i, (start, section, name)) in found.iter().enumerate() {
            let next = found.get(i + 1).filter(|n| n.1 == *section).map(|n| n.0);
            let Some(end) = next.or_else(|| section_end(*section)) else {
                continue;
            };
            if *start >= end || u64::from(end) > MAX_ADDRESS {
                continue;
            }
            let name = crate::symbols::demangle(name);
            out.push(RawFunction {
                start: *start,
                end,
                name: c.string(&name),
                source: SymbolSource::Publics,
                input: 0,
            });
        }
        out
    })
}

/// Names of inlined functions, from the id stream (and the type stream, for a member
/// function's class), found through finders built on first use.
struct Names<'a, 's> {
    ids: Option<&'a pdb2::IdInformation<'s>>,
    types: Option<&'a pdb2::TypeInformation<'s>>,
    id_finder: Option<pdb2::IdFinder<'a>>,
    type_finder: Option<pdb2::TypeFinder<'a>>,
    cache: FxHashMap<pdb2::IdIndex, Option<String>>,
}

impl<'a, 's> Names<'a, 's> {
    fn new(
        ids: Option<&'a pdb2::IdInformation<'s>>,
        types: Option<&'a pdb2::TypeInformation<'s>>,
    ) -> Self {
        Names {
            ids,
            types,
            id_finder: None,
            type_finder: None,
            cache: FxHashMap::default(),
        }
    }

    fn inlinee(&mut self, index: pdb2::IdIndex) -> Option<String> {
        if let Some(name) = self.cache.get(&index) {
            return name.clone();
        }
        let name = self.lookup(index);
        self.cache.insert(index, name.clone());
        name
    }

    fn lookup(&mut self, index: pdb2::IdIndex) -> Option<String> {
        let ids = self.ids?;
        let finder = self.id_finder.get_or_insert_with(|| finder_of(ids));
        match finder.find(index).ok()?.parse().ok()? {
            pdb2::IdData::Function(f) => {
                let name = f.name.to_string();
                let scope = f
                    .scope
                    .and_then(|s| match finder.find(s).ok()?.parse().ok()? {
                        pdb2::IdData::String(s) => Some(s.name.to_string().into_owned()),
                        _ => None,
                    });
                Some(match scope {
                    Some(scope) if !scope.is_empty() => format!("{scope}::{name}"),
                    _ => name.into_owned(),
                })
            }
            pdb2::IdData::MemberFunction(m) => {
                let name = m.name.to_string().into_owned();
                let class = self.class_name(m.parent);
                Some(match class {
                    Some(class) => format!("{class}::{name}"),
                    None => name,
                })
            }
            _ => None,
        }
    }

    fn class_name(&mut self, index: pdb2::TypeIndex) -> Option<String> {
        let types = self.types?;
        let finder = self.type_finder.get_or_insert_with(|| finder_of(types));
        match finder.find(index).ok()?.parse().ok()? {
            pdb2::TypeData::Class(c) => Some(c.name.to_string().into_owned()),
            pdb2::TypeData::Union(u) => Some(u.name.to_string().into_owned()),
            _ => None,
        }
    }
}

/// A finder over every item of a type or id stream (one pass over the stream; an item
/// that does not read ends it).
fn finder_of<'t, I: pdb2::ItemIndex>(
    items: &'t pdb2::ItemInformation<'_, I>,
) -> pdb2::ItemFinder<'t, I> {
    let mut finder = items.finder();
    let mut it = items.iter();
    while let Ok(Some(_)) = it.next() {
        finder.update(&it);
    }
    finder
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u32, end: u32, line: u32, level: u32) -> Span {
        Span {
            start,
            end,
            file: 0,
            line,
            column: 0,
            level,
        }
    }

    #[test]
    fn the_deepest_span_names_each_address() {
        // a procedure 0..100 at line 1, a site 10..20 (line 5) holding a site 12..14 (line 9)
        let rows = paint(vec![
            span(0, 100, 1, 0),
            span(10, 20, 5, 1),
            span(12, 14, 9, 2),
        ]);
        let got: Vec<(u32, u32, u32)> = rows.iter().map(|s| (s.start, s.end, s.line)).collect();
        assert_eq!(
            got,
            vec![
                (0, 10, 1),
                (10, 12, 5),
                (12, 14, 9),
                (14, 20, 5),
                (20, 100, 1)
            ]
        );
    }

    #[test]
    fn spans_of_one_depth_keep_their_own_ranges() {
        let rows = paint(vec![span(0, 4, 1, 0), span(4, 8, 2, 0), span(2, 6, 7, 1)]);
        let got: Vec<(u32, u32, u32)> = rows.iter().map(|s| (s.start, s.end, s.line)).collect();
        assert_eq!(got, vec![(0, 2, 1), (2, 6, 7), (6, 8, 2)]);
    }

    #[test]
    fn garbage_is_not_a_pdb() {
        assert!(!is_pdb(b"MZ\x90\0"));
        assert!(identity(Cursor::new(MAGIC)).is_err());
        let mut c = Collector::new(0);
        assert!(collect(b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0\0\0", &mut c).is_empty());
    }
}
