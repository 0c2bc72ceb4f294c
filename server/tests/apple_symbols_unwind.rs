//! Unwind rules from a dyld shared cache's images (issue 38): dylibs of our own built with
//! clang and ld64.lld — x86_64 with `-fomit-frame-pointer` (frameless functions: no
//! frame-pointer chain leads past them), arm64 with a frameless leaf under a function
//! with a frame record — put in a cache by `testsupport::dyld_cache` (no Apple tool here
//! makes one), then:
//!
//! - the `STACK CFI` records the cache's image gets (what both the walk and the upload
//!   write into its `.sym` file) are compared with `llvm-objdump --unwind-info` and
//!   `--dwarf=frames` of the standalone dylib: every compact-unwind entry's range has the
//!   rules its encoding means (`compact_unwind_encoding.h`), every `__eh_frame` row the
//!   CFA and saved registers llvm-objdump evaluates;
//! - `postmortem walk --symbols CACHE-DIR` of a stack laid out from those rules reaches the
//!   right callers (named as llvm-symbolizer names those addresses of the dylib) with
//!   `trust: cfi`. Without the rules (checked by leaving them out of the `.sym` file) the
//!   x86_64 walk ends at the crashing frame (no frame pointer, and the first word at
//!   `rsp` is a decoy return address into another function) and the arm64 one finds no
//!   frame by `cfi`.
//!
//! ld64.lld 14 (Debian's) writes `__unwind_info` without DWARF escapes and copies
//! `__eh_frame` without relocating its FDEs' pc-begin fields (they describe addresses past
//! `__text`): the `__eh_frame` rows are still compared, at the addresses the file gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use postmortem_testsupport::apple::{self, MacCpu};
use serde_json::Value;

/// Rules by target (`.cfa`, `.ra`, `$rbx`, `x29`) and their postfix expressions.
type Rules = BTreeMap<String, String>;

const X86_64_SOURCE: &str = "\
__attribute__((noinline)) int leaf_nofp(volatile int *p) { return *p * 3; }\n\
__attribute__((noinline)) int middle_nofp(volatile int *p) {\n\
  volatile int b[3]; b[0] = leaf_nofp(p); return b[0] + 1; }\n\
__attribute__((noinline)) int decoy_nofp(volatile int *p) { return middle_nofp(p) + 5; }\n\
int outer_nofp(volatile int *p) { return middle_nofp(p) + 2; }\n";

const ARM64_SOURCE: &str = "\
__attribute__((noinline)) int leaf_frameless(volatile int *p) {\n\
  volatile int b[6]; b[0] = *p; b[5] = b[0] + 1; return b[5] * 3; }\n\
__attribute__((noinline)) int middle_frame(volatile int *p) {\n\
  volatile int b[3]; b[0] = leaf_frameless(p); return b[0] + 1; }\n\
int outer_frame(volatile int *p) { return middle_frame(p) + 2; }\n";

const INSTALL: &str = "/usr/lib/system/libunwinddemo.dylib";

/// The dylib of `source` for `arch` and the directory of the cache made of it (with a
/// second image before it, so the image is not the cache's first).
fn cache_of(dir: &Path, arch: &str, source: &str, flags: &[&str]) -> (PathBuf, PathBuf) {
    let dir = dir.join(arch);
    let demo = apple::build_dylib_for(&dir, source, "libunwinddemo.dylib", INSTALL, arch, flags);
    let other = apple::build_dylib_for(
        &dir,
        "int other_function(int x) { return x * 7; }\n",
        "libother.dylib",
        "/usr/lib/libother.dylib",
        arch,
        &[],
    );
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let dylibs: Vec<_> = [(&other, "/usr/lib/libother.dylib"), (&demo, INSTALL)]
        .iter()
        .map(|(p, install)| postmortem_testsupport::dyld_cache::Dylib {
            install_path: install.to_string(),
            bytes: std::fs::read(p).unwrap(),
        })
        .collect();
    postmortem_testsupport::dyld_cache::write(&dylibs, &cache.join("dyld_shared_cache"));
    (demo, cache)
}

