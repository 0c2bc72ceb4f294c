//! Hand-assembled `.eh_frame` tests of the DWARF builder ([`super::add_eh_frame_section`]).
//!
//! Each test writes CIE and FDE bytes itself (no assembler, no compiler), builds a table
//! from them, and checks the table twice: against values stated in the test, and against
//! gimli's own `UnwindTable` evaluation at every address of every FDE. The expected side
//! never goes through the builder's translation code.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, LittleEndian, Register, RegisterRule, UnwindContext,
    UnwindSection,
};

use super::add_eh_frame_section;
use crate::dump::Arch;
use crate::unwind::builders::{BuildStats, TableWriter};
use crate::unwind::lookup::{Rule, UnwindTable};
use crate::unwind::rule::{Slot, SlotKind, UnwindSource};

/// File address of the `.eh_frame` section in these tests.
const SECTION_ADDR: u64 = 0x8000;
/// Link base of the pretend binary: table offsets are `address - LINK_BASE`.
const LINK_BASE: u64 = 0x40_0000;

const RSP: u8 = 7;
const RBP: u8 = 6;
const RBX: u8 = 3;
const RA: u8 = 16;

// DW_CFA opcodes used below.
const ADVANCE_LOC: u8 = 0x40;
const OFFSET: u8 = 0x80;
const RESTORE: u8 = 0xc0;
const ADVANCE_LOC1: u8 = 0x02;
const ADVANCE_LOC2: u8 = 0x03;
const ADVANCE_LOC4: u8 = 0x04;
const OFFSET_EXTENDED: u8 = 0x05;
const RESTORE_EXTENDED: u8 = 0x06;
const UNDEFINED: u8 = 0x07;
const SAME_VALUE: u8 = 0x08;
const REGISTER: u8 = 0x09;
const REMEMBER_STATE: u8 = 0x0a;
const RESTORE_STATE: u8 = 0x0b;
const DEF_CFA: u8 = 0x0c;
const DEF_CFA_REGISTER: u8 = 0x0d;
const DEF_CFA_OFFSET: u8 = 0x0e;
const DEF_CFA_EXPRESSION: u8 = 0x0f;
const EXPRESSION: u8 = 0x10;
const OFFSET_EXTENDED_SF: u8 = 0x11;
const VAL_OFFSET: u8 = 0x14;
const VAL_OFFSET_SF: u8 = 0x15;
const VAL_EXPRESSION: u8 = 0x16;

fn uleb(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn sleb(mut v: i64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        if done {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// An `.eh_frame` section under construction: 64-bit, little-endian, absolute pointers.
#[derive(Default)]
struct EhFrameBytes {
    bytes: Vec<u8>,
}

impl EhFrameBytes {
    /// Appends one entry (length field, `body`, `DW_CFA_nop` padding to 8 bytes) and
    /// returns its offset.
    fn entry(&mut self, body: Vec<u8>) -> usize {
        let at = self.bytes.len();
        let mut body = body;
        while !(4 + body.len()).is_multiple_of(8) {
            body.push(0); // DW_CFA_nop
        }
        self.bytes
            .extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&body);
        at
    }

    /// A CIE: code alignment 1, data alignment -8, return address in r16, augmentation
    /// `zR` (FDE pointers `DW_EH_PE_absptr`) plus `S` for a signal trampoline.
    fn cie(&mut self, signal: bool, initial: &[u8]) -> usize {
        let mut b = vec![0, 0, 0, 0, 1]; // CIE id 0, version 1
        b.extend_from_slice(if signal { b"zRS\0" } else { b"zR\0" });
        b.extend(uleb(1));
        b.extend(sleb(-8));
        b.push(RA);
        b.extend(uleb(1)); // augmentation data: one byte
        b.push(0x00); // DW_EH_PE_absptr
        b.extend_from_slice(initial);
        self.entry(b)
    }

    /// An FDE for `[start, start + len)` using the CIE at `cie`.
    fn fde(&mut self, cie: usize, start: u64, len: u64, instructions: &[u8]) -> usize {
        let pointer_field = self.bytes.len() + 4;
        let mut b = ((pointer_field - cie) as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&start.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend(uleb(0)); // no augmentation data
        b.extend_from_slice(instructions);
        self.entry(b)
    }

    /// An FDE whose CIE pointer leads to the entry at `not_a_cie` (an FDE).
    fn fde_with_bad_cie_pointer(&mut self, not_a_cie: usize, start: u64, len: u64) -> usize {
        let pointer_field = self.bytes.len() + 4;
        let mut b = ((pointer_field - not_a_cie) as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&start.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend(uleb(0));
        self.entry(b)
    }

    fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0, 0, 0, 0]); // terminator
        self.bytes
    }
}

/// The usual x86_64 CIE program: CFA = rsp + 8, return address at CFA - 8.
fn standard_initial() -> Vec<u8> {
    vec![DEF_CFA, RSP, 8, OFFSET | RA, 1]
}

struct Built {
    bytes: Vec<u8>,
    stats: BuildStats,
}

fn build(section: &[u8]) -> Built {
    let mut w = TableWriter::new(Arch::X86_64);
    add_eh_frame_section(&mut w, section, SECTION_ADDR, LINK_BASE);
    let built = w.finish();
    Built {
        bytes: built.bytes,
        stats: built.stats,
    }
}

fn find<'a>(table: &UnwindTable<'a>, addr: u64) -> Option<Rule<'a>> {
    table.find(addr - LINK_BASE)
}

