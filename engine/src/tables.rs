//! A module's tables: what a [`TableProvider`] hands over for each module of a dump, how
//! they are built from a binary and its debug files or from a Breakpad `.sym` file, and
//! how the pipeline loads and opens them for one dump (the vdso's from the dump's own
//! memory).

use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment};

use crate::binary::{self, FileBytes};
use crate::breakpad::index::BreakpadIndex;
use crate::dump::{Dump, Module};
use crate::report;
use crate::symbols::{self, OnDemandSymbols, SymbolIndex, SymbolTable};
use crate::unwind::{self, OnDemandUnwind, UnwindTable};
use crate::walk::ModuleUnwind;
use crate::warning::Warning;

/// Code bytes of a binary file, addressed by offset from its link base, for the
/// stack scanner's call-site check.
#[derive(Debug, Clone)]
pub struct CodeImage {
    data: FileBytes,
    /// (start, end, file offset) of each loadable segment, as link-base offsets.
    segments: Vec<(u64, u64, u64)>,
    /// `[start, end)` link-base offsets of its executable code: the sections that hold
    /// instructions (`SHF_EXECINSTR`, a PE code section, a Mach-O section of
    /// instructions), else its executable segments; sorted.
    text: Vec<(u64, u64)>,
}

impl CodeImage {
    /// Maps the loadable segments of an ELF/Mach-O file.
    pub fn new(data: FileBytes) -> Option<CodeImage> {
        let file = object::File::parse(&*data).ok()?;
        let link_base = binary::link_base(&file);
        let segments = file
            .segments()
            .filter_map(|s| {
                let (off, size) = s.file_range();
                let start = binary::svma_to_offset(s.address(), link_base)?;
                Some((start, start.checked_add(size)?, off))
            })
            .collect();
        let text = text_ranges(&file, link_base);
        drop(file);
        Some(CodeImage {
            data,
            segments,
            text,
        })
    }

    /// Whether link-base offset `rel` lies in the file's executable code; `None` when the
    /// file names no executable section or segment at all (it then tells nothing).
    pub fn is_executable(&self, rel: u64) -> Option<bool> {
        if self.text.is_empty() {
            return None;
        }
        let i = self.text.partition_point(|&(_, end)| end <= rel);
        Some(self.text.get(i).is_some_and(|&(start, _)| start <= rel))
    }

    /// Up to `len` bytes ending right before link-base offset `rel`.
    pub fn bytes_before(&self, rel: u64, len: usize) -> Option<&[u8]> {
        let &(start, _, off) = self
            .segments
            .iter()
            .find(|&&(s, e, _)| rel > s && rel <= e)?;
        let end = usize::try_from(off.checked_add(rel - start)?).ok()?;
        let begin = end.saturating_sub(len).max(usize::try_from(off).ok()?);
        self.data.get(begin..end)
    }

    /// Up to `len` bytes starting at link-base offset `rel` (fewer at a segment's end).
    pub fn bytes_at(&self, rel: u64, len: usize) -> Option<&[u8]> {
        let &(start, end, off) = self
            .segments
            .iter()
            .find(|&&(s, e, _)| rel >= s && rel < e)?;
        let begin = usize::try_from(off.checked_add(rel - start)?).ok()?;
        let stop = usize::try_from(off.checked_add(end - start)?).ok()?;
        self.data.get(begin..stop.min(begin.saturating_add(len)))
    }

    /// The link-base offset of the binary's symbol `name` (`.dynsym`, then `.symtab`): a
    /// variable the crash analysis reads from the dump (glibc's `__abort_msg`).
    pub fn symbol_offset(&self, name: &str) -> Option<u64> {
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(&*self.data).ok()?;
        let link_base = binary::link_base(&file);
        let sym = file
            .dynamic_symbols()
            .chain(file.symbols())
            .find(|s| s.name_bytes().ok() == Some(name.as_bytes()) && s.address() != 0)?;
        binary::svma_to_offset(sym.address(), link_base)
    }