/// The `STACK CFI` records of the image [`INSTALL`] of the cache in `cache`, as the walk
/// and the upload write them into its `.sym` file: (start, end, rules).
fn cache_rows(cache: &Path) -> Vec<(u64, u64, Rules)> {
    let main = std::fs::read(cache.join("dyld_shared_cache")).unwrap();
    let symbols = std::fs::read(cache.join("dyld_shared_cache.symbols")).unwrap();
    let subs = [symbols.as_slice()];
    let (_, images) = engine::dyld_cache::index(&main, &subs).unwrap();
    let image = images.iter().find(|i| i.path == INSTALL).unwrap();
    let cfi = engine::breakpad::write_cfi::dyld_image_stack_cfi(&main, &subs, image.index).unwrap();
    let names = engine::dyld_cache::image_symbols(&main, &subs, image.index).unwrap();
    let sym = engine::dyld_cache::breakpad_sym(INSTALL, &image.uuid, None, &names, &cfi.text);
    sym.lines()
        .filter_map(|l| l.strip_prefix("STACK CFI INIT "))
        .map(|rest| {
            let mut t = rest.splitn(3, ' ');
            let start = u64::from_str_radix(t.next().unwrap(), 16).unwrap();
            let size = u64::from_str_radix(t.next().unwrap(), 16).unwrap();
            (start, start + size, rules_of(t.next().unwrap()))
        })
        .collect()
}

/// `.cfa: $rsp 16 + .ra: .cfa -8 + ^` as a map of targets to expressions.
fn rules_of(text: &str) -> Rules {
    let mut out = Rules::new();
    let mut target: Option<String> = None;
    for tok in text.split_whitespace() {
        if let Some(t) = tok.strip_suffix(':') {
            target = Some(t.to_string());
            out.insert(t.to_string(), String::new());
        } else if let Some(t) = &target {
            let e = out.get_mut(t).unwrap();
            if !e.is_empty() {
                e.push(' ');
            }
            e.push_str(tok);
        }
    }
    out
}

