//! Round trip of the unwind table on real binaries: build, serialize, open and look up must
//! agree with gimli's direct evaluation (`.eh_frame_hdr` search table → FDE → CFI program)
//! at the same address, for the CFA rule, the return-address rule and the rules of rbp,
//! rbx and r12–r15.
//!
//! Binaries: the C library, this test binary itself, and `librustc_driver-*.so` from the
//! toolchain's sysroot when it is there. Addresses
//! are sampled with a fixed-seed generator (set `PM_ROUNDTRIP_SEED` to vary it): inside
//! FDEs, across the covered span, at FDE boundaries, and anywhere in the 64-bit space.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, Register,
    RegisterRule, UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection};
use postmortem_engine::dump::Arch;
use postmortem_engine::unwind::{build_from_elf, Rule, Slot, SlotKind, UnwindSource, UnwindTable};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// xorshift64*: deterministic, good enough to spread addresses.
struct Rng(u64);
impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("PM_ROUNDTRIP_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn libc_path() -> Option<PathBuf> {
    [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

fn rustc_driver_path() -> Option<PathBuf> {
    let out = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let lib = Path::new(String::from_utf8(out.stdout).ok()?.trim()).join("lib");
    std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("librustc_driver-") && n.ends_with(".so"))
        })
}

/// What one comparison run saw.
#[derive(Debug, Default)]
struct Outcome {
    compared: usize,
    no_info_both: usize,
    gimli_errors: usize,
    mismatches: Vec<String>,
    mismatch_count: usize,
}

/// The sections and gimli's view of one binary.
struct Gimli<'a> {
    eh: EhFrame<R<'a>>,
    hdr: gimli::ParsedEhFrameHdr<R<'a>>,
    bases: BaseAddresses,
    /// FDE ranges (start, len), from walking the section.
    fdes: Vec<(u64, u64)>,
}

fn gimli_view<'a>(file: &object::File<'a>) -> Gimli<'a> {
    let eh_sec = file.section_by_name(".eh_frame").unwrap();
    let hdr_sec = file.section_by_name(".eh_frame_hdr").unwrap();
    let mut bases = BaseAddresses::default()
        .set_eh_frame(eh_sec.address())
        .set_eh_frame_hdr(hdr_sec.address());
    if let Some(t) = file.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    if let Some(g) = file.section_by_name(".got") {
        bases = bases.set_got(g.address());
    }
    let mut eh = EhFrame::new(eh_sec.data().unwrap(), LittleEndian);
    eh.set_address_size(8);
    let hdr = EhFrameHdr::new(hdr_sec.data().unwrap(), LittleEndian)
        .parse(&bases, 8)
        .unwrap();
    let mut fdes = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(e)) = entries.next() {
        if let CieOrFde::Fde(p) = e {
            if let Ok(f) = p.parse(EhFrame::cie_from_offset) {
                if f.len() > 0 {
                    fdes.push((f.initial_address(), f.len()));
                }
            }
        }
    }
    fdes.sort_unstable();
    Gimli {
        eh,
        hdr,
        bases,
        fdes,
    }
}

fn slot_matches(
    eh: &EhFrame<R<'_>>,
    rule: &Rule<'_>,
    slot: Slot,
    g: Option<RegisterRule<usize>>,
) -> bool {
    let expr_eq = |e: &gimli::UnwindExpression<usize>| -> bool {
        e.get(eh)
            .is_ok_and(|x| rule.expression(slot) == Some(x.0.slice()))
    };
    match g {
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

/// Compares our table with gimli at `addr` (a file address).
fn compare_at(
    g: &Gimli<'_>,
    ctx: &mut UnwindContext<usize>,
    table: &UnwindTable<'_>,
    link_base: u64,
    addr: u64,
    out: &mut Outcome,
) {
    let ours = addr.checked_sub(link_base).and_then(|a| table.find(a));
    let fail = |out: &mut Outcome, why: String| {
        out.mismatch_count += 1;
        if out.mismatches.len() < 20 {
            out.mismatches.push(format!("{addr:#x}: {why}"));
        }
    };
    let hdr_table = g.hdr.table().unwrap();
    let row = match hdr_table.unwind_info_for_address(
        &g.eh,
        &g.bases,
        ctx,
        addr,
        EhFrame::cie_from_offset,
    ) {
        Ok(row) => row.clone(),
        Err(gimli::Error::NoUnwindInfoForAddress) => {
            // another source (.debug_frame, .sframe) may describe it; .eh_frame must not
            match ours {
                Some(r) if r.source() == Some(UnwindSource::EhFrame) => {
                    fail(out, format!("gimli has no FDE, we have {:?}", r.record))
                }
                _ => out.no_info_both += 1,
            }
            return;
        }
        Err(_) => {
            out.gimli_errors += 1;
            return;
        }
    };
    let Some(rule) = ours else {
        fail(out, format!("no rule; gimli has {row:?}"));
        return;
    };
    out.compared += 1;
    let rec = rule.record;
    if rule.source() != Some(UnwindSource::EhFrame) {
        fail(out, format!("source {:?}", rule.source()));
        return;
    }
    let cfa_ok = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            rec.cfa.kind() == Some(SlotKind::Offset)
                && u16::from(rec.cfa.reg) == register.0
                && i64::from(rec.cfa.value) == *offset
        }
        CfaRule::Expression(e) => e
            .get(&g.eh)
            .is_ok_and(|x| rule.expression(rec.cfa) == Some(x.0.slice())),
    };
    if !cfa_ok {
        fail(out, format!("cfa {:?} vs gimli {:?}", rec.cfa, row.cfa()));
    }
    let ra = row.register(Register(16));
    if !slot_matches(&g.eh, &rule, rec.ra, ra.clone()) {
        fail(out, format!("ra {:?} vs gimli {ra:?}", rec.ra));
    }
    for reg in [6u16, 3, 12, 13, 14, 15] {
        let slot = rec.reg(Arch::X86_64, reg).unwrap();
        let want = row.register(Register(reg));
        if !slot_matches(&g.eh, &rule, slot, want.clone()) {
            fail(out, format!("r{reg} {slot:?} vs gimli {want:?}"));
        }
    }
}

