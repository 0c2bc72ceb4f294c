//! Hand-assembled `UNWIND_INFO` tests of the `.pdata` builder ([`super::add_function`]).
//!
//! Each test writes the unwind info bytes as the x64 exception-handling documentation
//! lays them out (header, codes last instruction first, a chained `RUNTIME_FUNCTION`),
//! places them in a pretend image, and checks the rule at each prologue step against
//! values worked out by hand from the instructions the codes describe.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use super::{add_function, parse_unwind_info, Op, PdataError};
use crate::dump::Arch;
use crate::unwind::builders::TableWriter;
use crate::unwind::lookup::UnwindTable;
use crate::unwind::rule::{Slot, SlotKind, UnwindSource};

const RSP: u8 = 7;
const RBP: u16 = 6;
const RBX: u16 = 3;
const RSI: u16 = 4;
const RDI: u16 = 5;
const R12: u16 = 12;

// Windows register numbers in unwind codes.
const W_RBX: u8 = 3;
const W_RBP: u8 = 5;
const W_RSI: u8 = 6;
const W_RDI: u8 = 7;
const W_R12: u8 = 12;

/// An unwind code slot: (offset in prologue, op, op info).
fn code(offset: u8, op: u8, info: u8) -> [u8; 2] {
    [offset, op | (info << 4)]
}

/// An `UNWIND_INFO`: version 1, `flags`, prologue size, codes (already in stored order,
/// extra slots included), frame register and offset, then `tail` (e.g. a chained entry).
fn info(flags: u8, prolog: u8, slots: &[[u8; 2]], frame: (u8, u8), tail: &[u8]) -> Vec<u8> {
    let mut b = vec![
        1 | (flags << 3),
        prolog,
        slots.len() as u8,
        frame.0 | (frame.1 << 4),
    ];
    for s in slots {
        b.extend_from_slice(s);
    }
    if slots.len() % 2 == 1 {
        b.extend_from_slice(&[0, 0]);
    }
    b.extend_from_slice(tail);
    b
}

/// A pretend image: bytes by RVA from 0.
struct Image(Vec<u8>);

