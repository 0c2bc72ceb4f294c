//! The threads of the report: their order (the crashed thread first), each one walked
//! with the modules' unwind tables, then every frame symbolized — walks first, so that an
//! indexed `.sym` file builds its symbols once for all the addresses the walks need.

use crate::dump::{self, Dump, Module};
use crate::report::{self, budget::FrameBudget, hex_addr, Addr};
use crate::symbols::{SymbolFrame, SymbolIndex, SymbolTable};
use crate::walk::{self, CodeReader, WalkFrame};

use super::ProcessOptions;
use crate::tables::{CodeImage, Opened};

/// Below this, a pc outside every module is a call through a null (or near-null)
/// pointer, not generated code.
const MIN_CODE_ADDRESS: u64 = 0x1000;

/// A warning about the report's thread `index`.
fn thread_warning(code: &str, message: String, index: usize) -> report::Warning {
    report::Warning::new(code, message).of_thread(index)
}

/// What the walker asks of code: whether an address is the entry function, the bytes
/// before a return address (from the dump, else the module's file), whether an address is
/// executable (the module's file, else the dump's regions) and whether a symbol file
/// names a function there.
struct Code<'a, 't> {
    modules: &'a [Module],
    code: &'a [Option<CodeImage>],
    memory: &'a dump::MemoryMap<'a>,
    regions: &'a dump::Regions,
    symbols: &'a [Option<SymbolTable<'t>>],
    /// Symbol indexes, for modules without a built symbol table.
    indexed: &'a [Option<&'a dyn SymbolIndex>],
    /// Answers already found from an indexed file, by address (each costs a small
    /// table build, and a deep recursion or a long scan asks about one address many
    /// times).
    answers: std::cell::RefCell<rustc_hash::FxHashMap<u64, Option<FunctionAt>>>,
}

/// What a module's symbols say of one address.
#[derive(Debug, Clone, Copy)]
struct FunctionAt {
    /// A function is named there.
    named: bool,
    /// That function is `_start`.
    start: bool,
    /// That function is `main`.
    main: bool,
    /// The run-time address the function starts at, where the symbols say.
    entry: Option<u64>,
}

impl Code<'_, '_> {
    /// The module holding `addr`, by index.
    fn module_at(&self, addr: u64) -> Option<(usize, &Module)> {
        let i = dump::module_starting_at_or_below(self.modules, addr)?;
        let m = self.modules.get(i)?;
        (addr < m.end).then_some((i, m))
    }

    /// What the symbols of the module holding `addr` say of it; `None` when it has no
    /// symbols (or no module holds it).
    fn function_at(&self, addr: u64) -> Option<FunctionAt> {
        let (i, m) = self.module_at(addr)?;
        let rel = addr.checked_sub(m.load_base)?;
        let answer = |frames: &[SymbolFrame<'_>]| FunctionAt {
            // a symbol at the module's first byte names its header (Mach-O's
            // `_mh_execute_header`, PE's `__ImageBase`), not a function: a `.sym`
            // file's `PUBLIC 0 0 _mh_execute_header` covers everything up to the first
            // function, the load commands and constants before `__text` included
            named: frames
                .last()
                .is_some_and(|f| f.function.is_some() && f.function_start != Some(0)),
            start: is_start(frames),
            main: frames
                .last()
                .and_then(|f| f.function)
                .is_some_and(|name| name == "main"),
            entry: frames
                .last()
                .and_then(|f| f.function_start)
                .and_then(|s| s.checked_add(m.load_base)),
        };
        if let Some(Some(st)) = self.symbols.get(i) {
            let mut frames = Vec::new();
            st.lookup(rel, &mut frames);
            return Some(answer(&frames));
        }
        // symbols held as an index: a table for just this address
        let index = (*self.indexed.get(i)?)?;
        if let Some(&known) = self.answers.borrow().get(&addr) {
            return known;
        }
        let found = index.symbols_for(&[rel]).ok().map(|built| {
            let mut frames = Vec::new();
            let _ = SymbolTable::open(&built.bytes).is_ok_and(|st| st.lookup(rel, &mut frames));
            answer(&frames)
        });
        self.answers.borrow_mut().insert(addr, found);
        found
    }
}

