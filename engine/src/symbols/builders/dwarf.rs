//! DWARF → functions, line rows and inline records (DWARF 2–5, zlib/zstd-compressed
//! sections; not split DWARF).
//!
//! One pass over each unit's DIE tree records every `DW_TAG_subprogram` and
//! `DW_TAG_inlined_subroutine` with its ranges, naming attributes and enclosing scope
//! (namespaces, classes); names are resolved afterwards, when every unit has been seen, so
//! `DW_AT_abstract_origin`/`DW_AT_specification` may point anywhere in `.debug_info`. The
//! semantics follow the `addr2line` crate (which the tests compare against): a name is the
//! demangled linkage name if the DIE or one it refers to has one, else the `DW_AT_name`
//! qualified by its parents; an inlined call's depth counts enclosing inlined calls up to
//! the nearest subprogram.

use std::borrow::Cow;

use object::{Object, ObjectSection};
use rustc_hash::FxHashMap;

use super::{Collector, RawFunction};
use crate::symbols::demangle::try_demangle;
use crate::symbols::format::{InlineRecord, LineRecord, NONE};
use crate::symbols::SymbolSource;

pub(crate) type R<'d> = gimli::EndianSlice<'d, gimli::RunTimeEndian>;

/// File index meaning "the row has a line but its file is unknown" (never a real index:
/// the file table cannot hold that many entries). Distinct from [`NONE`], which marks an
/// end-of-sequence row.
const UNKNOWN_FILE: u32 = NONE - 1;

/// Bound on following `DW_AT_abstract_origin`/`DW_AT_specification` chains.
const MAX_NAME_HOPS: usize = 16;

/// The naming attributes of one subprogram or inlined-subroutine DIE.
struct DieName<'d> {
    linkage: Option<&'d [u8]>,
    name: Option<&'d [u8]>,
    /// Index into `Pass::scopes`.
    scope: u32,
    /// `.debug_info` offset of the DIE named by abstract_origin / specification.
    next: Option<usize>,
    /// The DIE's unit is Rust: debuggers name Rust functions by their qualified
    /// `DW_AT_name` (`std::rt::__rust_abort`), not the linkage name's path
    /// (`__rustc::__rust_abort`).
    rust: bool,
}

struct PendingInline {
    start: u32,
    end: u32,
    die: usize,
    depth: u32,
    call_file: u32,
    call_line: u32,
    call_column: u32,
}

struct Pass<'d> {
    names: FxHashMap<usize, DieName<'d>>,
    /// Qualified scope prefixes; 0 is the empty (global) scope.
    scopes: Vec<String>,
    functions: Vec<(u32, u32, usize)>,
    inlines: Vec<PendingInline>,
}

impl Pass<'_> {
    fn new() -> Self {
        Pass {
            names: FxHashMap::default(),
            scopes: vec![String::new()],
            functions: Vec::new(),
            inlines: Vec::new(),
        }
    }
}

fn section_data<'d>(file: &object::File<'d>, name: &str, c: &mut Collector) -> Cow<'d, [u8]> {
    let Some(section) = file.section_by_name(name) else {
        return Cow::Borrowed(&[]);
    };
    match section.uncompressed_data() {
        Ok(data) => data,
        Err(e) => {
            c.warn(format!("section {name} unreadable: {e}"));
            Cow::Borrowed(&[])
        }
    }
}

/// The DWARF sections the symbol builders read. The others (location lists, macros, name
/// indexes, type units, package indexes) say nothing about functions, inlines or lines:
/// they are neither read nor inflated (libc6-dbg's compressed `.debug_loclists` alone is
/// 1.4 MB inflated).
pub(crate) const READ_SECTIONS: [gimli::SectionId; 9] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
];

/// The byte order of `file`'s DWARF.
pub(crate) fn endian(file: &object::File<'_>) -> gimli::RunTimeEndian {
    if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    }
}

