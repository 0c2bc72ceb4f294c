//! `OnDemandUnwind` against the whole table on real binaries: `find_rule` must give what
//! `UnwindTable::open(&build_from_elf(..).bytes).find` gives — the same record, and for a
//! slot referring to an expression the same expression bytes (offsets differ: each FDE's
//! table has its own expression area) — at every FDE's start, start - 1, end - 1 and end,
//! at every row boundary of the whole table (and one before it), and at seeded
//! pseudo-random addresses across the text (set `PM_ON_DEMAND_SEED` to vary them);
//! `sources()` and `inputs()` must equal the whole build's too.
//!
//! Binaries: the C library, libstdc++, the dynamic loader and libm (always installed:
//! missing is a failure), a program compiled here with gcc -O2 -g and, when present,
//! clang, and an arm64 libc from `POSTMORTEM_ARM64_ROOT` (or
//! `/var/cache/postmortem-arm64-root`) when that root exists. Windows x64 images take the
//! `.pdata` path: wine's DLLs and a mingw-w64 program (see the section at the end). Also: the decline
//! reasons, the whole-table fallback, hostile headers, and a timing (`--nocapture`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};
use object::{Object, ObjectSection};
use postmortem_engine::binary::FileBytes;
use postmortem_engine::unwind::{
    build_from_elf, OnDemandUnwind, Rule, Slot, SlotKind, UnwindTable,
};

/// xorshift64*: deterministic, good enough to spread addresses.
struct Rng(u64);
impl Rng {
    fn from_env() -> Rng {
        let seed = std::env::var("PM_ON_DEMAND_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x2545_f491_4f6c_dd1du64);
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

fn file_bytes(bytes: Vec<u8>) -> FileBytes {
    FileBytes::new(bytes)
}

fn read_required(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path} must exist on this machine: {e}"))
}

/// A rule with each expression slot's offset replaced by its bytes (offsets are into
/// each table's own expression area).
fn normalized(
    rule: Option<Rule<'_>>,
) -> Option<(postmortem_engine::unwind::RuleRecord, Vec<Vec<u8>>)> {
    let rule = rule?;
    let mut rec = rule.record;
    let mut exprs = Vec::new();
    let mut fix = |s: &mut Slot| {
        if matches!(
            s.kind(),
            Some(SlotKind::Expression | SlotKind::ValExpression)
        ) {
            exprs.push(
                rule.expression(*s)
                    .expect("an expression slot refers into its table")
                    .to_vec(),
            );
            s.value = 0;
        }
    };
    fix(&mut rec.cfa);
    fix(&mut rec.ra);
    for s in rec.regs.iter_mut() {
        fix(s);
    }
    Some((rec, exprs))
}

/// (start, end) of each `.eh_frame` FDE as gimli reads it, offsets from the link base.
fn fde_extents(data: &[u8]) -> Vec<(u64, u64)> {
    let file = object::File::parse(data).unwrap();
    let link_base = postmortem_engine::binary::link_base(&file);
    let Some(sec) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let bytes = sec.data().unwrap();
    let mut eh = EhFrame::new(bytes, LittleEndian);
    eh.set_address_size(8);
    let mut bases = BaseAddresses::default().set_eh_frame(sec.address());
    if let Some(t) = file.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                let start = fde.initial_address().wrapping_sub(link_base);
                out.push((start, start.wrapping_add(fde.len())));
            }
        }
    }
    out
}

/// The text's span, offsets from the link base.
fn text_span(data: &[u8]) -> (u64, u64) {
    let file = object::File::parse(data).unwrap();
    let link_base = postmortem_engine::binary::link_base(&file);
    let text = file.section_by_name(".text").expect(".text");
    let start = text.address() - link_base;
    (start, start + text.size())
}