impl Image {
    fn new() -> Image {
        Image(vec![0; 0x100])
    }
    /// Places `bytes` at `rva`.
    fn put(&mut self, rva: u32, bytes: &[u8]) {
        let at = rva as usize;
        if self.0.len() < at + bytes.len() {
            self.0.resize(at + bytes.len(), 0);
        }
        self.0[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn read<'a>(&'a self) -> impl Fn(u32, usize) -> Option<&'a [u8]> + use<'a> {
        |rva, len| self.0.get(rva as usize..(rva as usize).checked_add(len)?)
    }
}

fn runtime_function(begin: u32, end: u32, info: u32) -> Vec<u8> {
    [begin, end, info]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// Builds a table of the functions `(begin, end, info)`.
fn build(image: &Image, functions: &[(u32, u32, u32)]) -> Result<Vec<u8>, PdataError> {
    let mut w = TableWriter::new(Arch::X86_64);
    for &(b, e, i) in functions {
        add_function(&mut w, &image.read(), b, e, i)?;
    }
    Ok(w.finish().bytes)
}

/// The rule at `rva`: CFA (register, offset), and the CFA offsets of the return address
/// and of each register in `regs` (`None`: unchanged).
fn rule_at(table: &[u8], rva: u64, regs: &[u16]) -> ((u8, i32), i32, Vec<Option<i32>>) {
    let t = UnwindTable::open(table).unwrap();
    let rule = t.find(rva).unwrap_or_else(|| panic!("no rule at {rva:#x}"));
    let r = rule.record;
    assert_eq!(rule.source(), Some(UnwindSource::Pdata));
    assert_eq!(r.cfa.kind(), Some(SlotKind::Offset), "CFA at {rva:#x}");
    assert_eq!(r.ra.kind(), Some(SlotKind::Offset));
    let saved = regs
        .iter()
        .map(|&reg| {
            let s: Slot = r.reg(Arch::X86_64, reg).unwrap();
            match s.kind() {
                Some(SlotKind::Unchanged) => None,
                Some(SlotKind::Offset) => Some(s.value),
                other => panic!("register {reg} at {rva:#x}: {other:?}"),
            }
        })
        .collect();
    ((r.cfa.reg, r.cfa.value), r.ra.value, saved)
}

/// `push rbp` (1) / `mov rbp, rsp` (4) / `sub rsp, 0x20` (8): gcc's -O0 prologue.
#[test]
fn frame_pointer_prologue_step_by_step() {
    let mut img = Image::new();
    let slots = [code(8, 2, 3), code(4, 3, 0), code(1, 0, W_RBP)];
    img.put(0x1000, &info(0, 8, &slots, (W_RBP, 0), &[]));
    let t = build(&img, &[(0x2000, 0x2040, 0x1000)]).unwrap();
    // at entry: the return address at [rsp]
    assert_eq!(rule_at(&t, 0x2000, &[RBP]), ((RSP, 8), -8, vec![None]));
    // after push rbp
    assert_eq!(
        rule_at(&t, 0x2001, &[RBP]),
        ((RSP, 16), -8, vec![Some(-16)])
    );
    assert_eq!(
        rule_at(&t, 0x2003, &[RBP]),
        ((RSP, 16), -8, vec![Some(-16)])
    );
    // after mov rbp, rsp: rbp = entry rsp - 8
    assert_eq!(
        rule_at(&t, 0x2004, &[RBP]),
        ((RBP as u8, 16), -8, vec![Some(-16)])
    );
    // the body: the allocation does not move the CFA off rbp
    assert_eq!(
        rule_at(&t, 0x2008, &[RBP]),
        ((RBP as u8, 16), -8, vec![Some(-16)])
    );
    assert_eq!(
        rule_at(&t, 0x203f, &[RBP]),
        ((RBP as u8, 16), -8, vec![Some(-16)])
    );
}

/// `push rsi` (1) / `push rdi` (2) / `sub rsp, 0x28` (6) / `mov [rsp+0x40], rbx` (11):
/// the Windows ABI's non-volatile rsi and rdi, and a register saved by `mov` into the
/// caller's home space, from the stack pointer after the allocation.
#[test]
fn pushes_allocation_and_a_saved_register() {
    let mut img = Image::new();
    // SAVE_NONVOL rbx, offset 0x40 / 8 = 8; ALLOC_SMALL 0x28 = (4 * 8 + 8); pushes
    let slots = [
        code(11, 4, W_RBX),
        [8, 0],
        code(6, 2, 4),
        code(2, 0, W_RDI),
        code(1, 0, W_RSI),
    ];
    img.put(0x1000, &info(0, 11, &slots, (0, 0), &[]));
    let t = build(&img, &[(0x3000, 0x3100, 0x1000)]).unwrap();
    let regs = [RSI, RDI, RBX];
    assert_eq!(
        rule_at(&t, 0x3001, &regs),
        ((RSP, 16), -8, vec![Some(-16), None, None])
    );
    assert_eq!(
        rule_at(&t, 0x3002, &regs),
        ((RSP, 24), -8, vec![Some(-16), Some(-24), None])
    );
    assert_eq!(
        rule_at(&t, 0x3006, &regs),
        ((RSP, 64), -8, vec![Some(-16), Some(-24), None])
    );
    // rsp = CFA - 64; rbx at rsp + 0x40 = CFA + 0
    assert_eq!(
        rule_at(&t, 0x3050, &regs),
        ((RSP, 64), -8, vec![Some(-16), Some(-24), Some(0)])
    );
}

/// Both `ALLOC_LARGE` forms: a 16-bit count of 8-byte units, and a 32-bit size.
#[test]
fn large_allocations() {
    let mut img = Image::new();
    // sub rsp, 0x1000 (7 bytes) as ALLOC_LARGE info 0: 0x1000 / 8 = 0x200
    img.put(
        0x1000,
        &info(0, 7, &[code(7, 1, 0), [0x00, 0x02]], (0, 0), &[]),
    );
    // sub rsp, 0x12345 as ALLOC_LARGE info 1: low then high half
    img.put(
        0x1100,
        &info(
            0,
            7,
            &[code(7, 1, 1), [0x45, 0x23], [0x01, 0x00]],
            (0, 0),
            &[],
        ),
    );
    let t = build(&img, &[(0x4000, 0x4010, 0x1000), (0x5000, 0x5010, 0x1100)]).unwrap();
    assert_eq!(rule_at(&t, 0x4008, &[]).0, (RSP, 0x1008));
    assert_eq!(rule_at(&t, 0x5008, &[]).0, (RSP, 0x1234d));
    assert_eq!(rule_at(&t, 0x5006, &[]).0, (RSP, 8), "before the sub ends");
}

/// `push rbp` (1) / `sub rsp, 0x40` (5) / `lea rbp, [rsp+0x20]` (10): a frame register
/// set to the middle of the frame (`FrameOffset` 2), as for `alloca` or realigned stacks;
/// a register saved by `mov` after it is placed from the frame register's base.
#[test]
fn frame_register_with_an_offset() {
    let mut img = Image::new();
    let slots = [
        code(15, 4, W_R12),
        [2, 0],
        code(10, 3, 0),
        code(5, 2, 7),
        code(1, 0, W_RBP),
    ];
    img.put(0x1000, &info(0, 15, &slots, (W_RBP, 2), &[]));
    let t = build(&img, &[(0x6000, 0x6100, 0x1000)]).unwrap();
    // before the lea: rsp-based, 8 + 8 + 0x40
    assert_eq!(rule_at(&t, 0x6005, &[RBP]).0, (RSP, 0x50));
    // rbp = rsp + 0x20 = CFA - 0x50 + 0x20: CFA = rbp + 0x30
    let (cfa, _, saved) = rule_at(&t, 0x6010, &[RBP, R12]);
    assert_eq!(cfa, (RBP as u8, 0x30));
    // r12 at (rbp - 0x20) + 0x10 = CFA - 0x50 + 0x10 = CFA - 0x40
    assert_eq!(saved, vec![Some(-16), Some(-0x40)]);
}

/// A part of a function split by the compiler: its own codes, then its parent's in
/// full (the parent's prologue ran before this part's code).
#[test]
fn chained_unwind_info_replays_the_parent() {
    let mut img = Image::new();
    // parent: push rbx (1), sub rsp, 0x20 (5)
    img.put(
        0x1000,
        &info(0, 5, &[code(5, 2, 3), code(1, 0, W_RBX)], (0, 0), &[]),
    );
    // the part: push rdi at its offset 1, chained to the parent's entry
    let chained = runtime_function(0x7000, 0x7040, 0x1000);
    img.put(0x1100, &info(4, 1, &[code(1, 0, W_RDI)], (0, 0), &chained));
    let t = build(&img, &[(0x7000, 0x7040, 0x1000), (0x7100, 0x7140, 0x1100)]).unwrap();
    // at the part's first byte: the parent's frame only (8 + 8 + 0x20)
    assert_eq!(
        rule_at(&t, 0x7100, &[RBX, RDI]),
        ((RSP, 0x30), -8, vec![Some(-16), None])
    );
    // after its push rdi
    assert_eq!(
        rule_at(&t, 0x7101, &[RBX, RDI]),
        ((RSP, 0x38), -8, vec![Some(-16), Some(-0x38)])
    );
    // an entry pointing at another RUNTIME_FUNCTION (low bit set) shares its info
    img.put(0x1200, &runtime_function(0x7000, 0x7040, 0x1000));
    let t = build(&img, &[(0x7200, 0x7240, 0x1201)]).unwrap();
    assert_eq!(rule_at(&t, 0x7220, &[RBX]).0, (RSP, 0x30));
}

/// A machine frame (an interrupt or exception): the return address at `[rsp]` and the
/// caller's stack pointer at `[rsp + 24]`, each 8 further with an error code.
#[test]
fn machine_frames() {
    let mut img = Image::new();
    img.put(0x1000, &info(0, 0, &[code(0, 10, 0)], (0, 0), &[]));
    img.put(0x1100, &info(0, 0, &[code(0, 10, 1)], (0, 0), &[]));
    let t = build(&img, &[(0x8000, 0x8010, 0x1000), (0x9000, 0x9010, 0x1100)]).unwrap();
    let table = UnwindTable::open(&t).unwrap();
    for (rva, ra_at, sp_at) in [(0x8004u64, 0i64, 24i32), (0x9004, 8, 32)] {
        let rule = table.find(rva).unwrap();
        let r = rule.record;
        assert_eq!(r.cfa.kind(), Some(SlotKind::DerefOffset));
        assert_eq!((r.cfa.reg, r.cfa.value), (RSP, sp_at));
        assert_eq!(r.ra.kind(), Some(SlotKind::Expression));
        // DW_OP_drop; DW_OP_breg7 (rsp) ra_at
        assert_eq!(rule.expression(r.ra).unwrap(), &[0x13, 0x77, ra_at as u8]);
    }
}

#[test]
fn every_code_size_is_read() {
    let mut img = Image::new();
    // SAVE_XMM128 (2 slots), SAVE_XMM128_FAR (3), SAVE_NONVOL_FAR (3), then a push
    let slots = [
        code(20, 8, 6),
        [1, 0],
        code(15, 9, 7),
        [0, 1],
        [0, 0],
        code(10, 5, W_RBX),
        [0x10, 0],
        [0, 0],
        code(1, 0, W_RBP),
    ];
    img.put(0x1000, &info(0, 20, &slots, (0, 0), &[]));
    let parsed = parse_unwind_info(&img.read(), 0x1000).unwrap();
    let ops: Vec<Op> = parsed.codes.iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        vec![
            Op::SaveXmm,
            Op::SaveXmm,
            Op::SaveNonvol {
                reg: W_RBX,
                offset: 0x10
            },
            Op::PushNonvol(W_RBP),
        ]
    );
}

#[test]
fn malformed_infos_are_errors() {
    let mut img = Image::new();
    // version 3
    img.put(0x10, &[3, 0, 0, 0]);
    // an unknown op (11)
    img.put(0x20, &info(0, 1, &[code(1, 11, 0)], (0, 0), &[]));
    // ALLOC_LARGE whose size slot lies past the image
    let at = img.0.len() as u32;
    img.put(at, &[1, 4, 2, 0, 4, 1]);
    // SET_FPREG without a frame register
    img.put(0x30, &info(0, 4, &[code(4, 3, 0)], (0, 0), &[]));
    // a chain that names itself
    let own = runtime_function(0xa000, 0xa010, 0x40);
    img.put(0x40, &info(4, 0, &[], (0, 0), &own));
    let read = img.read();
    let try_fn = |rva| {
        let mut w = TableWriter::new(Arch::X86_64);
        add_function(&mut w, &read, 0xa000, 0xa010, rva)
    };
    assert_eq!(try_fn(0x10), Err(PdataError::UnknownVersion(3)));
    assert_eq!(try_fn(0x20), Err(PdataError::UnknownOp(11)));
    assert!(matches!(try_fn(at), Err(PdataError::Truncated(_))));
    assert!(matches!(try_fn(0x30), Err(PdataError::Inconsistent(_))));
    assert_eq!(try_fn(0x40), Err(PdataError::ChainTooLong));
    assert!(matches!(try_fn(0x10_0000), Err(PdataError::Truncated(_))));
    let mut w = TableWriter::new(Arch::X86_64);
    assert!(add_function(&mut w, &read, 0xa010, 0xa000, 0x20).is_err());
}

/// `push rbx` / `sub rsp, 0x20` / body / `add rsp, 0x20` / `pop rbx` / `ret`: inside the
/// epilogue the stack is released step by step; an `add` that does not undo the
/// prologue's allocation is no epilogue, and the body's rule stays there.
#[test]
fn epilogues_are_recognised_from_the_code() {
    let mut img = Image::new();
    let slots = [code(5, 2, 3), code(1, 0, W_RBX)];
    img.put(0x1000, &info(0, 5, &slots, (0, 0), &[]));
    let mut f = vec![0x53, 0x48, 0x83, 0xec, 0x20, 0x90, 0x90, 0x90];
    // 0x08: add rsp, 0x20 / 0x0c: pop rbx / 0x0d: ret
    f.extend_from_slice(&[0x48, 0x83, 0xc4, 0x20, 0x5b, 0xc3]);
    // 0x0e: add rsp, 0x10 / pop rbx / ret: releases too little
    f.extend_from_slice(&[0x48, 0x83, 0xc4, 0x10, 0x5b, 0xc3]);
    img.put(0x2000, &f);
    let end = 0x2000 + f.len() as u32;
    let t = build(&img, &[(0x2000, end, 0x1000)]).unwrap();
    let body = ((RSP, 0x30), -8, vec![Some(-16)]);
    assert_eq!(rule_at(&t, 0x2005, &[RBX]), body);
    assert_eq!(rule_at(&t, 0x2008, &[RBX]), body, "the add has not run");
    assert_eq!(
        rule_at(&t, 0x200c, &[RBX]),
        ((RSP, 16), -8, vec![Some(-16)])
    );
    assert_eq!(rule_at(&t, 0x200d, &[RBX]), ((RSP, 8), -8, vec![None]));
    assert_eq!(rule_at(&t, 0x2012, &[RBX]), body, "not an epilogue");
    assert_eq!(rule_at(&t, 0x2013, &[RBX]), body, "not an epilogue");
}

/// `push rbx` / `sub rsp, 0x20` / body, then epilogues ending in a `jmp`: a tail call
/// (a `jmp` out of the function, `jmp [rip + N]`, `REX.W jmp rax`) ends one as a `ret`
/// does; a `jmp` that stays in the function (`jmp rel8` back into it, a bare `jmp rax`)
/// ends none, and the body's rule stays.
#[test]
fn tail_call_epilogues() {
    let mut img = Image::new();
    let slots = [code(5, 2, 3), code(1, 0, W_RBX)];
    img.put(0x1000, &info(0, 5, &slots, (0, 0), &[]));
    let mut f = vec![0x53, 0x48, 0x83, 0xec, 0x20, 0x90, 0x90, 0x90];
    let release = [0x48, 0x83, 0xc4, 0x20, 0x5b];
    // 0x08: add rsp, 0x20 / 0x0c: pop rbx / 0x0d: jmp rel32 past the function's end
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0xe9, 0x00, 0x10, 0x00, 0x00]);
    // 0x12: … / 0x17: jmp [rip + 0x100]
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0xff, 0x25, 0x00, 0x01, 0x00, 0x00]);
    // 0x1d: … / 0x22: rex.W jmp rax
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0x48, 0xff, 0xe0]);
    // 0x25: … / 0x2a: jmp rel8 back to 0x08 (inside the function)
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0xeb, 0xdc]);
    // 0x2c: … / 0x31: jmp rax (no REX.W: a switch's jump)
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0xff, 0xe0]);
    // 0x33: jmp rel8 to the function's first byte (recursion), the stack released
    f.extend_from_slice(&release);
    f.extend_from_slice(&[0xeb, 0xc6]);
    img.put(0x2000, &f);
    let end = 0x2000 + f.len() as u32;
    let t = build(&img, &[(0x2000, end, 0x1000)]).unwrap();
    let body = ((RSP, 0x30), -8, vec![Some(-16)]);
    let popping = ((RSP, 16), -8, vec![Some(-16)]);
    let popped = ((RSP, 8), -8, vec![None]);
    for (pop, jmp) in [
        (0x200c, 0x200d),
        (0x2016, 0x2017),
        (0x2021, 0x2022),
        (0x2037, 0x2038),
    ] {
        assert_eq!(rule_at(&t, pop, &[RBX]), popping, "at {pop:#x}");
        assert_eq!(rule_at(&t, jmp, &[RBX]), popped, "at {jmp:#x}");
    }
    for (pop, jmp) in [(0x2029, 0x202a), (0x2030, 0x2031)] {
        assert_eq!(
            rule_at(&t, pop, &[RBX]),
            body,
            "at {pop:#x}: not an epilogue"
        );
        assert_eq!(
            rule_at(&t, jmp, &[RBX]),
            body,
            "at {jmp:#x}: not an epilogue"
        );
    }
}