/// The expected slot for gimli's rule, or `None` when the slot does not match.
fn slot_matches(
    eh: &EhFrame<gimli::EndianSlice<'_, LittleEndian>>,
    rule: &Rule<'_>,
    slot: Slot,
    gimli_rule: Option<RegisterRule<usize>>,
) -> bool {
    let expr_eq = |e: &gimli::UnwindExpression<usize>| -> bool {
        let want = e.get(eh).unwrap().0.slice().to_vec();
        rule.expression(slot) == Some(&want[..])
    };
    match gimli_rule {
        None | Some(RegisterRule::SameValue) => slot.kind() == Some(SlotKind::Unchanged),
        Some(RegisterRule::Undefined) => slot.kind() == Some(SlotKind::Undefined),
        Some(RegisterRule::Offset(n)) => {
            slot.kind() == Some(SlotKind::Offset) && i64::from(slot.value) == n
        }
        Some(RegisterRule::ValOffset(n)) => {
            slot.kind() == Some(SlotKind::ValOffset) && i64::from(slot.value) == n
        }
        Some(RegisterRule::Register(r)) => {
            slot.kind() == Some(SlotKind::Register) && u16::from(slot.reg) == r.0
        }
        Some(RegisterRule::Expression(e)) => {
            slot.kind() == Some(SlotKind::Expression) && expr_eq(&e)
        }
        Some(RegisterRule::ValExpression(e)) => {
            slot.kind() == Some(SlotKind::ValExpression) && expr_eq(&e)
        }
        Some(_) => slot.kind() == Some(SlotKind::Undefined),
    }
}

