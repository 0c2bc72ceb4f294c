//! EHABI tables from literal bytes: the index's three kinds of entry, the extab's models,
//! every opcode group of the ABI's table 4, and what cannot be expressed.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::unwind::lookup::UnwindTable;
use crate::unwind::rule::SlotKind;

/// A `prel31` word at `place` pointing to `target`.
fn prel(target: u64, place: u64) -> u32 {
    (target.wrapping_sub(place) as u32) & 0x7fff_ffff
}

fn le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

const EXIDX: u64 = 0x2000;
const EXTAB: u64 = 0x3000;

/// An index of five functions at 0x1000, 0x1100 (Thumb: bit 0 set), 0x1200, 0x1300 and
/// 0x1400, and the extab their entries point to.
fn tables() -> (Vec<u8>, Vec<u8>) {
    let extab = le(&[
        // 0x3000: personality 1, one more word: pop {r4-r7, r14}; vsp += 16; finish
        0x8101_ab03,
        0xb0b0_b0b0,
        // 0x3008: generic model: personality at 0x1800, then GCC's layout with no
        // further word: vsp = r11; pop {r11, r14}
        prel(0x1800, 0x3008),
        0x009b_8480,
    ]);
    let exidx = le(&[
        prel(0x1000, EXIDX),
        1, // EXIDX_CANTUNWIND
        prel(0x1101, EXIDX + 8),
        0x80a8_b0b0, // inline: pop {r4, r14}
        prel(0x1200, EXIDX + 16),
        prel(0x3000, EXIDX + 20),
        prel(0x1300, EXIDX + 24),
        prel(0x3008, EXIDX + 28),
        prel(0x1400, EXIDX + 32),
        0x8080_00b0, // inline: refuse to unwind
    ]);
    (exidx, extab)
}

fn sections<'a>(exidx: &'a [u8], extab: &'a [u8]) -> (Section<'a>, Section<'a>) {
    (
        Section {
            bytes: exidx,
            address: EXIDX,
        },
        Section {
            bytes: extab,
            address: EXTAB,
        },
    )
}

#[test]
fn index_entries_of_every_kind() {
    let (exidx, extab) = tables();
    let (x, t) = sections(&exidx, &extab);
    let entries = read_index(x, t);
    let starts: Vec<u64> = entries.iter().map(|e| e.start).collect();
    assert_eq!(starts, vec![0x1000, 0x1100, 0x1200, 0x1300, 0x1400]);
    assert_eq!(entries[0].kind, Ok(EntryKind::CantUnwind));
    assert_eq!(
        entries[1].kind,
        Ok(EntryKind::Compact {
            personality: 0,
            inline: true,
            opcodes: vec![0xa8, 0xb0, 0xb0],
        })
    );
    assert_eq!(
        entries[2].kind,
        Ok(EntryKind::Compact {
            personality: 1,
            inline: false,
            opcodes: vec![0xab, 0x03, 0xb0, 0xb0, 0xb0, 0xb0],
        })
    );
    assert_eq!(
        entries[3].kind,
        Ok(EntryKind::Generic {
            personality: 0x1800,
            opcodes: vec![0x9b, 0x84, 0x80],
        })
    );
}

/// `(cfa register, cfa offset, ra slot, [(register, offset from the CFA)])` of a rule.
fn shape(rule: &RuleRecord) -> (u8, i32, Slot, Vec<(u16, i32)>) {
    let saved = Arch::Arm
        .callee_saved()
        .iter()
        .filter_map(|&r| {
            let s = rule.reg(Arch::Arm, r)?;
            (s.kind() == Some(SlotKind::Offset)).then_some((r, s.value))
        })
        .collect();
    (rule.cfa.reg, rule.cfa.value, rule.ra, saved)
}

fn run(ops: &[u8]) -> (u8, i32, Slot, Vec<(u16, i32)>) {
    shape(&execute(ops).unwrap().unwrap())
}

