//! Literal-stack walks of the arm walker: the leaf's lr, both frame-record layouts,
//! Thumb return addresses, an EHABI table, a signal frame, call decoding.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::arch::arm::Reg::{R11, R4, R7};
use crate::dump::MemoryMap;
use crate::unwind::builders::ehabi::{self, Section};
use crate::unwind::{TableWriter, UnwindSource, UnwindTable};
use crate::walk::tests::module_at as module;
use crate::walk::{walk_thread, CodeReader, EndReason, ModuleUnwind, WalkOptions, WalkResult};

/// Every address's preceding bytes are a call in both instruction sets: `0xeb00f000` is
/// an ARM `bl` and a Thumb-2 `blx`.
struct AllCalls;
impl CodeReader for AllCalls {
    fn bytes_before(&self, _addr: u64, len: usize) -> Option<Vec<u8>> {
        let bl = 0xeb00_f000u32.to_le_bytes();
        Some(bl[4 - len.min(4)..].to_vec())
    }
}

/// Nothing before any address is a call in either instruction set (zeros: ARM
/// `andeq r0, r0, r0`, Thumb `movs r0, r0`).
struct NoCalls;
impl CodeReader for NoCalls {
    fn bytes_before(&self, _addr: u64, len: usize) -> Option<Vec<u8>> {
        Some(vec![0; len])
    }
}