/// Compares the table with gimli's evaluation at every address of every FDE that gimli
/// can parse. Where gimli fails for an FDE, the builder must have dropped all of it.
/// Returns how many addresses were compared.
fn compare_with_gimli(section: &[u8], table: &UnwindTable<'_>) -> usize {
    let mut eh = EhFrame::new(section, LittleEndian);
    eh.set_address_size(8);
    let bases = BaseAddresses::default().set_eh_frame(SECTION_ADDR);
    let mut ctx = UnwindContext::new();
    let mut entries = eh.entries(&bases);
    let mut compared = 0;
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else {
            continue;
        };
        let whole_fde_ok = fde.rows(&eh, &bases, &mut ctx).is_ok_and(|mut rows| {
            let mut ok = true;
            loop {
                match rows.next_row() {
                    Ok(Some(_)) => {}
                    Ok(None) => break ok,
                    Err(_) => {
                        ok = false;
                        break ok;
                    }
                }
            }
        });
        let start = fde.initial_address();
        for addr in start..start + fde.len() {
            let got = find(table, addr);
            if !whole_fde_ok {
                assert!(got.is_none(), "{addr:#x}: a failed FDE left rows behind");
                continue;
            }
            let row = fde
                .unwind_info_for_address(&eh, &bases, &mut ctx, addr)
                .unwrap();
            let rule = got.unwrap_or_else(|| panic!("{addr:#x}: no rule, gimli has {row:?}"));
            let rec = rule.record;
            match row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => {
                    assert_eq!(rec.cfa.kind(), Some(SlotKind::Offset), "{addr:#x}");
                    assert_eq!(u16::from(rec.cfa.reg), register.0, "{addr:#x}");
                    assert_eq!(i64::from(rec.cfa.value), *offset, "{addr:#x}");
                }
                CfaRule::Expression(e) => {
                    let want = e.get(&eh).unwrap().0.slice().to_vec();
                    assert_eq!(rule.expression(rec.cfa), Some(&want[..]), "{addr:#x}");
                }
            }
            assert!(
                slot_matches(&eh, &rule, rec.ra, row.register(Register(16))),
                "{addr:#x}: ra {:?} vs gimli {:?}",
                rec.ra,
                row.register(Register(16))
            );
            for reg in [6u16, 3, 12, 13, 14, 15] {
                let slot = rec.reg(Arch::X86_64, reg).unwrap();
                assert!(
                    slot_matches(&eh, &rule, slot, row.register(Register(reg))),
                    "{addr:#x}: r{reg} {slot:?} vs gimli {:?}",
                    row.register(Register(reg))
                );
            }
            assert_eq!(
                rec.is_signal_frame(),
                fde.cie().is_signal_trampoline(),
                "{addr:#x}"
            );
            assert_eq!(rule.source(), Some(UnwindSource::EhFrame));
            compared += 1;
        }
    }
    compared
}

fn cfa(rule: &Rule<'_>) -> (Option<SlotKind>, u8, i32) {
    (
        rule.record.cfa.kind(),
        rule.record.cfa.reg,
        rule.record.cfa.value,
    )
}

fn reg(rule: &Rule<'_>, r: u16) -> Slot {
    rule.record.reg(Arch::X86_64, r).unwrap()
}

#[test]
fn cfa_register_offset_and_every_advance_form() {
    let f = 0x40_1000u64;
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    let mut p = vec![ADVANCE_LOC | 1, DEF_CFA_OFFSET, 16, OFFSET | RBP, 2];
    p.extend([ADVANCE_LOC1, 3, DEF_CFA_REGISTER, RBP]);
    p.extend([ADVANCE_LOC2, 0x00, 0x01, OFFSET | RBX, 3]);
    p.push(OFFSET_EXTENDED_SF);
    p.push(12);
    p.extend(sleb(4)); // r12 at CFA + 4 × -8
    p.extend([OFFSET_EXTENDED, 13, 5]); // r13 at CFA - 40
    p.extend([ADVANCE_LOC4, 0x00, 0x02, 0x00, 0x00, DEF_CFA, RSP, 8]);
    p.extend([RESTORE | RBP, RESTORE | RBX, RESTORE_EXTENDED, 12]);
    s.fde(cie, f, 0x400, &p);
    let section = s.finish();
    let built = build(&section);
    assert_eq!((built.stats.entries, built.stats.entries_skipped), (1, 0));
    let t = UnwindTable::open(&built.bytes).unwrap();

    let at = |a: u64| find(&t, a).unwrap();
    assert_eq!(cfa(&at(f)), (Some(SlotKind::Offset), RSP, 8));
    assert_eq!(at(f).record.ra, Slot::offset(0, -8));
    assert_eq!(reg(&at(f), 6), Slot::UNCHANGED);
    assert_eq!(cfa(&at(f + 1)), (Some(SlotKind::Offset), RSP, 16));
    assert_eq!(reg(&at(f + 1), 6), Slot::offset(0, -16));
    assert_eq!(cfa(&at(f + 3)), (Some(SlotKind::Offset), RSP, 16));
    assert_eq!(cfa(&at(f + 4)), (Some(SlotKind::Offset), RBP, 16));
    assert_eq!(reg(&at(f + 0x103), 3), Slot::UNCHANGED);
    assert_eq!(reg(&at(f + 0x104), 3), Slot::offset(0, -24));
    assert_eq!(reg(&at(f + 0x104), 12), Slot::offset(0, -32));
    assert_eq!(reg(&at(f + 0x104), 13), Slot::offset(0, -40));
    let tail = at(f + 0x304);
    assert_eq!(cfa(&tail), (Some(SlotKind::Offset), RSP, 8));
    assert_eq!(reg(&tail, 6), Slot::UNCHANGED);
    assert_eq!(reg(&tail, 3), Slot::UNCHANGED);
    assert_eq!(reg(&tail, 12), Slot::UNCHANGED);
    assert_eq!(reg(&tail, 13), Slot::offset(0, -40));
    assert!(find(&t, f - 1).is_none());
    assert!(find(&t, f + 0x400).is_none());
    assert_eq!(compare_with_gimli(&section, &t), 0x400);
}

