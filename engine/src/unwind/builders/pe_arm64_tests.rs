//! Hand-assembled ARM64 `.pdata`/`.xdata` tests of [`super::function_rows`].
//!
//! The bytes are laid out as Microsoft's "ARM64 exception handling" documents them (the
//! records clang 14 emits for small C functions), and each expected rule is worked out by
//! hand from the instructions the codes describe, listed beside them.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use super::{function_of, function_rows, parse_xdata, unpack, Arm64Error};
use crate::dump::Arch;
use crate::unwind::rule::{
    RuleRecord, SlotKind, UnwindSource, FLAG_MACHINE_FRAME, FLAG_NT_CONTEXT, FLAG_RA_SIGNED,
};

/// The rule of `rows` at `at`.
fn rule_at(rows: &[(u32, u32, RuleRecord)], at: u32) -> RuleRecord {
    rows.iter()
        .find(|(s, e, _)| *s <= at && at < *e)
        .map(|r| r.2)
        .unwrap_or_else(|| panic!("no row at {at:#x}"))
}

/// (CFA register, CFA offset, return address at CFA + n or None when in lr, x19.. slots).
fn summary(r: &RuleRecord) -> (u8, i32, Option<i32>, Vec<(u16, i32)>) {
    let ra = (r.ra.kind() == Some(SlotKind::Offset)).then_some(r.ra.value);
    let saved = (19u16..=29)
        .filter_map(|reg| {
            let s = r.reg(Arch::Aarch64, reg)?;
            (s.kind() == Some(SlotKind::Offset)).then_some((reg, s.value))
        })
        .collect();
    (r.cfa.reg, r.cfa.value, ra, saved)
}

fn packed(len: u32, reg_f: u32, reg_i: u32, h: u32, cr: u32, frame: u32) -> u32 {
    1 | (len / 4) << 2 | reg_f << 13 | reg_i << 16 | h << 20 | cr << 21 | (frame / 16) << 23
}

#[test]
fn packed_lr_only() {
    // str x30, [sp, #-16]! / body / ldr x30, [sp], #16 / ret  (28 bytes)
    let f = unpack(packed(28, 0, 0, 0, 1, 16)).unwrap();
    let rows = function_rows(0x1000, &f).unwrap();
    assert_eq!(summary(&rule_at(&rows, 0x1000)), (31, 0, None, vec![]));
    assert_eq!(
        summary(&rule_at(&rows, 0x1004)),
        (31, 16, Some(-16), vec![])
    );
    assert_eq!(
        summary(&rule_at(&rows, 0x1014)),
        (31, 16, Some(-16), vec![])
    );
    // the epilogue's ldr, then the ret with lr restored
    assert_eq!(summary(&rule_at(&rows, 0x1018)), (31, 0, None, vec![]));
    assert_eq!(rows.last().unwrap().1, 0x101c);
    assert_eq!(rule_at(&rows, 0x1004).source(), Some(UnwindSource::PeArm64));
}

#[test]
fn packed_chained_with_registers() {
    // RegI 2, CR 3, FrameSize 48: stp x19, x20, [sp, #-16]! / stp x29, lr, [sp, #-32]! /
    // mov x29, sp
    let f = unpack(packed(64, 0, 2, 0, 3, 48)).unwrap();
    let rows = function_rows(0, &f).unwrap();
    assert_eq!(
        summary(&rule_at(&rows, 4)),
        (31, 16, None, vec![(19, -16), (20, -8)])
    );
    let body = (29, 48, Some(-40), vec![(19, -16), (20, -8), (29, -48)]);
    assert_eq!(summary(&rule_at(&rows, 12)), body);
    // epilogue: ldp x29, lr, [sp], #32 / ldp x19, x20, [sp], #16 / ret at 52, 56, 60
    assert_eq!(
        summary(&rule_at(&rows, 52)),
        (31, 48, Some(-40), vec![(19, -16), (20, -8), (29, -48)])
    );
    assert_eq!(
        summary(&rule_at(&rows, 56)),
        (31, 16, None, vec![(19, -16), (20, -8)])
    );
    assert_eq!(summary(&rule_at(&rows, 60)), (31, 0, None, vec![]));
}

