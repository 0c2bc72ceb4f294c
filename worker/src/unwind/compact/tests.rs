//! Tests of the compact unwind reader and builder against real Mach-O binaries built at
//! test time (clang + ld64.lld), with `llvm-objdump --unwind-info` as the reference, plus
//! literal-stack walks through every opcode kind.
//!
//! The fixtures need `clang`, `ld64.lld`, `llvm-objcopy` and `llvm-objdump` (`test.sh`
//! installs them). Each C file is compiled alone so frame pointers can be on or off per
//! function group; the C objects' own `__eh_frame` is removed with llvm-objcopy because
//! lld 14 copies it without fixing the FDEs' pc-relative addresses, and a hand-written
//! assembly file provides both a DWARF escape (an explicit `__compact_unwind` entry
//! pointing at a hand-assembled FDE whose CFA is based on a callee-saved register, which
//! compact unwind cannot express) and a function with no unwind info (the null opcode).
//! lld 14 does not itself turn `.cfi_` directives it cannot encode into DWARF escapes.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use object::{Object, ObjectSection, ObjectSymbol};

use super::*;
use crate::binary;
use crate::dump::{Arch, MemoryMap, Module, RegisterSet};
use crate::unwind::build::build_from_elf;
use crate::unwind::build::compact_unwind::{add_unwind_info, arm64_rule, x86_64_rule, Context};
use crate::unwind::{TableWriter, UnwindSource, UnwindTable};
use crate::walk::{
    walk_thread, ArchWalker, Caller, CodeReader, Trust, WalkContext, WalkFrame, WalkOptions,
    WalkResult,
};

const X86_FP_C: &str = r#"long sink(long);
__attribute__((noinline)) long fp_saves(long a, long b, long c, long d, long e) {
  long x = sink(a), y = sink(b), z = sink(c), w = sink(d), v = sink(e);
  return sink(x + y) + sink(z + w) + v + a + b + c + d + e;
}
"#;
const X86_NOFP_C: &str = r#"long fp_saves(long, long, long, long, long);
long odd_cfa(long);
long sink(long);
__attribute__((noinline)) long imm_saves(long a, long b, long c, long d, long e) {
  long x = sink(a), y = sink(b), z = sink(c), w = sink(d), v = sink(e);
  return sink(x + y) + sink(z + w) + v + a + b + c + d + e;
}
__attribute__((noinline)) long huge(long n) {
  volatile char buf[100000];
  long r = sink(n);
  buf[r] = 1;
  return buf[n / 2] + sink(r) + n;
}
int main(void) { return (int)(fp_saves(1, 2, 3, 4, 5) + imm_saves(1, 2, 3, 4, 5) + huge(3) + odd_cfa(1)); }
"#;
const X86_ODD_S: &str = r#"  .text
  .globl _odd_cfa
  .p2align 4
_odd_cfa:
  pushq %rbx
  movq %rsp, %rbx
  subq $32, %rsp
  callq _sink
  movq %rbx, %rsp
  popq %rbx
  retq
Lodd_end:
  .globl _sink
  .p2align 4
_sink:
  movq %rdi, %rax
  retq

  .section __TEXT,__eh_frame
Lcie:
  .long Lcie_end - Lcie - 4
  .long 0
  .byte 1
  .asciz "zR"
  .byte 1, 0x78, 16, 1, 0
  .byte 0x0c, 7, 8, 0x90, 1
  .p2align 3
Lcie_end:
Lfde:
  .long Lfde_end - Lfde - 4
  .long Lfde + 4 - Lcie
  .quad _odd_cfa
  .quad Lodd_end - _odd_cfa
  .byte 0
  .byte 0x41, 0x0e, 16, 0x83, 2
  .byte 0x43, 0x0d, 3
  .p2align 3
Lfde_end:

  .section __LD,__compact_unwind,regular,debug
  .p2align 3
  .quad _odd_cfa
  .long Lodd_end - _odd_cfa
  .long 0x04000018
  .quad 0
  .quad 0