#[test]
fn cfa_expression_plt_style() {
    // x86_64 .plt: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)
    let expr = [
        0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
    ];
    let plt = 0x40_0ff0u64;
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    let mut p = vec![ADVANCE_LOC | 16, DEF_CFA_EXPRESSION];
    p.extend(uleb(expr.len() as u64));
    p.extend_from_slice(&expr);
    s.fde(cie, plt, 0x40, &p);
    let section = s.finish();
    let built = build(&section);
    let t = UnwindTable::open(&built.bytes).unwrap();
    assert_eq!(
        cfa(&find(&t, plt).unwrap()),
        (Some(SlotKind::Offset), RSP, 8)
    );
    let r = find(&t, plt + 0x10).unwrap();
    assert!(matches!(
        r.record.cfa.kind(),
        Some(SlotKind::Expression | SlotKind::ValExpression)
    ));
    assert_eq!(r.expression(r.record.cfa), Some(&expr[..]));
    assert_eq!(r.record.ra, Slot::offset(0, -8));
    assert_eq!(compare_with_gimli(&section, &t), 0x40);
}

#[test]
fn every_register_rule_kind() {
    let f = 0x40_2000u64;
    let addr_expr = [0x77, 0x10]; // DW_OP_breg7 (rsp) 16
    let val_expr = [0x76, 0x20]; // DW_OP_breg6 (rbp) 32
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    let mut p = vec![ADVANCE_LOC | 2];
    p.extend([VAL_OFFSET, RBX, 2]); // rbx = CFA - 16
    p.push(VAL_OFFSET_SF);
    p.push(6);
    p.extend(sleb(-3)); // rbp = CFA + 24
    p.extend([REGISTER, 12, 13]); // r12 is in r13
    p.extend([EXPRESSION, 13, addr_expr.len() as u8]);
    p.extend_from_slice(&addr_expr);
    p.extend([VAL_EXPRESSION, 14, val_expr.len() as u8]);
    p.extend_from_slice(&val_expr);
    p.extend([UNDEFINED, 15]);
    p.extend([ADVANCE_LOC | 2, SAME_VALUE, RBX]);
    s.fde(cie, f, 0x10, &p);
    let section = s.finish();
    let built = build(&section);
    let t = UnwindTable::open(&built.bytes).unwrap();
    let r = find(&t, f + 2).unwrap();
    assert_eq!(reg(&r, 3), Slot::val_offset(-16));
    assert_eq!(reg(&r, 6), Slot::val_offset(24));
    assert_eq!(reg(&r, 12), Slot::register(13));
    assert_eq!(reg(&r, 13).kind(), Some(SlotKind::Expression));
    assert_eq!(r.expression(reg(&r, 13)), Some(&addr_expr[..]));
    assert_eq!(reg(&r, 14).kind(), Some(SlotKind::ValExpression));
    assert_eq!(r.expression(reg(&r, 14)), Some(&val_expr[..]));
    assert_eq!(reg(&r, 15), Slot::UNDEFINED);
    assert_eq!(reg(&find(&t, f + 4).unwrap(), 3), Slot::UNCHANGED);
    assert_eq!(compare_with_gimli(&section, &t), 0x10);
}

#[test]
fn undefined_return_address_is_outermost() {
    // _start: the return-address column is undefined from the first instruction
    let f = 0x40_3000u64;
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    s.fde(cie, f, 0x20, &[UNDEFINED, RA]);
    let section = s.finish();
    let built = build(&section);
    let t = UnwindTable::open(&built.bytes).unwrap();
    assert_eq!(find(&t, f).unwrap().record.ra, Slot::UNDEFINED);
    assert_eq!(find(&t, f + 0x1f).unwrap().record.ra, Slot::UNDEFINED);
    assert_eq!(compare_with_gimli(&section, &t), 0x20);
}

