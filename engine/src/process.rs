//! One dump plus the tables of its modules in, one `postmortem.report/1` document out.
//!
//! The engine never opens files or databases: callers (the CLI, the service's jobs)
//! implement [`TableProvider`] to hand over the unwind and symbol table bytes of each
//! module, built once per build-id with [`build_tables`] and cached however they like.
//! The vdso, whose image lives in the dump's own memory, is handled here.

use std::collections::BTreeMap;
use std::sync::Arc;

use object::{Object, ObjectSegment};
use sha2::{Digest, Sha256};

use crate::binary;
use crate::breakpad_index::BreakpadIndex;
use crate::dump::{self, Dump, DumpError, Identity, Module};
use crate::report::signature::SignatureRules;
use crate::report::{self, hex_addr, signals, Report};
use crate::symbols::{self, SymbolFrame, SymbolTable};
use crate::unwind::{self, UnwindTable};
use crate::walk::{self, CodeReader, ModuleUnwind, WalkFrame, WalkOptions};

/// Code bytes of a binary file, addressed by offset from its link base, for the
/// stack scanner's call-site check.
#[derive(Debug, Clone)]
pub struct CodeImage {
    data: Arc<[u8]>,
    /// (start, end, file offset) of each loadable segment, as link-base offsets.
    segments: Vec<(u64, u64, u64)>,
}