/// `push rbp` / `mov rbp, rsp` / `sub rsp, 0x20` / … / `lea rsp, [rbp]` / `pop rbp` /
/// `ret`: a frame-pointer epilogue; a register restored by `mov` before it is unchanged.
/// (The `mov`s' bytes only give instruction lengths: the rules come from the codes.)
#[test]
fn frame_pointer_epilogue() {
    let mut img = Image::new();
    let slots = [
        code(13, 4, W_RSI),
        [6, 0],
        code(8, 2, 3),
        code(4, 3, 0),
        code(1, 0, W_RBP),
    ];
    img.put(0x1000, &info(0, 13, &slots, (W_RBP, 0), &[]));
    // push rbp / mov rbp, rsp / sub rsp, 0x20 / mov [rsp+0x30], rsi (5 bytes)
    let mut f = vec![0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20];
    f.extend_from_slice(&[0x48, 0x89, 0x74, 0x24, 0x30]);
    // 0x0d: mov rsi, [rsp+0x30] / 0x12: lea rsp, [rbp+0] / 0x16: pop rbp / 0x17: ret
    f.extend_from_slice(&[0x48, 0x8b, 0x74, 0x24, 0x30]);
    f.extend_from_slice(&[0x48, 0x8d, 0x65, 0x00, 0x5d, 0xc3]);
    img.put(0x3000, &f);
    let end = 0x3000 + f.len() as u32;
    let t = build(&img, &[(0x3000, end, 0x1000)]).unwrap();
    // with a frame register, a SAVE_NONVOL offset is from the establisher frame
    // (rbp - 16 * FrameOffset = CFA - 16), as RtlVirtualUnwind reads it: CFA + 0x20
    assert_eq!(
        rule_at(&t, 0x300d, &[RBP, RSI]),
        ((RBP as u8, 16), -8, vec![Some(-16), Some(0x20)])
    );
    assert_eq!(
        rule_at(&t, 0x3016, &[RBP, RSI]),
        ((RSP, 16), -8, vec![Some(-16), None])
    );
    assert_eq!(
        rule_at(&t, 0x3017, &[RBP, RSI]),
        ((RSP, 8), -8, vec![None, None])
    );
}