/// Compares the on-demand answers with the whole table's; returns addresses compared.
fn check_equal(name: &str, binary: Vec<u8>, extra: Vec<Vec<u8>>, random: usize) -> usize {
    let extra_refs: Vec<&[u8]> = extra.iter().map(|e| e.as_slice()).collect();
    let whole = build_from_elf(&binary, &extra_refs).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let mut addrs: Vec<u64> = Vec::new();
    for (start, end) in fde_extents(&binary) {
        addrs.extend([
            start,
            start.wrapping_sub(1),
            end.wrapping_sub(1),
            end,
            end + 1,
        ]);
    }
    let mut rows = 0usize;
    for (start, _) in table.rows() {
        addrs.extend([start, start.wrapping_sub(1)]);
        rows += 1;
    }
    assert!(rows > 10, "{name}: the whole table has only {rows} rows");
    let (lo, hi) = text_span(&binary);
    let mut rng = Rng::from_env();
    for _ in 0..random {
        addrs.push(lo + rng.below(hi - lo));
    }
    addrs.extend([0, 1, 0xffff_ffff, 1 << 32, u64::MAX]);
    let on_demand = OnDemandUnwind::new(
        file_bytes(binary),
        &extra.into_iter().map(file_bytes).collect::<Vec<_>>(),
    )
    .unwrap_or_else(|d| panic!("{name}: declined: {d}"));
    assert!(
        on_demand.per_fde(),
        "{name}: fell back to the whole table, the per-FDE path is not tested"
    );
    let mut answered = 0usize;
    for &a in &addrs {
        let want = normalized(table.find(a));
        let got = normalized(on_demand.find_rule(a));
        answered += usize::from(want.is_some());
        assert_eq!(got, want, "{name}: rule at {a:#x}");
    }
    assert!(
        answered * 2 > addrs.len(),
        "{name}: most addresses have no rule"
    );
    assert_eq!(on_demand.sources(), table.sources(), "{name}: sources");
    assert_eq!(on_demand.inputs(), whole.inputs, "{name}: inputs");
    addrs.len()
}

#[test]
fn system_libraries_equal_whole_table() {
    for path in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libm.so.6",
    ] {
        let n = check_equal(path, read_required(path), Vec::new(), 20_000);
        println!("{path}: {n} addresses equal");
    }
}

fn arm64_root() -> Option<PathBuf> {
    let root = std::env::var_os("POSTMORTEM_ARM64_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/postmortem-arm64-root"));
    root.exists().then_some(root)
}

#[test]
fn arm64_libc_equals_whole_table() {
    let Some(root) = arm64_root() else {
        println!("no arm64 root: skipped");
        return;
    };
    let path = root.join("lib/aarch64-linux-gnu/libc.so.6");
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: the arm64 root has no libc: {e}", path.display()));
    let n = check_equal(&path.display().to_string(), bytes, Vec::new(), 20_000);
    println!("{}: {n} addresses equal", path.display());
}

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
static jmp_buf jb;
__attribute__((noinline)) static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int frame(int n, char *buf) {
    char *p = alloca(n + 16);
    memset(p, n, n + 16);
    snprintf(buf, 32, "%d", p[n]);
    return leaf(n) + (int)strlen(buf);
}
__attribute__((noinline)) int loop(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) { char b[32]; s += frame(i & 63, b); if (s > 100000) longjmp(jb, 1); }
    return s;
}
int main(int argc, char **argv) {
    if (setjmp(jb)) return 2;
    return loop(argc * 1000) & 1;
}
"#;

/// Compiles `PROGRAM` with `cc` and `flags` into a temporary directory.
fn compile(cc: &str, flags: &[&str], dir: &Path) -> Option<Vec<u8>> {
    let src = dir.join("p.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let out = dir.join(format!("p-{cc}"));
    let status = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .ok()?;
    assert!(status.success(), "{cc} {flags:?} failed");
    Some(std::fs::read(out).unwrap())
}

#[test]
fn compiled_programs_equal_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let gcc = compile("gcc", &["-O2", "-g"], dir.path()).expect("gcc must be installed");
    check_equal("gcc -O2 -g", gcc, Vec::new(), 20_000);
    match compile("clang", &["-O2", "-g"], dir.path()) {
        Some(b) => {
            check_equal("clang -O2 -g", b, Vec::new(), 20_000);
        }
        None => println!("no clang: skipped"),
    }
}