#[test]
fn remember_and_restore_state() {
    // push rbp; mov rsp,rbp; ...; remember; leave; ret; restore (the rest of the body)
    let f = 0x40_4000u64;
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    let p = vec![
        ADVANCE_LOC | 1,
        DEF_CFA_OFFSET,
        16,
        OFFSET | RBP,
        2,
        ADVANCE_LOC | 3,
        DEF_CFA_REGISTER,
        RBP,
        ADVANCE_LOC | 8,
        REMEMBER_STATE,
        DEF_CFA,
        RSP,
        8,
        RESTORE | RBP,
        ADVANCE_LOC | 1,
        RESTORE_STATE,
    ];
    s.fde(cie, f, 0x30, &p);
    let section = s.finish();
    let built = build(&section);
    let t = UnwindTable::open(&built.bytes).unwrap();
    let body = find(&t, f + 4).unwrap();
    let epilogue = find(&t, f + 12).unwrap();
    let after = find(&t, f + 13).unwrap();
    assert_eq!(cfa(&body), (Some(SlotKind::Offset), RBP, 16));
    assert_eq!(cfa(&epilogue), (Some(SlotKind::Offset), RSP, 8));
    assert_eq!(reg(&epilogue, 6), Slot::UNCHANGED);
    assert_eq!(cfa(&after), (Some(SlotKind::Offset), RBP, 16));
    assert_eq!(reg(&after, 6), Slot::offset(0, -16));
    assert_eq!(after.record, body.record);
    assert_eq!(compare_with_gimli(&section, &t), 0x30);
}

/// glibc's x86_64 `__restore_rt` CFI: CFA and every register read from the ucontext the
/// kernel pushed (`rsp` points at it): `uc_mcontext.gregs` starts at offset 40.
fn restore_rt_program() -> Vec<u8> {
    let mut p = vec![DEF_CFA_EXPRESSION, 4, 0x77];
    p.extend(sleb(160)); // DW_OP_breg7 160 (gregs[REG_RSP])
    p.push(0x06); // DW_OP_deref
    for (reg, off) in [(8u8, 40i64), (6, 120), (3, 128), (12, 72), (16, 168)] {
        let mut e = vec![0x77];
        e.extend(sleb(off));
        p.extend([EXPRESSION, reg, e.len() as u8]);
        p.extend(e);
    }
    p
}

#[test]
fn signal_frame_augmentation() {
    // glibc puts a nop before __restore_rt and starts the FDE there, so that a lookup
    // at the return address minus one lands inside it.
    let restore_rt = 0x40_5001u64;
    let mut s = EhFrameBytes::default();
    let cie = s.cie(true, &[]);
    s.fde(cie, restore_rt - 1, 0x10, &restore_rt_program());
    let plain = s.cie(false, &standard_initial());
    s.fde(plain, 0x40_5100, 0x10, &[]);
    let section = s.finish();
    let built = build(&section);
    assert_eq!(built.stats.entries, 2);
    let t = UnwindTable::open(&built.bytes).unwrap();
    let r = find(&t, restore_rt - 1).unwrap();
    assert!(r.record.is_signal_frame());
    assert_eq!(
        r.expression(r.record.cfa),
        Some(&[0x77, 0xa0, 0x01, 0x06][..])
    );
    assert_eq!(r.record.ra.kind(), Some(SlotKind::Expression));
    assert_eq!(r.expression(r.record.ra), Some(&[0x77, 0xa8, 0x01][..]));
    assert_eq!(r.expression(reg(&r, 6)), Some(&[0x77, 0xf8, 0x00][..]));
    assert!(!find(&t, 0x40_5100).unwrap().record.is_signal_frame());
    assert_eq!(compare_with_gimli(&section, &t), 0x20);
}