    /// The link-base offset of the first function symbol whose demangled name is each of
    /// `names` (`.symtab`, then `.dynsym`): functions the crash analysis recognises by
    /// address (a `type_id` in a vtable). One pass over the symbols; only those whose
    /// mangled name holds the last part of a wanted name (`type_id`) are demangled.
    pub fn demangled_symbol_offsets(&self, names: &[&str]) -> Vec<Option<u64>> {
        use object::{Object, ObjectSymbol};
        let mut found = vec![None; names.len()];
        let Ok(file) = object::File::parse(&*self.data) else {
            return found;
        };
        let link_base = binary::link_base(&file);
        // an ASCII identifier is spelled as it is in every mangling
        let lasts: Vec<&str> = names
            .iter()
            .map(|n| n.rsplit("::").next().unwrap_or(n))
            .collect();
        let worth = |raw: &str| {
            lasts
                .iter()
                .any(|l| !l.is_ascii() || l.is_empty() || raw.contains(l))
        };
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if sym.address() == 0 || sym.kind() != object::SymbolKind::Text {
                continue;
            }
            let Ok(raw) = sym.name() else { continue };
            if !worth(raw) {
                continue;
            }
            let name = crate::symbols::demangle::demangle(raw);
            for (want, slot) in names.iter().zip(&mut found) {
                if slot.is_none() && name == *want {
                    *slot = binary::svma_to_offset(sym.address(), link_base);
                }
            }
            if found.iter().all(Option::is_some) {
                break;
            }
        }
        found
    }

    /// The words the dynamic loader sets by ELF relative relocations (`R_X86_64_RELATIVE`,
    /// `R_AARCH64_RELATIVE`), by link-base offset, and the link-base offset each is set
    /// to point to: what relocated data (a vtable's methods, a pointer in a static) holds
    /// once loaded, known from the file alone, where a position-independent binary leaves
    /// those words 0.
    pub fn relative_relocations(&self) -> std::collections::HashMap<u64, u64> {
        use object::{Object, RelocationFlags};
        let mut words = std::collections::HashMap::new();
        let Ok(file) = object::File::parse(&*self.data) else {
            return words;
        };
        let link_base = binary::link_base(&file);
        let Some(relocations) = file.dynamic_relocations() else {
            return words;
        };
        for (at, r) in relocations {
            let RelocationFlags::Elf { r_type } = r.flags() else {
                continue;
            };
            if r_type != object::elf::R_X86_64_RELATIVE && r_type != object::elf::R_AARCH64_RELATIVE
            {
                continue;
            }
            let to = u64::try_from(r.addend())
                .ok()
                .and_then(|a| binary::svma_to_offset(a, link_base));
            if let (Some(slot), Some(to)) = (binary::svma_to_offset(at, link_base), to) {
                words.insert(slot, to);
            }
        }
        words
    }
}

/// A module's unwind rules, in the form a provider hands them over.
#[warn(missing_docs)]
#[derive(Debug, Clone)]
pub enum UnwindTables {
    /// The serialized table (`unwind::format`) of every rule: built in memory, or bytes a
    /// cache holds (mapped from its file by `--table-cache`).
    Whole(FileBytes),
    /// A binary's `.eh_frame` rules built where the walk looks (one-shot walks, see
    /// [`on_demand_tables`]).
    OnDemand(Arc<OnDemandUnwind>),
}

/// A module's symbols, in the form a provider hands them over.
#[warn(missing_docs)]
#[derive(Debug, Clone)]
pub enum SymbolTables {
    /// The serialized table (`symbols::format`) of every symbol.
    Whole(FileBytes),
    /// A binary's symbols built from the DWARF units the walk's addresses need (one-shot
    /// walks, see [`on_demand_tables`]): [`ModuleTables::files`] then lists every input
    /// in the builders' order, each as having given symbols; the report keeps that only
    /// for the inputs [`OnDemandSymbols::inputs`] names.
    OnDemand(Arc<OnDemandSymbols>),
}

#[warn(missing_docs)]
/// What a module's files gave: tables built from a binary and its debug files (or a
/// Breakpad file built whole), each of which may be absent, or an indexed Breakpad file.
#[derive(Debug, Clone)]
pub enum Tables {
    /// Unwind rules and symbols, each in one form, if the files had them.
    Built {
        /// The unwind rules, if any unwind section (or `STACK` record) was found.
        unwind: Option<UnwindTables>,
        /// The symbols, if any were found.
        symbols: Option<SymbolTables>,
    },
    /// A Breakpad file indexed instead of built (one-shot walks, see
    /// [`indexed_breakpad_tables`]): both tables are built where the walk looks.
    Breakpad(Arc<BreakpadIndex>),
}

impl Default for Tables {
    fn default() -> Self {
        Tables::Built {
            unwind: None,
            symbols: None,
        }
    }
}