#[test]
fn xdata_single_epilogue_and_save_next() {
    // clang's `many`: sub sp, sp, #80 / stp x19, x20, [sp, #16] / save_next x21, x22 /
    // save_next x23, x24 / stp x25, lr, [sp, #64]; the E bit: the epilogue is the same codes
    let codes = [0xd6, 0xc8, 0xe6, 0xe6, 0xc8, 0x02, 0x05, 0xe4];
    let head: u32 = (124 / 4) | (1 << 21) | (2 << 27);
    let mut image = vec![0u8; 0x10];
    image.extend_from_slice(&head.to_le_bytes());
    image.extend_from_slice(&codes);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    let f = parse_xdata(&read, 0x10).unwrap();
    assert_eq!(f.length, 124);
    assert_eq!(f.epilogues.len(), 1);
    assert_eq!(f.epilogues[0].0, 124 - 4 * 6);
    let rows = function_rows(0, &f).unwrap();
    let body = summary(&rule_at(&rows, 0x40));
    assert_eq!(
        body,
        (
            31,
            80,
            Some(-8),
            vec![
                (19, -64),
                (20, -56),
                (21, -48),
                (22, -40),
                (23, -32),
                (24, -24),
                (25, -16)
            ]
        )
    );
    // after the first save_next only x21, x22 joined x19, x20
    assert_eq!(
        summary(&rule_at(&rows, 12)),
        (
            31,
            80,
            None,
            vec![(19, -64), (20, -56), (21, -48), (22, -40)]
        )
    );
    assert_eq!(summary(&rule_at(&rows, 120)), (31, 0, None, vec![]));
    assert_eq!(function_of(&read, 0x10).unwrap(), f);
}

#[test]
fn pac_and_unsupported_codes() {
    // pacibsp / stp x29, lr, [sp, #-16]! ; stored: save_fplr_x, pac_sign_lr, end
    let head: u32 = (16 / 4) | (1 << 27);
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&[0x81, 0xfc, 0xe4, 0xe4]);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    let rows = function_rows(0, &parse_xdata(&read, 0).unwrap()).unwrap();
    assert_ne!(rule_at(&rows, 8).flags & FLAG_RA_SIGNED, 0);
    assert_eq!(rule_at(&rows, 0).flags & FLAG_RA_SIGNED, 0);
    // a kernel trap frame cannot be expressed: the function gets no rows
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&[0xe8, 0x81, 0xe4, 0xe4]);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    assert_eq!(parse_xdata(&read, 0), Err(Arm64Error::Unsupported(0xe8)));
    // cut short
    assert_eq!(parse_xdata(&read, 6), Err(Arm64Error::Truncated(6)));
    assert_eq!(unpack(3), Err(Arm64Error::Reserved));
}

/// The rows of a 12-byte function whose `.xdata` holds one code word `codes`.
fn rows_of(codes: [u8; 4]) -> Result<Vec<(u32, u32, RuleRecord)>, Arm64Error> {
    let head: u32 = (12 / 4) | (1 << 27);
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&codes);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    function_rows(0, &parse_xdata(&read, 0)?)
}

#[test]
fn machine_frames_and_contexts_hold_from_the_first_instruction() {
    // .seh_pushframe / sub sp, sp, #32 / bl / brk  — stored: alloc_s 2, machine frame, end
    let rows = rows_of([0x02, 0xe9, 0xe4, 0xe4]).unwrap();
    for (at, moved) in [(0, 0), (4, 32), (8, 32)] {
        let r = rule_at(&rows, at);
        assert_eq!(summary(&r), (31, moved, Some(8), vec![]), "at {at}");
        assert_ne!(r.flags & FLAG_MACHINE_FRAME, 0, "at {at}");
        assert_eq!(r.flags & FLAG_NT_CONTEXT, 0);
    }
    // .seh_context / bl / brk (ntdll's dispatchers): the context at sp throughout
    let rows = rows_of([0xea, 0xe4, 0xe4, 0xe4]).unwrap();
    for at in [0, 4, 8] {
        let r = rule_at(&rows, at);
        assert_eq!((r.cfa.reg, r.cfa.value), (31, 0), "at {at}");
        assert_ne!(r.flags & FLAG_NT_CONTEXT, 0, "at {at}");
    }
    // a machine frame after another code (stored first: run last) is no real prologue
    assert!(matches!(
        rows_of([0xe9, 0x02, 0xe4, 0xe4]),
        Err(Arm64Error::Inconsistent(_))
    ));
    assert!(matches!(
        rows_of([0xea, 0xe9, 0xe4, 0xe4]),
        Err(Arm64Error::Inconsistent(_))
    ));
}

#[test]
fn hostile_records_never_panic() {
    let mut image = [0u8; 64];
    for seed in 0u32..20_000 {
        let x = seed.wrapping_mul(2_654_435_761);
        for (i, b) in image.iter_mut().enumerate() {
            *b = (x.rotate_left(i as u32 % 32) as u8) ^ (i as u8).wrapping_mul(37);
        }
        let read = |rva: u32, len: usize| image.get(rva as usize..(rva as usize).checked_add(len)?);
        if let Ok(f) = function_of(&read, x & !3) {
            let _ = function_rows(0xffff_f000, &f);
        }
        if let Ok(f) = unpack(x | 1) {
            let _ = function_rows(x, &f);
        }
    }
}