/// Reads the DWARF of `file` into `c`.
pub(super) fn collect(file: &object::File<'_>, c: &mut Collector) {
    let endian = endian(file);
    let sections: gimli::DwarfSections<Cow<'_, [u8]>> =
        match gimli::DwarfSections::load(|id| -> Result<_, gimli::Error> {
            Ok(if READ_SECTIONS.contains(&id) {
                section_data(file, id.name(), c)
            } else {
                Cow::Borrowed(&[][..])
            })
        }) {
            Ok(s) => s,
            Err(e) => {
                c.warn(format!("DWARF sections unreadable: {e}"));
                return;
            }
        };
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
    let mut pass = Pass::new();
    let mut units = dwarf.units();
    loop {
        let header = match units.next() {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(e) => {
                c.warn(format!("unit headers unreadable: {e}"));
                break;
            }
        };
        read_unit(&dwarf, header, &mut pass, c, true);
    }
    resolve(pass, c);
}

/// Reads one unit: its line program (if `lines`) and DIEs.
fn read_unit<'d>(
    dwarf: &gimli::Dwarf<R<'d>>,
    header: gimli::UnitHeader<R<'d>>,
    pass: &mut Pass<'d>,
    c: &mut Collector,
    lines: bool,
) {
    let at = header.offset();
    let unit = match dwarf.unit(header) {
        Ok(u) => u,
        Err(e) => {
            c.warn(format!("unit at {at:?} skipped: {e}"));
            return;
        }
    };
    let unit = unit.unit_ref(dwarf);
    let files = if lines {
        match read_lines(unit, c) {
            Ok(f) => f,
            Err(e) => {
                c.warn(format!("line program of unit at {at:?} skipped: {e}"));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    if let Err(e) = read_dies(unit, &files, pass, c) {
        c.warn(format!("DIEs of unit at {at:?} partly skipped: {e}"));
    }
}

/// Which units [`collect_units`] reads, and how it checks them.
pub(crate) struct UnitPlan<'p> {
    /// `.debug_info` offsets of the units to read as [`collect`] reads every unit,
    /// ascending.
    pub units: &'p [usize],
    /// The `.debug_info` offset of the unit holding a `.debug_info` offset.
    pub unit_of: &'p dyn Fn(usize) -> Option<usize>,
    /// Whether table range `start..=end` lies within one address range of the unit at a
    /// `.debug_info` offset.
    pub inside: &'p dyn Fn(usize, u32, u32) -> bool,
}

/// Reads the units of `plan` into `c` as [`collect`] reads all of them, and from other
/// units the names of the DIEs their names lead to (abstract_origin/specification across
/// units: the DIEs only, no lines or ranges). Returns whether every function, inline
/// record and line sequence of the planned units lies within one of its unit's ranges.
pub(crate) fn collect_units<'d>(
    dwarf: &gimli::Dwarf<R<'d>>,
    plan: &UnitPlan<'_>,
    c: &mut Collector,
) -> bool {
    let mut pass = Pass::new();
    let mut read: rustc_hash::FxHashSet<usize> = rustc_hash::FxHashSet::default();
    let mut contained = true;
    let header_at = |at: usize| {
        dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(at))
            .ok()
    };
    for &at in plan.units {
        let Some(header) = header_at(at) else {
            continue;
        };
        read.insert(at);
        let (f0, i0, l0) = (pass.functions.len(), pass.inlines.len(), c.lines.len());
        read_unit(dwarf, header, &mut pass, c, true);
        let inside = |s: u32, e: u32| (plan.inside)(at, s, e);
        contained &= pass
            .functions
            .get(f0..)
            .unwrap_or(&[])
            .iter()
            .all(|f| inside(f.0, f.1))
            && pass
                .inlines
                .get(i0..)
                .unwrap_or(&[])
                .iter()
                .all(|i| inside(i.start, i.end))
            && sequences_inside(c.lines.get(l0..).unwrap_or(&[]), inside);
    }
    let mut dies: Vec<usize> = pass.functions.iter().map(|f| f.2).collect();
    dies.extend(pass.inlines.iter().map(|i| i.die));
    dies.sort_unstable();
    dies.dedup();
    loop {
        let mut missing: Vec<usize> = dies
            .iter()
            .filter_map(|&die| unread_unit_on_chain(&pass, die, &read, plan.unit_of))
            .collect();
        if missing.is_empty() {
            break;
        }
        missing.sort_unstable();
        missing.dedup();
        for at in missing {
            read.insert(at);
            let Some(header) = header_at(at) else {
                continue;
            };
            let (f0, i0) = (pass.functions.len(), pass.inlines.len());
            read_unit(dwarf, header, &mut pass, c, false);
            pass.functions.truncate(f0);
            pass.inlines.truncate(i0);
        }
    }
    resolve(pass, c);
    contained
}

