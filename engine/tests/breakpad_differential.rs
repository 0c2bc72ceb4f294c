//! The Breakpad `.sym` builders against an independent reader of the same files: the
//! `breakpad-symbols` crate of rust-minidump (its own parser, symbolizer and CFI
//! evaluator; nothing of ours is used on its side).
//!
//! On `.sym` texts generated here (well-formed, every record kind, x86_64 and arm64) and,
//! when `dump_syms` is on the PATH, on its output for this process's libc and the fixture
//! programs, every address worth asking about — each FUNC's, line record's, INLINE
//! range's and PUBLIC symbol's edges, and random ones — must get:
//! - the same function name (ours without the parameter list), the same file and line
//!   for each of the inlined frames and the function itself;
//! - the same unwind result: evaluated with the same registers and memory, our rule and
//!   `breakpad-symbols`' evaluation of the `STACK CFI` rules give the same CFA, return
//!   address and callee-saved registers. Where the rules use expressions our table does
//!   not represent, we must have no rule (the walker falls back); where there is no
//!   `.ra` rule, ours marks the outermost frame and theirs gives nothing.
//!
//! Known, documented differences are not compared: a `PUBLIC` symbol after the last
//! symbol of the file (ours lasts one byte, theirs forever), and `PUBLIC` aliases (one
//! address, several names: ours picks one by a fixed rule, it must be one of them).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;

use breakpad_symbols::{FrameSymbolizer, FrameWalker, SimpleModule, SymbolFile};
use postmortem_engine::breakpad::symbols::build_symbol_table_breakpad;
use postmortem_engine::breakpad::unwind::build_from_breakpad;
use postmortem_engine::dump::Arch;
use postmortem_engine::symbols::SymbolTable;
use postmortem_engine::unwind::{rule::callee_saved, Slot, SlotKind, UnwindTable};

/// A small xorshift generator: random, but the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A well-formed `.sym` text as `dump_syms` lays one out, with every record kind.
fn generated_sym(arch: Arch, seed: u64) -> String {
    let mut rng = Rng(seed | 1);
    let (arch_name, sp, fp, saved): (&str, &str, &str, &[&str]) = match arch {
        Arch::X86_64 => ("x86_64", "$rsp", "$rbp", &["$rbx", "$r12", "$r13", "$r14"]),
        _ => ("arm64", "sp", "x29", &["x19", "x20", "x21", "x22"]),
    };
    let mut out = format!("MODULE Linux {arch_name} 0123456789ABCDEF0123456789ABCDEF0 gen\n");
    out.push_str("INFO CODE_ID 0123456789ABCDEF\n");
    for f in 0..6 {
        out.push_str(&format!("FILE {f} /src/file{f}.c\n"));
    }
    for o in 0..5 {
        out.push_str(&format!("INLINE_ORIGIN {o} inl{o}(int, char const*)\n"));
    }
    let mut addr = 0x1000u64;
    let mut publics = Vec::new();
    let mut cfi = Vec::new();
    for i in 0..120 {
        addr += rng.below(0x40);
        if rng.below(4) == 0 {
            // a gap only a PUBLIC symbol covers, sometimes with an alias
            publics.push(format!("PUBLIC {addr:x} 0 pub{i}"));
            if rng.below(3) == 0 {
                publics.push(format!("PUBLIC m {addr:x} 0 alias{i}"));
            }
            addr += 0x10 + rng.below(0x30);
        }
        let size = 0x20 + rng.below(0x100);
        let name = match rng.below(3) {
            0 => format!("ns::f{i}(int) const"),
            1 => format!("(anonymous namespace)::g{i}(std::vector<int>&)"),
            _ => format!("c_func{i}"),
        };
        let m = if rng.below(8) == 0 { "m " } else { "" };
        out.push_str(&format!("FUNC {m}{addr:x} {size:x} 0 {name}\n"));
        // INLINE records of nested depths inside the function
        let mut inl_at = addr + 4;
        let mut inl_size = size / 2;
        for depth in 0..rng.below(4) {
            let (call_line, call_file, origin) = (10 + rng.below(90), rng.below(6), rng.below(5));
            out.push_str(&format!(
                "INLINE {depth} {call_line} {call_file} {origin} {inl_at:x} {inl_size:x}\n"
            ));
            inl_at += 2;
            inl_size = inl_size.saturating_sub(4).max(2);
        }
        // line records covering parts of the function
        let mut at = addr;
        while at < addr + size {
            let len = 1 + rng.below(0x20).min(addr + size - at - 1);
            if rng.below(6) != 0 {
                let (line, file) = (1 + rng.below(500), rng.below(6));
                out.push_str(&format!("{at:x} {len:x} {line} {file}\n"));
            }
            at += len;
        }
        cfi.push(cfi_block(&mut rng, addr, size, sp, fp, saved));
        addr += size;
    }
    publics.push(format!("PUBLIC {addr:x} 0 _end_marker"));
    for p in publics {
        out.push_str(&p);
        out.push('\n');
    }
    for c in cfi {
        out.push_str(&c);
    }
    out.push_str("STACK WIN 4 1000 10 0 0 0 0 0 0 1 $eip 4 + ^ =\n");
    out
}