/// The tables one module's files produced (see [`build_tables`]).
#[warn(missing_docs)]
#[derive(Debug, Clone, Default)]
pub struct ModuleTables {
    /// The unwind and symbol tables, in whichever form they came.
    pub tables: Tables,
    /// Code bytes for call-site checks while scanning (optional).
    pub code: Option<CodeImage>,
    /// Whether the file's build-id equals the dump's (false for a match by path).
    pub verified: bool,
    /// Problems met while building (`unwind-table-corrupt`, `symbols-corrupt`): (code,
    /// message). Owned, so that a cache can store and replay them with the tables.
    pub warnings: Vec<Warning>,
    /// The files the tables came from and what each gave (a `.sym` file's `gave` is
    /// filled when the report is made, as it is for an indexed one). Owned and
    /// serializable, so that a cache can store it with the tables.
    pub files: Vec<report::ModuleFile>,
}

impl ModuleTables {
    /// The whole serialized unwind table, if the tables hold one.
    pub fn whole_unwind(&self) -> Option<&FileBytes> {
        match &self.tables {
            Tables::Built {
                unwind: Some(UnwindTables::Whole(b)),
                ..
            } => Some(b),
            _ => None,
        }
    }

    /// The whole serialized symbol table, if the tables hold one.
    pub fn whole_symbols(&self) -> Option<&FileBytes> {
        match &self.tables {
            Tables::Built {
                symbols: Some(SymbolTables::Whole(b)),
                ..
            } => Some(b),
            _ => None,
        }
    }

    /// Unwind rules built where the walk looks, if the tables are so.
    pub fn unwind_on_demand(&self) -> Option<&OnDemandUnwind> {
        match &self.tables {
            Tables::Built {
                unwind: Some(UnwindTables::OnDemand(od)),
                ..
            } => Some(od),
            _ => None,
        }
    }

    /// Symbols built where the walk looks, if the tables are so.
    pub fn symbols_on_demand(&self) -> Option<&OnDemandSymbols> {
        match &self.tables {
            Tables::Built {
                symbols: Some(SymbolTables::OnDemand(od)),
                ..
            } => Some(od),
            _ => None,
        }
    }

    /// The indexed Breakpad file, if the tables are one.
    pub fn breakpad(&self) -> Option<&BreakpadIndex> {
        match &self.tables {
            Tables::Breakpad(index) => Some(index),
            Tables::Built { .. } => None,
        }
    }

    /// Whether any part is built where the walk looks (and so cannot be stored whole).
    pub fn is_on_demand(&self) -> bool {
        match &self.tables {
            Tables::Breakpad(_) => true,
            Tables::Built { unwind, symbols } => {
                matches!(unwind, Some(UnwindTables::OnDemand(_)))
                    || matches!(symbols, Some(SymbolTables::OnDemand(_)))
            }
        }
    }
}

/// Supplies tables for the modules of a dump.
#[warn(missing_docs)]
pub trait TableProvider: Sync {
    /// The tables for `module` of `dump`, or `None` when no file describes it (the
    /// report then marks the module `missing`).
    fn tables(&self, dump: &Dump<'_>, module: &Module) -> Option<ModuleTables>;
    /// Problems met looking for `module`'s files that the report should tell whether or
    /// not tables were found (code, message): e.g. a file at the module's path that is
    /// another build.
    fn module_warnings(&self, _dump: &Dump<'_>, _module: &Module) -> Vec<Warning> {
        Vec::new()
    }
    /// Whether [`TableProvider::tables`] builds tables (tens of milliseconds for a libc),
    /// so that asking for two modules at once on two threads pays; a provider that hands
    /// over tables already built answers faster than a thread starts.
    fn builds_tables(&self) -> bool {
        false
    }
    /// What remote symbol sources were asked for `module`'s files, and what they answered
    /// (the report's `modules[].lookups`); asked after [`TableProvider::tables`].
    fn module_lookups(&self, _dump: &Dump<'_>, _module: &Module) -> Vec<report::Lookup> {
        Vec::new()
    }
}

/// A provider that knows no files: every module but the vdso is `missing`.
pub struct NoTables;

impl TableProvider for NoTables {
    fn tables(&self, _dump: &Dump<'_>, _module: &Module) -> Option<ModuleTables> {
        None
    }
}

/// One file handed to [`build_tables`]: its bytes and the name the report gives it.
#[warn(missing_docs)]
#[derive(Debug, Clone, Copy)]
pub struct TableInput<'a> {
    /// The file's name (its last path component, or the name it was uploaded under).
    pub name: &'a str,
    /// The file's contents.
    pub bytes: &'a [u8],
}

/// `a` and `b`, on two threads when `apart` (a panic in either stays a panic, as if it
/// had run on this thread).
fn side_by_side<A: Send, B>(
    apart: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    if !apart {
        return (a(), b());
    }
    std::thread::scope(|s| {
        let a = s.spawn(a);
        let b = b();
        (a.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), b)
    })
}

