//! Tests of the SFrame table builder ([`crate::unwind::builders::sframe`]): "unwind from
//! `.sframe` alone" — for every fixture ELF, the rules built from `.sframe` must agree
//! with the rules built from `.eh_frame` at every address both describe, and a copy of the
//! binary without `.eh_frame` must unwind from `.sframe`.

use object::{Object, ObjectSection};

use crate::unwind::builders::{dwarf, sframe as build_sframe, TableWriter};
use crate::unwind::lookup::{Rule, UnwindTable};
use crate::unwind::rule::{
    RuleRecord, Slot, SlotKind, UnwindSource, FLAG_RA_KEY_B, FLAG_RA_SIGNED, FLAG_SIGNAL_FRAME,
};
use crate::{binary, dump::Arch};

/// `fixtures/sframe`, found from the running test's package (`CARGO_MANIFEST_DIR` as
/// `cargo test` sets it), not a compiled-in path, which may be another clone's when builds
/// are shared.
fn fixtures() -> String {
    let package = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{package}/../fixtures/sframe")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/{name}", fixtures());
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The linked ELF vectors of an architecture we unwind: (name, file, SFrame version).
fn elf_vectors() -> Vec<(String, String, u64)> {
    let m: serde_json::Value = serde_json::from_slice(&fixture("manifest.json")).expect("json");
    m["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .filter(|v| v["expect"] == "ok" && v["elf_type"] != "ET_REL")
        .filter(|v| v["elf_machine"] == "EM_X86_64" || v["elf_machine"] == "EM_AARCH64")
        .filter_map(|v| {
            Some((
                v["name"].as_str()?.to_string(),
                v["files"]["elf"].as_str()?.to_string(),
                v["header"]["version"].as_u64()?,
            ))
        })
        .collect()
}

fn table_from(data: &[u8], eh: bool, sframe: bool) -> Vec<u8> {
    let file = object::File::parse(data).expect("elf");
    let mut w = TableWriter::new(binary::arch_of(&file).expect("arch"));
    if eh {
        dwarf::add_elf_sections(&mut w, &file, true).expect("eh_frame");
    }
    if sframe {
        build_sframe::add_elf_sframe(&mut w, &file, data);
        assert_eq!(w.stats.entries_skipped, 0, "{:?}", w.stats.first_error);
    }
    w.finish().bytes
}

/// A copy of `data` whose `.eh_frame` and `.eh_frame_hdr` sections no longer exist under
/// those names (the names in `.shstrtab` are changed to `.xh_frame*`), as if removed by
/// `objcopy --remove-section`.
fn without_eh_frame(data: &[u8]) -> Vec<u8> {
    let file = object::File::parse(data).expect("elf");
    let (off, size) = file
        .section_by_name(".shstrtab")
        .and_then(|s| s.file_range())
        .expect("shstrtab");
    let mut out = data.to_vec();
    let strtab = &mut out[off as usize..(off + size) as usize];
    for i in 0..strtab.len().saturating_sub(9) {
        if &strtab[i..i + 9] == b".eh_frame" {
            strtab[i + 1] = b'x';
        }
    }
    out
}

/// What is compared: CFA, RA and FP rules in a form where equal meanings are equal
/// values. The one normalisation: `.eh_frame`'s DRAP CFA expression
/// `DW_OP_breg<n> off; DW_OP_deref` is the same rule as SFrame's dereferenced CFA, and
/// expressions compare by their bytes, not their place in the expression area.
#[derive(Debug, PartialEq, Eq)]
struct Comparable {
    cfa: (u8, u8, i32, Vec<u8>),
    ra: (u8, u8, i32, Vec<u8>),
    fp: (u8, u8, i32, Vec<u8>),
    ra_signed: bool,
    signal: bool,
}

fn slot_key(rule: &Rule<'_>, slot: Slot) -> (u8, u8, i32, Vec<u8>) {
    match slot.kind() {
        Some(SlotKind::Expression | SlotKind::ValExpression) => {
            let bytes = rule.expression(slot).unwrap_or_default().to_vec();
            // DW_OP_breg<n> sleb DW_OP_deref
            if slot.kind == SlotKind::ValExpression as u8
                && bytes.len() >= 3
                && (0x70..0x90).contains(&bytes[0])
                && bytes[bytes.len() - 1] == 0x06
            {
                if let Some(off) = read_sleb(&bytes[1..bytes.len() - 1]) {
                    return (
                        SlotKind::DerefOffset as u8,
                        bytes[0] - 0x70,
                        off,
                        Vec::new(),
                    );
                }
            }
            (slot.kind, 0, 0, bytes)
        }
        Some(SlotKind::Register | SlotKind::Offset | SlotKind::DerefOffset) => {
            (slot.kind, slot.reg, slot.value, Vec::new())
        }
        _ => (slot.kind, 0, slot.value, Vec::new()),
    }
}

fn read_sleb(b: &[u8]) -> Option<i32> {
    let mut v: i64 = 0;
    let mut shift = 0;
    for (i, &byte) in b.iter().enumerate() {
        v |= i64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            if i + 1 != b.len() {
                return None;
            }
            if shift < 64 && byte & 0x40 != 0 {
                v |= -1 << shift;
            }
            return i32::try_from(v).ok();
        }
    }
    None
}