/// The unread unit holding the first DIE of `die`'s abstract_origin/specification chain
/// that is not known (as [`name_of`] follows it), if any.
fn unread_unit_on_chain(
    pass: &Pass<'_>,
    mut die: usize,
    read: &rustc_hash::FxHashSet<usize>,
    unit_of: &dyn Fn(usize) -> Option<usize>,
) -> Option<usize> {
    for _ in 0..MAX_NAME_HOPS {
        match pass.names.get(&die) {
            Some(n) => die = n.next?,
            None => return unit_of(die).filter(|u| !read.contains(u)),
        }
    }
    None
}

/// Whether each line sequence (rows up to an end-of-sequence row) lies within one range.
fn sequences_inside(rows: &[LineRecord], inside: impl Fn(u32, u32) -> bool) -> bool {
    let mut start = None;
    for r in rows {
        let s = *start.get_or_insert(r.address);
        if r.file == NONE {
            if !inside(s, r.address) {
                return false;
            }
            start = None;
        }
    }
    start.is_none()
}

/// Renders a line-program file entry as addr2line does: comp_dir, directory, name.
fn render_file<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    file: &gimli::FileEntry<R<'d>>,
    header: &gimli::LineProgramHeader<R<'d>>,
) -> Result<String, gimli::Error> {
    let mut path = match unit.comp_dir {
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => String::new(),
    };
    if file.directory_index() != 0 {
        if let Some(dir) = file.directory(header) {
            path_push(&mut path, &unit.attr_string(dir)?.to_string_lossy());
        }
    }
    path_push(
        &mut path,
        &unit.attr_string(file.path_name())?.to_string_lossy(),
    );
    Ok(path)
}

fn path_push(path: &mut String, p: &str) {
    let rooted = |s: &str| {
        s.starts_with('/')
            || s.starts_with('\\')
            || s.get(1..3) == Some(":/")
            || s.get(1..3) == Some(":\\")
    };
    if rooted(p) {
        *path = p.to_string();
    } else {
        let sep = if path.starts_with('\\') || path.get(1..3) == Some(":\\") {
            '\\'
        } else {
            '/'
        };
        if !path.is_empty() && !path.ends_with(sep) {
            path.push(sep);
        }
        path.push_str(p);
    }
}

/// Reads a unit's line program into `c.lines`; returns the unit's file index → file-table
/// index map (for call files).
fn read_lines(
    unit: gimli::UnitRef<'_, R<'_>>,
    c: &mut Collector,
) -> Result<Vec<u32>, gimli::Error> {
    let Some(program) = unit.line_program.clone() else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    {
        let header = program.header();
        let mut index = 0u64;
        loop {
            match header.file(index) {
                Some(f) => {
                    let path = render_file(unit, f, header)?;
                    files.push(c.file(&path));
                }
                None if index == 0 => files.push(UNKNOWN_FILE),
                None => break,
            }
            index += 1;
        }
    }
    let mut rows = program.rows();
    let mut sequence: Vec<LineRecord> = Vec::new();
    let mut start_svma = None;
    while let Some((_, row)) = rows.next_row()? {
        if row.end_sequence() {
            let end = row.address();
            let start = start_svma.take();
            let rows_of = std::mem::take(&mut sequence);
            // Sequences at 0 are code the linker discarded.
            if let Some(start) = start.filter(|&s| s != 0 && s < end) {
                let end_off = c.range(start, end).map(|(_, e)| e);
                if let Some(end_off) = end_off {
                    c.lines
                        .extend(rows_of.into_iter().filter(|r| r.address < end_off));
                    c.lines.push(LineRecord {
                        address: end_off,
                        file: NONE,
                        line: 0,
                        column: 0,
                    });
                }
            }
            continue;
        }
        let svma = row.address();
        if start_svma.is_none() {
            start_svma = Some(svma);
        }
        let Some(address) = c.offset(svma) else {
            continue;
        };
        let file = usize::try_from(row.file_index())
            .ok()
            .and_then(|i| files.get(i).copied())
            .unwrap_or(UNKNOWN_FILE);
        let line = row
            .line()
            .map_or(0, |l| u32::try_from(l.get()).unwrap_or(0));
        let column = match row.column() {
            gimli::ColumnType::LeftEdge => 0,
            gimli::ColumnType::Column(x) => u32::try_from(x.get()).unwrap_or(0),
        };
        let rec = LineRecord {
            address,
            file,
            line,
            column,
        };
        match sequence.last_mut() {
            Some(last) if last.address == address => *last = rec,
            _ => sequence.push(rec),
        }
    }
    Ok(files)
}