/// From this many bytes of input up, a module's unwind and symbol tables are built on two
/// threads.
const BUILD_APART_BYTES: usize = 1 << 20;

/// Builds the unwind and symbol tables of one binary (and its separate debug files).
/// Either may be absent; failures become warnings, never errors. The tables say which
/// of the files gave what ([`ModuleTables::files`]).
pub fn build_tables(
    binary: Option<TableInput<'_>>,
    debug_files: &[TableInput<'_>],
) -> ModuleTables {
    let mut made = Made::new(binary, debug_files);
    let debug_bytes: Vec<&[u8]> = debug_files.iter().map(|d| d.bytes).collect();
    // The unwind and symbol builders read the same files for disjoint sections: they run
    // side by side (a one-shot walk builds libc's tables on every run). Their results are
    // taken in one order, so the warnings are too.
    // Small files (the vdso, built from the dump on every report) build faster than a
    // thread starts.
    let inputs = &made.inputs;
    let apart = inputs.iter().map(|(f, _)| f.bytes.len()).sum::<usize>() >= BUILD_APART_BYTES;
    let (unwind_built, symbols_built) = side_by_side(
        apart,
        || whole_unwind(inputs),
        || symbols::build_symbol_table(binary.map(|b| b.bytes), &debug_bytes),
    );
    if let Some(result) = unwind_built {
        made.take_unwind(result);
    }
    made.take_symbols(symbols_built);
    made.finish()
}

/// The tables of one binary (and its separate debug files) for one walk: the unwind rules
/// of `.eh_frame` built FDE by FDE where the walk looks ([`OnDemandUnwind`]), the symbols
/// from the DWARF units the walk's addresses need ([`OnDemandSymbols`]), else (files
/// either declines) the whole table as [`build_tables`] builds it. The report is the same
/// as with [`build_tables`]'s tables.
pub fn on_demand_tables(
    binary: Option<(&str, &FileBytes)>,
    debug_files: &[(&str, &FileBytes)],
) -> ModuleTables {
    let debug_inputs: Vec<TableInput<'_>> = debug_files.iter().map(|&f| file_input(f)).collect();
    let mut made = Made::new(binary.map(file_input), &debug_inputs);
    // the first input gives the unwind rules, the others their .debug_frame (as in
    // `whole_unwind`)
    let files: Vec<&FileBytes> = binary
        .into_iter()
        .chain(debug_files.iter().copied())
        .map(|(_, b)| b)
        .collect();
    if let Some((first, rest)) = files.split_first() {
        let rest: Vec<FileBytes> = rest.iter().map(|&b| b.clone()).collect();
        match OnDemandUnwind::new((*first).clone(), &rest) {
            // FDE by FDE; when its first look at the FDEs finds them laid out so that only
            // the whole table is sure to answer the same, that table is built here, with
            // its warnings (an unreadable FDE's `unwind-table-corrupt`)
            Ok(on_demand) if on_demand.per_fde() => made.take_on_demand_unwind(on_demand),
            _ => {
                if let Some(result) = whole_unwind(&made.inputs) {
                    made.take_unwind(result);
                }
            }
        }
    }
    let debug: Vec<FileBytes> = debug_files.iter().map(|(_, b)| (*b).clone()).collect();
    match OnDemandSymbols::new(binary.map(|(_, b)| b.clone()), &debug) {
        Ok(on_demand) => made.take_on_demand_symbols(on_demand),
        Err(_) => {
            let debug_bytes: Vec<&[u8]> = debug_inputs.iter().map(|d| d.bytes).collect();
            made.take_symbols(symbols::build_symbol_table(
                binary.map(|(_, b)| &b[..]),
                &debug_bytes,
            ));
        }
    }
    made.finish()
}

fn file_input<'a>((name, bytes): (&'a str, &'a FileBytes)) -> TableInput<'a> {
    TableInput { name, bytes }
}

/// The whole unwind table of `inputs`: the first one's unwind sections, the others'
/// `.debug_frame`. A Windows x64 image's rules are in its `.pdata`, but a 32-bit one's
/// are in its PDB (FPO and FrameData): an x86 PDB gives its table, first (no image on
/// hand; a binary always comes first) or after the image; any other PDB first gives no
/// table, and one among the others is passed over.
fn whole_unwind(
    inputs: &[(TableInput<'_>, report::FileKind)],
) -> Option<Result<unwind::BuiltTable, unwind::UnwindError>> {
    let ((first, _), rest) = inputs.split_first()?;
    if crate::binary::is_pdb(first.bytes) {
        return unwind::builders::pdb_frame_data::build_from_pdb(first.bytes)
            .ok()
            .map(Ok);
    }
    let extra: Vec<&[u8]> = rest.iter().map(|(f, _)| f.bytes).collect();
    Some(unwind::build_from_elf(first.bytes, &extra))
}

/// A module's tables while they are made from its files: which file gave what.
struct Made<'a> {
    t: ModuleTables,
    unwind: Option<UnwindTables>,
    symbols: Option<SymbolTables>,
    /// Every input by index: the binary first, then the debug files — the order both
    /// builders number their inputs in.
    inputs: Vec<(TableInput<'a>, report::FileKind)>,
    gave: Vec<Vec<report::FileGave>>,
}

impl<'a> Made<'a> {
    fn new(binary: Option<TableInput<'a>>, debug_files: &[TableInput<'a>]) -> Self {
        let inputs: Vec<(TableInput<'_>, report::FileKind)> = binary
            .map(|b| (b, report::FileKind::Binary))
            .into_iter()
            .chain(debug_files.iter().map(|d| (*d, report::FileKind::Debug)))
            .collect();
        Made {
            t: ModuleTables {
                verified: true,
                ..ModuleTables::default()
            },
            unwind: None,
            symbols: None,
            gave: vec![Vec::new(); inputs.len()],
            inputs,
        }
    }

    /// Input `i` gave `what`.
    fn gave(&mut self, inputs: &[usize], what: report::FileGave) {
        for &i in inputs {
            if let Some(g) = self.gave.get_mut(i) {
                g.push(what);
            }
        }
    }

    fn take_unwind(&mut self, result: Result<unwind::BuiltTable, unwind::UnwindError>) {
        match result {
            Ok(built) => {
                if built.stats.entries_skipped > 0 {
                    self.t.warnings.push(Warning::new(
                        "unwind-table-corrupt",
                        format!(
                            "{} unwind entries could not be read and were skipped (first: {})",
                            built.stats.entries_skipped,
                            built.stats.first_error.as_deref().unwrap_or("?")
                        ),
                    ));
                }
                if built.stats.rows > 0 {
                    self.unwind = Some(UnwindTables::Whole(FileBytes::new(built.bytes)));
                    self.gave(&built.inputs, report::FileGave::Unwind);
                }
            }
            Err(e) => self.t.warnings.push(Warning::new(e.code(), e.to_string())),
        }
    }

    fn take_on_demand_unwind(&mut self, on_demand: OnDemandUnwind) {
        // the files the whole table's rows would come from; none: no table, as a whole
        // build without rows
        let inputs = on_demand.inputs();
        if !inputs.is_empty() {
            self.gave(&inputs, report::FileGave::Unwind);
            self.unwind = Some(UnwindTables::OnDemand(Arc::new(on_demand)));
        }
    }

    fn take_on_demand_symbols(&mut self, on_demand: OnDemandSymbols) {
        let on_demand = Arc::new(on_demand);
        // Which files the whole table's functions come from (the report's `files[].gave`)
        // is settled by probing a few dozen addresses, as costly as the walk's own
        // lookups and needed only when the report is made: another thread settles it
        // meanwhile (if none can be started, the report settles it itself).
        let ahead = on_demand.clone();
        let _ = std::thread::Builder::new()
            .name("symbol-inputs".into())
            .spawn(move || ahead.inputs());
        // every input may have given symbols: `module_files` keeps those that did
        let all: Vec<usize> = (0..self.inputs.len()).collect();
        self.gave(&all, report::FileGave::Symbols);
        self.symbols = Some(SymbolTables::OnDemand(on_demand));
    }

    fn take_symbols(&mut self, result: Result<symbols::BuiltSymbols, symbols::SymbolsError>) {
        match result {
            Ok(built) => {
                self.symbols = Some(SymbolTables::Whole(FileBytes::new(built.bytes)));
                self.gave(&built.inputs, report::FileGave::Symbols);
            }
            Err(e) => self.t.warnings.push(Warning::new(
                "symbols-corrupt",
                format!("symbols unavailable: {e}"),
            )),
        }
    }

    fn finish(self) -> ModuleTables {
        let Made {
            mut t,
            unwind,
            symbols,
            inputs,
            gave,
        } = self;
        t.tables = Tables::Built { unwind, symbols };
        t.files = inputs
            .iter()
            .zip(gave)
            .filter(|(_, gave)| !gave.is_empty())
            .map(|((f, kind), gave)| report::ModuleFile {
                name: f.name.to_string(),
                build_id: object::File::parse(f.bytes)
                    .ok()
                    .and_then(|o| binary::build_id(&o))
                    .map(|id| crate::ids::hex(&id)),
                kind: *kind,
                gave,
                source: None,
            })
            .collect();
        t
    }
}

/// Builds the unwind and symbol tables of a module from its Breakpad `.sym` file (used
/// when no binary of the module is available: a binary's own tables win). Failures become
/// warnings, never errors.
///
/// At most `max_records` records (lines after the `MODULE` line) are read: tables grow
/// with the records, and a `.sym` file is anyone's upload. The rest are left out, with a
/// `sym-records-cut` warning.
pub fn build_tables_from_breakpad(name: &str, sym: &[u8], max_records: usize) -> ModuleTables {
    let mut t = ModuleTables {
        verified: true,
        files: vec![breakpad_file(name)],
        ..ModuleTables::default()
    };
    let sym = match first_records(sym, max_records) {
        Some(cut) => {
            t.warnings.push(Warning::new(
                "sym-records-cut",
                format!(
                    "{name} holds more than {max_records} records: only the first \
                     {max_records} were read (--max-sym-records)"
                ),
            ));
            cut
        }
        None => sym,
    };
    // The two tables come from disjoint records of one text: build them side by side (a
    // large `.sym` takes milliseconds each, and `postmortem walk` builds them per run).
    let (unwind_built, symbols_built) = side_by_side(
        true,
        || crate::breakpad::unwind::build_from_breakpad(sym),
        || crate::breakpad::symbols::build_symbol_table_breakpad(sym),
    );
    let (mut unwind, mut symbols) = (None, None);
    // Rules Breakpad's postfix language can say but our rules cannot (a dereferenced CFA)
    // are not corruption: those ranges simply fall back to frame pointers and scanning.
    match unwind_built {
        Ok(built) if built.stats.rows > 0 => {
            unwind = Some(UnwindTables::Whole(FileBytes::new(built.bytes)));
        }
        Ok(_) => {}
        Err(e) => t.warnings.push(Warning::new(e.code(), e.to_string())),
    }
    match symbols_built {
        Ok(built) => symbols = Some(SymbolTables::Whole(FileBytes::new(built.bytes))),
        Err(e) => t.warnings.push(Warning::new(
            "symbols-corrupt",
            format!("symbols unavailable: {e}"),
        )),
    }
    t.tables = Tables::Built { unwind, symbols };
    t
}

/// The `MODULE` line and the first `max_records` lines after it, when `sym` holds more;
/// `None` when it holds no more. Only the bytes up to the cut are looked at.
fn first_records(sym: &[u8], max_records: usize) -> Option<&[u8]> {
    let end = memchr::memchr_iter(b'\n', sym).nth(max_records)?;
    let rest = sym.get(end + 1..)?;
    // a last line without its newline is a record too; trailing newlines are none
    if rest.iter().all(|b| b.is_ascii_whitespace()) {
        return None;
    }
    sym.get(..=end)
}

/// The tables of an indexed Breakpad `.sym` file, built where one walk looks
/// ([`crate::breakpad::index`]); the report is the same as with [`build_tables_from_breakpad`].
pub fn indexed_breakpad_tables(name: &str, index: BreakpadIndex) -> ModuleTables {
    ModuleTables {
        verified: true,
        tables: Tables::Breakpad(Arc::new(index)),
        files: vec![breakpad_file(name)],
        ..ModuleTables::default()
    }
}

/// A module's `.sym` file, before the report says what it gave (see `modules::module_files`).
fn breakpad_file(name: &str) -> report::ModuleFile {
    report::ModuleFile {
        name: name.to_string(),
        build_id: None,
        kind: report::FileKind::Breakpad,
        gave: Vec::new(),
        source: None,
    }
}

/// Where a module's tables came from, for the report.
pub(crate) struct Loaded {
    pub tables: Option<ModuleTables>,
    pub from_memory: bool,
}

/// Up to `len` bytes at `addr`: from the dump's memory, else from the file of the module
/// mapped there (code and read-only data, which a core leaves to the file). What the crash
/// analysis reads: the crashing instruction, strings a library keeps (a type's name).
pub(crate) fn read_image<'a>(
    dump: &'a Dump<'_>,
    loaded: &'a [Loaded],
    addr: u64,
    len: usize,
) -> Option<&'a [u8]> {
    let from_file = || {
        let i = dump.module_index_for(addr)?;
        let code = loaded.get(i)?.tables.as_ref()?.code.as_ref()?;
        code.bytes_at(addr.checked_sub(dump.modules.get(i)?.load_base)?, len)
    };
    dump.memory
        .read_bytes(addr, len)
        .or_else(|| dump.memory.read_to_range_end(addr))
        .map(|b| b.get(..b.len().min(len)).unwrap_or(b))
        .or_else(from_file)
}

/// At most this many modules of a dump get tables built from the dump's own memory.
const MAX_MEMORY_IMAGES: usize = 4;

/// The vdso's whole image is in the dump: its tables come from there. Whatever path the
/// dump gives it — none in a core, its name (`linux-gate.so`, `linux-vdso.so.1`) in a
/// minidump's module list — no file describes it: a Linux minidump's threads blocked in
/// a system call stand in i386's `__kernel_vsyscall`, whose caller only the vdso's own
/// CFI finds.
fn tables_from_memory(dump: &Dump<'_>, m: &Module) -> Option<ModuleTables> {
    if !m.is_vdso() {
        return None;
    }
    let len = usize::try_from(m.end.checked_sub(m.base)?).ok()?;
    let image = dump.memory.read_bytes(m.base, len)?;
    let input = TableInput {
        name: &m.name,
        bytes: image,
    };
    let mut t = build_tables(Some(input), &[]);
    t.verified = m.build_id.is_some();
    // no file: the report says `dump-memory` among its unwind sources
    t.files.clear();
    Some(t)
}

/// Each module's tables from the provider, else (the vdso) from the dump's memory.
pub(crate) fn load(dump: &Dump<'_>, provider: &dyn TableProvider) -> Vec<Loaded> {
    // A process has one vdso; a dump listing many (hostile) would have each one's image
    // built from its memory, so a few at most are.
    let mut images_left = MAX_MEMORY_IMAGES;
    dump.modules
        .iter()
        .zip(provider_tables(dump, provider))
        .map(|(m, tables)| match tables {
            Some(t) => Loaded {
                tables: Some(t),
                from_memory: false,
            },
            None => {
                let from_memory = (images_left > 0)
                    .then(|| tables_from_memory(dump, m))
                    .flatten();
                if from_memory.is_some() {
                    images_left -= 1;
                }
                Loaded {
                    from_memory: from_memory.is_some(),
                    tables: from_memory,
                }
            }
        })
        .collect()
}

/// Each module's tables from the provider, in module order: on two threads taking the
/// modules in turn when the provider builds them (one module's files, libc's DWARF, can
/// take as long as all the others').
fn provider_tables(dump: &Dump<'_>, provider: &dyn TableProvider) -> Vec<Option<ModuleTables>> {
    let modules = &dump.modules;
    if !provider.builds_tables() || modules.len() < 2 {
        return modules.iter().map(|m| provider.tables(dump, m)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let mut got = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(m) = modules.get(i) else { break };
            got.push((i, provider.tables(dump, m)));
        }
        got
    };
    let (theirs, ours) = side_by_side(true, take, take);
    let mut out: Vec<Option<ModuleTables>> = vec![None; modules.len()];
    for (i, t) in theirs.into_iter().chain(ours) {
        if let Some(slot) = out.get_mut(i) {
            *slot = t;
        }
    }
    out
}

/// The loaded tables opened for lookups, one entry per module (`None` where a module
/// has no such table, or its bytes do not open).
pub(crate) struct Opened<'t> {
    /// Symbols held as an index, whose tables are built where the walk looks (modules
    /// with no whole symbol table).
    pub indexed: Vec<Option<&'t dyn SymbolIndex>>,
    pub unwind: Vec<Option<ModuleUnwind<'t>>>,
    pub symbols: Vec<Option<SymbolTable<'t>>>,
    pub code: Vec<Option<CodeImage>>,
}