#[test]
fn declines_what_could_differ() {
    let dir = tempfile::tempdir().unwrap();
    let declined = |bytes: Vec<u8>, extra: Vec<Vec<u8>>| -> String {
        let extra: Vec<FileBytes> = extra.into_iter().map(file_bytes).collect();
        match OnDemandUnwind::new(file_bytes(bytes), &extra) {
            Ok(_) => "accepted".to_string(),
            Err(d) => d.to_string(),
        }
    };
    // the program's own functions' CFI in .debug_frame
    let debug_frame = compile(
        "gcc",
        &["-O2", "-g", "-fno-asynchronous-unwind-tables"],
        dir.path(),
    )
    .unwrap();
    assert_eq!(
        declined(debug_frame.clone(), Vec::new()),
        "the binary has a .debug_frame"
    );
    let plain = compile("gcc", &["-O2"], dir.path()).unwrap();
    assert_eq!(declined(plain.clone(), Vec::new()), "accepted");
    // a debug file (same architecture) with a .debug_frame
    assert_eq!(
        declined(plain.clone(), vec![debug_frame]),
        "a debug file has a .debug_frame"
    );
    // an extra file of no interest is ignored, as the whole build ignores it
    assert_eq!(
        declined(plain.clone(), vec![b"not an object".to_vec()]),
        "accepted"
    );
    let no_hdr = compile("gcc", &["-O2", "-Wl,--no-eh-frame-hdr"], dir.path()).unwrap();
    assert_eq!(declined(no_hdr, Vec::new()), "no .eh_frame_hdr");
    assert_eq!(
        declined(b"\x7fELF".to_vec(), Vec::new()),
        "not an object file"
    );
    assert_eq!(declined(Vec::new(), Vec::new()), "not an object file");
    // an .sframe section (contents do not matter: present is enough)
    let sframe_src = dir.path().join("sframe.bin");
    std::fs::write(&sframe_src, [0xe2u8, 0xde, 2, 0, 0, 0, 0, 0]).unwrap();
    let with_sframe = dir.path().join("with-sframe");
    let ok = Command::new("objcopy")
        .arg(format!("--add-section=.sframe={}", sframe_src.display()))
        .arg(dir.path().join("p-gcc"))
        .arg(&with_sframe)
        .status()
        .unwrap()
        .success();
    assert!(ok, "objcopy --add-section failed");
    let with_sframe = std::fs::read(with_sframe).unwrap();
    let verdict = declined(with_sframe, Vec::new());
    assert_eq!(verdict, "the binary has SFrame data");
}

/// Offset of `.eh_frame_hdr` in `bytes` and its size.
fn hdr_range(bytes: &[u8]) -> (usize, usize) {
    let file = object::File::parse(bytes).unwrap();
    let (off, size) = file
        .section_by_name(".eh_frame_hdr")
        .unwrap()
        .file_range()
        .unwrap();
    (off as usize, size as usize)
}