fn global_offset(unit: gimli::UnitRef<'_, R<'_>>, offset: gimli::UnitOffset) -> Option<usize> {
    offset.to_debug_info_offset(&unit.header).map(|o| o.0)
}

/// Whether a linkage name is in a mangling scheme (Itanium C++ `_Z`, Rust v0 `_R`).
fn is_mangled(name: &str) -> bool {
    name.starts_with("_Z") || name.starts_with("_R") || name.starts_with("__Z")
}

/// Whether the unit's `DW_AT_language` is Rust.
fn unit_is_rust(unit: gimli::UnitRef<'_, R<'_>>) -> bool {
    let mut entries = unit.entries();
    let Ok(Some(root)) = entries.next_dfs() else {
        return false;
    };
    matches!(
        root.attr_value(gimli::DW_AT_language),
        Some(gimli::AttributeValue::Language(gimli::DW_LANG_Rust))
    )
}

/// One pass over a unit's DIEs.
fn read_dies<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    files: &[u32],
    pass: &mut Pass<'d>,
    c: &mut Collector,
) -> Result<(), gimli::Error> {
    // (depth, scope index) of enclosing namespaces/types; (depth, is_inlined) of
    // enclosing subprograms and inlined calls.
    let mut scopes: Vec<(isize, u32)> = Vec::new();
    let mut code: Vec<(isize, bool)> = Vec::new();
    let rust = unit_is_rust(unit);
    let mut entries = unit.entries();
    while let Some(entry) = entries.next_dfs()? {
        let depth = entry.depth();
        while scopes.last().is_some_and(|&(d, _)| d >= depth) {
            scopes.pop();
        }
        while code.last().is_some_and(|&(d, _)| d >= depth) {
            code.pop();
        }
        let scope = scopes.last().map_or(0, |&(_, s)| s);
        let tag = entry.tag();
        match tag {
            gimli::DW_TAG_namespace
            | gimli::DW_TAG_class_type
            | gimli::DW_TAG_structure_type
            | gimli::DW_TAG_union_type
            | gimli::DW_TAG_interface_type => {
                if let Some(id) = enter_scope(unit, entry, scope, pass) {
                    scopes.push((depth, id));
                }
            }
            gimli::DW_TAG_subprogram | gimli::DW_TAG_inlined_subroutine => {
                let Some(die) = global_offset(unit, entry.offset()) else {
                    continue;
                };
                let (name, call) = code_attrs(unit, entry, files, scope, rust);
                pass.names.insert(die, name);
                let inlined = tag == gimli::DW_TAG_inlined_subroutine;
                // Inline depth: inlined calls enclosing this one up to the nearest subprogram.
                let inline_depth = code.iter().rev().take_while(|&&(_, i)| i).count();
                // An inlined call outside any subprogram has nothing to attach to.
                let attached = !inlined || !code.is_empty();
                code.push((depth, inlined));
                if !attached {
                    continue;
                }
                let site = Site {
                    die,
                    inlined,
                    depth: u32::try_from(inline_depth).unwrap_or(u32::MAX),
                    call,
                };
                add_ranges(unit, entry, &site, pass, c)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A namespace or type DIE: its qualified name becomes a new scope, whose index is
/// returned (`None` for an unnamed type, which names nothing).
fn enter_scope<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    entry: &gimli::DebuggingInformationEntry<R<'d>>,
    scope: u32,
    pass: &mut Pass<'_>,
) -> Option<u32> {
    let name = match entry.attr_value(gimli::DW_AT_name) {
        Some(v) => unit
            .attr_string(v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned()),
        None => None,
    };
    let name = match name {
        Some(n) => n,
        None if entry.tag() == gimli::DW_TAG_namespace => "(anonymous namespace)".into(),
        None => return None,
    };
    let parent = &pass.scopes[scope as usize];
    let qualified = if parent.is_empty() {
        name
    } else {
        format!("{parent}::{name}")
    };
    let id = u32::try_from(pass.scopes.len()).ok()?;
    pass.scopes.push(qualified);
    Some(id)
}

/// (file, line, column) of an inlined call site.
type CallSite = (u32, u32, u32);

/// A subprogram's or inlined call's names (linkage, plain, the DIE it continues) and,
/// for an inlined call, its call site.
fn code_attrs<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    entry: &gimli::DebuggingInformationEntry<R<'d>>,
    files: &[u32],
    scope: u32,
    rust: bool,
) -> (DieName<'d>, CallSite) {
    let mut name = DieName {
        linkage: None,
        name: None,
        scope,
        next: None,
        rust,
    };
    let mut call = (UNKNOWN_FILE, 0u32, 0u32);
    let udata = |attr: &gimli::Attribute<R<'d>>| {
        attr.udata_value()
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0)
    };
    for attr in entry.attrs() {
        match attr.name() {
            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                name.linkage = unit.attr_string(attr.value()).ok().map(|s| s.slice());
            }
            gimli::DW_AT_name => {
                name.name = unit.attr_string(attr.value()).ok().map(|s| s.slice());
            }
            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => {
                name.next = match attr.value() {
                    gimli::AttributeValue::UnitRef(o) => global_offset(unit, o),
                    gimli::AttributeValue::DebugInfoRef(o) => Some(o.0),
                    _ => None,
                };
            }
            gimli::DW_AT_call_file => {
                if let gimli::AttributeValue::FileIndex(fi) = attr.value() {
                    if fi > 0 || unit.header.version() >= 5 {
                        call.0 = usize::try_from(fi)
                            .ok()
                            .and_then(|i| files.get(i).copied())
                            .unwrap_or(UNKNOWN_FILE);
                    }
                }
            }
            gimli::DW_AT_call_line => call.1 = udata(attr),
            gimli::DW_AT_call_column => call.2 = udata(attr),
            _ => {}
        }
    }
    (name, call)
}