impl CodeReader for Code<'_, '_> {
    fn is_entry_function(&self, addr: u64) -> bool {
        self.module_at(addr).is_some_and(|(_, m)| m.main)
            && self.function_at(addr).is_some_and(|f| f.start)
    }

    fn is_loader_start(&self, addr: u64, main_addr: u64) -> bool {
        let in_dyld = self.module_at(addr).is_some_and(|(_, m)| {
            m.path
                .as_deref()
                .is_some_and(|p| p.ends_with("/dyld") || p.ends_with("/libdyld.dylib"))
        });
        in_dyld
            && self.module_at(main_addr).is_some_and(|(_, m)| m.main)
            && self.function_at(main_addr).is_some_and(|f| f.main)
    }

    fn is_executable(&self, addr: u64) -> Option<bool> {
        if let Some((i, m)) = self.module_at(addr) {
            let from_file = self
                .code
                .get(i)
                .and_then(Option::as_ref)
                .zip(addr.checked_sub(m.load_base))
                .and_then(|(img, rel)| img.is_executable(rel));
            if from_file.is_some() {
                return from_file;
            }
        }
        self.regions.executable(addr)
    }

    fn names_function(&self, addr: u64) -> Option<bool> {
        self.function_at(addr).map(|f| f.named)
    }

    fn function_start(&self, addr: u64) -> Option<u64> {
        self.function_at(addr).and_then(|f| f.entry)
    }

    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if let Some(start) = addr.checked_sub(len as u64) {
            if let Some(b) = self.memory.read_bytes(start, len) {
                return Some(b.to_vec());
            }
        }
        let i = dump::module_starting_at_or_below(self.modules, addr)?;
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

/// The threads to walk, as indexes into the dump's: the crashed one first, then dump
/// order, cut to the budget's thread count (the cut said in `warnings`).
pub(super) fn order(
    dump: &Dump<'_>,
    options: &ProcessOptions,
    warnings: &mut Vec<report::Warning>,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dump.threads.len()).collect();
    if let Some(tid) = dump.crash.as_ref().map(|c| c.tid) {
        if let Some(pos) = dump.threads.iter().position(|t| t.tid == tid) {
            order.remove(pos);
            order.insert(0, pos);
        }
    }
    warnings.extend(options.budget.cut_threads(&mut order));
    order
}

/// Walks the threads of `order`, within the budget's frame count.
pub(super) fn walk_all(
    dump: &Dump<'_>,
    opened: &Opened<'_>,
    order: &[usize],
    options: &ProcessOptions,
    warnings: &mut Vec<report::Warning>,
) -> Vec<walk::WalkResult> {
    let code = Code {
        modules: &dump.modules,
        code: &opened.code,
        memory: &dump.memory,
        regions: &dump.regions,
        symbols: &opened.symbols,
        indexed: &opened.indexed,
        answers: Default::default(),
    };
    let pac_mask = dump.pac_mask.unwrap_or(0);
    let pac_signed_seen = std::cell::Cell::new(false);
    let mut base_options = options.walk.clone();
    if dump.os == dump::Os::Windows && dump.arch == dump::Arch::X86_64 {
        // Windows x64 code keeps no frame-pointer chain (see the option's doc).
        base_options.fp_without_unwind_table = false;
    }
    let ctx = walk::WalkContext {
        memory: &dump.memory,
        modules: &dump.modules,
        tables: &opened.unwind,
        code: &code,
        options: &base_options,
        pac_mask,
        pac_signed_seen: Some(&pac_signed_seen),
    };
    let walker = walk::arch::walker_for(dump.arch);
    if walker.is_none() && dump.threads.iter().any(|t| t.prewalked.is_none()) {
        warnings.push(report::Warning::new(
            "unsupported-arch",
            format!(
                "stack walking is not supported for {} yet: only frame 0 is shown",
                dump.arch.as_str()
            ),
        ));
    }
    let mut results = Vec::with_capacity(order.len());
    let mut frame_budget = options.budget.frames();
    for (index, &ti) in order.iter().enumerate() {
        let t = &dump.threads[ti];
        let walk_options = frame_budget.walk_options(&base_options);
        let ctx = walk::WalkContext {
            options: &walk_options,
            ..ctx
        };
        let result = match (&t.prewalked, walker) {
            (Some(given), _) => prewalked(dump, t, given, walk_options.max_frames),
            (None, Some(w)) => walk::walk_thread(w, &ctx, &t.registers),
            (None, None) => frame_zero(dump, t),
        };
        thread_warnings(t, index, &result, &mut frame_budget, options, warnings);
        results.push(result);
    }
    warnings.extend(frame_budget.warning());
    if dump.arch.info().pointer_authentication && pac_mask == 0 && pac_signed_seen.get() {
        // The walker derived the mask from the address space (see walk::aarch64). Said
        // only where a signed return address was stripped with it: a core from before
        // pointer authentication (or of a program built without it) has none.
        warnings.push(report::Warning::new(
            "pac-mask-inferred",
            "the dump records no pointer-authentication mask (NT_ARM_PAC_MASK): \
             return addresses were stripped to the address space's significant \
             bits (at least 48)",
        ));
    }
    results
}