/// A hdr table whose order the per-FDE lookup cannot trust: the first lookup builds the
/// whole table instead, and the answers stay equal.
#[test]
fn unsorted_hdr_table_falls_back_to_whole_table() {
    let libc = read_required("/lib/x86_64-linux-gnu/libc.so.6");
    let mut bytes = libc.clone();
    let (hdr, _) = hdr_range(&bytes);
    // the table: after version, three encodings, eh_frame_ptr (4) and fde_count (4)
    let t = hdr + 12;
    // swap entries 10 and 11
    let (a, b) = (t + 10 * 8, t + 11 * 8);
    let tmp: Vec<u8> = bytes[a..a + 8].to_vec();
    bytes.copy_within(b..b + 8, a);
    bytes[b..b + 8].copy_from_slice(&tmp);
    let whole = build_from_elf(&bytes, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let od = OnDemandUnwind::new(file_bytes(bytes.clone()), &[]).unwrap();
    assert!(!od.per_fde());
    let mut rng = Rng::from_env();
    let (lo, hi) = text_span(&bytes);
    for _ in 0..2000 {
        let a = lo + rng.below(hi - lo);
        assert_eq!(
            normalized(od.find_rule(a)),
            normalized(table.find(a)),
            "{a:#x}"
        );
    }
    assert_eq!(od.inputs(), whole.inputs);
}

/// Checks that `bytes` makes the on-demand table fall back to the whole table, and that
/// the answers stay equal at `addrs` and across the text.
fn check_fallback(name: &str, bytes: Vec<u8>, addrs: &[u64]) {
    let whole = build_from_elf(&bytes, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let (lo, hi) = text_span(&bytes);
    let od = OnDemandUnwind::new(file_bytes(bytes), &[]).unwrap();
    let mut rng = Rng::from_env();
    let random: Vec<u64> = (0..2000).map(|_| lo + rng.below(hi - lo)).collect();
    for &a in addrs.iter().chain(&random) {
        assert_eq!(
            normalized(od.find_rule(a)),
            normalized(table.find(a)),
            "{name}: {a:#x}"
        );
    }
    assert!(!od.per_fde(), "{name}: answered FDE by FDE");
    assert_eq!(od.inputs(), whole.inputs, "{name}");
}

/// An FDE whose range runs into the next one: where they overlap the whole table gives
/// the first FDE's rule, a lookup through the hdr table would find the second's.
#[test]
fn overlapping_fdes_fall_back_to_whole_table() {
    let mut bytes = read_required("/lib/x86_64-linux-gnu/libc.so.6");
    let file = object::File::parse(&*bytes).unwrap();
    let link_base = postmortem_engine::binary::link_base(&file);
    let sec = file.section_by_name(".eh_frame").unwrap();
    let (sec_off, _) = sec.file_range().unwrap();
    let data = sec.data().unwrap();
    let mut eh = EhFrame::new(data, LittleEndian);
    eh.set_address_size(8);
    let bases = BaseAddresses::default().set_eh_frame(sec.address());
    // (section offset, start, len) of every FDE, sorted by start
    let mut fdes = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            let off = partial.offset();
            if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                fdes.push((off, fde.initial_address(), fde.len()));
            }
        }
    }
    drop(file);
    fdes.sort_by_key(|f| f.1);
    // an FDE in the middle directly followed by another, pc_range a udata4 at +12
    let k = (fdes.len() / 2..fdes.len() - 1)
        .find(|&k| {
            let (off, start, len) = fdes[k];
            let at = sec_off as usize + off + 12;
            let stored = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            u64::from(stored) == len && fdes[k + 1].1 >= start + len && fdes[k + 1].2 > 0x40
        })
        .expect("an FDE to stretch");
    let (off, start, _) = fdes[k];
    let next = fdes[k + 1].1;
    let new_len = (next - start + 0x20) as u32;
    let at = sec_off as usize + off + 12;
    bytes[at..at + 4].copy_from_slice(&new_len.to_le_bytes());
    let rel = |a: u64| a - link_base;
    let addrs: Vec<u64> = (0..0x30).map(|d| rel(next) + d).collect();
    // the stretch matters: the whole table answers differently there than FDE k+1 alone
    check_fallback("stretched FDE", bytes, &addrs);
}

/// A hdr table that leaves out the last FDE: the whole table has rules where the hdr
/// table has no entry.
#[test]
fn incomplete_hdr_table_falls_back_to_whole_table() {
    let mut bytes = read_required("/lib/x86_64-linux-gnu/libc.so.6");
    let (hdr, _) = hdr_range(&bytes);
    assert_eq!(&bytes[hdr..hdr + 4], &[1, 0x1b, 0x03, 0x3b]);
    let count = u32::from_le_bytes(bytes[hdr + 8..hdr + 12].try_into().unwrap());
    // the last entry's FDE, as an address to ask about
    let last = hdr + 12 + (count as usize - 1) * 8;
    let hdr_addr = {
        let file = object::File::parse(&*bytes).unwrap();
        let a = file.section_by_name(".eh_frame_hdr").unwrap().address();
        a - postmortem_engine::binary::link_base(&file)
    };
    let start = i32::from_le_bytes(bytes[last..last + 4].try_into().unwrap());
    let start = hdr_addr.wrapping_add(start as i64 as u64);
    bytes[hdr + 8..hdr + 12].copy_from_slice(&(count - 1).to_le_bytes());
    check_fallback(
        "hdr table short of one",
        bytes,
        &[start, start + 1, start + 4],
    );
}