#[test]
fn opcodes_give_the_caller_s_cfa_and_saved_registers() {
    // a leaf: nothing moved, the return address still in lr
    assert_eq!(run(&[0xb0, 0xb0, 0xb0]), (13, 0, Slot::UNCHANGED, vec![]));
    // vsp = vsp + 12; pop {r14}
    assert_eq!(
        run(&[0x02, 0x84, 0x00]),
        (13, 16, Slot::offset(0, -4), vec![])
    );
    // pop {r4, r14}
    assert_eq!(
        run(&[0xa8, 0xb0, 0xb0]),
        (13, 8, Slot::offset(0, -4), vec![(4, -8)])
    );
    // vsp += 52; vsp += 256; pop {r14}: libc's large frames
    assert_eq!(
        run(&[0x0c, 0x3f, 0x84, 0x00, 0xb0]),
        (13, 312, Slot::offset(0, -4), vec![])
    );
    // pop {r4-r11, r14} after vsp += 12
    let (_, off, ra, saved) = run(&[0x02, 0xaf, 0xb0]);
    assert_eq!((off, ra), (48, Slot::offset(0, -4)));
    assert_eq!(saved.first(), Some(&(4, -36)));
    assert_eq!(saved.last(), Some(&(11, -8)));
    // vsp = r7; pop {r7, r14}: a Thumb frame pointer
    assert_eq!(
        run(&[0x97, 0x84, 0x08]),
        (7, 8, Slot::offset(0, -4), vec![(7, -8)])
    );
    // pop {r3} (a pad register, not tracked); pop {r4, r5, pc}: pc is the return address
    assert_eq!(
        run(&[0xb1, 0x08, 0x88, 0x03]),
        (13, 16, Slot::offset(0, -4), vec![(4, -12), (5, -8)])
    );
    // vsp = vsp - 4, then + 8: subtraction
    assert_eq!(run(&[0x40, 0x01]).1, 4);
}

#[test]
fn coprocessor_pops_only_move_vsp() {
    assert_eq!(run(&[0xb2, 0x01]).1, 0x208); // uleb128 1: 0x204 + 4
    assert_eq!(run(&[0xb2, 0x81, 0x01]).1, 0x204 + 4 * 129);
    assert_eq!(run(&[0xb3, 0x12]).1, 8 * 3 + 4); // FSTMFDX d1-d3
    assert_eq!(run(&[0xb9]).1, 8 * 2 + 4); // FSTMFDX d8-d9
    assert_eq!(run(&[0xc1]).1, 8 * 2); // wR10-wR11
    assert_eq!(run(&[0xc6, 0x02]).1, 8 * 3);
    assert_eq!(run(&[0xc7, 0x05]).1, 8); // wCGR0, wCGR2
    assert_eq!(run(&[0xc8, 0x01]).1, 16); // VPUSH d16-d17
    assert_eq!(run(&[0xc9, 0x83]).1, 32); // VPUSH d8-d11
    assert_eq!(run(&[0xd7]).1, 64); // VPUSH d8-d15
}

#[test]
fn what_cannot_be_expressed_is_an_error_or_no_rule() {
    assert_eq!(execute(&[0x80, 0x00]), Ok(None), "refuse to unwind");
    assert_eq!(execute(&[0x82, 0x00]), Err(EhabiError::PopsSp));
    assert_eq!(execute(&[0xa8, 0x97]), Err(EhabiError::VspAfterPop(7)));
    assert_eq!(execute(&[0x84]), Err(EhabiError::TruncatedOpcode(0x84)));
    assert_eq!(
        execute(&[0xb2, 0x80]),
        Err(EhabiError::TruncatedOpcode(0xb2))
    );
    for op in [0x9d, 0x9f, 0xb4, 0xb7, 0xca, 0xd8, 0xff] {
        assert_eq!(
            execute(&[op]),
            Err(EhabiError::ReservedOpcode(op)),
            "{op:#x}"
        );
    }
    assert_eq!(
        execute(&[0xb1, 0x00]),
        Err(EhabiError::ReservedOpcode(0xb1))
    );
    assert_eq!(
        execute(&[0xb1, 0x10]),
        Err(EhabiError::ReservedOpcode(0xb1))
    );
    // an endless uleb128 stays bounded and overflows into an error, never a panic
    let mut long = vec![0xb2];
    long.extend([0xff; 20]);
    long.push(0x01);
    assert!(execute(&long).is_err());
}