/// The frames a crash report lists for a thread (its writer walked them), up to
/// `max_frames`: frame 0 at its exact pc, the callers at their return addresses, which
/// are looked up at the call (return address − 1 on x86_64, − 4 on aarch64: inside the
/// call instruction either way, where llvm-symbolizer and lldb look callers up).
fn prewalked(
    dump: &Dump<'_>,
    t: &dump::Thread,
    given: &[dump::GivenFrame],
    max_frames: usize,
) -> walk::WalkResult {
    let frames: Vec<WalkFrame> = given
        .iter()
        .take(max_frames)
        .enumerate()
        .map(|(k, g)| WalkFrame {
            pc: g.pc,
            sp: if k == 0 { t.registers.sp() } else { None },
            trust: if k == 0 {
                walk::Trust::Context
            } else {
                walk::Trust::Prewalked
            },
            unwind_source: None,
            module: dump.module_index_for(g.pc),
            exact_pc: k == 0,
            registers: if k == 0 {
                (&t.registers).into()
            } else {
                dump::FrameRegisters::none(dump.arch)
            },
        })
        .collect();
    let cut = given.len() > frames.len();
    walk::WalkResult {
        frames,
        end: if cut {
            walk::EndReason::FrameLimit
        } else {
            walk::EndReason::Outermost
        },
        end_detail: Some(if cut {
            "the crash report lists more frames than the walk's limit".into()
        } else {
            "the crash report's frame list ends here (walked on the device)".into()
        }),
    }
}

/// Frame 0 alone, from the thread's registers: the walk of an architecture without a
/// walker.
fn frame_zero(dump: &Dump<'_>, t: &dump::Thread) -> walk::WalkResult {
    walk::WalkResult {
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
                registers: (&t.registers).into(),
            })
            .into_iter()
            .collect(),
        end: walk::EndReason::UnwindError,
        end_detail: Some("no walker for this architecture".into()),
    }
}

/// What one thread's walk tells the reader: generated code on the stack, a thread cut at
/// the frame limit (the budget's own cut is said once, by the budget).
fn thread_warnings(
    t: &dump::Thread,
    index: usize,
    result: &walk::WalkResult,
    frame_budget: &mut FrameBudget,
    options: &ProcessOptions,
    warnings: &mut Vec<report::Warning>,
) {
    if let Some((k, f)) = result
        .frames
        .iter()
        .enumerate()
        .find(|(_, f)| f.module.is_none() && f.pc >= MIN_CODE_ADDRESS)
    {
        let message = format!(
            "thread {}: frame {k} at {} runs code that no module maps (JIT or other \
             generated code): no unwind table or symbol describes it, so the frames \
             around it come from frame pointers and stack scanning",
            t.tid,
            hex_addr(f.pc)
        );
        warnings.push(thread_warning("code-outside-modules", message, index));
    }
    let cut_by_budget = frame_budget.spent(&options.walk, result);
    if result.end == walk::EndReason::FrameLimit && !cut_by_budget {
        let message = format!(
            "thread {} has more frames than the walk's limit of {} per thread: the frames \
             past it are not shown",
            t.tid, options.walk.max_frames
        );
        warnings.push(thread_warning("frame-limit", message, index));
    }
}