fn comparable(arch: Arch, rule: &Rule<'_>) -> Comparable {
    let fp_reg = if arch == Arch::Aarch64 { 29 } else { 6 };
    let r: &RuleRecord = &rule.record;
    Comparable {
        cfa: slot_key(rule, r.cfa),
        ra: slot_key(rule, r.ra),
        fp: slot_key(rule, r.reg(arch, fp_reg).unwrap_or(Slot::UNCHANGED)),
        ra_signed: r.flags & FLAG_RA_SIGNED != 0,
        signal: r.flags & FLAG_SIGNAL_FRAME != 0,
    }
}

/// Where `.sframe` legitimately says something else than `.eh_frame`, and why. Returns
/// `None` for a real disagreement.
fn known_difference(
    version: u64,
    in_plt_got: bool,
    eh: &Comparable,
    sf: &Comparable,
) -> Option<&'static str> {
    if in_plt_got && eh.cfa == (SlotKind::Offset as u8, 7, 8, Vec::new()) && sf.cfa.2 == 16 {
        // ld (2.44, 2.47) describes `.plt.got` entries (`jmp *GOT(%rip); xchg %ax,%ax`,
        // no push) with the PLTn rule CFA = sp+16; the code and .eh_frame say sp+8.
        // A binutils bug: .eh_frame, which has priority in a full table, is right.
        return Some("ld's .plt.got SFrame rule is sp+16, the code's CFA is sp+8");
    }
    let undefined = (SlotKind::Undefined as u8, 0, 0, Vec::new());
    if sf.ra == undefined && eh.ra == undefined {
        // v3 outermost frame: SFrame gives no CFA at all (zero data words), the walk
        // stops on the undefined RA either way.
        return Some("outermost frame: SFrame has no CFA");
    }
    let expr = SlotKind::ValExpression as u8;
    if eh.cfa.0 == expr
        && sf.cfa.0 == SlotKind::Offset as u8
        && sf.cfa.1 == 7
        && (sf.cfa.2 == 8 || sf.cfa.2 == 16)
        && eh.ra == sf.ra
        && eh.fp == sf.fp
    {
        // x86_64 PLTn: .eh_frame computes the CFA with one expression over rip
        // (rsp + 8, +8 more once the push has run); SFrame's MASK FDE spells out the two
        // cases per 16-byte block.
        return Some("PLT entry: CFA expression vs MASK rows");
    }
    if version == 2 && eh.ra == undefined && eh.cfa == sf.cfa {
        // binutils 2.41/2.44 ignore `.cfi_undefined rip`: v2 has no outermost marker.
        return Some("v2 cannot mark the outermost frame");
    }
    if version == 2 && eh.ra.0 == SlotKind::Register as u8 && eh.cfa == sf.cfa {
        // gas 2.44 mis-encodes `.cfi_register rip, r11` as the fixed CFA-8 slot
        // (fixtures README: "ra-in-register-misrepresented").
        return Some("gas 2.44 mis-encodes an RA held in a register");
    }
    if version == 2
        && eh.signal
        && !sf.signal
        && (&eh.cfa, &eh.ra, &eh.fp) == (&sf.cfa, &sf.ra, &sf.fp)
        && eh.ra_signed == sf.ra_signed
    {
        // v2 has no signal-frame bit.
        return Some("v2 cannot mark signal frames");
    }
    None
}