impl<'t> Opened<'t> {
    pub fn new(loaded: &'t [Loaded]) -> Self {
        let tables = |l: &'t Loaded| l.tables.as_ref();
        let breakpad: Vec<Option<&BreakpadIndex>> = loaded
            .iter()
            .map(|l| tables(l).and_then(ModuleTables::breakpad))
            .collect();
        let unwind = loaded
            .iter()
            .zip(&breakpad)
            .map(|(l, index)| {
                let table = tables(l)
                    .and_then(ModuleTables::whole_unwind)
                    .and_then(|b| UnwindTable::open(b).ok())
                    .map(ModuleUnwind::Table);
                let on_demand = || {
                    let od = tables(l)?.unwind_on_demand()?;
                    Some(ModuleUnwind::OnDemand(od))
                };
                table
                    .or_else(on_demand)
                    .or_else(|| index.filter(|i| i.has_unwind()).map(ModuleUnwind::Breakpad))
            })
            .collect();
        let symbols: Vec<Option<SymbolTable<'t>>> = loaded
            .iter()
            .map(|l| {
                tables(l)
                    .and_then(ModuleTables::whole_symbols)
                    .and_then(|b| SymbolTable::open(b).ok())
            })
            .collect();
        let indexed = loaded
            .iter()
            .zip(&breakpad)
            .zip(&symbols)
            .map(|((l, index), table)| {
                if table.is_some() {
                    return None;
                }
                let on_demand = tables(l).and_then(ModuleTables::symbols_on_demand);
                match (on_demand, index) {
                    (Some(od), _) => Some(od as &dyn SymbolIndex),
                    (None, Some(index)) => Some(*index as &dyn SymbolIndex),
                    (None, None) => None,
                }
            })
            .collect();
        let code = loaded
            .iter()
            .map(|l| tables(l).and_then(|t| t.code.clone()))
            .collect();
        Opened {
            indexed,
            unwind,
            symbols,
            code,
        }
    }
}