fn words32(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn regs(pc: u64, sp: u64, lr: Option<u64>, fps: &[(Reg, u64)]) -> RegisterSet {
    let mut r = RegisterSet::new(Arch::Arm);
    r.set(PC, pc);
    r.set(SP, sp);
    if let Some(lr) = lr {
        r.set(LR, lr);
    }
    for &(reg, v) in fps {
        r.set(reg, v);
    }
    r
}

/// Walks `regs` over `stack` (at 0x1000) in one module at 0x40_0000 (unwind data `table`).
fn walk(
    stack: &[u32],
    regs: &RegisterSet,
    table: Option<ModuleUnwind<'_>>,
    code: &dyn CodeReader,
) -> WalkResult {
    let bytes = words32(stack);
    let mem = MemoryMap::new(vec![(0x1000, &bytes[..])]);
    let modules = vec![module(0x40_0000, 0x50_0000)];
    let tables = vec![table];
    let opts = WalkOptions {
        enable_scan: false,
        ..WalkOptions::default()
    };
    let ctx = WalkContext {
        memory: &mem,
        modules: &modules,
        tables: &tables,
        code,
        options: &opts,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    walk_thread(&Arm, &ctx, regs)
}

fn pcs(r: &WalkResult) -> Vec<u64> {
    r.frames.iter().map(|f| f.pc).collect()
}

#[test]
fn call_decoding() {
    let a = Arm;
    let le32 = |i: u32| i.to_le_bytes().to_vec();
    let thumb = |h1: u16, h2: u16| [h1.to_le_bytes(), h2.to_le_bytes()].concat();
    assert!(a.is_call_before(&le32(0xebff_fff0))); // bl
    assert!(a.is_call_before(&le32(0x0b00_0010))); // bleq
    assert!(a.is_call_before(&le32(0xfa00_0001))); // blx imm
    assert!(a.is_call_before(&le32(0xe12f_ff33))); // blx r3
    assert!(a.is_call_before(&thumb(0xf7ff, 0xffde))); // thumb bl
    assert!(a.is_call_before(&thumb(0xf000, 0xe800))); // thumb blx imm
    assert!(a.is_call_before(&thumb(0xbf00, 0x4798))); // nop; blx r3
    assert!(a.is_call_before(&0x4798u16.to_le_bytes())); // blx r3 alone
    assert!(!a.is_call_before(&le32(0xea00_0001))); // b
    assert!(!a.is_call_before(&le32(0xe12f_ff13))); // bx r3
                                                    // an ARM nop reads as a Thumb blx: only the return address's Thumb bit tells
    assert!(a.is_call_before(&le32(0xe320_f000)));
    assert!(!a.is_call_before_return(0x40_1000, &le32(0xe320_f000)));
    assert!(a.is_call_before_return(0x40_1001, &le32(0xe320_f000)));
    assert!(a.is_call_before_return(0x40_1000, &le32(0xebff_fff0)));
    assert!(
        !a.is_call_before_return(0x40_1002, &le32(0xebff_fff0)),
        "misaligned ARM"
    );
    assert!(
        !a.is_call_before_return(0x40_1001, &le32(0xebff_fff0)),
        "not Thumb"
    );
    assert!(a.is_call_before_return(0x40_1003, &thumb(0xbf00, 0x4798)));
    assert!(!a.is_call_before(&thumb(0xbf00, 0x4718))); // nop; bx r3
    assert!(!a.is_call_before(&thumb(0xbf00, 0xbf00)));
    assert!(!a.is_call_before(&[0x98]));
    assert!(!a.is_call_before(&[]));
}

#[test]
fn leaf_lr_then_gcc_arm_frame_records() {
    // frame 0, a leaf: lr = 0x40_1001 (Thumb bit), r11 = the caller's record at 0x100c,
    // GCC's layout: [fp] = return address, [fp - 4] = caller fp; caller sp = fp + 4
    let stack = [
        0, 0,         // 0x1000
        0x101c,    // 0x1008: caller's fp
        0x40_2000, // 0x100c: its return address
        0, 0, 0, // 0x1010
        0, // 0x101c - 4 = 0x1018: outermost fp
        0, // 0x101c: return address 0
    ];
    let r = walk(
        &stack,
        &regs(0x40_1000, 0x1000, Some(0x40_1501), &[(R11, 0x100c)]),
        None,
        &AllCalls,
    );
    assert_eq!(pcs(&r), vec![0x40_1000, 0x40_1500, 0x40_2000]);
    assert_eq!(
        r.frames[1].sp,
        Some(0x1000),
        "the leaf's caller keeps its sp"
    );
    assert_eq!(r.frames[1].registers.get(LR), None, "lr is not inherited");
    assert_eq!(r.frames[2].sp, Some(0x1010));
    assert_eq!(r.frames[2].registers.get(R11), Some(0x101c));
    assert_eq!(r.frames[2].trust, Trust::Fp);
}

#[test]
fn clang_thumb_r7_records_and_the_thumb_bit() {
    // frame 0 is not a leaf (lr is not after a call); r7 = 0x1008 is its record in
    // clang's layout: [r7] = caller r7, [r7 + 4] = return address (Thumb: odd)
    let stack = [
        0, 0,         // 0x1000
        0x1018,    // 0x1008: caller's r7
        0x40_3457, // 0x100c: return address, Thumb
        0, 0,         // 0x1010
        0,         // 0x1018: outermost
        0x40_4001, // 0x101c
    ];
    let r = walk(
        &stack,
        &regs(0x40_3000, 0x1000, Some(0x40_3002), &[(R7, 0x1008)]),
        None,
        &NoCalls,
    );
    // NoCalls: no return address follows a call, so nothing is taken
    assert_eq!(pcs(&r), vec![0x40_3000]);
    let r = walk(
        &stack,
        &regs(0x40_3000, 0x1000, None, &[(R7, 0x1008)]),
        None,
        &AllCalls,
    );
    assert_eq!(pcs(&r), vec![0x40_3000, 0x40_3456, 0x40_4000]);
    assert_eq!(r.frames[1].sp, Some(0x1010));
    assert_eq!(r.frames[2].sp, Some(0x1020));
}

#[test]
fn ehabi_rules_walk_with_lr_at_frame_0_only() {
    // 0x40_0000 + 0x1000: a leaf (finish); + 0x2000: vsp += 8; pop {r4, r14}
    let exidx_addr = 0x8000u64;
    let prel = |target: u64, place: u64| (target.wrapping_sub(place) as u32) & 0x7fff_ffff;
    let exidx = words32(&[
        prel(0x1000, exidx_addr),
        0x80b0_b0b0,
        prel(0x2000, exidx_addr + 8),
        0x8001_a8b0,
        prel(0x3000, exidx_addr + 16),
        1,
    ]);
    let mut w = TableWriter::new(Arch::Arm);
    ehabi::add_index(
        &mut w,
        Section {
            bytes: &exidx,
            address: exidx_addr,
        },
        Section {
            bytes: &[],
            address: 0,
        },
        0,
        &[(0x1000, 0x4000)],
    );
    let built = w.finish();
    let table = UnwindTable::open(&built.bytes).unwrap();
    // frame 0 at +0x1010 (leaf): lr = +0x2021 (Thumb); frame 1's rule: CFA = sp + 16,
    // r4 at CFA - 8, lr at CFA - 4
    let stack = [0, 0, 0x77, 0x40_3011, 0, 0, 0, 0];
    let r = walk(
        &stack,
        &regs(0x40_1010, 0x1000, Some(0x40_2021), &[(R4, 5)]),
        Some(ModuleUnwind::Table(table)),
        &AllCalls,
    );
    assert_eq!(pcs(&r), vec![0x40_1010, 0x40_2020, 0x40_3010]);
    assert_eq!(r.frames[1].trust, Trust::Cfi);
    assert_eq!(r.frames[1].unwind_source, Some(UnwindSource::ArmExidx));
    assert_eq!(r.frames[2].sp, Some(0x1010));
    assert_eq!(r.frames[2].registers.get(R4), Some(0x77));
    // frame 2 (+0x3010) is EXIDX_CANTUNWIND: no rule, and no record: the walk ends
    assert_eq!(r.end, EndReason::NoCaller);
    // without lr, frame 0's leaf rule gives nothing
    let r = walk(
        &stack,
        &regs(0x40_1010, 0x1000, None, &[]),
        Some(ModuleUnwind::Table(
            UnwindTable::open(&built.bytes).unwrap(),
        )),
        &AllCalls,
    );
    assert_eq!(pcs(&r), vec![0x40_1010]);
}

/// Code bytes: QEMU's sigreturn page at 0x3000_0000, `bl` before everything else.
struct WithTrampoline;
impl CodeReader for WithTrampoline {
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if addr == 0x3000_0020 && len == 8 {
            return Some(words32(&[0xe3a0_70ad, 0xef90_00ad]));
        }
        AllCalls.bytes_before(addr, len)
    }
}

#[test]
fn rt_signal_frame_restores_the_interrupted_registers() {
    // a handler (frame 0, a leaf with sp at the signal frame) whose lr is the
    // rt_sigreturn trampoline at 0x3000_0018; the signal frame at sp 0x1000: siginfo (128), ucontext, sigcontext r0 at +160
    let mut stack = vec![0u32; 0x80];
    let r0 = 160 / 4;
    stack[r0 + 7] = 0x1200; // r7
    stack[r0 + 13] = 0x1180; // sp
    stack[r0 + 14] = 0x40_5001; // lr: the interrupted leaf's caller
    stack[r0 + 15] = 0x40_4445; // pc (Thumb)
    let bytes = words32(&stack);
    let mem = MemoryMap::new(vec![(0x1000, &bytes[..])]);
    let modules = vec![module(0x40_0000, 0x50_0000)];
    let tables = vec![None];
    let opts = WalkOptions {
        enable_scan: false,
        ..WalkOptions::default()
    };
    let ctx = WalkContext {
        memory: &mem,
        modules: &modules,
        tables: &tables,
        code: &WithTrampoline,
        options: &opts,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    let r = walk_thread(&Arm, &ctx, &regs(0x40_6000, 0x1000, Some(0x3000_0018), &[]));
    assert_eq!(
        pcs(&r)[..4],
        [0x40_6000, 0x3000_0018, 0x40_4444, 0x40_5000],
        "{:?}",
        r.frames
    );
    assert!(r.frames[2].exact_pc);
    assert_eq!(r.frames[2].sp, Some(0x1180));
    assert_eq!(r.frames[2].registers.get(R7), Some(0x1200));
}

#[test]
fn glibc_s_thumb2_restorer_is_a_trampoline() {
    // __default_sa_restorer: mov.w r7, #119; svc 0; nop
    struct Restorer;
    impl CodeReader for Restorer {
        fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
            (addr == 0x40_2008 && len == 8).then(|| words32(&[0x0777_f04f, 0xbf00_df00]))
        }
    }
    let bytes = words32(&[0; 4]);
    let mem = MemoryMap::new(vec![(0x1000, &bytes[..])]);
    let modules = vec![module(0x40_0000, 0x50_0000)];
    let opts = WalkOptions::default();
    let ctx = WalkContext {
        memory: &mem,
        modules: &modules,
        tables: &[None],
        code: &Restorer,
        options: &opts,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    assert!(Arm.is_signal_trampoline(&ctx, 0x40_2000));
    assert!(!Arm.is_signal_trampoline(&ctx, 0x40_2004));
}

#[test]
fn hostile_registers_do_not_panic() {
    let r = walk(
        &[u32::MAX; 8],
        &regs(
            0xffff_ffff,
            0xffff_fffc,
            Some(0xffff_ffff),
            &[(R11, 0xffff_fffc), (R7, 0)],
        ),
        None,
        &AllCalls,
    );
    assert_eq!(r.frames.len(), 1);
    let r = walk(
        &[u32::MAX; 8],
        &regs(0x40_1000, 0x1000, None, &[(R11, 0x1000)]),
        None,
        &AllCalls,
    );
    assert!(r.frames.len() <= 2);
}

/// A Thumb function at 0x40_1000 (`push {r7, lr}; sub sp, #8; nop`) that no unwind rule
/// describes, located by its symbol; `bl` before everything else.
struct WithSymbol;
impl CodeReader for WithSymbol {
    fn bytes_before(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if addr == 0x40_1006 && len == 6 {
            return Some(
                [0xb580u16, 0xb082, 0xbf00]
                    .iter()
                    .flat_map(|h| h.to_le_bytes())
                    .collect(),
            );
        }
        AllCalls.bytes_before(addr, len)
    }
    fn function_start(&self, addr: u64) -> Option<u64> {
        (0x40_1000..0x40_1100).contains(&addr).then_some(0x40_1000)
    }
}

#[test]
fn a_function_without_rules_is_unwound_from_its_prologue() {
    // frame 0 at +6, after the prologue: CFA = sp + 16, r7 at CFA - 8, lr at CFA - 4;
    // lr itself holds garbage that must not be taken
    let stack = [0, 0, 0x55, 0x40_2001, 0, 0, 0, 0];
    let mut thumb = regs(0x40_1006, 0x1000, Some(0x40_7777), &[(R7, 0x1000)]);
    thumb.set(CPSR_SLOT, CPSR_THUMB);
    let r = walk(&stack, &thumb, None, &WithSymbol);
    assert_eq!(pcs(&r)[..2], [0x40_1006, 0x40_2000]);
    // the caller's Thumb state, from the return address's low bit
    assert_eq!(r.frames[1].registers.get(CPSR_SLOT), Some(CPSR_THUMB));
    assert_eq!(r.frames[1].sp, Some(0x1010));
    assert_eq!(r.frames[1].registers.get(R7), Some(0x55));
    assert_eq!(r.frames[1].trust, Trust::Fp);
}