fn rules(pairs: &[(&str, String)]) -> Rules {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The rules the records give every address of `[start, end)`: they must cover it whole.
fn rules_over(rows: &[(u64, u64, Rules)], start: u64, end: u64) -> Vec<Rules> {
    let mut at = start;
    let mut out = Vec::new();
    while at < end {
        let Some(row) = rows.iter().find(|r| r.0 <= at && at < r.1) else {
            panic!("no STACK CFI record covers {at:#x} (of {start:#x}..{end:#x}): {rows:?}");
        };
        out.push(row.2.clone());
        at = row.1;
    }
    out
}

fn run(tool: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(tool)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{tool} {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn hex_after(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    u64::from_str_radix(&digits, 16).ok()
}

/// `llvm-objdump --unwind-info`'s entries: (function offset, end, encoding), each to the
/// next entry or to the last top-level index's offset (the end of `__text`).
fn compact_entries(dylib: &Path) -> Vec<(u64, u64, u32)> {
    let text = run("llvm-objdump", &["--unwind-info", dylib.to_str().unwrap()]);
    let mut end = 0;
    let mut entries = Vec::new();
    for line in text.lines() {
        if line.contains("2nd level page offset") {
            end = end.max(hex_after(line, "function offset=0x").unwrap());
        } else if line.contains("function offset=") && line.contains("encoding") {
            let off = hex_after(line, "function offset=0x").unwrap();
            let enc = hex_after(&line[line.find("encoding").unwrap()..], "=0x").unwrap();
            entries.push((off, enc as u32));
        }
    }
    assert!(!entries.is_empty(), "{text}");
    entries.sort_unstable();
    let ends: Vec<u64> = entries.iter().skip(1).map(|e| e.0).chain([end]).collect();
    entries
        .iter()
        .zip(ends)
        .map(|(&(off, enc), end)| (off, end, enc))
        .collect()
}

/// What a compact-unwind encoding means, as `compact_unwind_encoding.h` defines it (the
/// encodings these dylibs have: frame and frameless without saved registers); `None`
/// for no rule.
fn encoding_rules(cpu: MacCpu, enc: u32) -> Option<Rules> {
    let mode = (enc >> 24) & 0xf;
    let ra = || ".cfa -8 + ^".to_string();
    match (cpu, mode) {
        (_, 0) => None,
        // UNWIND_X86_64_MODE_RBP_FRAME
        (MacCpu::X86_64, 1) => {
            assert_eq!(enc & 0x00ff_7fff, 0, "saved registers: {enc:#x}");
            Some(rules(&[
                (".cfa", "$rbp 16 +".into()),
                (".ra", ra()),
                ("$rbp", ".cfa -16 + ^".into()),
            ]))
        }
        // UNWIND_X86_64_MODE_STACK_IMMD: the stack size in 8-byte words
        (MacCpu::X86_64, 2) => {
            assert_eq!(enc & 0x1c00, 0, "saved registers: {enc:#x}");
            let size = ((enc >> 16) & 0xff) * 8;
            Some(rules(&[(".cfa", format!("$rsp {size} +")), (".ra", ra())]))
        }
        // UNWIND_ARM64_MODE_FRAMELESS: the stack size in 16-byte units, lr unsaved
        (MacCpu::Arm64, 2) => {
            let size = ((enc >> 12) & 0xfff) * 16;
            Some(rules(&[
                (".cfa", format!("sp {size} +")),
                (".ra", "x30".into()),
            ]))
        }
        // UNWIND_ARM64_MODE_FRAME: x29/x30 at the frame record
        (MacCpu::Arm64, 4) => {
            assert_eq!(enc & 0xfff, 0, "saved register pairs: {enc:#x}");
            Some(rules(&[
                (".cfa", "x29 16 +".into()),
                (".ra", ra()),
                ("x29", ".cfa -16 + ^".into()),
            ]))
        }
        _ => panic!("encoding {enc:#010x} is not one this test expects"),
    }
}

/// `llvm-objdump --dwarf=frames`'s evaluated rows of `__eh_frame` (x86_64): (start, end,
/// rules), each to the next row of its FDE or the FDE's end.
fn eh_frame_rows(dylib: &Path) -> Vec<(u64, u64, Rules)> {
    let text = run("llvm-objdump", &["--dwarf=frames", dylib.to_str().unwrap()]);
    let name = |n: u64| match n {
        3 => "$rbx".to_string(),
        6 => "$rbp".to_string(),
        7 => "$rsp".to_string(),
        12..=15 => format!("$r{n}"),
        16 => ".ra".to_string(),
        _ => panic!("register {n}"),
    };
    let mut out: Vec<(u64, u64, Rules)> = Vec::new();
    let mut fde_end = None;
    let mut fde_rows: Vec<(u64, Rules)> = Vec::new();
    let mut flush = |rows: &mut Vec<(u64, Rules)>, end: Option<u64>| {
        for i in 0..rows.len() {
            let e = rows.get(i + 1).map_or(end.unwrap(), |r| r.0);
            out.push((rows[i].0, e, rows[i].1.clone()));
        }
        rows.clear();
    };
    for line in text.lines() {
        if line.contains(" FDE ") {
            flush(&mut fde_rows, fde_end);
            fde_end = Some(hex_after(line, "...").unwrap());
        } else if fde_end.is_some() && line.trim_start().starts_with("0x") {
            let line = line.trim();
            let (addr, rest) = line.split_once(": ").unwrap();
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
            let (cfa, regs) = rest.split_once(": ").unwrap_or((rest, ""));
            let (reg, off) = cfa.trim_start_matches("CFA=reg").split_once('+').unwrap();
            let mut r = rules(&[(".cfa", format!("{} {off} +", name(reg.parse().unwrap())))]);
            for saved in regs.split(", ").filter(|s| !s.is_empty()) {
                let (reg, at) = saved.trim_start_matches("reg").split_once('=').unwrap();
                let off = at.trim_start_matches("[CFA").trim_end_matches(']');
                r.insert(name(reg.parse().unwrap()), format!(".cfa {off} + ^"));
            }
            fde_rows.push((addr, r));
        }
    }
    flush(&mut fde_rows, fde_end);
    out
}

/// Every compact-unwind entry of the standalone dylib, and (x86_64) every `__eh_frame`
/// row, has the same rules in the cache image's `STACK CFI` records, over its whole range.
#[test]
fn a_dyld_cache_images_stack_cfi_is_llvm_objdumps_unwind_info() {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld is needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (cpu, arch, source, flags) in [
        (
            MacCpu::X86_64,
            "x86_64",
            X86_64_SOURCE,
            &["-fomit-frame-pointer"][..],
        ),
        (MacCpu::Arm64, "arm64", ARM64_SOURCE, &[][..]),
    ] {
        let (dylib, cache) = cache_of(dir.path(), arch, source, flags);
        let rows = cache_rows(&cache);
        let entries = compact_entries(&dylib);
        let mut checked = 0;
        for &(start, end, enc) in &entries {
            let Some(want) = encoding_rules(cpu, enc) else {
                continue;
            };
            for got in rules_over(&rows, start, end) {
                assert_eq!(got, want, "{arch}: {start:#x}..{end:#x} ({enc:#010x})");
            }
            checked += 1;
        }
        assert!(checked >= 1, "{arch}: {entries:x?}");
        if cpu == MacCpu::X86_64 {
            let eh = eh_frame_rows(&dylib);
            assert!(!eh.is_empty(), "{arch}: no __eh_frame rows");
            for (start, end, want) in eh {
                for got in rules_over(&rows, start, end) {
                    assert_eq!(got, want, "{arch}: __eh_frame {start:#x}..{end:#x}");
                }
            }
        }
    }
}

/// The address (in the dylib as linked) of the instruction after the call in `function`.
fn after_call(dylib: &Path, function: &str) -> u64 {
    let code = apple::disassembly(dylib, function);
    let call = code
        .iter()
        .position(|(_, t)| t.contains("callq") || t.contains("\tbl\t"))
        .unwrap_or_else(|| panic!("no call in {function}: {code:?}"));
    code[call + 1].0
}

/// The crashed thread's frames: (function, trust, unwind_source) of each.
fn walked(report: &Value) -> Vec<(String, String, String)> {
    report["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (s("function"), s("trust"), s("unwind_source"))
        })
        .collect()
}

/// `postmortem walk --symbols CACHE` of `crash`'s minidump (written to `dir`).
fn walk(dir: &Path, cache: &Path, crash: &apple::MacCrash) -> Value {
    let dump = dir.join("crash.dmp");
    std::fs::write(&dump, apple::mac_minidump(crash)).unwrap();
    super::apple_symbols::walk_json(cache, &dump)
}

/// The function llvm-symbolizer names at `address` of the dylib.
fn named(dylib: &Path, address: u64) -> String {
    apple::symbolizer(dylib, address)[0].function.clone()
}

const LOAD: u64 = 0x1_9b00_0000;
const STACK: u64 = 0x7ff7_bfe0_0000;

/// x86_64, no frame pointers: the crash in `middle_nofp` after its call (its compact
/// unwind: `CFA = rsp + 16`, the return address at `rsp + 8`), `rbp` holding nothing; the
/// word at `rsp` is a decoy return address into `decoy_nofp`, a wrong caller. The walk
/// must reach `outer_nofp` by the cache image's rules.
#[test]
fn walk_unwinds_a_frameless_x86_64_function_from_a_dyld_caches_unwind_info() {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld is needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dylib, cache) = cache_of(
        dir.path(),
        "x86_64",
        X86_64_SOURCE,
        &["-fomit-frame-pointer"],
    );
    let pc = after_call(&dylib, "_middle_nofp");
    let (decoy, ret) = (
        after_call(&dylib, "_decoy_nofp"),
        after_call(&dylib, "_outer_nofp"),
    );
    let mut stack = vec![0u8; 0x100];
    stack[0..8].copy_from_slice(&(LOAD + decoy).to_le_bytes());
    stack[8..16].copy_from_slice(&(LOAD + ret).to_le_bytes());
    let mut registers = vec![0u64; 17];
    registers[7] = STACK; // rsp; rbp (6) is 0
    registers[16] = LOAD + pc;
    let crash = mac_crash(MacCpu::X86_64, &dylib, registers, stack);
    let report = walk(dir.path(), &cache, &crash);
    let frames = walked(&report);
    let want_caller = named(&dylib, ret - 1);
    assert_eq!(want_caller, "outer_nofp");
    assert_eq!(
        frames.get(..2),
        Some(
            &[
                (named(&dylib, pc), "context".into(), String::new()),
                (want_caller, "cfi".into(), "breakpad".into()),
            ][..]
        ),
        "{:#}",
        report["threads"][0]
    );
}

/// arm64: the crash in the frameless leaf `leaf_frameless` (`CFA = sp + 16`, the return
/// address still in x30) called from `middle_frame` (a frame record: `CFA = x29 + 16`),
/// called from `outer_frame`. Both callers are found by the cache image's rules.
#[test]
fn walk_unwinds_an_arm64_frameless_leaf_from_a_dyld_caches_unwind_info() {
    if !apple::can_build() {
        eprintln!("skipped: clang with ld64.lld is needed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dylib, cache) = cache_of(dir.path(), "arm64", ARM64_SOURCE, &[]);
    let leaf = apple::disassembly(&dylib, "_leaf_frameless");
    // past the prologue's `sub sp, sp, #16`
    let pc = leaf
        .iter()
        .find(|(_, t)| t.contains("[x0]"))
        .expect("the load through p")
        .0;
    let (ret1, ret2) = (
        after_call(&dylib, "_middle_frame"),
        after_call(&dylib, "_outer_frame"),
    );
    // leaf: 16 bytes at sp; middle's frame record at sp + 32 (its x29), under its 16
    // bytes of locals; outer's frame record at sp + 48, the outermost (fp 0, lr 0)
    let words = [0, 0, 0, 0, STACK + 48, LOAD + ret2, 0, 0];
    let stack: Vec<u8> = words.iter().flat_map(|w: &u64| w.to_le_bytes()).collect();
    let mut registers = vec![0u64; 33];
    registers[29] = STACK + 32;
    registers[30] = LOAD + ret1;
    registers[31] = STACK;
    registers[32] = LOAD + pc;
    let crash = mac_crash(MacCpu::Arm64, &dylib, registers, stack);
    let report = walk(dir.path(), &cache, &crash);
    let frames = walked(&report);
    let cfi = |f: String| (f, "cfi".to_string(), "breakpad".to_string());
    assert_eq!(
        frames.get(..3),
        Some(
            &[
                (named(&dylib, pc), "context".into(), String::new()),
                cfi(named(&dylib, ret1 - 4)),
                cfi(named(&dylib, ret2 - 4)),
            ][..]
        ),
        "{:#}",
        report["threads"][0]
    );
    assert_eq!(frames[2].0, "outer_frame");
}

fn mac_crash(cpu: MacCpu, dylib: &Path, registers: Vec<u64>, stack: Vec<u8>) -> apple::MacCrash {
    apple::MacCrash {
        cpu,
        registers,
        stack_start: STACK,
        stack,
        fault_address: 0,
        modules: vec![apple::MacModule {
            path: INSTALL.into(),
            base: LOAD,
            size: 0x8000,
            uuid: apple::uuid_of(&std::fs::read(dylib).unwrap()),
        }],
    }
}