"#;
const A64_C: &str = r#"long sink(long);
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f, long g, long h) {
  long x1 = sink(a), x2 = sink(b), x3 = sink(c), x4 = sink(d), x5 = sink(e);
  long x6 = sink(f), x7 = sink(g), x8 = sink(h), x9 = sink(x1 + x2), x10 = sink(x3);
  return sink(x1 + x2 + x3) + x4 + x5 + x6 + x7 + x8 + x9 + x10 + a + b + c + d + e + f + g + h;
}
__attribute__((noinline)) long two(long a, long b) {
  long x = sink(a);
  return sink(x + b) + a + b;
}
long odd_cfa(long);
int main(void) { return (int)(many(1, 2, 3, 4, 5, 6, 7, 8) + two(1, 2) + odd_cfa(3)); }
"#;
const A64_LEAF_C: &str = r#"__attribute__((noinline)) long leaf_stack(long n) {
  volatile long buf[40];
  for (long i = 0; i < 40; i++) buf[i] = i * n;
  return buf[n & 31];
}
"#;
const A64_ODD_S: &str = r#"  .text
  .globl _odd_cfa
  .p2align 2
_odd_cfa:
  stp x19, x30, [sp, #-16]!
  mov x19, sp
  sub sp, sp, #32
  bl _sink
  mov sp, x19
  ldp x19, x30, [sp], #16
  ret
Lodd_end:
  .globl _sink
  .p2align 2
_sink:
  ret

  .section __TEXT,__eh_frame
odd_eh_frame:
  .long 20
  .long 0
  .byte 1
  .asciz "zR"
  .byte 4, 0x78, 30, 1, 0
  .byte 0x0c, 31, 0
  .space 4
  .long 36
  .long 0x1c
  .quad _odd_cfa
  .quad 28
  .byte 0
  .byte 0x41, 0x0e, 16, 0x93, 2, 0x9e, 1
  .byte 0x41, 0x0d, 19
  .space 5

  .section __LD,__compact_unwind,regular,debug
  .p2align 3
  .quad _odd_cfa
  .long 28
  .long 0x03000018
  .quad 0
  .quad 0
"#;

/// A linked fixture: the Mach-O bytes and llvm-objdump's `--unwind-info` output.
struct Fixture {
    bytes: Vec<u8>,
    objdump: String,
}

struct Fixtures {
    x86_64: Fixture,
    arm64: Fixture,
}

fn run(cmd: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} is needed for these tests (test.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles `(name, source, extra flags)` files for `target`, strips the C objects'
/// `__eh_frame`, links them in order and returns the binary and its objdump text.
fn link(dir: &Path, target: &str, files: &[(&str, &str, &[&str])]) -> Fixture {
    let target = format!("--target={target}");
    let mut objects = Vec::new();
    for (name, src, flags) in files {
        std::fs::write(dir.join(name), src).expect("write fixture source");
        let obj = format!("{name}.o");
        let mut args = vec![
            target.as_str(),
            "-O2",
            "-fno-stack-protector",
            "-c",
            name,
            "-o",
            &obj,
        ];
        args.extend_from_slice(flags);
        run("clang", &args, dir);
        if name.ends_with(".c") {
            let stripped = format!("{name}.stripped.o");
            run(
                "llvm-objcopy",
                &["--remove-section", "__TEXT,__eh_frame", &obj, &stripped],
                dir,
            );
            objects.push(stripped);
        } else {
            objects.push(obj);
        }
    }
    let exe = "a.out";
    let mut args = vec![
        target.as_str(),
        "-fuse-ld=lld",
        "-nostdlib",
        "-Wl,-e,_main",
        "-o",
        exe,
    ];
    args.extend(objects.iter().map(String::as_str));
    run("clang", &args, dir);
    let objdump = run("llvm-objdump", &["--unwind-info", exe], dir);
    Fixture {
        bytes: std::fs::read(dir.join(exe)).expect("read linked fixture"),
        objdump,
    }
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("temp dir");
        let x86 = tmp.path().join("x86_64");
        let arm = tmp.path().join("arm64");
        std::fs::create_dir_all(&x86).expect("mkdir");
        std::fs::create_dir_all(&arm).expect("mkdir");
        let fp: &[&str] = &["-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"];
        let nofp: &[&str] = &["-fomit-frame-pointer"];
        Fixtures {
            x86_64: link(
                &x86,
                "x86_64-apple-macos11",
                &[
                    ("odd.s", X86_ODD_S, &[]),
                    ("fp.c", X86_FP_C, fp),
                    ("nofp.c", X86_NOFP_C, nofp),
                ],
            ),
            arm64: link(
                &arm,
                "arm64-apple-macos11",
                &[
                    ("odd.s", A64_ODD_S, &[]),
                    ("fp.c", A64_C, &[]),
                    ("leaf.c", A64_LEAF_C, nofp),
                ],
            ),
        }
    })
}

