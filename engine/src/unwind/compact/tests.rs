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
use crate::unwind::builders::build_from_elf;
use crate::unwind::builders::compact_unwind::{add_unwind_info, arm64_rule, x86_64_rule, Context};
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
    /// More distinct opcodes than the 127-entry global palette holds, so the linker puts
    /// the rest in compressed pages' local palettes.
    x86_64_many: Fixture,
    arm64_many: Fixture,
}

/// C source of `count` functions that call out, with differing stack sizes and
/// saved-register sets, and `count` leaf functions with differing stack sizes (the only
/// frameless kind on arm64, where calling functions keep frame records; each size used
/// twice), plus the
/// externals they call.
fn many_encodings_source(count: usize) -> (String, String) {
    let mut s = String::from("long sink(long);\nlong sinkp(volatile char *);\n");
    for i in 1..=count {
        let n = 1 + i % 4;
        let args: Vec<String> = (0..n).map(|k| format!("long a{k}")).collect();
        let calls: String = (0..n)
            .map(|k| format!("long x{k} = sink(a{k}); "))
            .collect();
        let sum: Vec<String> = (0..n).map(|k| format!("x{k} + a{k}")).collect();
        s.push_str(&format!(
            "__attribute__((noinline)) long f{i}({}) {{ volatile char buf[{}]; {calls}\
             buf[0] = x0; sinkp(buf); return sink({}) + buf[1]; }}\n",
            args.join(", "),
            8 * (i / 4 + 1),
            sum.join(" + "),
        ));
        s.push_str(&format!(
            "__attribute__((noinline)) long g{i}(long a) {{ volatile char buf[{}]; \
             buf[a & 7] = (char)a; return buf[(a + 1) & 7]; }}\n",
            // Each size twice: the linker only compresses pages when opcodes repeat.
            16 * i.div_ceil(2)
        ));
    }
    let main = "long sink(long x) { return x; }\n\
                long sinkp(volatile char *p) { return p[0]; }\n\
                int main(void) { return 0; }\n"
        .to_string();
    (s, main)
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
        let x86_many = tmp.path().join("x86_64-many");
        let arm_many = tmp.path().join("arm64-many");
        std::fs::create_dir_all(&x86_many).expect("mkdir");
        std::fs::create_dir_all(&arm_many).expect("mkdir");
        let (many_c, many_main) = many_encodings_source(400);
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
            x86_64_many: link(
                &x86_many,
                "x86_64-apple-macos11",
                &[
                    ("many.c", many_c.as_str(), nofp),
                    ("main.c", many_main.as_str(), nofp),
                ],
            ),
            arm64_many: link(
                &arm_many,
                "arm64-apple-macos11",
                &[
                    ("many.c", many_c.as_str(), nofp),
                    ("main.c", many_main.as_str(), nofp),
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
    let theirs = normalize_objdump(&f.objdump);
    // Name the first differing line: the texts run to thousands of lines.
    if let Some((n, (a, b))) = ours
        .lines()
        .zip(theirs.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        panic!("line {}: ours {a:?}, llvm-objdump {b:?}", n + 1);
    }
    assert_eq!(
        ours.lines().count(),
        theirs.lines().count(),
        "line counts differ"
    );
}

#[test]
fn x86_64_decode_matches_llvm_objdump() {
    check_objdump(&fixtures().x86_64);
}

#[test]
fn arm64_decode_matches_llvm_objdump() {
    check_objdump(&fixtures().arm64);
}

/// Pages with local palettes, as ld64.lld writes them once the global palette is full:
/// decoded exactly as llvm-objdump prints them, and every entry whose palette index points
/// past the global palette resolves to the page's local opcode.
#[test]
fn local_palettes_decode_like_llvm_objdump() {
    for f in [&fixtures().x86_64_many, &fixtures().arm64_many] {
        check_objdump(f);
        let info = UnwindInfo::parse(unwind_info_section(&f.bytes)).expect("parse");
        let with_locals = (0..info.page_count())
            .filter_map(|i| info.page(i).ok())
            .filter(|p| !p.local_opcodes.is_empty())
            .count();
        assert!(
            with_locals > 0,
            "the fixture must have a compressed page with a local palette:\n{}",
            f.objdump
        );
        // Every function's opcode from our entries equals llvm-objdump's for its address.
        let base = 0x1_0000_0000;
        let entries = info.entries().expect("entries");
        for name in [1usize, 2, 3, 4, 50, 199, 200, 333, 400]
            .iter()
            .flat_map(|i| [format!("_f{i}"), format!("_g{i}")])
        {
            let addr = symbol(&f.bytes, &name);
            let off = addr - base;
            let ours = entries
                .iter()
                .find(|e| u64::from(e.start) <= off && off < u64::from(e.end))
                .map(|e| e.opcode);
            assert_eq!(ours, Some(objdump_opcode_at(f, base, addr)), "{name}");
        }
    }
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

// ---- walking through the built table, one literal stack per opcode kind ----

const STACK_LO: u64 = 0x7000_0000;
const STACK_SIZE: usize = 0x20000;
/// The caller's stack pointer right before its `call`/`bl`.
const CALLER_SP: u64 = STACK_LO + STACK_SIZE as u64 - 0x100;

/// A stack being built the way the function's prologue builds it.
struct Stack {
    words: Vec<u64>,
    sp: u64,
}

impl Stack {
    fn new() -> Stack {
        Stack {
            words: vec![0; STACK_SIZE / 8],
            sp: CALLER_SP,
        }
    }
    fn write(&mut self, addr: u64, v: u64) {
        self.words[((addr - STACK_LO) / 8) as usize] = v;
    }
    fn push(&mut self, v: u64) {
        self.sp -= 8;
        self.write(self.sp, v);
    }
    fn bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

struct NoCode;
impl CodeReader for NoCode {
    fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
        None
    }
}

/// A minimal aarch64 walker for these tests (the real one lives on another branch):
/// only the table strategy.
struct TestArm64;
impl ArchWalker for TestArm64 {
    fn arch(&self) -> Arch {
        Arch::Aarch64
    }
    fn return_address_register(&self) -> u16 {
        30
    }
    fn lookup_back(&self) -> u64 {
        4
    }
    fn caller_by_fp(&self, _: &WalkContext<'_, '_>, _: &WalkFrame, _: bool) -> Option<Caller> {
        None
    }
    fn is_call_before(&self, _code: &[u8]) -> bool {
        false
    }
    fn call_check_len(&self) -> usize {
        4
    }
}

/// Walks one thread of the fixture, loaded at its link address, from `regs` over `stack`.
fn walk(
    f: &Fixture,
    arch: &dyn ArchWalker,
    stack: &Stack,
    regs: &RegisterSet,
    fp: bool,
) -> WalkResult {
    let built = build_from_elf(&f.bytes, &[]).expect("build table");
    assert_eq!(
        built.stats.entries_skipped, 0,
        "{:?}",
        built.stats.first_error
    );
    let table = UnwindTable::open(&built.bytes).expect("open table");
    let file = object::File::parse(&*f.bytes).expect("parse");
    let link_base = binary::link_base(&file);
    let bytes = stack.bytes();
    let mem = MemoryMap::new(vec![(STACK_LO, &bytes[..])]);
    let modules = vec![Module {
        name: "fixture".into(),
        path: None,
        base: 0x1_0000_0000,
        end: 0x1_0001_0000,
        // loaded at its link address: runtime = svma
        load_base: link_base,
        build_id: None,
        debug_id: None,
        debug_file: None,
        code_id: None,
        version: None,
        identity: crate::dump::Identity::None,
        main: true,
        mappings: vec![],
    }];
    let tables = vec![Some(crate::walk::ModuleUnwind::Table(table))];
    let opts = WalkOptions {
        enable_scan: false,
        enable_fp: fp,
        ..WalkOptions::default()
    };
    let ctx = WalkContext {
        memory: &mem,
        modules: &modules,
        tables: &tables,
        code: &NoCode,
        options: &opts,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    walk_thread(arch, &ctx, regs)
}

fn x86_regs(pc: u64, sp: u64, rbp: u64) -> RegisterSet {
    let mut r = RegisterSet::new(Arch::X86_64);
    r.set(16, pc);
    r.set(7, sp);
    r.set(6, rbp);
    r
}

/// Asserts frame 1 was found by a table rule from `source` with the given pc and sp.
fn assert_caller(r: &WalkResult, source: UnwindSource, pc: u64, sp: u64) {
    assert!(
        r.frames.len() >= 2,
        "no caller: {:?} {:?}",
        r.end,
        r.end_detail
    );
    let c = &r.frames[1];
    assert_eq!(c.trust, Trust::Cfi);
    assert_eq!(c.unwind_source, Some(source));
    assert_eq!(c.pc, pc, "caller pc");
    assert_eq!(c.sp, Some(sp), "caller sp");
}

#[test]
fn walk_x86_64_rbp_frame() {
    let f = &fixtures().x86_64;
    let func = symbol(&f.bytes, "_fp_saves");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // push %rbp; mov %rsp,%rbp; push %r15 … push %rbx; sub $40,%rsp
    let mut s = Stack::new();
    s.push(ra);
    s.push(0xcafe_0000); // caller's rbp
    let rbp = s.sp;
    for v in [0x15u64, 0x14, 0x13, 0x12, 0x03] {
        s.push(0xaaaa_0000 + v);
    }
    s.sp -= 40;
    let mut regs = x86_regs(func + 0x11, s.sp, rbp);
    for r in [3u16, 12, 13, 14, 15] {
        regs.set(r, 0xdead); // the callee's own values: must not leak into the caller
    }
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    let c = &r.frames[1].registers;
    assert_eq!(c.get(6), Some(0xcafe_0000));
    for (reg, v) in [
        (3u16, 0x03u64),
        (12, 0x12),
        (13, 0x13),
        (14, 0x14),
        (15, 0x15),
    ] {
        assert_eq!(c.get(reg), Some(0xaaaa_0000 + v), "register {reg}");
    }
}

#[test]
fn walk_x86_64_frameless_immediate() {
    let f = &fixtures().x86_64;
    let func = symbol(&f.bytes, "_imm_saves");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // push %rbp; push %r15; push %r14; push %r13; push %r12; push %rbx; sub $40,%rsp
    let mut s = Stack::new();
    s.push(ra);
    for v in [0x06u64, 0x15, 0x14, 0x13, 0x12, 0x03] {
        s.push(0xbbbb_0000 + v);
    }
    s.sp -= 40;
    let regs = x86_regs(func + 0x11, s.sp, 0x1234);
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    let c = &r.frames[1].registers;
    for (reg, v) in [
        (6u16, 0x06u64),
        (3, 0x03),
        (12, 0x12),
        (13, 0x13),
        (14, 0x14),
        (15, 0x15),
    ] {
        assert_eq!(c.get(reg), Some(0xbbbb_0000 + v), "register {reg}");
    }
}

#[test]
fn walk_x86_64_frameless_indirect() {
    let f = &fixtures().x86_64;
    let func = symbol(&f.bytes, "_huge");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // push %r14; push %rbx; sub $100008,%rsp (the size is only in the code)
    let mut s = Stack::new();
    s.push(ra);
    s.push(0xcccc_0014);
    s.push(0xcccc_0003);
    s.sp -= 100_008;
    let regs = x86_regs(func + 0xa, s.sp, 0x1234);
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    let c = &r.frames[1].registers;
    assert_eq!(c.get(14), Some(0xcccc_0014));
    assert_eq!(c.get(3), Some(0xcccc_0003));
    assert_eq!(c.get(6), Some(0x1234), "rbp unchanged");
}

#[test]
fn walk_x86_64_dwarf_escape() {
    let f = &fixtures().x86_64;
    let func = symbol(&f.bytes, "_odd_cfa");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // push %rbx; mov %rsp,%rbx; sub $32,%rsp: the CFA is rbx + 16 (from the FDE)
    let mut s = Stack::new();
    s.push(ra);
    s.push(0xdddd_0003);
    let rbx = s.sp;
    s.sp -= 32;
    let mut regs = x86_regs(func + 8, s.sp, 0x1234);
    regs.set(3, rbx);
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, false);
    assert_caller(&r, UnwindSource::EhFrame, ra, CALLER_SP);
    assert_eq!(r.frames[1].registers.get(3), Some(0xdddd_0003));
}

#[test]
fn walk_x86_64_null_opcode_has_no_rule() {
    let f = &fixtures().x86_64;
    let func = symbol(&f.bytes, "_sink");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    let mut s = Stack::new();
    s.push(ra);
    // no rule: the table strategy finds nothing and the walk falls back to the frame
    // pointer chain (rbp points at a [saved rbp, return address] pair)
    let rbp = CALLER_SP + 0x20;
    s.write(rbp, 0);
    s.write(rbp + 8, ra);
    let regs = x86_regs(func, s.sp, rbp);
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, true);
    assert!(r.frames.len() >= 2);
    assert_eq!(r.frames[1].trust, Trust::Fp);
    let r = walk(f, &crate::walk::x86_64::X86_64, &s, &regs, false);
    assert_eq!(r.frames.len(), 1, "no table rule at a null opcode");
}

fn arm_regs(pc: u64, sp: u64, fp: u64, lr: u64) -> RegisterSet {
    let mut r = RegisterSet::new(Arch::Aarch64);
    r.set(32, pc);
    r.set(31, sp);
    r.set(29, fp);
    r.set(30, lr);
    r
}

#[test]
fn walk_arm64_frame_with_register_pairs() {
    let f = &fixtures().arm64;
    let func = symbol(&f.bytes, "_many");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // sub sp,sp,#160; stp x28,x27,[sp,#64] … stp x20,x19,[sp,#128];
    // stp x29,x30,[sp,#144]; add x29,sp,#144
    let mut s = Stack::new();
    s.sp -= 160;
    let sp = s.sp;
    for (k, (hi, lo)) in [(28u64, 27u64), (26, 25), (24, 23), (22, 21), (20, 19)]
        .into_iter()
        .enumerate()
    {
        let at = sp + 64 + 16 * k as u64;
        s.write(at, 0xeeee_0000 + hi);
        s.write(at + 8, 0xeeee_0000 + lo);
    }
    s.write(sp + 144, 0xcafe_0000);
    s.write(sp + 152, ra);
    let regs = arm_regs(func + 0x20, sp, sp + 144, 0xbad);
    let r = walk(f, &TestArm64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    let c = &r.frames[1].registers;
    assert_eq!(c.get(29), Some(0xcafe_0000));
    for reg in 19u16..=28 {
        assert_eq!(c.get(reg), Some(0xeeee_0000 + u64::from(reg)), "x{reg}");
    }
}

#[test]
fn walk_arm64_frame_one_pair() {
    let f = &fixtures().arm64;
    let func = symbol(&f.bytes, "_two");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // stp x20,x19,[sp,#-32]!; stp x29,x30,[sp,#16]; add x29,sp,#16
    let mut s = Stack::new();
    s.sp -= 32;
    let sp = s.sp;
    s.write(sp, 0xf0f0_0020);
    s.write(sp + 8, 0xf0f0_0019);
    s.write(sp + 16, 0xcafe_0000);
    s.write(sp + 24, ra);
    let mut regs = arm_regs(func + 0xc, sp, sp + 16, 0xbad);
    regs.set(21, 0x2121);
    let r = walk(f, &TestArm64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    let c = &r.frames[1].registers;
    assert_eq!(c.get(19), Some(0xf0f0_0019));
    assert_eq!(c.get(20), Some(0xf0f0_0020));
    assert_eq!(c.get(21), Some(0x2121), "not saved: unchanged");
    assert_eq!(c.get(29), Some(0xcafe_0000));
}

#[test]
fn walk_arm64_frameless() {
    let f = &fixtures().arm64;
    let func = symbol(&f.bytes, "_leaf_stack");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // sub sp,sp,#336; the return address stays in x30
    let mut s = Stack::new();
    s.sp -= 336;
    let regs = arm_regs(func + 8, s.sp, 0xf00d, ra);
    let r = walk(f, &TestArm64, &s, &regs, false);
    assert_caller(&r, UnwindSource::CompactUnwind, ra, CALLER_SP);
    assert_eq!(r.frames[1].registers.get(29), Some(0xf00d));
}

#[test]
fn walk_arm64_dwarf_escape() {
    let f = &fixtures().arm64;
    let func = symbol(&f.bytes, "_odd_cfa");
    let ra = symbol(&f.bytes, "_main") + 0x10;
    // stp x19,x30,[sp,#-16]!; mov x19,sp; sub sp,sp,#32: the CFA is x19 + 16
    let mut s = Stack::new();
    s.sp -= 16;
    s.write(s.sp, 0x1919_0019);
    s.write(s.sp + 8, ra);
    let x19 = s.sp;
    s.sp -= 32;
    let mut regs = arm_regs(func + 12, s.sp, 0xf00d, 0xbad);
    regs.set(19, x19);
    let r = walk(f, &TestArm64, &s, &regs, false);
    assert_caller(&r, UnwindSource::EhFrame, ra, CALLER_SP);
    assert_eq!(r.frames[1].registers.get(19), Some(0x1919_0019));
}

#[test]
fn arm64_null_opcode_has_no_rule() {
    let f = &fixtures().arm64;
    let func = symbol(&f.bytes, "_sink");
    let s = Stack::new();
    let regs = arm_regs(func, s.sp, 0xf00d, symbol(&f.bytes, "_main") + 0x10);
    let r = walk(f, &TestArm64, &s, &regs, false);
    assert_eq!(r.frames.len(), 1, "no table rule at a null opcode");
}

// ---- literal sections: structure, errors, hostile bytes ----

/// Little-endian words as bytes.
fn le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A section with one compressed page (entries at 0x1000 and 0x1010 and a zero-length
/// one at 0x1020) and one regular page from 0x2000, sentinel at 0x3000.
fn literal_section() -> Vec<u8> {
    let mut w = vec![
        1,
        0x1c,
        2,
        0x24,
        0,
        0x24,
        3, // root: 2 global opcodes at 0x1c, 3 index entries at 0x24
        0x0201_0000,
        0x0100_0000, // global opcodes (frameless 8 bytes; rbp frame)
        // index at 0x24: (first address, page offset, lsda offset)
        0x1000,
        0x48,
        0x48,
        0x2000,
        0x70,
        0x48,
        0x3000,
        0,
        0x48,
    ];
    assert_eq!(w.len() * 4, 0x48);
    // compressed page at 0x48: kind, entries at +12 (4 entries), local opcodes at +28 (1)
    w.extend_from_slice(&[3, 12 | 4 << 16, 28 | 1 << 16]);
    w.extend_from_slice(&[0x0000_0000, 1 << 24 | 0x10, 2 << 24 | 0x20, 0x20]);
    w.extend_from_slice(&[0x0208_0000]); // local opcode: frameless 64 bytes
                                         // pad to 0x70
    while w.len() * 4 < 0x70 {
        w.push(0);
    }
    // regular page at 0x70: kind, entries at +8 (1 entry)
    w.extend_from_slice(&[2, 8 | 1 << 16, 0x2000, 0x0101_0000]);
    le(&w)
}

#[test]
fn literal_section_entries() {
    let data = literal_section();
    let info = UnwindInfo::parse(&data).expect("parse");
    assert_eq!(info.page_count(), 2);
    let e = info.entries().expect("entries");
    assert_eq!(
        e,
        vec![
            Entry {
                start: 0x1000,
                end: 0x1010,
                opcode: 0x0201_0000
            },
            Entry {
                start: 0x1010,
                end: 0x1020,
                opcode: 0x0100_0000
            },
            // the zero-length entry at 0x1020 (palette index 2) is discarded
            Entry {
                start: 0x1020,
                end: 0x2000,
                opcode: 0x0201_0000
            },
            Entry {
                start: 0x2000,
                end: 0x3000,
                opcode: 0x0101_0000
            },
        ]
    );
    let page = info.page(0).expect("page 0");
    assert_eq!(page.local_opcodes, vec![0x0208_0000]);
    assert_eq!(page.entries[2].opcode, 0x0208_0000);
    // and as table rows
    let mut w = TableWriter::new(Arch::X86_64);
    let read = |_: u64| None;
    let ctx = Context {
        image_base: 0x1_0000_0000,
        link_base: 0x1_0000_0000,
        eh_frame: None,
        read_u32: &read,
    };
    add_unwind_info(&mut w, &data, &ctx).expect("rows");
    let built = w.finish();
    let t = UnwindTable::open(&built.bytes).expect("open");
    let cfa = |a| t.find(a).map(|r| (r.record.cfa.reg, r.record.cfa.value));
    assert_eq!(cfa(0x0fff), None);
    assert_eq!(cfa(0x1000), Some((7, 8)));
    assert_eq!(cfa(0x1010), Some((6, 16)));
    assert_eq!(cfa(0x1fff), Some((7, 8)));
    assert_eq!(cfa(0x2000), Some((6, 16)));
    assert_eq!(cfa(0x3000), None);
}

#[test]
fn structural_errors() {
    let good = literal_section();
    let mut bad = good.clone();
    bad[0] = 2;
    assert_eq!(
        UnwindInfo::parse(&bad).err(),
        Some(CompactUnwindError::UnsupportedVersion(2))
    );
    assert_eq!(
        UnwindInfo::parse(&good[..20])
            .map(|_| ())
            .err()
            .map(|e| e.code()),
        Some("compact-unwind-truncated")
    );
    // global opcodes offset beyond the section
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    assert!(matches!(
        UnwindInfo::parse(&bad),
        Err(CompactUnwindError::Truncated { .. })
    ));
    // unknown page kind
    let mut bad = good.clone();
    bad[0x70..0x74].copy_from_slice(&7u32.to_le_bytes());
    let info = UnwindInfo::parse(&bad).expect("root is fine");
    assert_eq!(
        info.entries(),
        Err(CompactUnwindError::UnknownPageKind { page: 1, kind: 7 })
    );
    // palette index beyond global + local
    let mut bad = good.clone();
    bad[0x54..0x58].copy_from_slice(&(9u32 << 24).to_le_bytes());
    let info = UnwindInfo::parse(&bad).expect("root is fine");
    assert_eq!(
        info.entries().map(|_| ()).err().map(|e| e.code()),
        Some("compact-unwind-opcode-index")
    );
    // unsorted entries
    let mut bad = good.clone();
    bad[0x58..0x5c].copy_from_slice(&(1u32 << 24 | 0x900).to_le_bytes());
    bad[0x5c..0x60].copy_from_slice(&(1u32 << 24 | 0x800).to_le_bytes());
    let info = UnwindInfo::parse(&bad).expect("root is fine");
    assert_eq!(
        info.entries().map(|_| ()).err().map(|e| e.code()),
        Some("compact-unwind-unsorted")
    );
    // unsorted pages
    let mut bad = good.clone();
    bad[0x30..0x34].copy_from_slice(&0x0800u32.to_le_bytes());
    let info = UnwindInfo::parse(&bad).expect("root is fine");
    assert_eq!(
        info.entries().map(|_| ()).err().map(|e| e.code()),
        Some("compact-unwind-unsorted")
    );
}

#[test]
fn hostile_bytes_never_panic() {
    let good = literal_section();
    let read = |_: u64| Some(0x1000);
    for arch in [Arch::X86_64, Arch::Aarch64] {
        for cut in 0..good.len() {
            let mut w = TableWriter::new(arch);
            let ctx = Context {
                image_base: 0,
                link_base: 0,
                eh_frame: None,
                read_u32: &read,
            };
            let _ = add_unwind_info(&mut w, &good[..cut], &ctx);
            let _ = UnwindInfo::parse(&good[..cut]).map(|i| objdump::format(&i));
        }
        for i in 0..good.len() {
            for b in [0u8, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[i] = b;
                let mut w = TableWriter::new(arch);
                let ctx = Context {
                    image_base: 0,
                    link_base: 0,
                    eh_frame: None,
                    read_u32: &read,
                };
                let _ = add_unwind_info(&mut w, &bad, &ctx);
                let _ = UnwindInfo::parse(&bad).map(|i| objdump::format(&i));
                let built = w.finish();
                assert!(UnwindTable::open(&built.bytes).is_ok());
            }
        }
    }
    // many index entries aliasing one page: rejected by the entry budget, not expanded
    let mut w = vec![1, 0x1c, 0, 0x1c, 0, 0x1c, 1001];
    for i in 0..1000u32 {
        w.extend_from_slice(&[i, 0x1c + 1001 * 12, 0]);
    }
    w.extend_from_slice(&[1000, 0, 0]);
    w.extend_from_slice(&[2, 8 | 500 << 16]);
    w.extend(std::iter::repeat_n(0u32, 1000));
    let data = le(&w);
    let info = UnwindInfo::parse(&data).expect("root");
    assert!(info.entries().is_err());
}

#[test]
fn permutation_decoding_matches_libunwind() {
    // count 6, permutation 0: rbx, r12, r13, r14, r15, rbp in order
    assert_eq!(
        decode_permutation(6, 0).map(|r| r.regs),
        Some([1, 2, 3, 4, 5, 6])
    );
    // count 2, permutation 2 (the huge() fixture): digits 0, 2 -> rbx, r14
    assert_eq!(
        decode_permutation(2, 2).map(|r| r.as_slice().to_vec()),
        Some(vec![1, 4])
    );
    // count 3, permutation 10 (the x86_64 main fixture): digits 0, 2, 2 -> rbx, r14, r15
    assert_eq!(
        decode_permutation(3, 10).map(|r| r.as_slice().to_vec()),
        Some(vec![1, 4, 5])
    );
    // count 1: the digit is the register number minus one
    assert_eq!(
        decode_permutation(1, 5).map(|r| r.as_slice().to_vec()),
        Some(vec![6])
    );
    // a digit beyond the remaining registers
    assert_eq!(decode_permutation(1, 6), None);
    // every encodable 6-register permutation is a permutation of 1..=6
    for p in 0..720 {
        let mut r = decode_permutation(6, p).expect("valid").regs;
        r.sort_unstable();
        assert_eq!(r, [1, 2, 3, 4, 5, 6], "{p}");
    }
}

#[test]
fn opcode_rules() {
    // rbp frame, offset 5, rbx r12 r13 r14 r15 (the fp_saves fixture)
    let op = X86_64Opcode::decode(0x0105_58d1);
    let r = x86_64_rule(&op, |_| None).expect("rule");
    assert_eq!((r.cfa.reg, r.cfa.value), (6, 16));
    assert_eq!(r.ra.value, -8);
    let at = |reg| r.reg(Arch::X86_64, reg).map(|s| s.value);
    assert_eq!(at(6), Some(-16));
    assert_eq!(at(3), Some(-56));
    assert_eq!(at(15), Some(-24));
    // indirect: the immediate comes from the code
    let op = X86_64Opcode::decode(0x0306_6802);
    let r = x86_64_rule(&op, |off| (off == 6).then_some(100_008)).expect("rule");
    assert_eq!((r.cfa.reg, r.cfa.value), (7, 100_032));
    assert!(x86_64_rule(&op, |_| None).is_err());
    // rbp is not a valid register in an rbp frame
    assert_eq!(
        X86_64Opcode::decode(0x0100_0006),
        X86_64Opcode::Invalid { mode: 1 }
    );
    // arm64
    let r = arm64_rule(&Arm64Opcode::decode(0x0201_5010)).expect("rule");
    assert_eq!((r.cfa.reg, r.cfa.value), (31, 336));
    assert_eq!(r.ra, crate::unwind::Slot::UNCHANGED);
    let r = arm64_rule(&Arm64Opcode::decode(0x0400_0003)).expect("rule");
    let at = |reg| r.reg(Arch::Aarch64, reg).map(|s| s.value);
    assert_eq!(
        (at(19), at(20), at(21), at(22), at(23)),
        (Some(-24), Some(-32), Some(-40), Some(-48), Some(0))
    );
}

/// Build speed and size of the same program's unwind info as Mach-O `__unwind_info` and
/// as ELF `.eh_frame`. Not a correctness test: run with
/// `cargo test --release -p postmortem-engine --lib compact_vs_eh_frame_figures -- --ignored --nocapture`.
#[test]
#[ignore]
fn compact_vs_eh_frame_figures() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let mut src = String::from("long sink(long);\n");
    let n = 4000;
    for i in 0..n {
        src += &match i % 4 {
            0 => format!("__attribute__((noinline)) long f{i}(long a, long b) {{ return a * {i} + b; }}\n"),
            1 => format!("__attribute__((noinline)) long f{i}(long a, long b, long c, long d, long e) {{ long x = sink(a), y = sink(b), z = sink(c), w = sink(d), v = sink(e); return sink(x + y) + sink(z + w) + v + a + b + c + d + e + {i}; }}\n"),
            2 => format!("__attribute__((noinline)) long f{i}(long n) {{ volatile char buf[{}]; long r = sink(n); buf[r & 63] = 1; return buf[n & 31] + sink(r) + {i}; }}\n", [64, 512, 5000, 70000][i % 7 % 4]),
            _ => format!("__attribute__((noinline)) long f{i}(long a) {{ long x = sink(a); return sink(x + {i}) + a; }}\n"),
        };
    }
    src += "long sink(long x) { __asm__ volatile(\"\" : \"+r\"(x)); return x; }\nint main(void) { long s = 0;\n";
    for i in 0..n {
        src += &format!(" s += (long)f{i};\n");
    }
    src += " return (int)s; }\n";
    std::fs::write(dir.join("big.c"), src).expect("write");
    let f = "-O2 -fno-stack-protector -fomit-frame-pointer";
    let flags: Vec<&str> = f.split(' ').collect();
    let mut a = vec![
        "--target=x86_64-apple-macos11",
        "-c",
        "big.c",
        "-o",
        "big.o",
    ];
    a.extend(&flags);
    run("clang", &a, dir);
    run(
        "llvm-objcopy",
        &["--remove-section", "__TEXT,__eh_frame", "big.o", "big.s.o"],
        dir,
    );
    run(
        "clang",
        &[
            "--target=x86_64-apple-macos11",
            "-fuse-ld=lld",
            "-nostdlib",
            "-Wl,-e,_main",
            "big.s.o",
            "-o",
            "big.macho",
        ],
        dir,
    );
    let mut a = vec![
        "--target=x86_64-linux-gnu",
        "-fuse-ld=lld",
        "-nostdlib",
        "-static",
        "-Wl,-e,main",
        "big.c",
        "-o",
        "big.elf",
    ];
    a.extend(&flags);
    run("clang", &a, dir);
    for name in ["big.macho", "big.elf"] {
        let data = std::fs::read(dir.join(name)).expect("read");
        let mut times = Vec::new();
        let mut built = None;
        for _ in 0..21 {
            let t = std::time::Instant::now();
            built = Some(build_from_elf(&data, &[]).expect("build"));
            times.push(t.elapsed());
        }
        times.sort();
        let b = built.expect("built");
        println!(
            "{name}: source {} bytes, {} entries ({} skipped), table {} bytes, {} rows, {} rules, median build {:.3} ms",
            b.stats.source_bytes,
            b.stats.entries,
            b.stats.entries_skipped,
            b.stats.table_bytes,
            b.stats.rows,
            b.stats.palette,
            times[times.len() / 2].as_secs_f64() * 1e3
        );
    }
}
