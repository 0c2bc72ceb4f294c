//! Fuzz target: Windows x86 frame data. The input's first line is read as a `STACK WIN`
//! record and its rest as a postfix program, evaluated over the input's bytes as stack
//! memory; then the whole input, after a fixed x86 `MODULE` line, is built into an unwind
//! table and an x86 thread is walked with it over the same stack bytes (every `STACK WIN`
//! row is evaluated by the walker's frame-data strategy).
//! Properties: nothing panics, evaluation and the walk end, a parsed record survives its
//! table encoding, the built table opens.
#![no_main]

use engine::breakpad::postfix::{evaluate, Variables};
use engine::breakpad::stack_win::{self, WinFrame};
use engine::breakpad::unwind::build_from_breakpad;
use engine::dump::{Arch, Identity, MemoryMap, Module, RegisterSet};
use engine::unwind::UnwindTable;
use engine::walk::x86::X86;
use engine::walk::{walk_thread, CodeReader, ModuleUnwind, WalkContext, WalkOptions};
use libfuzzer_sys::fuzz_target;

const BASE: u64 = 0x40_0000;
const STACK: u64 = 0x7fff_0000;

struct NoCode;

impl CodeReader for NoCode {
    fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
        None
    }
    fn names_function(&self, addr: u64) -> Option<bool> {
        Some(addr & 1 == 0)
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    if let Some(r) = stack_win::parse(first.strip_prefix("STACK ").unwrap_or(first)) {
        let bytes = r.frame.encode();
        assert_eq!(WinFrame::decode(&bytes), Some(r.frame));
    }
    let word = |a: u32| -> Option<u32> {
        let i = usize::try_from(a.checked_sub(STACK as u32)?).ok()?;
        Some(u32::from_le_bytes(data.get(i..i + 4)?.try_into().ok()?))
    };
    let mut vars = Variables::new();
    for (name, v) in [
        ("$esp", STACK as u32),
        ("$ebp", STACK as u32 + 16),
        (".cbParams", 8),
    ] {
        let _ = vars.set(name, v);
    }
    let _ = evaluate(rest, &mut vars, &mut |a| word(a));

    let mut sym = b"MODULE windows x86 0123456789ABCDEF0123456789ABCDEF1 m.pdb\n".to_vec();
    sym.extend_from_slice(data);
    let Ok(built) = build_from_breakpad(&sym) else {
        return;
    };
    let table = UnwindTable::open(&built.bytes).expect("a built table opens");
    let modules = vec![Module {
        name: "m".into(),
        path: None,
        base: BASE,
        end: BASE + 0x10_0000,
        load_base: BASE,
        build_id: None,
        debug_id: None,
        debug_file: None,
        code_id: None,
        version: None,
        identity: Identity::None,
        main: true,
        mappings: vec![],
    }];
    let tables = vec![Some(ModuleUnwind::Table(table))];
    let memory = MemoryMap::new(vec![(STACK, data)]);
    let mut options = WalkOptions::default();
    options.max_frames = 64;
    let ctx = WalkContext {
        memory: &memory,
        modules: &modules,
        tables: &tables,
        code: &NoCode,
        options: &options,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    let mut regs = RegisterSet::new(Arch::X86);
    regs.set(
        8,
        BASE + 0x1000 + u64::from(data.first().copied().unwrap_or(0)),
    );
    regs.set(4, STACK);
    regs.set(5, STACK + 16);
    let r = walk_thread(&X86, &ctx, &regs);
    assert!(r.frames.len() <= options.max_frames);
});