/// The report's threads: every walked frame symbolized (inlined functions first).
pub(super) fn symbolize(
    dump: &Dump<'_>,
    opened: Opened<'_>,
    order: &[usize],
    results: Vec<walk::WalkResult>,
) -> Vec<report::Thread> {
    let back = dump.arch.call_back();
    let crashed_tid = dump.crash.as_ref().map(|c| c.tid);
    let indexed = symbols_from_indexes(dump, &opened.indexed, &results, back);
    let symbol_tables: Vec<Option<SymbolTable<'_>>> = opened
        .symbols
        .into_iter()
        .zip(&indexed)
        .map(|(table, built)| table.or_else(|| SymbolTable::open(built.as_deref()?).ok()))
        .collect();
    let mut threads = Vec::with_capacity(order.len());
    let mut scratch: Vec<SymbolFrame<'_>> = Vec::new();
    for (index, (&ti, result)) in order.iter().zip(results).enumerate() {
        let t = &dump.threads[ti];
        let mut frames = Vec::with_capacity(result.frames.len());
        for (k, wf) in result.frames.iter().enumerate() {
            let start = frames.len();
            symbolize_frame(dump, &symbol_tables, wf, back, &mut scratch, &mut frames);
            let given = t.prewalked.as_ref().and_then(|g| g.get(k));
            if let (Some(g), Some(f)) = (given, frames.get_mut(start)) {
                named_by_report(f, g);
            }
        }
        threads.push(report::Thread {
            index,
            tid: t.tid,
            name: t.name.clone(),
            crashed: Some(t.tid) == crashed_tid && index == 0,
            registers: t
                .registers
                .named()
                .map(|(n, v)| (n.to_string(), Addr(v)))
                .collect(),
            frames,
            end: result.end,
            end_detail: result.end_detail,
        });
    }
    threads
}

/// Moves the evidence stacks ([`dump::Thread::evidence`]: an Android heap error's
/// backtraces) out of the symbolized threads, which `order` lists by dump index: (the
/// threads, the stacks), the stacks numbered from 0 and none of them crashed. The dump
/// lists them after its threads, so the threads keep their indices.
pub(super) fn split_evidence(
    dump: &Dump<'_>,
    order: &[usize],
    symbolized: Vec<report::Thread>,
) -> (Vec<report::Thread>, Vec<report::Thread>) {
    let (mut threads, mut stacks) = (Vec::new(), Vec::new());
    for (&ti, t) in order.iter().zip(symbolized) {
        if dump.threads.get(ti).is_some_and(|d| d.evidence) {
            stacks.push(report::Thread {
                index: stacks.len(),
                crashed: false,
                ..t
            });
        } else {
            threads.push(t);
        }
    }
    (threads, stacks)
}

/// A frame no symbol file names gets the name the crash report gives it (a system
/// library's function the device knew), with `symbol_source: report`.
fn named_by_report(f: &mut report::Frame, g: &dump::GivenFrame) {
    if f.function.is_some() || f.inlined {
        return;
    }
    if let Some(name) = &g.function {
        f.function = Some(name.clone());
        f.function_offset = g.function_offset.map(Addr);
        f.symbol_source = Some(crate::symbols::SymbolSource::Report);
    }
}