/// Truncated and garbled `.eh_frame_hdr` and `.eh_frame` bytes: no panic, whatever the
/// answers.
#[test]
fn hostile_headers_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = compile("gcc", &["-O2"], dir.path()).unwrap();
    let (hdr, size) = hdr_range(&good);
    let (lo, hi) = text_span(&good);
    let probe = |bytes: Vec<u8>| {
        if let Ok(od) = OnDemandUnwind::new(file_bytes(bytes), &[]) {
            for a in [
                0,
                lo,
                lo + 1,
                (lo + hi) / 2,
                hi - 1,
                hi,
                0xffff_ffff,
                u64::MAX,
            ] {
                let _ = od.find_rule(a);
            }
            let _ = od.inputs();
            let _ = od.sources();
        }
    };
    let mut rng = Rng(7);
    for i in 0..size.min(64) {
        for v in [0u8, 1, 0x7f, 0x80, 0xff, 0x3b, 0x1b, 0x03] {
            let mut b = good.clone();
            b[hdr + i] = v;
            probe(b);
        }
    }
    let eh = {
        let file = object::File::parse(&*good).unwrap();
        let (o, s) = file
            .section_by_name(".eh_frame")
            .unwrap()
            .file_range()
            .unwrap();
        (o as usize, s as usize)
    };
    for _ in 0..3000 {
        let mut b = good.clone();
        for _ in 0..4 {
            let at = if rng.below(2) == 0 {
                hdr + rng.below(size as u64) as usize
            } else {
                eh.0 + rng.below(eh.1 as u64) as usize
            };
            b[at] = rng.next() as u8;
        }
        probe(b);
    }
    for cut in (0..good.len()).step_by(997) {
        probe(good[..cut].to_vec());
    }
}

/// Not a check: how much `postmortem walk` saves on libc (run with `--nocapture`).
#[test]
fn timing_libc() {
    let libc = read_required("/lib/x86_64-linux-gnu/libc.so.6");
    let (lo, hi) = text_span(&libc);
    let addrs: Vec<u64> = (0..30u64).map(|i| lo + (hi - lo) / 30 * i + 7).collect();
    let t = Instant::now();
    let whole = build_from_elf(&libc, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let n = addrs.iter().filter(|&&a| table.find(a).is_some()).count();
    let whole_time = t.elapsed();
    let bytes = file_bytes(libc);
    let t = Instant::now();
    let od = OnDemandUnwind::new(bytes, &[]).unwrap();
    let new_time = t.elapsed();
    let first = od.find_rule(addrs[0]).is_some();
    let first_time = t.elapsed();
    let m = addrs[1..]
        .iter()
        .filter(|&&a| od.find_rule(a).is_some())
        .count();
    let total = t.elapsed();
    assert_eq!(n, m + usize::from(first));
    println!(
        "libc: build_from_elf + 30 finds {whole_time:?}; OnDemandUnwind::new {new_time:?}, \
         + first find_rule (with the layout check) {first_time:?}, + 29 more {total:?}"
    );
}

// ---- Windows x64 images: the `.pdata` path ----
//
// On wine's Windows x64 DLLs (Debian's `wine64`, which `test.sh` installs; missing is a
// failure) and a mingw-w64 program compiled here: the same record at every address of
// every eighth function and one byte around it, at every function's first and last byte
// and the bytes just outside, and at seeded pseudo-random RVAs across the image (leaf
// code, padding, data); `sources()` and `inputs()` as the whole build's.

const WINE_DLLS: &str = "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows";

/// The image's `.pdata` entries (begin, end) and its size.
fn layout(data: &[u8]) -> (Vec<(u64, u64)>, u64) {
    use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, PeFile64};
    use object::LittleEndian as LE;
    let pe = PeFile64::parse(data).unwrap();
    let size = u64::from(pe.nt_headers().optional_header().size_of_image());
    let dir = pe
        .data_directory(object::pe::IMAGE_DIRECTORY_ENTRY_EXCEPTION)
        .unwrap();
    let pdata = pe
        .section_table()
        .pe_data_at(data, dir.virtual_address.get(LE))
        .unwrap();
    let n = dir.size.get(LE) as usize / 12;
    let entries = pdata
        .chunks_exact(12)
        .take(n)
        .map(|b| {
            let w = |k: usize| u64::from(u32::from_le_bytes(b[k..k + 4].try_into().unwrap()));
            (w(0), w(4))
        })
        .collect();
    (entries, size)
}