/// Where a subprogram's or inlined call's ranges go.
struct Site {
    die: usize,
    inlined: bool,
    /// Inlined calls enclosing this one, up to the nearest subprogram.
    depth: u32,
    call: CallSite,
}

/// The address ranges of a subprogram (functions) or an inlined call (inline records).
fn add_ranges<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    entry: &gimli::DebuggingInformationEntry<R<'d>>,
    site: &Site,
    pass: &mut Pass<'_>,
    c: &mut Collector,
) -> Result<(), gimli::Error> {
    let die = site.die;
    if pc_range_overflows(unit, entry) {
        c.warn(format!("ranges of DIE at {die:#x} overflow"));
        return Ok(());
    }
    let mut ranges = match unit.die_ranges(entry) {
        Ok(r) => r,
        Err(e) => {
            c.warn(format!("ranges of DIE at {die:#x} unreadable: {e}"));
            return Ok(());
        }
    };
    while let Some(r) = ranges.next()? {
        if r.begin == 0 {
            continue; // discarded by the linker
        }
        let Some((start, end)) = c.range(r.begin, r.end) else {
            continue;
        };
        if site.inlined {
            pass.inlines.push(PendingInline {
                start,
                end,
                die,
                depth: site.depth,
                call_file: site.call.0,
                call_line: site.call.1,
                call_column: site.call.2,
            });
        } else {
            pass.functions.push((start, end, die));
        }
    }
    Ok(())
}

/// Whether `DW_AT_low_pc` plus a `DW_AT_high_pc` size overflows (gimli adds them
/// unchecked: a panic in debug builds, a wrapped end, which reads as no range, otherwise).
pub(crate) fn pc_range_overflows<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    entry: &gimli::DebuggingInformationEntry<R<'d>>,
) -> bool {
    let (Some(low), Some(high)) = (
        entry.attr(gimli::DW_AT_low_pc),
        entry.attr(gimli::DW_AT_high_pc),
    ) else {
        return false;
    };
    if matches!(
        high.value(),
        gimli::AttributeValue::Addr(_) | gimli::AttributeValue::DebugAddrIndex(_)
    ) {
        return false;
    }
    let (Ok(Some(low)), Some(size)) = (unit.attr_address(low.value()), high.udata_value()) else {
        return false;
    };
    low.checked_add(size).is_none()
}