/// A `STACK CFI INIT` block and its deltas in compilers' style.
fn cfi_block(rng: &mut Rng, addr: u64, size: u64, sp: &str, fp: &str, saved: &[&str]) -> String {
    let ra = if sp == "sp" {
        ".ra: x30"
    } else {
        ".ra: .cfa -8 + ^"
    };
    let mut s = match rng.below(10) {
        // no .ra rule: the outermost frame
        0 => format!("STACK CFI INIT {addr:x} {size:x} .cfa: {sp} 8 +\n"),
        _ => format!("STACK CFI INIT {addr:x} {size:x} .cfa: {sp} 8 + {ra}\n"),
    };
    let mut at = addr;
    let mut cfa = 8;
    for _ in 0..rng.below(5) {
        at += 1 + rng.below(8);
        if at >= addr + size {
            break;
        }
        cfa += 8;
        let reg = saved[rng.below(saved.len() as u64) as usize];
        let rule = match rng.below(6) {
            0 => format!(".cfa: {fp} 16 +"),
            1 => format!("{reg}: {reg}"),
            2 => format!(".cfa: {sp} {cfa} + {reg}: .cfa -{cfa} + ^"),
            3 => format!("{reg}: .cfa 16 +"),
            // an expression our table does not represent
            4 => format!(".cfa: {sp} 8 + ^ {reg}: .cfa -8 + ^"),
            _ => format!(".cfa: {sp} {cfa} + {fp}: .cfa -16 + ^ .ra: .cfa -8 + ^"),
        };
        s.push_str(&format!("STACK CFI {at:x} {rule}\n"));
    }
    s
}

/// `dump_syms` output for the programs worth comparing, when `dump_syms` is installed.
fn dumped_syms() -> Vec<(String, String)> {
    let works = Command::new("dump_syms").arg("--version").output();
    if !works.is_ok_and(|o| o.status.success()) {
        eprintln!("dump_syms is not installed: comparing generated .sym texts only");
        return Vec::new();
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .map(PathBuf::from);
    let fixtures = postmortem_testsupport::workspace_root().join("fixtures/sframe/walk");
    let programs = ["crash_deep", "crash_qsort", "crash_mixed", "crash_a64"];
    libc.into_iter()
        .chain(programs.iter().map(|p| fixtures.join(p)))
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let out = Command::new("dump_syms").arg(&p).output().ok()?;
            let text = String::from_utf8(out.stdout).ok()?;
            out.status
                .success()
                .then(|| (p.display().to_string(), text))
        })
        .collect()
}

/// What `breakpad-symbols` says about one address.
#[derive(Default)]
struct Theirs {
    instruction: u64,
    function: Option<String>,
    /// (file, line) of the function itself (the outermost frame).
    source: Option<(String, u32)>,
    /// Inlined frames, outermost first: (name, file, line).
    inlines: Vec<(String, Option<String>, Option<u32>)>,
}

impl FrameSymbolizer for Theirs {
    fn get_instruction(&self) -> u64 {
        self.instruction
    }
    fn set_function(&mut self, name: &str, _base: u64, _parameter_size: u32) {
        self.function = Some(name.to_owned());
    }
    fn set_source_file(&mut self, file: &str, line: u32, _base: u64) {
        self.source = Some((file.to_owned(), line));
    }
    fn add_inline_frame(&mut self, name: &str, file: Option<&str>, line: Option<u32>) {
        self.inlines
            .push((name.to_owned(), file.map(str::to_owned), line));
    }
}