#[test]
fn sframe_alone_agrees_with_eh_frame_at_every_address() {
    let mut total_compared = 0usize;
    let mut total_explained = 0usize;
    let mut vectors = 0usize;
    for (name, elf, version) in elf_vectors() {
        let data = fixture(&elf);
        let arch = binary::arch_of(&object::File::parse(&*data).expect("elf")).expect("arch");
        let eh_bytes = table_from(&data, true, false);
        let sf_bytes = table_from(&data, false, true);
        let eh = UnwindTable::open(&eh_bytes).expect("eh table");
        let sf = UnwindTable::open(&sf_bytes).expect("sframe table");
        assert_eq!(sf.sources(), vec![UnwindSource::Sframe], "{name}");
        let rows: Vec<(u64, Option<RuleRecord>)> = sf.rows().collect();
        let plt_got = object::File::parse(&*data)
            .ok()
            .and_then(|f| {
                let base = binary::link_base(&f);
                let s = f.section_by_name(".plt.got")?;
                Some(s.address() - base..s.address() - base + s.size())
            })
            .unwrap_or(0..0);
        let (mut compared, mut explained) = (0usize, 0usize);
        let mut failures = Vec::new();
        for pair in rows.windows(2) {
            let (start, Some(_)) = pair[0] else { continue };
            for addr in start..pair[1].0 {
                let s = sf.find(addr).expect("sframe row");
                assert_eq!(s.source(), Some(UnwindSource::Sframe));
                let Some(e) = eh.find(addr) else { continue };
                let (ec, sc) = (comparable(arch, &e), comparable(arch, &s));
                compared += 1;
                if ec == sc {
                    continue;
                }
                match known_difference(version, plt_got.contains(&addr), &ec, &sc) {
                    Some(_) => explained += 1,
                    None => {
                        failures.push(format!("{addr:#x}: eh_frame {ec:?}\n        sframe {sc:?}"))
                    }
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{name}: {} of {compared} addresses disagree:\n{}",
            failures.len(),
            failures
                .iter()
                .take(6)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(compared > 0, "{name}: nothing compared");
        assert!(
            explained < compared,
            "{name}: {explained} of {compared} explained away"
        );
        total_compared += compared;
        total_explained += explained;
        vectors += 1;
    }
    assert_eq!(vectors, 16, "ELF vectors compared");
    assert!(total_compared > 2000, "{total_compared}");
    // the known differences are PLT entries and a handful of v2 rows, not the bulk
    assert!(
        total_explained * 5 < total_compared,
        "{total_explained} of {total_compared}"
    );
    eprintln!("compared {total_compared} addresses, {total_explained} known differences");
}

#[test]
fn a_binary_without_eh_frame_unwinds_from_sframe() {
    for (name, elf, _) in elf_vectors() {
        let data = fixture(&elf);
        let stripped = without_eh_frame(&data);
        let file = object::File::parse(&*stripped).expect("elf");
        assert!(file.section_by_name(".eh_frame").is_none(), "{name}");
        let built = dwarf::build_from_elf(&stripped, &[]).expect("builds");
        assert_eq!(
            built.stats.entries_skipped, 0,
            "{name}: {:?}",
            built.stats.first_error
        );
        // the same rows as the SFrame-only table built from the original
        assert_eq!(built.bytes, table_from(&data, false, true), "{name}");
        let t = UnwindTable::open(&built.bytes).expect("open");
        assert_eq!(t.sources(), vec![UnwindSource::Sframe], "{name}");
        // and with .eh_frame present, .eh_frame wins wherever it has a rule
        let full = dwarf::build_from_elf(&data, &[]).expect("builds");
        let full = UnwindTable::open(&full.bytes).expect("open");
        let eh_bytes = table_from(&data, true, false);
        let eh = UnwindTable::open(&eh_bytes).expect("open");
        for (start, rule) in eh.rows() {
            if rule.is_some() {
                assert_eq!(
                    full.find(start).map(|r| r.record),
                    eh.find(start).map(|r| r.record),
                    "{name} {start:#x}"
                );
            }
        }
    }
}

/// PLT entries from the objdump text of `v3-x86_64-plt` (func idx [1]: pc = 0x1030,
/// size = 32, `STARTPC[m]` rows `0 sp+8`, `b sp+16`, rep size 16).
#[test]
fn mask_fdes_expand_per_plt_entry() {
    let data = fixture("v3-x86_64-plt.elf");
    let bytes = table_from(&data, false, true);
    let t = UnwindTable::open(&bytes).expect("open");
    let cfa = |a: u64| t.find(a).map(|r| (r.record.cfa.reg, r.record.cfa.value));
    let fde = crate::unwind::sframe::Sframe::parse(&fixture("v3-x86_64-plt.sframe"), 0x2118)
        .expect("parse")
        .fdes[1]
        .clone();
    assert_eq!((fde.func_start, fde.rep_size), (0x1030, 16));
    let entries = u64::from(fde.func_size) / 16;
    assert!(entries >= 2);
    for k in 0..entries {
        let base = 0x1030 + 16 * k;
        assert_eq!(cfa(base), Some((7, 8)), "{base:#x}");
        assert_eq!(cfa(base + 0xa), Some((7, 8)), "{base:#x}");
        assert_eq!(cfa(base + 0xb), Some((7, 16)), "{base:#x}");
        assert_eq!(cfa(base + 0xf), Some((7, 16)), "{base:#x}");
    }
}

#[test]
fn aarch64_signed_ra_and_key_b() {
    // v3-aarch64-cfi func idx [4]: pc = 0x4000f8, pauth = B key; row 0x400100:
    // sp+16 c-16 c-8[s]. func idx [3] at 0x4000e4: same rule, key A.
    let data = fixture("v3-aarch64-cfi.elf");
    let bytes = table_from(&data, false, true);
    let t = UnwindTable::open(&bytes).expect("open");
    let link_base = 0x400000;
    let b = t.find(0x400100 - link_base).expect("row").record;
    assert_eq!(b.cfa, Slot::offset(31, 16));
    assert_eq!(b.ra, Slot::offset(0, -8));
    assert_eq!(b.reg(Arch::Aarch64, 29), Some(Slot::offset(0, -16)));
    assert_eq!(
        b.flags & (FLAG_RA_SIGNED | FLAG_RA_KEY_B),
        FLAG_RA_SIGNED | FLAG_RA_KEY_B
    );
    let a = t.find(0x4000e4 - link_base).expect("row").record;
    assert_eq!(a.flags & (FLAG_RA_SIGNED | FLAG_RA_KEY_B), FLAG_RA_SIGNED);
    // 0x4000dc: sp+0 u u — RA still in x30
    let leaf = t.find(0x4000dc - link_base).expect("row").record;
    assert_eq!(leaf.ra, Slot::UNCHANGED);
    assert_eq!(leaf.flags & FLAG_RA_SIGNED, 0);
    // 0x4000b0: RA undefined (outermost)
    let outer = t.find(0x4000b0 - link_base).expect("row").record;
    assert_eq!(outer.ra, Slot::UNDEFINED);
    // 0x4000bc: signal frame (attr = "S")
    assert!(t
        .find(0x4000bc - link_base)
        .expect("row")
        .record
        .is_signal_frame());
}

#[test]
fn hostile_sections_never_panic_or_explode() {
    let good = fixture("v3-x86_64-plt.sframe");
    for i in 0..good.len() {
        for v in [0x00u8, 0xff, 0x7f, 0x80] {
            let mut bad = good.clone();
            bad[i] = v;
            let mut w = TableWriter::new(Arch::X86_64);
            let _ = build_sframe::add_sframe_section(&mut w, &bad, 0x2118, 0);
            let built = w.finish();
            assert!(built.stats.rows <= (1 << 21), "{i} {v}");
        }
    }
}

/// Without a `.sframe` section header (renamed in `.shstrtab`), the rows come from the
/// `PT_GNU_SFRAME` segment and are the same.
#[test]
fn pt_gnu_sframe_segment_is_used_without_the_section() {
    let m: serde_json::Value = serde_json::from_slice(&fixture("manifest.json")).expect("json");
    let mut checked = 0;
    for (name, elf, _) in elf_vectors() {
        let v = m["vectors"]
            .as_array()
            .and_then(|a| a.iter().find(|v| v["name"] == name.as_str()))
            .expect("vector");
        if v["pt_gnu_sframe"] != true {
            continue;
        }
        let data = fixture(&elf);
        let file = object::File::parse(&*data).expect("elf");
        let (off, size) = file
            .section_by_name(".shstrtab")
            .and_then(|s| s.file_range())
            .expect("shstrtab");
        let mut renamed = data.clone();
        let strtab = &mut renamed[off as usize..(off + size) as usize];
        let at = strtab
            .windows(8)
            .position(|w| w == b".sframe\0")
            .expect(".sframe name");
        strtab[at + 1] = b'x';
        let f2 = object::File::parse(&*renamed).expect("elf");
        assert!(f2.section_by_name(".sframe").is_none());
        assert_eq!(
            table_from(&renamed, false, true),
            table_from(&data, false, true),
            "{name}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}