impl CodeImage {
    /// Maps the loadable segments of an ELF/Mach-O file.
    pub fn new(data: Arc<[u8]>) -> Option<CodeImage> {
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
        drop(file);
        Some(CodeImage { data, segments })
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
}

/// The tables one module's files produced (see [`build_tables`]).
#[derive(Debug, Clone, Default)]
pub struct ModuleTables {
    /// Serialized unwind table (`unwind::format`), if any unwind section was found.
    pub unwind: Option<Arc<[u8]>>,
    /// Serialized symbol table (`symbols::format`), if any symbols were found.
    pub symbols: Option<Arc<[u8]>>,
    /// Code bytes for call-site checks while scanning (optional).
    pub code: Option<CodeImage>,
    /// Whether the file's build-id equals the dump's (false for a match by path).
    pub verified: bool,
    /// Problems met while building (`unwind-table-corrupt`, `symbols-corrupt`): (code,
    /// message). Owned, so that a cache can store and replay them with the tables.
    pub warnings: Vec<(String, String)>,
    /// A Breakpad file indexed instead of built (one-shot walks, see
    /// [`indexed_breakpad_tables`]): `unwind` and `symbols` are then `None` and the tables
    /// are built where the walk looks.
    pub breakpad: Option<Arc<BreakpadIndex>>,
    /// The files the tables came from and what each gave (a `.sym` file's `gave` is
    /// filled when the report is made, as it is for an indexed one). Owned and
    /// serializable, so that a cache can store it with the tables.
    pub files: Vec<report::ModuleFile>,
}

/// Supplies tables for the modules of a dump.
pub trait TableProvider {
    /// The tables for `module` of `dump`, or `None` when no file describes it (the
    /// report then marks the module `missing`).
    fn tables(&self, dump: &Dump<'_>, module: &Module) -> Option<ModuleTables>;
    /// Problems met looking for `module`'s files that the report should tell whether or
    /// not tables were found (code, message): e.g. a file at the module's path that is
    /// another build.
    fn module_warnings(&self, _dump: &Dump<'_>, _module: &Module) -> Vec<(String, String)> {
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
#[derive(Debug, Clone, Copy)]
pub struct TableInput<'a> {
    /// The file's name (its last path component, or the name it was uploaded under).
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// Builds the unwind and symbol tables of one binary (and its separate debug files).
/// Either may be absent; failures become warnings, never errors. The tables say which
/// of the files gave what ([`ModuleTables::files`]).
pub fn build_tables(
    binary: Option<TableInput<'_>>,
    debug_files: &[TableInput<'_>],
) -> ModuleTables {
    let mut t = ModuleTables {
        verified: true,
        ..ModuleTables::default()
    };
    // Every input by index: the binary first, then the debug files — the order both
    // builders number their inputs in.
    let inputs: Vec<(TableInput<'_>, report::FileKind)> = binary
        .map(|b| (b, report::FileKind::Binary))
        .into_iter()
        .chain(debug_files.iter().map(|d| (*d, report::FileKind::Debug)))
        .collect();
    let mut gave: Vec<Vec<report::FileGave>> = vec![Vec::new(); inputs.len()];
    if let Some(((first, _), rest)) = inputs.split_first() {
        let extra: Vec<&[u8]> = rest.iter().map(|(f, _)| f.bytes).collect();
        match unwind::build_from_elf(first.bytes, &extra) {
            Ok(built) => {
                if built.stats.entries_skipped > 0 {
                    t.warnings.push((
                        "unwind-table-corrupt".into(),
                        format!(
                            "{} unwind entries could not be read and were skipped (first: {})",
                            built.stats.entries_skipped,
                            built.stats.first_error.as_deref().unwrap_or("?")
                        ),
                    ));
                }
                if built.stats.rows > 0 {
                    t.unwind = Some(built.bytes.into());
                    for &i in &built.inputs {
                        if let Some(g) = gave.get_mut(i) {
                            g.push(report::FileGave::Unwind);
                        }
                    }
                }
            }
            Err(e) => t.warnings.push((e.code().into(), e.to_string())),
        }
    }
    let debug_bytes: Vec<&[u8]> = debug_files.iter().map(|d| d.bytes).collect();
    match symbols::build_symbol_table(binary.map(|b| b.bytes), &debug_bytes) {
        Ok(built) => {
            t.symbols = Some(built.bytes.into());
            for &i in &built.inputs {
                if let Some(g) = gave.get_mut(i) {
                    g.push(report::FileGave::Symbols);
                }
            }
        }
        Err(e) => t.warnings.push((
            "symbols-corrupt".into(),
            format!("symbols unavailable: {e}"),
        )),
    }
    t.files = inputs
        .iter()
        .zip(gave)
        .filter(|(_, gave)| !gave.is_empty())
        .map(|((f, kind), gave)| report::ModuleFile {
            name: f.name.to_string(),
            build_id: object::File::parse(f.bytes)
                .ok()
                .and_then(|o| binary::build_id(&o))
                .map(|id| dump::hex(&id)),
            kind: *kind,
            gave,
        })
        .collect();
    t
}

/// Builds the unwind and symbol tables of a module from its Breakpad `.sym` file (used
/// when no binary of the module is available: a binary's own tables win). Failures become
/// warnings, never errors.
pub fn build_tables_from_breakpad(name: &str, sym: &[u8]) -> ModuleTables {
    let mut t = ModuleTables {
        verified: true,
        files: vec![breakpad_file(name)],
        ..ModuleTables::default()
    };
    // The two tables come from disjoint records of one text: build them side by side (a
    // large `.sym` takes milliseconds each, and `postmortem walk` builds them per run).
    let (unwind_built, symbols_built) = std::thread::scope(|s| {
        let unwind = s.spawn(|| unwind::build_from_breakpad(sym));
        let symbols = symbols::build_symbol_table_breakpad(sym);
        // a panic in the builder stays a panic, as if it had run on this thread
        let unwind = unwind
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (unwind, symbols)
    });
    // Rules Breakpad's postfix language can say but our rules cannot (a dereferenced CFA)
    // are not corruption: those ranges simply fall back to frame pointers and scanning.
    match unwind_built {
        Ok(built) if built.stats.rows > 0 => t.unwind = Some(built.bytes.into()),
        Ok(_) => {}
        Err(e) => t.warnings.push((e.code().into(), e.to_string())),
    }
    match symbols_built {
        Ok(built) => t.symbols = Some(built.bytes.into()),
        Err(e) => t.warnings.push((
            "symbols-corrupt".into(),
            format!("symbols unavailable: {e}"),
        )),
    }
    t
}

/// The tables of an indexed Breakpad `.sym` file, built where one walk looks
/// ([`crate::breakpad_index`]); the report is the same as with [`build_tables_from_breakpad`].
pub fn indexed_breakpad_tables(name: &str, index: BreakpadIndex) -> ModuleTables {
    ModuleTables {
        verified: true,
        breakpad: Some(Arc::new(index)),
        files: vec![breakpad_file(name)],
        ..ModuleTables::default()
    }
}

/// A module's `.sym` file, before the report says what it gave (see [`module_files`]).
fn breakpad_file(name: &str) -> report::ModuleFile {
    report::ModuleFile {
        name: name.to_string(),
        build_id: None,
        kind: report::FileKind::Breakpad,
        gave: Vec::new(),
    }
}

/// The files a module's report lists: those that gave a table the walk could open. A
/// `.sym` file gave what the module's sources say Breakpad gave (built whole or indexed,
/// the same answer).
fn module_files(
    tables: Option<&ModuleTables>,
    unwind_opened: bool,
    symbols_opened: bool,
    unwind_sources: &[String],
    symbol_sources: &[String],
) -> Vec<report::ModuleFile> {
    let Some(t) = tables else {
        return Vec::new();
    };
    let breakpad = symbols::SymbolSource::Breakpad.as_str();
    t.files
        .iter()
        .filter_map(|f| {
            let gave: Vec<report::FileGave> = match f.kind {
                report::FileKind::Breakpad => [
                    (unwind_sources, report::FileGave::Unwind),
                    (symbol_sources, report::FileGave::Symbols),
                ]
                .into_iter()
                .filter(|(sources, _)| sources.iter().any(|s| s == breakpad))
                .map(|(_, g)| g)
                .collect(),
                _ => f
                    .gave
                    .iter()
                    .copied()
                    .filter(|g| match g {
                        report::FileGave::Unwind => unwind_opened,
                        report::FileGave::Symbols => symbols_opened,
                    })
                    .collect(),
            };
            (!gave.is_empty()).then(|| report::ModuleFile { gave, ..f.clone() })
        })
        .collect()
}

/// Options of one processing run.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ProcessOptions {
    pub walk: WalkOptions,
    /// The dump's sha256 (lower-case hex) when the caller already knows it — the service
    /// stores dumps content-addressed — so hashing a large core is not repeated.
    pub dump_sha256: Option<String>,
    /// How the crash signature is made (`--signature-rules`; built-in by default).
    pub signature_rules: Arc<SignatureRules>,
    /// Threads walked, frames in all, report bytes: what one dump may cost.
    pub budget: report::budget::Budget,
}

impl ProcessOptions {
    /// The same options with the dump's sha256 already known.
    pub fn with_dump_sha256(mut self, sha256: String) -> Self {
        self.dump_sha256 = Some(sha256);
        self
    }
}

/// Reads the dump, walks and symbolizes every thread, and assembles the report.
pub fn process_dump(
    dump_bytes: &[u8],
    provider: &dyn TableProvider,
    options: &ProcessOptions,
) -> Result<Report, DumpError> {
    let dump = dump::read_dump(dump_bytes)?;
    Ok(process(&dump, dump_bytes, provider, options))
}

/// Where a module's tables came from, for the report.
struct Loaded {
    tables: Option<ModuleTables>,
    from_memory: bool,
}

/// At most this many modules of a dump get tables built from the dump's own memory.
const MAX_MEMORY_IMAGES: usize = 4;

/// The vdso's whole image is in the dump: its tables come from there.
fn tables_from_memory(dump: &Dump<'_>, m: &Module) -> Option<ModuleTables> {
    let is_vdso = m.path.is_none()
        && (m.name.contains("vdso") || m.name.contains("linux-gate") || m.name == "[vdso]");
    if !is_vdso {
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

struct Code<'a, 't> {
    modules: &'a [Module],
    code: &'a [Option<CodeImage>],
    memory: &'a dump::MemoryMap<'a>,
    symbols: &'a [Option<SymbolTable<'t>>],
    /// Indexed Breakpad files, for modules without a built symbol table.
    breakpad: &'a [Option<&'a BreakpadIndex>],
    /// Answers already found from an indexed file, by address (each costs a small
    /// table build, and a deep recursion asks about one address many times).
    entry_answers: std::cell::RefCell<rustc_hash::FxHashMap<u64, bool>>,
}

impl CodeReader for Code<'_, '_> {
    fn is_entry_function(&self, addr: u64) -> bool {
        let Some(i) = self
            .modules
            .partition_point(|m| m.base <= addr)
            .checked_sub(1)
        else {
            return false;
        };
        let Some(m) = self.modules.get(i) else {
            return false;
        };
        if !m.main || addr >= m.end {
            return false;
        }
        let Some(Some(st)) = self.symbols.get(i) else {
            // an indexed .sym file: a table for just this address
            let (Some(Some(index)), Some(rel)) =
                (self.breakpad.get(i), addr.checked_sub(m.load_base))
            else {
                return false;
            };
            if let Some(&known) = self.entry_answers.borrow().get(&addr) {
                return known;
            }
            let answer = index.symbols_for(&[rel]).ok().is_some_and(|built| {
                let mut frames = Vec::new();
                SymbolTable::open(&built.bytes).is_ok_and(|st| st.lookup(rel, &mut frames))
                    && is_start(&frames)
            });
            self.entry_answers.borrow_mut().insert(addr, answer);
            return answer;
        };
        let Some(rel) = addr.checked_sub(m.load_base) else {
            return false;
        };
        let mut frames = Vec::new();
        st.lookup(rel, &mut frames);
        is_start(&frames)
    }

    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if let Some(start) = addr.checked_sub(len as u64) {
            if let Some(b) = self.memory.read_bytes(start, len) {
                return Some(b.to_vec());
            }
        }
        let i = self
            .modules
            .partition_point(|m| m.base <= addr)
            .checked_sub(1)?;
        let m = self.modules.get(i)?;
        let img = self.code.get(i)?.as_ref()?;
        img.bytes_before(addr.checked_sub(m.load_base)?, len)
            .map(<[u8]>::to_vec)
    }
}

/// Whether the outermost function of a lookup is the entry point.
fn is_start(frames: &[SymbolFrame<'_>]) -> bool {
    frames
        .last()
        .and_then(|f| f.function)
        .is_some_and(|name| name == "_start")
}

/// Assembles the report of an already-read dump.
/// Below this, a pc outside every module is a call through a null (or near-null)
/// pointer, not generated code.
const MIN_CODE_ADDRESS: u64 = 0x1000;

pub fn process(
    dump: &Dump<'_>,
    dump_bytes: &[u8],
    provider: &dyn TableProvider,
    options: &ProcessOptions,
) -> Report {
    let mut warnings: Vec<report::Warning> = dump
        .warnings
        .iter()
        .map(|w| report::Warning {
            code: w.code.to_string(),
            message: w.message.clone(),
            thread: None,
            module: None,
        })
        .collect();
    // A process has one vdso; a dump listing many (hostile) would have each one's image
    // built from its memory, so a few at most are.
    let mut images_left = MAX_MEMORY_IMAGES;
    let loaded: Vec<Loaded> = dump
        .modules
        .iter()
        .map(|m| match provider.tables(dump, m) {
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
        .collect();
    let breakpad: Vec<Option<&BreakpadIndex>> = loaded
        .iter()
        .map(|l| l.tables.as_ref().and_then(|t| t.breakpad.as_deref()))
        .collect();
    let unwind_tables: Vec<Option<ModuleUnwind<'_>>> = loaded
        .iter()
        .zip(&breakpad)
        .map(|(l, index)| {
            let table = l
                .tables
                .as_ref()
                .and_then(|t| t.unwind.as_deref())
                .and_then(|b| UnwindTable::open(b).ok())
                .map(ModuleUnwind::Table);
            table.or_else(|| index.filter(|i| i.has_unwind()).map(ModuleUnwind::Breakpad))
        })
        .collect();
    let symbol_tables: Vec<Option<SymbolTable<'_>>> = loaded
        .iter()
        .map(|l| {
            l.tables
                .as_ref()
                .and_then(|t| t.symbols.as_deref())
                .and_then(|b| SymbolTable::open(b).ok())
        })
        .collect();
    let code_images: Vec<Option<CodeImage>> = loaded
        .iter()
        .map(|l| l.tables.as_ref().and_then(|t| t.code.clone()))
        .collect();

    // modules
    let mut modules = Vec::with_capacity(dump.modules.len());
    for (i, (m, l)) in dump.modules.iter().zip(&loaded).enumerate() {
        let verified = l.tables.as_ref().is_some_and(|t| t.verified);
        let indexed_symbols = breakpad[i].is_some_and(BreakpadIndex::has_symbols);
        let has_tables =
            unwind_tables[i].is_some() || symbol_tables[i].is_some() || indexed_symbols;
        let mut unwind_sources: Vec<String> = unwind_tables[i]
            .map(|t| t.sources().iter().map(|s| s.as_str().to_string()).collect())
            .unwrap_or_default();
        if l.from_memory && unwind_tables[i].is_some() {
            unwind_sources = vec!["dump-memory".to_string()];
        }
        let mut symbol_sources: Vec<String> = symbol_tables[i]
            .as_ref()
            .map(|t| t.sources().iter().map(|s| s.as_str().to_string()).collect())
            .unwrap_or_default();
        if indexed_symbols && symbol_tables[i].is_none() {
            symbol_sources = vec![symbols::SymbolSource::Breakpad.as_str().to_string()];
        }
        for (code, message) in provider.module_warnings(dump, m) {
            warnings.push(report::Warning {
                code,
                message,
                thread: None,
                module: Some(i),
            });
        }
        if let Some(t) = &l.tables {
            for (code, msg) in &t.warnings {
                warnings.push(report::Warning {
                    code: code.clone(),
                    message: format!("{}: {msg}", m.name),
                    thread: None,
                    module: Some(i),
                });
            }
        }
        let status = match &l.tables {
            None => {
                warnings.push(report::Warning {
                    code: "module-missing".into(),
                    message: match m.build_id_hex() {
                        Some(id) => format!(
                            "no file for {} (build-id {id}): upload it to symbolize its frames",
                            m.name
                        ),
                        None => format!("no file for {}, which has no build-id", m.name),
                    },
                    thread: None,
                    module: Some(i),
                });
                "missing"
            }
            Some(_) if !has_tables => "corrupt",
            Some(_) if !verified => {
                warnings.push(report::Warning {
                    code: "module-unverified".into(),
                    message: format!(
                        "{} was matched by path only; its symbols may not be the crashed build",
                        m.name
                    ),
                    thread: None,
                    module: Some(i),
                });
                "unverified"
            }
            Some(_) => "ok",
        };
        modules.push(report::Module {
            index: i,
            name: m.name.clone(),
            path: m.path.clone(),
            base: hex_addr(m.base),
            end: hex_addr(m.end),
            build_id: m.build_id_hex(),
            debug_id: m.debug_id.clone(),
            code_id: m.code_id.clone(),
            identity: match m.identity {
                Identity::BuildId => "build-id",
                Identity::Path => "path",
                Identity::None => "none",
            }
            .to_string(),
            verified,
            main: m.main,
            status: status.to_string(),
            files: module_files(
                l.tables.as_ref(),
                unwind_tables[i].is_some(),
                symbol_tables[i].is_some(),
                &unwind_sources,
                &symbol_sources,
            ),
            unwind: unwind_sources,
            symbols: symbol_sources,
        });
    }

    // threads: crashed first, then dump order
    let crashed_tid = dump.crash.as_ref().map(|c| c.tid);
    let mut order: Vec<usize> = (0..dump.threads.len()).collect();
    if let Some(tid) = crashed_tid {
        if let Some(pos) = dump.threads.iter().position(|t| t.tid == tid) {
            order.remove(pos);
            order.insert(0, pos);
        }
    }
    warnings.extend(options.budget.cut_threads(&mut order));
    let code = Code {
        modules: &dump.modules,
        code: &code_images,
        memory: &dump.memory,
        symbols: &symbol_tables,
        breakpad: &breakpad,
        entry_answers: Default::default(),
    };
    let pac_mask = dump.pac_mask.unwrap_or(0);
    if dump.arch == dump::Arch::Aarch64 && pac_mask == 0 {
        // The walker then derives the mask from the address space (see walk::aarch64).
        warnings.push(report::Warning {
            code: "pac-mask-inferred".into(),
            message: "the dump records no pointer-authentication mask (NT_ARM_PAC_MASK): \
                      return addresses were stripped to the address space's significant \
                      bits (at least 48)"
                .into(),
            thread: None,
            module: None,
        });
    }
    let ctx = walk::WalkContext {
        memory: &dump.memory,
        modules: &dump.modules,
        tables: &unwind_tables,
        code: &code,
        options: &options.walk,
        pac_mask,
    };
    let walker = walk::arch::walker_for(dump.arch);
    if walker.is_none() {
        warnings.push(report::Warning {
            code: "unsupported-arch".into(),
            message: format!(
                "stack walking is not supported for {} yet: only frame 0 is shown",
                dump.arch.as_str()
            ),
            thread: None,
            module: None,
        });
    }
    let back = match dump.arch {
        dump::Arch::Aarch64 | dump::Arch::Arm => 4,
        _ => 1,
    };
    // Walk every thread first, then symbolize: an indexed .sym file builds its symbols
    // once for all the addresses the walks need.
    let mut results = Vec::with_capacity(order.len());
    let mut frame_budget = options.budget.frames();
    for (index, &ti) in order.iter().enumerate() {
        let t = &dump.threads[ti];
        let walk_options = frame_budget.walk_options(&options.walk);
        let ctx = walk::WalkContext {
            options: &walk_options,
            ..ctx
        };
        let result = match walker {
            Some(w) => walk::walk_thread(w, &ctx, &t.registers),
            None => walk::WalkResult {
                frames: t
                    .registers
                    .pc()
                    .map(|pc| WalkFrame {
                        pc,
                        sp: t.registers.sp(),
                        trust: walk::Trust::Context,
                        unwind_source: None,
                        module: dump.module_index_for(pc),
                        exact_pc: true,
                        registers: t.registers.clone(),
                    })
                    .into_iter()
                    .collect(),
                end: walk::EndReason::UnwindError,
                end_detail: Some("no walker for this architecture".into()),
            },
        };
        if let Some((k, f)) = result
            .frames
            .iter()
            .enumerate()
            .find(|(_, f)| f.module.is_none() && f.pc >= MIN_CODE_ADDRESS)
        {
            warnings.push(report::Warning {
                code: "code-outside-modules".into(),
                message: format!(
                    "thread {}: frame {k} at {} runs code that no module maps (JIT or other \
                     generated code): no unwind table or symbol describes it, so the frames \
                     around it come from frame pointers and stack scanning",
                    t.tid,
                    hex_addr(f.pc)
                ),
                thread: Some(index),
                module: None,
            });
        }
        let cut_by_budget = frame_budget.spent(&options.walk, &result);
        if result.end == walk::EndReason::FrameLimit && !cut_by_budget {
            warnings.push(report::Warning {
                code: "frame-limit".into(),
                message: format!("thread {} has more frames than the limit", t.tid),
                thread: Some(index),
                module: None,
            });
        }
        results.push(result);
    }
    warnings.extend(frame_budget.warning());
    let indexed_symbols = symbols_from_indexes(dump, &breakpad, &symbol_tables, &results, back);
    let symbol_tables: Vec<Option<SymbolTable<'_>>> = symbol_tables
        .into_iter()
        .zip(&indexed_symbols)
        .map(|(table, built)| table.or_else(|| SymbolTable::open(built.as_deref()?).ok()))
        .collect();
    let mut threads = Vec::with_capacity(order.len());
    let mut scratch: Vec<SymbolFrame<'_>> = Vec::new();
    for (index, (&ti, result)) in order.iter().zip(results).enumerate() {
        let t = &dump.threads[ti];
        let mut frames = Vec::with_capacity(result.frames.len());
        for wf in &result.frames {
            symbolize_frame(dump, &symbol_tables, wf, back, &mut scratch, &mut frames);
        }
        threads.push(report::Thread {
            index,
            tid: t.tid,
            name: t.name.clone(),
            crashed: Some(t.tid) == crashed_tid && index == 0,
            registers: t
                .registers
                .named()
                .map(|(n, v)| (n.to_string(), hex_addr(v)))
                .collect(),
            frames,
            end: result.end.as_str().to_string(),
            end_detail: result.end_detail,
        });
    }

    let crash = dump.crash.as_ref().map(|c| crash_of(c, &threads));
    // The signature comes from the crashed thread (first by the ordering rule); a dump of
    // a live process has none.
    let signature = threads
        .iter()
        .find(|t| t.crashed)
        .and_then(|t| options.signature_rules.signature_of(t));
    let sha256 = options
        .dump_sha256
        .clone()
        .unwrap_or_else(|| dump::hex(&Sha256::digest(dump_bytes)));
    let mut report = Report {
        schema: report::SCHEMA.to_string(),
        processor: report::Processor {
            name: "postmortem".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            unwind_table_version: unwind::UNWIND_TABLE_VERSION,
            symbol_table_version: symbols::SYMBOL_TABLE_VERSION,
        },
        dump: report::DumpInfo {
            format: dump.format.as_str().into(),
            sha256,
            size: dump_bytes.len() as u64,
            os: dump.os.as_str().into(),
            arch: dump.arch.as_str().into(),
            writer: dump.writer.clone(),
            pid: dump.pid,
            executable: dump.executable.clone(),
            command_line: dump.command_line.clone(),
            created: dump.created.clone(),
        },
        crash,
        threads,
        modules,
        unloaded_modules: dump
            .unloaded_modules
            .iter()
            .map(|u| report::UnloadedModule {
                name: u.name.clone(),
                base: hex_addr(u.base),
                end: hex_addr(u.end),
                build_id: u.build_id.as_deref().map(dump::hex),
                debug_id: u.debug_id.clone(),
            })
            .collect(),
        annotations: dump
            .annotations
            .clone()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        signature,
        warnings,
    };
    report::budget::fit(&mut report, options.budget.max_report_bytes);
    report
}

/// For each module with an indexed `.sym` file and no built symbol table, the table of the
/// addresses the walks' frames look up there.
fn symbols_from_indexes(
    dump: &Dump<'_>,
    breakpad: &[Option<&BreakpadIndex>],
    built: &[Option<SymbolTable<'_>>],
    results: &[walk::WalkResult],
    back: u64,
) -> Vec<Option<Vec<u8>>> {
    let mut rels: Vec<Vec<u64>> = vec![Vec::new(); dump.modules.len()];
    for wf in results.iter().flat_map(|r| &r.frames) {
        let Some(i) = wf.module else { continue };
        let (Some(m), Some(list)) = (dump.modules.get(i), rels.get_mut(i)) else {
            continue;
        };
        if let Some(rel) = wf.address_for_lookup(back).checked_sub(m.load_base) {
            list.push(rel);
        }
    }
    breakpad
        .iter()
        .zip(built)
        .zip(&mut rels)
        .map(|((index, table), rels)| {
            let index = (*index).filter(|_| table.is_none() && !rels.is_empty())?;
            rels.sort_unstable();
            rels.dedup();
            index.symbols_for(rels).ok().map(|b| b.bytes)
        })
        .collect()
}

/// Appends the report frames of one physical frame: its inlined functions first.
fn symbolize_frame<'t>(
    dump: &Dump<'_>,
    symbol_tables: &[Option<SymbolTable<'t>>],
    wf: &WalkFrame,
    back: u64,
    scratch: &mut Vec<SymbolFrame<'t>>,
    out: &mut Vec<report::Frame>,
) {
    let module = wf.module.and_then(|i| dump.modules.get(i).map(|m| (i, m)));
    let lookup = wf.address_for_lookup(back);
    scratch.clear();
    if let Some((i, m)) = module {
        if let (Some(Some(st)), Some(rel)) = (symbol_tables.get(i), lookup.checked_sub(m.load_base))
        {
            st.lookup(rel, scratch);
        }
    }
    let base = |inlined: bool| report::Frame {
        index: 0,
        pc: hex_addr(wf.pc),
        sp: wf.sp.map(hex_addr),
        trust: wf.trust.as_str().into(),
        unwind_source: wf.unwind_source.map(|s| s.as_str().to_string()),
        module: module.map(|(_, m)| m.name.clone()),
        module_index: module.map(|(i, _)| i),
        module_offset: module.map(|(_, m)| hex_addr(wf.pc.wrapping_sub(m.base))),
        function: None,
        function_offset: None,
        file: None,
        line: None,
        column: None,
        inlined,
        symbol_source: None,
    };
    if scratch.is_empty() {
        let mut f = base(false);
        f.index = out.len();
        out.push(f);
        return;
    }
    for sf in scratch.iter() {
        let mut f = base(sf.inlined);
        f.index = out.len();
        f.function = sf.function.map(str::to_string);
        f.file = sf.file.map(str::to_string);
        f.line = sf.line;
        f.column = sf.column;
        f.symbol_source = Some(sf.source.as_str().to_string());
        if !sf.inlined {
            if let (Some(start), Some((_, m))) = (sf.function_start, module) {
                let start = m.load_base.wrapping_add(start);
                f.function_offset = wf.pc.checked_sub(start).map(hex_addr);
            }
        }
        out.push(f);
    }
}

fn crash_of(c: &dump::CrashInfo, threads: &[report::Thread]) -> report::Crash {
    let signal_name = c.signal.and_then(signals::signal_name).map(str::to_string);
    let code_name = match (c.signal, c.code) {
        (Some(s), Some(code)) => signals::code_name(s, code).map(str::to_string),
        _ => None,
    };
    let address = c.address.map(hex_addr);
    let mut reason = match (&signal_name, c.signal, &c.exception) {
        (Some(n), _, _) => n.clone(),
        (None, Some(s), _) => format!("signal {s}"),
        (None, None, Some(e)) => e.name.clone(),
        _ => "unknown".to_string(),
    };
    if let Some(cn) = &code_name {
        reason = format!("{reason} / {cn}");
    }
    let show_addr = c.signal.is_none_or(signals::has_fault_address);
    if let (true, Some(a)) = (show_addr, &address) {
        reason = format!("{reason} at {a}");
    }
    report::Crash {
        thread: 0,
        tid: threads.first().map(|t| t.tid).unwrap_or(c.tid),
        reason,
        signal: c.signal,
        signal_name,
        code: c.code,
        code_name,
        address,
        exception: c.exception.as_ref().map(|e| report::Exception {
            code: hex_addr(e.code),
            name: e.name.clone(),
            flags: hex_addr(e.flags),
        }),
        assertion: c.assertion.clone(),
    }
}