/// Builds the table of `path` and compares `samples` sampled addresses plus `random`
/// addresses drawn from the whole 64-bit space.
fn round_trip(path: &Path, samples: usize, random: usize) -> Outcome {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let link_base = postmortem_engine::binary::link_base(&file);
    let started = std::time::Instant::now();
    let built = build_from_elf(&data, &[]).unwrap();
    let build_time = started.elapsed();
    let table = UnwindTable::open(&built.bytes).unwrap();
    let g = gimli_view(&file);
    assert!(!g.fdes.is_empty(), "{}: no FDEs", path.display());
    let lo = g.fdes[0].0;
    let hi = g.fdes.iter().map(|&(s, l)| s + l).max().unwrap();
    let mut rng = Rng::from_env();
    let mut ctx = UnwindContext::new();
    let mut out = Outcome::default();
    for i in 0..samples {
        let addr = match i % 4 {
            // inside a random FDE
            0 | 1 => {
                let (s, l) = g.fdes[rng.below(g.fdes.len() as u64) as usize];
                s + rng.below(l)
            }
            // anywhere in the covered span (gaps included)
            2 => lo + rng.below(hi - lo + 16),
            // an FDE's edges
            _ => {
                let (s, l) = g.fdes[rng.below(g.fdes.len() as u64) as usize];
                [s, s + l - 1, s + l][rng.below(3) as usize]
            }
        };
        compare_at(&g, &mut ctx, &table, link_base, addr, &mut out);
    }
    for _ in 0..random {
        let addr = rng.next() >> rng.below(64);
        compare_at(&g, &mut ctx, &table, link_base, addr, &mut out);
    }
    eprintln!(
        "{}: {} FDEs, built in {build_time:?}: {} rows, {} rules, {} table bytes from {} source bytes; \
         {} skipped; compared {} addresses, {} without info on both sides, {} gimli errors, {} mismatches",
        path.display(),
        g.fdes.len(),
        built.stats.rows,
        built.stats.palette,
        built.stats.table_bytes,
        built.stats.source_bytes,
        built.stats.entries_skipped,
        out.compared,
        out.no_info_both,
        out.gimli_errors,
        out.mismatch_count
    );
    out
}

fn assert_agrees(path: &Path, out: &Outcome) {
    assert!(
        out.mismatch_count == 0,
        "{}: {} mismatches with gimli, first ones:\n{}",
        path.display(),
        out.mismatch_count,
        out.mismatches.join("\n")
    );
    assert!(out.compared > 0);
}

#[test]
fn libc_round_trip_agrees_with_gimli() {
    let path = libc_path().expect("this test needs the C library (libc.so.6)");
    let out = round_trip(&path, 20_000, 2_000);
    assert_agrees(&path, &out);
}

#[test]
fn own_binary_round_trip_agrees_with_gimli() {
    let path = std::env::current_exe().unwrap();
    let out = round_trip(&path, 20_000, 2_000);
    assert_agrees(&path, &out);
}

/// The largest binary at hand (about 150 MB, 100 000 FDEs); skipped where the toolchain
/// has no `librustc_driver-*.so`.
#[test]
fn rustc_driver_round_trip_agrees_with_gimli() {
    let Some(path) = rustc_driver_path() else {
        eprintln!("no librustc_driver-*.so in the sysroot: nothing to compare");
        return;
    };
    let out = round_trip(&path, 20_000, 2_000);
    assert_agrees(&path, &out);
}