/// The executable ranges of a binary, as link-base offsets (see [`CodeImage`]'s `text`).
fn text_ranges(file: &object::File<'_>, link_base: u64) -> Vec<(u64, u64)> {
    let range = |address: u64, size: u64| {
        let start = binary::svma_to_offset(address, link_base)?;
        (size > 0).then_some((start, start.checked_add(size)?))
    };
    let mut text: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text && s.address() != 0)
        .filter_map(|s| range(s.address(), s.size()))
        .collect();
    if text.is_empty() {
        text = file
            .segments()
            .filter(|s| segment_is_executable(s.flags()))
            .filter_map(|s| range(s.address(), s.size()))
            .collect();
    }
    text.sort_unstable();
    crate::ranges::merged(text)
}

/// Whether a segment's flags say it is executable (ELF `PF_X`, Mach-O `VM_PROT_EXECUTE`,
/// PE `IMAGE_SCN_MEM_EXECUTE`).
fn segment_is_executable(flags: object::SegmentFlags) -> bool {
    match flags {
        object::SegmentFlags::Elf { p_flags, .. } => p_flags.contains(object::elf::PF_X),
        object::SegmentFlags::MachO { initprot, .. } => {
            initprot.contains(object::macho::VM_PROT_EXECUTE)
        }
        object::SegmentFlags::Coff { characteristics } => {
            characteristics.contains(object::pe::IMAGE_SCN_MEM_EXECUTE)
        }
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// The innermost function name the symbol table gives at `addr`.
    fn name_at(t: &ModuleTables, addr: u64) -> Option<String> {
        let s = crate::symbols::SymbolTable::open(t.whole_symbols()?).ok()?;
        let mut frames = Vec::new();
        s.lookup(addr, &mut frames);
        frames.last().and_then(|f| f.function).map(str::to_string)
    }

    /// Issue 34, finding 11: a `.sym` file's records past `max_records` are left out of its
    /// tables, with a `sym-records-cut` warning; within the bound, every record is read
    /// and nothing is said.
    #[test]
    fn sym_records_past_the_bound_are_left_out_with_a_warning() {
        let mut sym = String::from("MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 big\n");
        for i in 0..10u64 {
            sym.push_str(&format!("FUNC {:x} 10 0 f{i}\n", 0x1000 + i * 0x10));
        }
        let cut = build_tables_from_breakpad("big.sym", sym.as_bytes(), 4);
        assert_eq!(name_at(&cut, 0x1031).as_deref(), Some("f3"));
        assert_eq!(name_at(&cut, 0x1041), None);
        let codes: Vec<&str> = cut.warnings.iter().map(|w| w.code.as_str()).collect();
        assert_eq!(codes, ["sym-records-cut"]);
        let whole = build_tables_from_breakpad("big.sym", sym.as_bytes(), 10);
        assert_eq!(name_at(&whole, 0x1091).as_deref(), Some("f9"));
        assert!(whole.warnings.is_empty(), "{:?}", whole.warnings);
        // the last record without its newline counts too
        let unterminated = sym.trim_end();
        let cut = build_tables_from_breakpad("big.sym", unterminated.as_bytes(), 9);
        assert_eq!(cut.warnings.len(), 1);
        assert_eq!(name_at(&cut, 0x1091), None);
    }
}