/// The one place llvm-objdump's output is normalized: everything before the section's
/// own text (the `file: file format …` line, `Unwind info:` and blank lines) is dropped,
/// as are trailing blank lines. Nothing inside the section's text is touched.
fn normalize_objdump(text: &str) -> String {
    let start = text
        .find("Contents of __unwind_info section:")
        .expect("llvm-objdump printed an __unwind_info section");
    let mut s = text[start..].trim_end().to_string();
    s.push('\n');
    s
}

fn unwind_info_section(bytes: &[u8]) -> &[u8] {
    let file = object::File::parse(bytes).expect("parse fixture");
    let sec = file
        .section_by_name("__unwind_info")
        .expect("__unwind_info");
    let range = sec.file_range().expect("in file");
    &bytes[range.0 as usize..(range.0 + range.1) as usize]
}

fn symbol(bytes: &[u8], name: &str) -> u64 {
    let file = object::File::parse(bytes).expect("parse fixture");
    let s = file.symbols().find(|s| s.name() == Ok(name));
    s.unwrap_or_else(|| panic!("symbol {name}")).address()
}

fn check_objdump(f: &Fixture) {
    let info = UnwindInfo::parse(unwind_info_section(&f.bytes)).expect("parse __unwind_info");
    let ours = objdump::format(&info).expect("format");
    assert_eq!(ours, normalize_objdump(&f.objdump));
}

#[test]
fn x86_64_decode_matches_llvm_objdump() {
    check_objdump(&fixtures().x86_64);
}

#[test]
fn arm64_decode_matches_llvm_objdump() {
    check_objdump(&fixtures().arm64);
}

/// The opcode of the entry covering `addr` (an SVMA), from llvm-objdump's text: the
/// entries are read independently of our reader.
fn objdump_opcode_at(f: &Fixture, image_base: u64, addr: u64) -> u32 {
    let mut best = None;
    for line in f.objdump.lines() {
        let line = line.trim();
        let Some(rest) = line.split_once("]: function offset=0x").map(|(_, r)| r) else {
            continue;
        };
        if !rest.contains("encoding") {
            continue;
        }
        let off = u64::from_str_radix(&rest[..8], 16).expect("hex offset");
        let enc = rest.rsplit_once("=0x").expect("encoding").1;
        let enc = u32::from_str_radix(enc, 16).expect("hex encoding");
        if image_base + off <= addr {
            best = Some(enc);
        }
    }
    best.expect("an entry covers the address")
}

#[test]
fn fixtures_hold_every_opcode_kind() {
    let f = fixtures();
    let x = &f.x86_64;
    let base = 0x1_0000_0000;
    let at = |name| objdump_opcode_at(x, base, symbol(&x.bytes, name));
    assert_eq!(mode(at("_odd_cfa")), 4, "DWARF escape");
    assert_eq!(at("_sink"), 0, "null opcode");
    assert_eq!(mode(at("_fp_saves")), 1, "rbp frame");
    assert_eq!(mode(at("_imm_saves")), 2, "frameless immediate");
    assert_eq!(mode(at("_huge")), 3, "frameless indirect");
    let a = &f.arm64;
    let at = |name| objdump_opcode_at(a, base, symbol(&a.bytes, name));
    assert_eq!(mode(at("_odd_cfa")), 3, "DWARF escape");
    assert_eq!(at("_sink"), 0, "null opcode");
    assert_eq!(mode(at("_many")), 4, "frame");
    assert_eq!(at("_many") & 0x1f, 0x1f, "x19..x28 all saved");
    assert_eq!(mode(at("_leaf_stack")), 2, "frameless");
}

/// Every entry's range from our reader agrees with llvm-objdump's entry list: each
/// entry starts at an objdump entry and ends at the next different one or the sentinel.
#[test]
fn entry_ranges_follow_the_page_table() {
    for f in [&fixtures().x86_64, &fixtures().arm64] {
        let info = UnwindInfo::parse(unwind_info_section(&f.bytes)).expect("parse");
        let entries = info.entries().expect("entries");
        let sentinel = info.index.last().expect("sentinel").first_address;
        assert!(!entries.is_empty());
        for w in entries.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert_eq!(entries.last().map(|e| e.end), Some(sentinel));
        for e in &entries {
            assert_eq!(objdump_opcode_at(f, 0, u64::from(e.start)), e.opcode);
            assert_eq!(objdump_opcode_at(f, 0, u64::from(e.end) - 1), e.opcode);
        }
    }
}