/// Whether `ours` is `theirs` without its parameter list (`ns::f(int) const` → `ns::f`).
fn same_name(ours: &str, theirs: &str) -> bool {
    theirs
        .strip_prefix(ours)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('('))
}

/// One frame of a symbolized address: (function, file, line), innermost first.
type Frame = (String, Option<String>, Option<u32>);

/// Their answer as frames, innermost first, names as written in the file.
fn their_frames(t: &Theirs) -> Vec<Frame> {
    let Some(function) = &t.function else {
        return Vec::new();
    };
    let (file, line) = match &t.source {
        Some((f, l)) => (Some(f.clone()), Some(*l)),
        None => (None, None),
    };
    let mut frames = vec![(function.clone(), file, line)];
    frames.extend(t.inlines.iter().cloned());
    frames.reverse();
    frames
}

/// The addresses worth asking about: the edges of every record with a range, and
/// random ones over the file's span.
fn probes(sym: &SymbolFile, rng: &mut Rng, random: usize) -> Vec<u64> {
    let mut edges = BTreeSet::new();
    let mut edge = |start: u64, len: u64| {
        for a in [
            start,
            start + len / 2,
            start + len.saturating_sub(1),
            start + len,
        ] {
            edges.insert(a);
        }
        edges.insert(start.saturating_sub(1));
    };
    for (_, f) in sym.functions.ranges_values() {
        edge(f.address, u64::from(f.size));
        for (_, l) in f.lines.ranges_values() {
            edge(l.address, u64::from(l.size));
        }
        for i in &f.inlinees {
            edge(i.address, u64::from(i.size));
        }
    }
    for p in &sym.publics {
        edge(p.address, 1);
    }
    for (_, c) in sym.cfi_stack_info.ranges_values() {
        edge(c.init.address, u64::from(c.size));
        for r in &c.add_rules {
            edge(r.address, 1);
        }
    }
    let low = edges.iter().next().copied().unwrap_or(0);
    let top = edges.iter().next_back().copied().unwrap_or(0x1000) + 0x10;
    edges.extend((0..random).map(|_| low + rng.below(top - low)));
    edges.into_iter().collect()
}

/// Our symbols equal theirs at every probe; returns how many probes had a function.
fn compare_symbols(what: &str, text: &str, sym: &SymbolFile, probes: &[u64]) -> usize {
    let built = build_symbol_table_breakpad(text.as_bytes()).unwrap();
    let table = SymbolTable::open(&built.bytes).unwrap();
    let module = SimpleModule::default();
    // past the last symbol's start ours ends PUBLIC symbols, theirs does not
    let last_start = sym
        .publics
        .iter()
        .map(|p| p.address)
        .chain(sym.functions.ranges_values().map(|(r, _)| r.start))
        .max()
        .unwrap_or(0);
    let mut named = 0;
    for &addr in probes {
        let mut theirs = Theirs {
            instruction: addr,
            ..Theirs::default()
        };
        sym.fill_symbol(&module, &mut theirs);
        let mut ours = Vec::new();
        table.lookup(addr, &mut ours);
        let in_func = sym.functions.get(addr).is_some();
        if !in_func && addr >= last_start {
            continue;
        }
        let theirs = their_frames(&theirs);
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{what}: frames at {addr:#x}: ours {ours:?}, theirs {theirs:?}"
        );
        if !in_func {
            // a PUBLIC symbol: ours is one of the names at its address
            if let (Some(o), Some(_)) = (ours.first(), theirs.first()) {
                let names: Vec<&str> = sym
                    .publics
                    .iter()
                    .filter(|p| Some(p.address) == o.function_start)
                    .map(|p| p.name.as_str())
                    .collect();
                let name = o.function.unwrap_or("");
                assert!(
                    names.iter().any(|n| same_name(name, n)),
                    "{what}: PUBLIC at {addr:#x}: ours {name:?}, theirs one of {names:?}"
                );
                named += 1;
            }
            continue;
        }
        for (o, (name, file, line)) in ours.iter().zip(&theirs) {
            let ours_name = o.function.unwrap_or("");
            assert!(
                same_name(ours_name, name),
                "{what}: function at {addr:#x}: ours {ours_name:?}, theirs {name:?}"
            );
            let nonzero = |l: Option<u32>| l.filter(|&l| l != 0);
            assert_eq!(
                (o.file, nonzero(o.line)),
                (file.as_deref(), nonzero(*line)),
                "{what}: file and line at {addr:#x} ({name})"
            );
        }
        named += 1;
    }
    named
}

