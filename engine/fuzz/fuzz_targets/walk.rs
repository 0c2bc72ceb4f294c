//! Fuzz target: the x86_64 walker on arbitrary registers and stack bytes, with a small
//! fixed unwind table holding every rule kind (rsp- and rbp-based CFA, a PLT-style CFA
//! expression, glibc's `__restore_rt` signal-frame expressions, an outermost row).
//!
//! Input: rip, rsp, rbp, rbx as four little-endian u64s, then the stack bytes (mapped at
//! `STACK`); the same bytes also answer the call-site checks of the scan, and the
//! address's own bits whether its code is readable, executable and named by a symbol
//! file (every branch of the scan's rules, generated code outside the module included).
//! Property: the walk never panics and stops within the frame limit.
#![no_main]

use engine::dump::{Arch, Identity, MemoryMap, Module, RegisterSet};
use engine::unwind::rule::FLAG_SIGNAL_FRAME;
use engine::unwind::{RuleRecord, Slot, TableWriter, UnwindSource, UnwindTable};
use engine::walk::x86_64::X86_64;
use engine::walk::{walk_thread, CodeReader, WalkContext, WalkOptions};
use libfuzzer_sys::fuzz_target;

const BASE: u64 = 0x40_0000;
const STACK: u64 = 0x7fff_0000;

fn table() -> Vec<u8> {
    let mut w = TableWriter::new(Arch::X86_64);
    let expr = |w: &mut TableWriter, b: &[u8], val: bool| -> Slot {
        match w.add_expression(b) {
            Some((off, len)) => Slot::expression(val, off, len),
            None => Slot::UNDEFINED,
        }
    };
    let rsp = |off| {
        RuleRecord::new(
            UnwindSource::EhFrame,
            Slot::offset(7, off),
            Slot::offset(0, -8),
        )
    };
    let mut rbp = RuleRecord::new(
        UnwindSource::EhFrame,
        Slot::offset(6, 16),
        Slot::offset(0, -8),
    );
    rbp.set_reg(Arch::X86_64, 6, Slot::offset(0, -16));
    let plt_cfa = expr(
        &mut w,
        &[
            0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
        ],
        true,
    );
    let plt = RuleRecord::new(UnwindSource::EhFrame, plt_cfa, Slot::offset(0, -8));
    let sig_cfa = expr(&mut w, &[0x77, 0xa0, 0x01, 0x06], true);
    let sig_ra = expr(&mut w, &[0x77, 0xa8, 0x01], false);
    let sig_rbp = expr(&mut w, &[0x77, 0xf8, 0x00], false);
    let mut sig = RuleRecord::new(UnwindSource::EhFrame, sig_cfa, sig_ra);
    sig.flags |= FLAG_SIGNAL_FRAME;
    sig.set_reg(Arch::X86_64, 6, sig_rbp);
    let outermost = RuleRecord::new(UnwindSource::EhFrame, Slot::offset(7, 8), Slot::UNDEFINED);
    w.push(0x100, 0x200, &rsp(8), 0);
    w.push(0x200, 0x300, &rsp(40), 0);
    w.push(0x300, 0x400, &rbp, 0);
    w.push(0x400, 0x410, &sig, 0);
    w.push(0x500, 0x540, &plt, 0);
    w.push(0x600, 0x610, &outermost, 0);
    w.finish().bytes
}

struct InputCode<'a>(&'a [u8]);

impl CodeReader for InputCode<'_> {
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if addr & 0x10 != 0 {
            return None;
        }
        let at = (addr as usize) % (self.0.len() + 1);
        let b = self.0.get(at.saturating_sub(len)..at)?;
        Some(b.to_vec())
    }

    fn is_executable(&self, addr: u64) -> Option<bool> {
        (addr & 0x20 != 0).then_some(addr & 0x40 != 0)
    }

    fn names_function(&self, addr: u64) -> Option<bool> {
        (addr & 0x80 != 0).then_some(addr & 0x100 != 0)
    }
}

fuzz_target!(|data: &[u8]| {
    let word = |i: usize| -> u64 {
        data.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0)
    };
    let stack = data.get(32..).unwrap_or(&[]);
    let bytes = table();
    let Ok(t) = UnwindTable::open(&bytes) else {
        panic!("the fixed table does not open");
    };
    let modules = vec![Module {
        name: "m".into(),
        path: None,
        base: BASE,
        end: BASE + 0x1000,
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
    let tables = vec![Some(engine::walk::ModuleUnwind::Table(t))];
    let memory = MemoryMap::new(vec![(STACK, stack)]);
    let mut options = WalkOptions::default();
    options.max_frames = 256;
    options.fp_without_unwind_table = word(3) & 1 == 0;
    let code = InputCode(stack);
    let ctx = WalkContext {
        memory: &memory,
        modules: &modules,
        tables: &tables,
        code: &code,
        options: &options,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    let mut regs = RegisterSet::new(Arch::X86_64);
    regs.set(16, word(0));
    regs.set(7, word(1));
    regs.set(6, word(2));
    regs.set(3, word(3));
    let r = walk_thread(&X86_64, &ctx, &regs);
    assert!(r.frames.len() <= options.max_frames);
});