#[test]
fn corrupt_fdes_are_skipped_and_counted_while_the_others_build() {
    let (a, b, c, d) = (0x40_6000u64, 0x40_6010u64, 0x40_6020u64, 0x40_6030u64);
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    // a: push rbp ... pop rbp: its last row is the CIE's rule again
    let fde_a = s.fde(
        cie,
        a,
        0x10,
        &[
            ADVANCE_LOC | 1,
            DEF_CFA_OFFSET,
            16,
            ADVANCE_LOC | 8,
            DEF_CFA_OFFSET,
            8,
        ],
    );
    // b: adjacent to a, first row equal to a's last one, then an unknown opcode
    s.fde(cie, b, 0x10, &[ADVANCE_LOC | 4, 0x3e, 0, 0]);
    // c: its CIE pointer leads to an FDE
    s.fde_with_bad_cie_pointer(fde_a, c, 0x10);
    // d: fine
    s.fde(cie, d, 0x10, &[ADVANCE_LOC | 1, DEF_CFA_OFFSET, 16]);
    let section = s.finish();
    let built = build(&section);
    assert_eq!(built.stats.entries, 2, "{:?}", built.stats);
    assert_eq!(built.stats.entries_skipped, 2, "{:?}", built.stats);
    assert!(built.stats.first_error.is_some());
    let t = UnwindTable::open(&built.bytes).unwrap();
    for addr in b..d {
        assert!(find(&t, addr).is_none(), "{addr:#x} should have no rule");
    }
    assert_eq!(
        cfa(&find(&t, a + 9).unwrap()),
        (Some(SlotKind::Offset), RSP, 8)
    );
    assert_eq!(
        cfa(&find(&t, d + 1).unwrap()),
        (Some(SlotKind::Offset), RSP, 16)
    );
    // a and d are compared address by address; b is checked to have left nothing
    assert_eq!(compare_with_gimli(&section, &t), 0x20);
}

/// An FDE whose CIE pointer leads before the section start (or past its end) loses only
/// itself: the FDEs after it are still found by their lengths.
#[test]
fn fdes_after_an_out_of_section_cie_pointer_still_build() {
    let (a, b, c) = (0x40_6000u64, 0x40_6010u64, 0x40_6020u64);
    let mut s = EhFrameBytes::default();
    let cie = s.cie(false, &standard_initial());
    s.fde(cie, a, 0x10, &[ADVANCE_LOC | 1, DEF_CFA_OFFSET, 16]);
    // b: CIE pointer larger than its own offset, i.e. before the section start
    let mut body = 0x7fff_0000u32.to_le_bytes().to_vec();
    body.extend_from_slice(&b.to_le_bytes());
    body.extend_from_slice(&0x10u64.to_le_bytes());
    body.extend(uleb(0));
    s.entry(body);
    // b2: CIE pointer "negative", i.e. past the section end
    let mut body = 0xffff_fff0u32.to_le_bytes().to_vec();
    body.extend_from_slice(&(b + 8).to_le_bytes());
    body.extend_from_slice(&0x8u64.to_le_bytes());
    body.extend(uleb(0));
    s.entry(body);
    s.fde(cie, c, 0x10, &[ADVANCE_LOC | 2, DEF_CFA_OFFSET, 24]);
    let section = s.finish();
    let built = build(&section);
    assert_eq!(built.stats.entries, 2, "{:?}", built.stats);
    assert_eq!(built.stats.entries_skipped, 2, "{:?}", built.stats);
    let t = UnwindTable::open(&built.bytes).unwrap();
    assert!(find(&t, b + 1).is_none());
    assert_eq!(
        cfa(&find(&t, c + 3).unwrap()),
        (Some(SlotKind::Offset), RSP, 24)
    );
    assert_eq!(
        cfa(&find(&t, a + 1).unwrap()),
        (Some(SlotKind::Offset), RSP, 16)
    );
}

#[test]
fn truncated_sections_never_panic() {
    let mut s = EhFrameBytes::default();
    let cie = s.cie(true, &restore_rt_program());
    s.fde(cie, 0x40_7000, 0x100, &restore_rt_program());
    s.fde(
        cie,
        0x40_7100,
        0x100,
        &[ADVANCE_LOC2, 0xff, 0xff, UNDEFINED, RA],
    );
    let section = s.finish();
    for cut in 0..section.len() {
        let built = build(&section[..cut]);
        let t = UnwindTable::open(&built.bytes).unwrap();
        for addr in [0x40_7000u64, 0x40_7050, 0x40_7100, 0x40_71ff] {
            let _ = find(&t, addr);
        }
    }
}