/// DWARF register numbers → `.sym` register names of the registers we compare.
fn reg_name(arch: Arch, reg: u16) -> Option<String> {
    const X86_64: [&str; 17] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15", "rip",
    ];
    match arch {
        Arch::X86_64 => X86_64.get(usize::from(reg)).map(|s| (*s).to_owned()),
        Arch::Aarch64 => match reg {
            0..=30 => Some(format!("x{reg}")),
            31 => Some("sp".into()),
            _ => None,
        },
        _ => None,
    }
}

/// A register's value in the callee frame: derived from its name (aliases first).
fn reg_value(name: &str) -> u64 {
    let name = match name {
        "fp" => "x29",
        "lr" => "x30",
        n => n,
    };
    name.bytes().fold(0x1000_0000u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    }) & 0x0000_7fff_ffff_fff0
}

/// The word in memory at `addr`: derived from the address.
fn memory(addr: u64) -> u64 {
    addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 8
}

/// What `breakpad-symbols`' CFI evaluation gives for one frame.
#[derive(Default, Debug)]
struct Walked {
    instruction: u64,
    cfa: Option<u64>,
    ra: Option<u64>,
    caller: HashMap<String, u64>,
}

impl FrameWalker for Walked {
    fn get_instruction(&self) -> u64 {
        self.instruction
    }
    fn has_grand_callee(&self) -> bool {
        false
    }
    fn get_grand_callee_parameter_size(&self) -> u32 {
        0
    }
    fn get_register_at_address(&self, address: u64) -> Option<u64> {
        Some(memory(address))
    }
    fn get_callee_register(&self, name: &str) -> Option<u64> {
        Some(reg_value(name))
    }
    fn set_caller_register(&mut self, name: &str, val: u64) -> Option<()> {
        self.caller.insert(name.to_owned(), val);
        Some(())
    }
    fn clear_caller_register(&mut self, name: &str) {
        self.caller.remove(name);
    }
    fn set_cfa(&mut self, val: u64) -> Option<()> {
        self.cfa = Some(val);
        Some(())
    }
    fn set_ra(&mut self, val: u64) -> Option<()> {
        self.ra = Some(val);
        Some(())
    }
}

/// Our slot evaluated like the rules (`cfa` for the CFA itself is `None`).
fn eval(arch: Arch, slot: Slot, cfa: Option<u64>, own: u16) -> Option<u64> {
    let off = i64::from(slot.value);
    let reg = |r: u16| reg_name(arch, r).map(|n| reg_value(&n));
    match (slot.kind()?, cfa) {
        (SlotKind::Offset, None) => Some(reg(u16::from(slot.reg))?.wrapping_add_signed(off)),
        (SlotKind::Offset, Some(cfa)) => Some(memory(cfa.wrapping_add_signed(off))),
        (SlotKind::ValOffset, Some(cfa)) => Some(cfa.wrapping_add_signed(off)),
        (SlotKind::Register, _) => reg(u16::from(slot.reg)),
        (SlotKind::Unchanged, _) => reg(own),
        _ => None,
    }
}

/// Whether every rule in force at `addr` is one our table represents (see
/// `postmortem_engine::breakpad::unwind`): `reg N ±`, `reg`, `.cfa N ± ^`, `.cfa ^`, `.cfa N ±`,
/// `.cfa`, `reg` — judged from the text, independently of our translation.
fn representable(rules: &[&str]) -> bool {
    let mut exprs: HashMap<&str, Vec<&str>> = HashMap::new();
    for r in rules {
        let mut target = None;
        for tok in r.split_ascii_whitespace() {
            if let Some(t) = tok.strip_suffix(':') {
                target = Some(t);
                exprs.insert(t, Vec::new());
            } else if let Some(t) = target {
                exprs.entry(t).or_default().push(tok);
            }
        }
    }
    let num = |s: &str| s.parse::<i32>().is_ok();
    let op = |s: &str| s == "+" || s == "-";
    exprs
        .iter()
        .all(|(target, e)| match (*target, e.as_slice()) {
            (".cfa", [r, n, o]) => !r.starts_with('.') && num(n) && op(o),
            (".cfa", [r]) => !r.starts_with('.'),
            (_, [".cfa", n, o, "^"]) => num(n) && op(o),
            (_, [".cfa", "^"] | [".cfa"]) => true,
            (t, [".cfa", n, o]) => t != ".ra" && num(n) && op(o),
            (_, [r]) => !r.starts_with('.'),
            _ => false,
        })
}