fn check_pdata_equal(name: &str, data: Vec<u8>) -> usize {
    let whole = build_from_elf(&data, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let (entries, size) = layout(&data);
    assert!(entries.len() > 10, "{name}: .pdata has entries");
    let on = OnDemandUnwind::new(file_bytes(data), &[]).unwrap();
    assert!(on.per_fde(), "{name}: answered function by function");
    let mut addresses: Vec<u64> = Vec::new();
    for (i, &(b, e)) in entries.iter().enumerate() {
        addresses.extend([b.saturating_sub(1), b, e.saturating_sub(1), e]);
        if i % 8 == 0 {
            addresses.extend(b.saturating_sub(1)..=e);
        }
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        addresses.push(x.wrapping_mul(0x2545_f491_4f6c_dd1d) % size);
    }
    for &rel in &addresses {
        assert_eq!(
            normalized(on.find_rule(rel)),
            normalized(table.find(rel)),
            "{name}: rule at {rel:#x}"
        );
    }
    assert_eq!(on.sources(), table.sources(), "{name}: sources");
    assert_eq!(on.inputs(), whole.inputs, "{name}: inputs");
    addresses.len()
}

#[test]
fn wine_dlls_equal_the_whole_table() {
    for dll in ["ntdll.dll", "kernelbase.dll", "msvcrt.dll", "ucrtbase.dll"] {
        let path = Path::new(WINE_DLLS).join(dll);
        let data = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{} must exist (test.sh installs wine64): {e}",
                path.display()
            )
        });
        let n = check_pdata_equal(dll, data);
        eprintln!("{dll}: {n} addresses equal");
    }
}

#[test]
fn a_mingw_program_equals_the_whole_table() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(
        &src,
        "#include <malloc.h>\n#include <stdlib.h>\n\
         static int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }\n\
         __attribute__((noinline)) double f(double x, int n) { char *p = alloca(n); p[0] = 1;\n\
           int v[] = {3, 1, n}; qsort(v, 3, sizeof v[0], cmp); return x * v[0] + p[0]; }\n\
         int main(int argc, char **argv) { return (int)f(argc, argc + 8); }\n",
    )
    .unwrap();
    let exe = dir.path().join("p.exe");
    let status = std::process::Command::new("x86_64-w64-mingw32-gcc")
        .args(["-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("x86_64-w64-mingw32-gcc (test.sh installs gcc-mingw-w64-x86-64)");
    assert!(status.success());
    check_pdata_equal("p.exe", std::fs::read(&exe).unwrap());
}

/// Entries out of order: the whole table answers (and still equals itself).
#[test]
fn unsorted_entries_fall_back_to_the_whole_table() {
    let path = Path::new(WINE_DLLS).join("kernelbase.dll");
    let mut data = std::fs::read(&path).unwrap();
    let (entries, _) = layout(&data);
    // swap the first two entries in the file's .pdata bytes
    let first = entries[0];
    let needle: Vec<u8> = [first.0 as u32, first.1 as u32]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let at = data
        .windows(8)
        .position(|w| w == needle.as_slice())
        .unwrap();
    let (a, b) = data[at..at + 24].split_at_mut(12);
    a.swap_with_slice(b);
    let whole = build_from_elf(&data, &[]).unwrap();
    let table = UnwindTable::open(&whole.bytes).unwrap();
    let on = OnDemandUnwind::new(file_bytes(data), &[]).unwrap();
    assert!(!on.per_fde());
    for rel in [entries[0].0, entries[1].0, entries[5].0 + 3] {
        assert_eq!(normalized(on.find_rule(rel)), normalized(table.find(rel)));
    }
}
