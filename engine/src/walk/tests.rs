//! Walker tests over literal stacks (x86_64): one per rule kind and end reason, each
//! through [`walk_thread`] with a table written rule by rule and stack words written out.
//!
//! Addresses: one module at `BASE`, the stack at `STACK`. Each test states the stack as
//! words and asserts pc, sp, trust and the recovered registers frame by frame.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use super::x86_64::X86_64;
use super::{walk_thread, CodeReader, EndReason, Trust, WalkContext, WalkOptions, WalkResult};
use crate::dump::{Arch, Identity, MemoryMap, Module, RegisterSet};
use crate::unwind::rule::{RuleRecord, Slot, UnwindSource, FLAG_SIGNAL_FRAME};
use crate::unwind::{TableWriter, UnwindTable};

const BASE: u64 = 0x40_0000;
const STACK: u64 = 0x7fff_0000;
const RSP: u16 = 7;
const RBP: u16 = 6;
const RBX: u16 = 3;
const RIP: u16 = 16;

/// A region whose rule says "outermost": return address undefined.
const OUTERMOST: u64 = 0x300;

fn module() -> Module {
    module_at(BASE, BASE + 0x10_0000)
}

/// A main module `m` over `[base, end)` with no identity: what the per-architecture
/// walker tests map their code into.
pub(crate) fn module_at(base: u64, end: u64) -> Module {
    Module {
        name: "m".into(),
        path: None,
        base,
        end,
        load_base: base,
        build_id: None,
        debug_id: None,
        debug_file: None,
        code_id: None,
        version: None,
        identity: Identity::None,
        main: true,
        mappings: vec![],
    }
}

/// Little-endian bytes of stack words.
pub(crate) fn stack_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// CFA = rsp + `cfa`, return address at CFA - 8.
fn rsp_rule(cfa: i32) -> RuleRecord {
    RuleRecord::new(
        UnwindSource::EhFrame,
        Slot::offset(RSP as u8, cfa),
        Slot::offset(0, -8),
    )
}

fn outermost_rule() -> RuleRecord {
    RuleRecord::new(
        UnwindSource::EhFrame,
        Slot::offset(RSP as u8, 8),
        Slot::UNDEFINED,
    )
}

/// A table from `(start, end, rule)` offsets, plus the outermost region.
fn table(rows: &[(u64, u64, RuleRecord)]) -> Vec<u8> {
    table_with(|_| rows.to_vec())
}

/// A table whose rows may refer to expressions added through the writer.
fn table_with(rows: impl FnOnce(&mut TableWriter) -> Vec<(u64, u64, RuleRecord)>) -> Vec<u8> {
    let mut w = TableWriter::new(Arch::X86_64);
    for (start, end, rule) in rows(&mut w) {
        w.push(start, end, &rule, 0);
    }
    w.push(OUTERMOST, OUTERMOST + 0x10, &outermost_rule(), 0);
    w.finish().bytes
}

fn expr(w: &mut TableWriter, bytes: &[u8], val: bool) -> Slot {
    let (off, len) = w.add_expression(bytes).unwrap();
    Slot::expression(val, off, len)
}

/// `DW_OP_breg7 (rsp) off`.
fn breg7(off: u8) -> Vec<u8> {
    // one- or two-byte SLEB128 for the offsets used here (< 8192)
    if off < 0x40 {
        vec![0x77, off]
    } else {
        vec![0x77, 0x80 | (off & 0x7f), off >> 7]
    }
}

struct NoCode;
impl CodeReader for NoCode {
    fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
        None
    }
}

/// Code where only `calls` are preceded by `call rel32`; every other address by nops.
struct Code {
    calls: Vec<u64>,
}
impl CodeReader for Code {
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut b = vec![0x90; len];
        if self.calls.contains(&addr) && len >= 5 {
            b[len - 5..].copy_from_slice(&[0xe8, 0x10, 0x20, 0x00, 0x00]);
        }
        Some(b)
    }
}