#[test]
fn extab_references_outside_the_table_are_errors() {
    let exidx = le(&[prel(0x1000, EXIDX), prel(0x9000, EXIDX + 4)]);
    let (x, t) = sections(&exidx, &[]);
    assert_eq!(
        read_index(x, t)[0].kind,
        Err(EhabiError::ExtabOutOfBounds(0x9000))
    );
    // personality 1 promising more words than the table holds
    let extab = le(&[0x8102_b0b0]);
    let exidx = le(&[prel(0x1000, EXIDX), prel(EXTAB, EXIDX + 4)]);
    let (x, t) = sections(&exidx, &extab);
    assert_eq!(
        read_index(x, t)[0].kind,
        Err(EhabiError::ExtabOutOfBounds(EXTAB))
    );
    // personality 3 is not defined
    let exidx = le(&[prel(0x1000, EXIDX), 0x8300_0000]);
    let (x, t) = sections(&exidx, &[]);
    assert_eq!(
        read_index(x, t)[0].kind,
        Err(EhabiError::UnknownPersonality(3))
    );
}

#[test]
fn rows_run_to_the_next_entry_and_the_section_end() {
    let (exidx, extab) = tables();
    let (x, t) = sections(&exidx, &extab);
    let mut w = TableWriter::new(Arch::Arm);
    add_index(&mut w, x, t, 0, &[(0x1000, 0x1480)]);
    assert_eq!(w.stats.entries, 5);
    assert_eq!(w.stats.entries_skipped, 0);
    let built = w.finish();
    let table = UnwindTable::open(&built.bytes).unwrap();
    let cfa = |a: u64| {
        table
            .find(a)
            .map(|r| (r.record.cfa.reg, r.record.cfa.value))
    };
    assert_eq!(cfa(0x1000), None, "EXIDX_CANTUNWIND: no rule");
    assert_eq!(cfa(0x1100), Some((13, 8)));
    assert_eq!(cfa(0x11fe), Some((13, 8)));
    assert_eq!(cfa(0x1200), Some((13, 36)));
    assert_eq!(cfa(0x1300), Some((11, 8)));
    assert_eq!(cfa(0x1400), None, "refuse to unwind: no rule");
    assert_eq!(cfa(0x1480), None, "past the code section");
    assert_eq!(
        table.find(0x1100).and_then(|r| r.source()),
        Some(UnwindSource::ArmExidx)
    );
}

#[test]
fn hostile_tables_never_panic() {
    let (exidx, extab) = tables();
    for cut in 0..exidx.len() {
        for cut_t in [0, 4, 8, extab.len()] {
            let (x, t) = sections(&exidx[..cut], &extab[..cut_t]);
            let mut w = TableWriter::new(Arch::Arm);
            add_index(&mut w, x, t, 0x1000, &[(0, u64::MAX)]);
            let _ = w.finish();
        }
    }
    let mut w = TableWriter::new(Arch::Arm);
    let junk = vec![0xffu8; 64];
    let (x, t) = sections(&junk, &junk);
    add_index(&mut w, x, t, u64::MAX, &[]);
    let _ = w.finish();
}

#[test]
fn many_entries_at_one_start_take_linear_time() {
    // 200 000 entries for the same function (a hostile index): each one's range must be
    // found without searching the rest (quadratic: 4e10 steps)
    let n = 200_000u64;
    let mut words = Vec::with_capacity(2 * n as usize + 2);
    for i in 0..n {
        words.push(prel(0x1000, EXIDX + 8 * i));
        words.push(0x80a8_b0b0);
    }
    words.push(prel(0x1100, EXIDX + 8 * n));
    words.push(1);
    let exidx = le(&words);
    let (x, t) = sections(&exidx, &[]);
    let mut w = TableWriter::new(Arch::Arm);
    add_index(&mut w, x, t, 0, &[(0x1000, 0x2000)]);
    let built = w.finish();
    let table = UnwindTable::open(&built.bytes).unwrap();
    assert_eq!(table.find(0x10fe).map(|r| r.record.cfa.value), Some(8));
    assert_eq!(table.find(0x1100).map(|r| r.record.cfa.value), None);
}