#[test]
fn end_c_runs_the_parent_prologue_first() {
    // a fragment: its own `sub sp, sp, #16`, then `end_c` and the parent's phantom
    // prologue `stp x29, lr, [sp, #-16]!` / `add x29, sp, #8` (stored last first)
    let head: u32 = (32 / 4) | (2 << 27);
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&[0x01, 0xe5, 0xe2, 0x01, 0x81, 0xe4, 0xe4, 0xe4]);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    let f = parse_xdata(&read, 0).unwrap();
    assert_eq!(f.prologue.own.len(), 1);
    assert_eq!(f.prologue.parent.len(), 2);
    let rows = function_rows(0, &f).unwrap();
    // at the fragment's first instruction the parent's frame is whole: x29 = sp + 8
    assert_eq!(
        summary(&rule_at(&rows, 0)),
        (29, 8, Some(-8), vec![(29, -16)])
    );
    assert_eq!(
        summary(&rule_at(&rows, 4)),
        (29, 8, Some(-8), vec![(29, -16)])
    );
    // an epilogue scope at 24 running the parent's codes only after its own
    let head: u32 = (32 / 4) | (1 << 22) | (2 << 27);
    let scope: u32 = (24 / 4) | (4 << 22);
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&scope.to_le_bytes());
    image.extend_from_slice(&[0x01, 0xe1, 0x81, 0xe4, 0x81, 0xe4, 0xe4, 0xe4]);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    let rows = function_rows(0, &parse_xdata(&read, 0).unwrap()).unwrap();
    // body: stp x29, lr, [sp, #-16]! / mov x29, sp / sub sp, sp, #16
    assert_eq!(
        summary(&rule_at(&rows, 12)),
        (29, 16, Some(-8), vec![(29, -16)])
    );
    // the scope (index 4: ldp x29, lr, [sp], #16 / ret)
    assert_eq!(
        summary(&rule_at(&rows, 24)),
        (31, 16, Some(-8), vec![(29, -16)])
    );
    assert_eq!(summary(&rule_at(&rows, 28)), (31, 0, None, vec![]));
    // a scope starting inside a code is refused
    let scope: u32 = (24 / 4) | (5 << 22);
    image[4..8].copy_from_slice(&scope.to_le_bytes());
    image[8..16].copy_from_slice(&[0x01, 0xe1, 0xe0, 0, 0, 1, 0xe4, 0xe4]);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    assert!(matches!(
        parse_xdata(&read, 0),
        Err(Arm64Error::Inconsistent(_))
    ));
}

#[test]
fn the_largest_record_is_bounded_work() {
    // a 1 MiB function claiming 65 535 epilogue scopes over 1 020 code bytes: each
    // distinct sequence is replayed once, and rows stay within one per instruction
    let head: u32 = 0x3ffff;
    let ext: u32 = 0xffff | (0xff << 16);
    let mut image = head.to_le_bytes().to_vec();
    image.extend_from_slice(&ext.to_le_bytes());
    for i in 0..0xffffu32 {
        let scope = ((i * 4) & 0x3ffff) | ((i % 3) << 22);
        image.extend_from_slice(&scope.to_le_bytes());
    }
    let mut codes = vec![0x01u8; 1019];
    codes.push(0xe4);
    image.extend_from_slice(&codes);
    let read = |rva: u32, len: usize| image.get(rva as usize..rva as usize + len);
    let f = parse_xdata(&read, 0).unwrap();
    assert_eq!(f.epilogues.len(), 0xffff);
    let rows = function_rows(0, &f).unwrap();
    assert!(rows.len() <= 2 * (0x3ffff + 1), "{}", rows.len());
    assert_eq!(rows.last().unwrap().1, 0x3ffff * 4);
}

#[test]
fn packed_homed_parameters_alone() {
    // H 1 and nothing else saved: stp x0, x1, [sp, #-64]! / three more stp / sub sp, sp,
    // #48; the epilogue gives back all 112 bytes before its ret
    let f = unpack(packed(64, 0, 0, 1, 0, 112)).unwrap();
    let rows = function_rows(0, &f).unwrap();
    assert_eq!(summary(&rule_at(&rows, 4)), (31, 64, None, vec![]));
    assert_eq!(summary(&rule_at(&rows, 20)), (31, 112, None, vec![]));
    // epilogue: add sp, sp, #48 / add sp, sp, #64 / ret at 52, 56, 60
    assert_eq!(summary(&rule_at(&rows, 52)), (31, 112, None, vec![]));
    assert_eq!(summary(&rule_at(&rows, 56)), (31, 64, None, vec![]));
    assert_eq!(summary(&rule_at(&rows, 60)), (31, 0, None, vec![]));
}