/// Our unwind answers equal theirs at every probe; returns how many were compared.
fn compare_unwind(what: &str, arch: Arch, text: &str, sym: &SymbolFile, probes: &[u64]) -> usize {
    let built = build_from_breakpad(text.as_bytes()).unwrap();
    let table = UnwindTable::open(&built.bytes).unwrap();
    let module = SimpleModule::default();
    let mut compared = 0;
    for &addr in probes {
        let mut theirs = Walked {
            instruction: addr,
            ..Walked::default()
        };
        let walked = sym.walk_frame(&module, &mut theirs).is_some();
        let ours = table.find(addr).map(|r| r.record);
        let Some(info) = sym.cfi_stack_info.get(addr) else {
            assert!(
                ours.is_none(),
                "{what}: a rule at {addr:#x} outside any INIT"
            );
            continue;
        };
        let mut rules = vec![info.init.rules.as_str()];
        rules.extend(
            info.add_rules
                .iter()
                .filter(|r| r.address <= addr)
                .map(|r| r.rules.as_str()),
        );
        let Some(ours) = ours else {
            assert!(
                !representable(&rules),
                "{what}: no rule at {addr:#x} for {rules:?} (theirs walked: {walked})"
            );
            continue;
        };
        if !walked {
            assert_eq!(
                ours.ra.kind(),
                Some(SlotKind::Undefined),
                "{what}: a rule at {addr:#x} that breakpad-symbols cannot evaluate: {rules:?}"
            );
            continue;
        }
        let cfa = eval(arch, ours.cfa, None, 0);
        assert_eq!(cfa, theirs.cfa, "{what}: CFA at {addr:#x} for {rules:?}");
        let ra = eval(arch, ours.ra, cfa, 0);
        assert_eq!(
            ra, theirs.ra,
            "{what}: return address at {addr:#x} for {rules:?}"
        );
        for &reg in callee_saved(arch) {
            let Some(name) = reg_name(arch, reg) else {
                continue;
            };
            let their_value = theirs.caller.get(&name).copied();
            let slot = ours.reg(arch, reg);
            let our_value = slot.and_then(|s| eval(arch, s, cfa, reg));
            // without a rule theirs leaves the register to the walker (which keeps a
            // callee-saved one), ours says so: unchanged
            let no_rule = slot.and_then(|s| s.kind()) == Some(SlotKind::Unchanged);
            if their_value.is_some() || !no_rule {
                assert_eq!(
                    our_value, their_value,
                    "{what}: {name} at {addr:#x} for {rules:?}"
                );
            }
        }
        compared += 1;
    }
    compared
}

fn arch_of(text: &str) -> Option<Arch> {
    let arch = text.lines().next()?.split(' ').nth(2)?;
    match arch {
        "x86_64" => Some(Arch::X86_64),
        "arm64" | "aarch64" => Some(Arch::Aarch64),
        _ => None,
    }
}

fn compare(what: &str, text: &str, seed: u64) {
    let sym = SymbolFile::from_bytes(text.as_bytes()).unwrap();
    let mut rng = Rng(seed | 1);
    let probes = probes(&sym, &mut rng, 3000);
    let named = compare_symbols(what, text, &sym, &probes);
    assert!(
        named > probes.len() / 10,
        "{what}: {named} of {} probes named",
        probes.len()
    );
    if let Some(arch) = arch_of(text) {
        let compared = compare_unwind(what, arch, text, &sym, &probes);
        let blocks = sym.cfi_stack_info.ranges_values().len();
        eprintln!(
            "{what}: {named} named, {compared} unwound, {blocks} CFI blocks, {} probes",
            probes.len()
        );
        // every block is asked about at several addresses
        assert!(
            compared >= blocks,
            "{what}: {compared} probes unwound for {blocks} STACK CFI INIT blocks"
        );
    }
}

#[test]
fn generated_sym_files_answer_like_breakpad_symbols() {
    for seed in 1..=6 {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let text = generated_sym(arch, seed * 0x9e37);
            compare(&format!("generated {arch:?} #{seed}"), &text, seed);
        }
    }
}

#[test]
fn dump_syms_output_answers_like_breakpad_symbols() {
    for (name, text) in dumped_syms() {
        compare(&name, &text, 0x5eed);
    }
}