/// The display name of a DIE, following abstract_origin/specification.
fn name_of(pass: &Pass<'_>, mut die: usize) -> Option<String> {
    for _ in 0..MAX_NAME_HOPS {
        let n = pass.names.get(&die)?;
        let qualified = |name: &[u8]| qualify(pass, n.scope, name);
        if let (true, Some(name)) = (n.rust, n.name) {
            return Some(qualified(name));
        }
        let linkage = n.linkage.map(String::from_utf8_lossy);
        if let Some(raw) = linkage {
            // Debuggers print the linkage name: demangled where it is mangled, as it is
            // where it is not mangled at all (glibc's asm labels: gdb shows
            // `__GI___clock_nanosleep`, not the DW_AT_name `__clock_nanosleep`). A
            // mangled name the demangler cannot read falls through to DW_AT_name.
            if let Some(d) = try_demangle(&raw) {
                return Some(d);
            }
            // An i386 Windows stdcall or fastcall function's linkage name carries its
            // argument bytes (`RaiseException@16`, `@f@8`): winedbg and Microsoft's
            // tools name it by the function's own name, its `DW_AT_name` (here or on
            // the DIE its abstract origin or specification is).
            if let Some((_, name)) =
                dw_at_name(pass, die).filter(|(name, _)| is_decorated_i386(&raw, name))
            {
                return Some(name);
            }
            if !is_mangled(&raw) {
                return Some(raw.into_owned());
            }
        }
        if let Some(name) = n.name {
            return Some(qualified(name));
        }
        die = n.next?;
    }
    None
}

/// `name` (a `DW_AT_name`) in its enclosing namespaces and types (`scope`, an index into
/// `Pass::scopes`).
fn qualify(pass: &Pass<'_>, scope: u32, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    let scope = pass.scopes.get(scope as usize).map_or("", String::as_str);
    if scope.is_empty() {
        name.into_owned()
    } else {
        format!("{scope}::{name}")
    }
}

/// The first `DW_AT_name` along `die`'s abstract_origin/specification chain: the name
/// itself, and the name qualified by that DIE's enclosing namespaces and types.
fn dw_at_name<'d>(pass: &Pass<'d>, mut die: usize) -> Option<(&'d [u8], String)> {
    for _ in 0..MAX_NAME_HOPS {
        let n = pass.names.get(&die)?;
        if let Some(name) = n.name {
            return Some((name, qualify(pass, n.scope, name)));
        }
        die = n.next?;
    }
    None
}

/// Whether `linkage` is `name` decorated as an i386 Windows stdcall (`name@N`) or fastcall
/// (`@name@N`) function, N the decimal bytes of its arguments.
fn is_decorated_i386(linkage: &str, name: &[u8]) -> bool {
    let linkage = linkage.as_bytes();
    let undecorated = linkage.strip_prefix(b"@").unwrap_or(linkage);
    undecorated
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(b"@"))
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

fn resolve(pass: Pass<'_>, c: &mut Collector) {
    let mut memo: FxHashMap<usize, u32> = FxHashMap::default();
    let mut name_id = |die: usize, c: &mut Collector| -> u32 {
        if let Some(&id) = memo.get(&die) {
            return id;
        }
        let id = name_of(&pass, die).map_or(NONE, |n| c.string(&n));
        memo.insert(die, id);
        id
    };
    for &(start, end, die) in &pass.functions {
        let name = name_id(die, c);
        c.functions.push(RawFunction {
            start,
            end,
            name,
            source: SymbolSource::Dwarf,
            input: 0,
        });
    }
    for i in &pass.inlines {
        let name = name_id(i.die, c);
        c.inlines.push((
            i.depth,
            InlineRecord {
                start: i.start,
                end: i.end,
                name,
                call_file: i.call_file,
                call_line: i.call_line,
                call_column: i.call_column,
            },
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::is_decorated_i386;

    #[test]
    fn only_an_i386_stdcall_or_fastcall_decoration_of_the_name_is_taken_off() {
        for (linkage, name, decorated) in [
            ("RaiseException@16", "RaiseException", true),
            ("WaitForSingleObject@8", "WaitForSingleObject", true),
            ("@fast@8", "fast", true),
            ("f@0", "f", true),
            ("f@", "f", false),
            ("f@8x", "f", false),
            ("g@8", "f", false),
            ("f@@8", "f", false),
            ("__GI___clock_nanosleep", "__clock_nanosleep", false),
        ] {
            assert_eq!(
                is_decorated_i386(linkage, name.as_bytes()),
                decorated,
                "{linkage} / {name}"
            );
        }
    }
}