/// For each module whose symbols are an index (no built symbol table), the table of the
/// addresses the walks' frames look up there.
fn symbols_from_indexes(
    dump: &Dump<'_>,
    indexed: &[Option<&dyn SymbolIndex>],
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
    indexed
        .iter()
        .zip(&mut rels)
        .map(|(index, rels)| {
            let index = (*index).filter(|_| !rels.is_empty())?;
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
        pc: Addr(wf.pc),
        sp: wf.sp.map(Addr),
        trust: wf.trust,
        unwind_source: wf.unwind_source,
        module: module.map(|(_, m)| m.name.clone()),
        module_index: module.map(|(i, _)| i),
        module_offset: module.map(|(_, m)| Addr(wf.pc.wrapping_sub(m.base))),
        function: None,
        function_offset: None,
        file: None,
        line: None,
        column: None,
        inlined,
        symbol_source: None,
        pre_context: Default::default(),
        context_line: None,
        post_context: Default::default(),
        source_url: None,
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
        f.symbol_source = Some(sf.source);
        if !sf.inlined {
            if let (Some(start), Some((_, m))) = (sf.function_start, module) {
                let start = m.load_base.wrapping_add(start);
                f.function_offset = wf.pc.checked_sub(start).map(Addr);
            }
        }
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::binary::FileBytes;
    use crate::dump::{MemoryMap, Regions};
    use std::sync::atomic::{AtomicU64, Ordering};

    const BASE: u64 = 0x40_0000;

    fn module() -> Module {
        Module {
            name: "m".into(),
            base: BASE,
            end: BASE + 0x10_0000,
            load_base: BASE,
            main: true,
            ..Module::default()
        }
    }

    fn code<'a>(
        modules: &'a [Module],
        images: &'a [Option<CodeImage>],
        memory: &'a MemoryMap<'a>,
        regions: &'a Regions,
        symbols: &'a [Option<SymbolTable<'a>>],
    ) -> Code<'a, 'a> {
        Code {
            modules,
            code: images,
            memory,
            regions,
            symbols,
            indexed: &[None],
            answers: Default::default(),
        }
    }

    /// Where this test program's own executable is loaded: its mapping at file offset 0.
    fn own_load_base() -> u64 {
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(2) == Some(&"00000000")
                    && f.get(5).is_some_and(|p| std::path::Path::new(p) == exe)
            })
            .unwrap();
        let start = line.split('-').next().unwrap();
        u64::from_str_radix(start, 16).unwrap()
    }

    #[test]
    fn a_modules_file_tells_its_code_from_its_data() {
        // This program itself: a function it runs is executable code, a variable it
        // writes is not, as its own file's sections say.
        static WRITTEN: AtomicU64 = AtomicU64::new(0);
        WRITTEN.store(1, Ordering::Relaxed);
        let image = CodeImage::new(FileBytes::new(
            std::fs::read(std::env::current_exe().unwrap()).unwrap(),
        ))
        .unwrap();
        let base = own_load_base();
        let function = a_modules_file_tells_its_code_from_its_data as fn() as usize as u64;
        let variable = &WRITTEN as *const AtomicU64 as u64;
        assert_eq!(image.is_executable(function - base), Some(true));
        assert_eq!(image.is_executable(variable - base), Some(false));
        // its header (the module's first byte) is in no executable section
        assert_eq!(image.is_executable(0), Some(false));
    }

    #[test]
    fn without_a_file_the_dumps_regions_tell_code_from_data() {
        let modules = [module()];
        let memory = MemoryMap::default();
        let regions = Regions::new([
            (BASE, BASE + 0x8_0000, Some(true)),
            (BASE + 0x8_0000, BASE + 0x10_0000, Some(false)),
        ]);
        let c = code(&modules, &[None], &memory, &regions, &[None]);
        assert_eq!(c.is_executable(BASE + 0x1234), Some(true));
        assert_eq!(c.is_executable(BASE + 0x9_0000), Some(false));
        // a dump without region permissions says nothing
        let silent = Regions::default();
        let c = code(&modules, &[None], &memory, &silent, &[None]);
        assert_eq!(c.is_executable(BASE + 0x9_0000), None);
    }

    #[test]
    fn a_symbol_file_names_the_functions_it_covers() {
        let sym = b"MODULE Linux x86_64 000102030405060708090A0B0C0D0E0F0 m\n\
                    FUNC 1000 20 0 f\n\
                    FUNC 3000 40 0 g\n";
        let built = crate::breakpad::symbols::build_symbol_table_breakpad(sym).unwrap();
        let table = SymbolTable::open(&built.bytes).unwrap();
        let modules = [module()];
        let memory = MemoryMap::default();
        let regions = Regions::default();
        let symbols = [Some(table)];
        let c = code(&modules, &[None], &memory, &regions, &symbols);
        assert_eq!(c.names_function(BASE + 0x1010), Some(true));
        assert_eq!(c.names_function(BASE + 0x303f), Some(true));
        assert_eq!(c.names_function(BASE + 0x2000), Some(false));
        assert_eq!(c.names_function(BASE + 0x9_0040), Some(false));
        // no symbol file: nothing to say
        let c = code(&modules, &[None], &memory, &regions, &[None]);
        assert_eq!(c.names_function(BASE + 0x1010), None);
        // no module
        assert_eq!(c.names_function(0x10), None);
    }
}