fn regs(pc: u64, sp: u64) -> RegisterSet {
    let mut r = RegisterSet::new(Arch::X86_64);
    r.set(RIP, pc);
    r.set(RSP, sp);
    r
}

/// Walks with the given memory, table and options.
fn walk(
    memory: &MemoryMap<'_>,
    table_bytes: Option<&[u8]>,
    code: &dyn CodeReader,
    options: &WalkOptions,
    regs: &RegisterSet,
) -> WalkResult {
    let modules = vec![module()];
    let tables =
        vec![table_bytes.map(|b| super::ModuleUnwind::Table(UnwindTable::open(b).unwrap()))];
    let ctx = WalkContext {
        memory,
        modules: &modules,
        tables: &tables,
        code,
        options,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    walk_thread(&X86_64, &ctx, regs)
}

fn cfi_only() -> WalkOptions {
    WalkOptions {
        enable_fp: false,
        enable_scan: false,
        ..WalkOptions::default()
    }
}

fn pcs(r: &WalkResult) -> Vec<u64> {
    r.frames.iter().map(|f| f.pc).collect()
}

#[test]
fn cfa_rsp_offset_with_return_address_at_cfa_minus_8() {
    // f: sub $16,%rsp after push %rbx: CFA = rsp + 24, ra at CFA-8, rbx at CFA-16
    let mut f = rsp_rule(24);
    f.set_reg(Arch::X86_64, RBX, Slot::offset(0, -16));
    let t = table(&[(0x100, 0x200, f)]);
    let ra = BASE + OUTERMOST + 5;
    let stack = words(&[0xdead, 0x5555, ra, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let mut r0 = regs(BASE + 0x123, STACK);
    r0.set(RBX, 0x1);
    let r = walk(&mem, Some(&t), &NoCode, &cfi_only(), &r0);
    assert_eq!(pcs(&r), vec![BASE + 0x123, ra]);
    let f1 = &r.frames[1];
    assert_eq!(f1.trust, Trust::Cfi);
    assert_eq!(f1.unwind_source, Some(UnwindSource::EhFrame));
    assert_eq!(f1.sp, Some(STACK + 24));
    assert_eq!(f1.registers.get(RBX), Some(0x5555));
    assert!(!f1.exact_pc);
    assert_eq!(f1.address_for_lookup(1), ra - 1);
    assert_eq!(r.end, EndReason::Outermost);
}

#[test]
fn rbp_based_cfa_with_saved_rbp() {
    let mut f = RuleRecord::new(
        UnwindSource::EhFrame,
        Slot::offset(RBP as u8, 16),
        Slot::offset(0, -8),
    );
    f.set_reg(Arch::X86_64, RBP, Slot::offset(0, -16));
    let t = table(&[(0x100, 0x200, f)]);
    let ra = BASE + OUTERMOST + 1;
    // rsp = STACK, rbp = STACK + 0x20: [rbp] = caller's rbp, [rbp + 8] = return address
    let stack = words(&[0, 0, 0, 0, STACK + 0x40, ra, 0, 0, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let mut r0 = regs(BASE + 0x150, STACK);
    r0.set(RBP, STACK + 0x20);
    let r = walk(&mem, Some(&t), &NoCode, &cfi_only(), &r0);
    assert_eq!(pcs(&r), vec![BASE + 0x150, ra]);
    assert_eq!(r.frames[1].sp, Some(STACK + 0x30));
    assert_eq!(r.frames[1].registers.get(RBP), Some(STACK + 0x40));
    assert_eq!(r.frames[1].trust, Trust::Cfi);
    assert_eq!(r.end, EndReason::Outermost);
}

#[test]
fn expression_cfa_of_a_plt_entry() {
    // CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0): after the push of a lazy-binding stub
    let plt_expr = [
        0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
    ];
    let t = table_with(|w| {
        let cfa = expr(w, &plt_expr, true);
        vec![(
            0x500,
            0x540,
            RuleRecord::new(UnwindSource::EhFrame, cfa, Slot::offset(0, -8)),
        )]
    });
    let ra = BASE + OUTERMOST + 1;
    let stack = words(&[ra, 0x1234, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    // at the stub's first instruction (rip & 15 = 6): the return address is at rsp
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &cfi_only(),
        &regs(BASE + 0x506, STACK),
    );
    assert_eq!(pcs(&r), vec![BASE + 0x506, ra]);
    assert_eq!(r.frames[1].sp, Some(STACK + 8));
    // after `push` (rip & 15 = 11): one more word on the stack
    let stack = words(&[0x1234, ra, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &cfi_only(),
        &regs(BASE + 0x50b, STACK),
    );
    assert_eq!(pcs(&r), vec![BASE + 0x50b, ra]);
    assert_eq!(r.frames[1].sp, Some(STACK + 16));
    assert_eq!(r.end, EndReason::Outermost);
}

/// glibc's `__restore_rt` rule (x86_64): everything from the ucontext at rsp, whose
/// `uc_mcontext.gregs` start at offset 40 (rbp 120, rbx 128, rsp 160, rip 168).
fn restore_rt_rule(w: &mut TableWriter) -> RuleRecord {
    let mut cfa = breg7(160);
    cfa.push(0x06); // DW_OP_deref
    let cfa = expr(w, &cfa, true);
    let ra = expr(w, &breg7(168), false);
    let mut rec = RuleRecord::new(UnwindSource::EhFrame, cfa, ra);
    rec.flags |= FLAG_SIGNAL_FRAME;
    let rbp = expr(w, &breg7(120), false);
    let rbx = expr(w, &breg7(128), false);
    rec.set_reg(Arch::X86_64, RBP, rbp);
    rec.set_reg(Arch::X86_64, RBX, rbx);
    rec
}

/// Handler at 0x100, `__restore_rt` at 0x401 (its FDE starting one byte earlier, as
/// glibc's does), the interrupted function at 0x600 with a row starting exactly there and
/// an outermost row just before it: a lookup at pc - 1 would end the walk.
fn signal_table() -> Vec<u8> {
    table_with(|w| {
        let sig = restore_rt_rule(w);
        vec![
            (0x100, 0x200, rsp_rule(8)),
            (0x400, 0x410, sig),
            (0x5f0, 0x600, outermost_rule()),
            (0x600, 0x610, rsp_rule(16)),
        ]
    })
}

/// A stack with the return address to `__restore_rt` at `STACK` and the ucontext above it.
fn signal_stack(interrupted_sp: u64, interrupted_pc: u64, ra3: u64) -> Vec<u8> {
    let mut w = vec![0u64; 0x80];
    w[0] = BASE + 0x401;
    let uc = 1; // the ucontext starts at STACK + 8
    w[uc + 120 / 8] = 0x1111; // rbp
    w[uc + 128 / 8] = 0x2222; // rbx
    w[uc + 160 / 8] = interrupted_sp;
    w[uc + 168 / 8] = interrupted_pc;
    // the interrupted frame: CFA = rsp + 16, return address at rsp + 8
    if let Some(i) = interrupted_sp
        .checked_sub(STACK)
        .map(|o| o as usize / 8 + 1)
        .filter(|&i| i < w.len())
    {
        w[i] = ra3;
    }
    words(&w)
}

#[test]
fn signal_frame_then_the_interrupted_frame_at_its_exact_pc() {
    let t = signal_table();
    let interrupted_sp = STACK + 0x300;
    let interrupted_pc = BASE + 0x600;
    let ra3 = BASE + OUTERMOST + 1;
    let stack = signal_stack(interrupted_sp, interrupted_pc, ra3);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &cfi_only(),
        &regs(BASE + 0x140, STACK),
    );
    assert_eq!(
        pcs(&r),
        vec![BASE + 0x140, BASE + 0x401, interrupted_pc, ra3],
        "{:?} {:?}",
        r.end,
        r.end_detail
    );
    let (tramp, interrupted, caller) = (&r.frames[1], &r.frames[2], &r.frames[3]);
    assert_eq!(tramp.sp, Some(STACK + 8));
    assert!(
        tramp.exact_pc,
        "a signal trampoline is symbolized at its pc"
    );
    assert_eq!(interrupted.sp, Some(interrupted_sp));
    assert!(interrupted.exact_pc);
    assert_eq!(interrupted.address_for_lookup(1), interrupted_pc);
    assert_eq!(interrupted.registers.get(RBP), Some(0x1111));
    assert_eq!(interrupted.registers.get(RBX), Some(0x2222));
    assert_eq!(interrupted.trust, Trust::Cfi);
    assert_eq!(caller.sp, Some(interrupted_sp + 16));
    assert!(!caller.exact_pc);
    // rbp and rbx are unchanged through the interrupted frame's rule
    assert_eq!(caller.registers.get(RBX), Some(0x2222));
    assert_eq!(r.end, EndReason::Outermost);
}

#[test]
fn undefined_return_address_is_outermost() {
    let t = table(&[]);
    let stack = words(&[0, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &WalkOptions::default(),
        &regs(BASE + OUTERMOST, STACK),
    );
    assert_eq!(r.frames.len(), 1);
    assert_eq!(r.end, EndReason::Outermost);
    assert_eq!(r.end.as_str(), "outermost");
}

#[test]
fn memory_missing_when_the_rule_needs_absent_stack() {
    let t = table(&[(0x100, 0x200, rsp_rule(16))]);
    // captured: only a distant range, not the words at rsp
    let other = words(&[1, 2]);
    let mem = MemoryMap::new(vec![(STACK + 0x10_0000, &other[..])]);
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &WalkOptions::default(),
        &regs(BASE + 0x100, STACK),
    );
    assert_eq!(r.frames.len(), 1);
    assert_eq!(r.end, EndReason::MemoryMissing);
    assert_eq!(r.end.as_str(), "memory-missing");
}

#[test]
fn a_rule_naming_the_frame_as_its_own_caller_is_a_loop() {
    // CFA = rsp, return address = rip: the "caller" is the frame itself
    let rec = RuleRecord::new(
        UnwindSource::EhFrame,
        Slot::offset(RSP as u8, 0),
        Slot::register(RIP as u8),
    );
    let t = table(&[(0x100, 0x200, rec)]);
    let stack = words(&[0, 0, 0, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let r = walk(
        &mem,
        Some(&t),
        &NoCode,
        &cfi_only(),
        &regs(BASE + 0x100, STACK),
    );
    assert_eq!(r.frames.len(), 1);
    assert_eq!(r.end, EndReason::Loop, "{:?}", r.end_detail);
}

#[test]
fn a_forged_ucontext_that_loops_back_is_a_loop() {
    // The ucontext sends the walk back to frame 0 (same pc, same sp): without loop
    // detection the walk would go round until the frame limit.
    let t = signal_table();
    let pc0 = BASE + 0x140;
    let stack = signal_stack(STACK, pc0, 0);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let r = walk(&mem, Some(&t), &NoCode, &cfi_only(), &regs(pc0, STACK));
    assert_eq!(r.end, EndReason::Loop, "{:?}", r.end_detail);
    assert_eq!(pcs(&r), vec![pc0, BASE + 0x401]);
}

#[test]
fn scan_finds_a_return_address_after_a_call_and_skips_other_code_pointers() {
    let not_after_call = BASE + 0x800;
    let after_call = BASE + 0x905;
    let stack = words(&[0x1234, not_after_call, STACK + 0x40, after_call, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let code = Code {
        calls: vec![after_call],
    };
    let opts = WalkOptions {
        enable_fp: false,
        ..WalkOptions::default()
    };
    let r = walk(&mem, None, &code, &opts, &regs(BASE + 0x100, STACK));
    assert_eq!(pcs(&r), vec![BASE + 0x100, after_call]);
    assert_eq!(r.frames[1].trust, Trust::Scan);
    assert_eq!(r.frames[1].sp, Some(STACK + 32));
    assert_ne!(r.end, EndReason::Outermost);
    // without code bytes, a file or a symbol file, nothing vouches for a code pointer:
    // none is taken, and the walk says why
    let r = walk(&mem, None, &NoCode, &opts, &regs(BASE + 0x100, STACK));
    assert_eq!(pcs(&r), vec![BASE + 0x100]);
    assert_eq!(r.end, EndReason::NoCaller);
    assert!(r
        .end_detail
        .is_some_and(|d| d.contains("neither code, file nor symbol file")));
}

#[test]
fn frame_pointer_fallback_where_the_table_has_no_row() {
    // the table only knows the outermost region; frame 0's pc has no row
    let t = table(&[(0x100, 0x110, rsp_rule(8))]);
    let ra = BASE + OUTERMOST + 1;
    let stack = words(&[0, 0, STACK + 0x30, ra, 0, 0, 0]);
    let mem = MemoryMap::new(vec![(STACK, &stack[..])]);
    let mut r0 = regs(BASE + 0x700, STACK);
    r0.set(RBP, STACK + 0x10);
    r0.set(RBX, 0x77);
    let opts = WalkOptions {
        enable_scan: false,
        ..WalkOptions::default()
    };
    let r = walk(&mem, Some(&t), &NoCode, &opts, &r0);
    assert_eq!(pcs(&r), vec![BASE + 0x700, ra]);
    let f1 = &r.frames[1];
    assert_eq!(f1.trust, Trust::Fp);
    assert_eq!(f1.unwind_source, None);
    assert_eq!(f1.sp, Some(STACK + 0x20));
    assert_eq!(f1.registers.get(RBP), Some(STACK + 0x30));
    assert_eq!(f1.registers.get(RBX), Some(0x77));
    // frame 1 is back in the table: its rule ends the walk
    assert_eq!(r.end, EndReason::Outermost);
}

#[test]
fn extreme_registers_and_offsets_never_panic() {
    let t = table_with(|w| {
        let sig = restore_rt_rule(w);
        let mut far = RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::offset(RSP as u8, i32::MAX),
            Slot::offset(0, i32::MIN),
        );
        far.set_reg(Arch::X86_64, RBP, Slot::val_offset(i32::MIN));
        let neg = RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::offset(RBP as u8, i32::MIN),
            Slot::register(RBP as u8),
        );
        vec![
            (0x100, 0x200, rsp_rule(8)),
            (0x200, 0x210, far),
            (0x210, 0x220, neg),
            (0x400, 0x410, sig),
        ]
    });
    let top = words(&[u64::MAX; 64]);
    let low = words(&[BASE + 0x401, BASE + 0x201, BASE + 0x211, 0, u64::MAX, 1]);
    let mem = MemoryMap::new(vec![(u64::MAX - 511, &top[..]), (0, &low[..])]);
    for pc in [
        BASE + 0x100,
        BASE + 0x200,
        BASE + 0x210,
        BASE + 0x401,
        u64::MAX,
    ] {
        for sp in [0, 8, u64::MAX, u64::MAX - 7, u64::MAX - 160] {
            for bp in [0, u64::MAX, u64::MAX - 15] {
                let mut r0 = regs(pc, sp);
                r0.set(RBP, bp);
                r0.set(RBX, u64::MAX);
                let r = walk(&mem, Some(&t), &NoCode, &WalkOptions::default(), &r0);
                assert!(!r.frames.is_empty());
                assert!(r.frames.len() < 8192);
            }
        }
    }
}
