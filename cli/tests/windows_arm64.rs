//! A Windows ARM64 image's unwind table (`engine::unwind::builders::pe_arm64`) says what
//! `llvm-readobj --unwind` says of the same image, and walks a stack laid out from it
//! (issue 39).
//!
//! `CALLS_C` (a chain of functions with different prologues: lr only, saved register
//! pairs, `save_next`, d8/d9, a frame of 100 000 bytes through `__chkstk`, one of 3 000)
//! is compiled for `aarch64-pc-windows-msvc` by clang three ways (`-O2`, which gives
//! packed unwind data and `.xdata` records; `-O1 -fno-omit-frame-pointer`, which gives
//! `add fp`/`mov fp` frames, epilogues packed by the `E` bit and a packed chained
//! function; `-mbranch-protection=pac-ret+b-key`) and linked by `lld-link
//! /machine:arm64` without a C runtime. Then:
//!
//! - for every `RuntimeFunction` llvm-readobj prints, the instructions it prints for the
//!   prologue (and the epilogue scopes, or the `E` bit's epilogue at the function's
//!   end) are replayed here, from their text, into the CFA (`sp`/`x29` + offset) and the
//!   slots of lr and x19–x29; at every instruction of the function our table's rule must
//!   say the same (packed data's epilogue, which llvm-readobj 14 does not print, is
//!   checked in the body only);
//! - a stack is laid out from that reference decode, frame 0 at the first instruction of
//!   `ext` (a leaf: no `.pdata`, its return address in lr), each caller's frame below
//!   the return address after its `bl` (`llvm-objdump -d` gives the calls), and the walk
//!   from our table (no frame-pointer chain, no scanning) gives exactly those frames, pc
//!   and sp, with `unwind_source` `pe_arm64`; and so does `postmortem-walk` on a
//!   Windows ARM64 minidump of that stack (a `CONTEXT_ARM64`, the image named by its file
//!   name and code id, found under `--symbols`).
//!
//! Needs clang, lld-link, llvm-readobj and llvm-objdump (what `test.sh` installs): a
//! machine without them fails here, with a message saying which.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use engine::dump::{Arch, MemoryMap, Module, RegisterSet};
use engine::unwind::rule::{RuleRecord, SlotKind};
use engine::unwind::{build_from_elf, UnwindSource, UnwindTable};
use engine::walk::aarch64::Aarch64;
use engine::walk::{walk_thread, CodeReader, ModuleUnwind, Trust, WalkContext, WalkOptions};

const IMAGE_BASE: u64 = 0x1_4000_0000;
const STACK_AT: u64 = 0x10_0000;

/// Each function calls the next once; `ext` (another file) is a leaf.
const CALLS_C: &str = r#"
void ext(int *p);
__declspec(noinline) int inner(int a) { int x = a; ext(&x); return x; }
__declspec(noinline) int pairs(int a, int b, int c) { int x = inner(a); return x * b + c + a * b; }
__declspec(noinline) int big(int a) { volatile char buf[100000]; buf[a & 1023] = 1; return pairs(a, buf[3], a + 1) + buf[a & 7]; }
__declspec(noinline) int mid(int a) { volatile char buf[3000]; buf[a & 1023] = 1; return big(a) + buf[5]; }
__declspec(noinline) double fl(double a, double b) { double x = (double)mid((int)a); return x + a * b + b; }
__declspec(noinline) int many(int a, int b, int c, int d, int e, int f, int g) { int x = (int)fl(a, b); return x + a + b + c + d + e + f + g + x * c; }
int entry(void) { return many(1, 2, 3, 4, 5, 6, 7) + 1; }
"#;

const EXT_C: &str = "void ext(int *p) { *p += 1; }\nvoid __chkstk(void) {}\n";

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (install clang, lld and llvm)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("calls.c");
    let ext = dir.join("ext.c");
    std::fs::write(&src, CALLS_C).unwrap();
    std::fs::write(&ext, EXT_C).unwrap();
    let obj = dir.join(format!("{name}.obj"));
    let ext_obj = dir.join("ext.obj");
    let target = "--target=aarch64-pc-windows-msvc";
    run(Command::new("clang")
        .arg(target)
        .args(flags)
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    run(Command::new("clang")
        .args([target, "-O2", "-c"])
        .arg(&ext)
        .arg("-o")
        .arg(&ext_obj));
    let exe = dir.join(format!("{name}.exe"));
    link(&[&obj, &ext_obj], &exe);
    exe
}

/// Links `objs` into the program `exe` (entry `entry`, no C runtime) with lld-link.
fn link(objs: &[&Path], exe: &Path) {
    run(Command::new("lld-link")
        .args([
            "/machine:arm64",
            "/entry:entry",
            "/subsystem:console",
            "/nodefaultlib",
        ])
        .args(objs)
        .arg(format!("/out:{}", exe.display())));
}

/// One instruction of a prologue or epilogue, from llvm-readobj's text.
#[derive(Debug, Clone, PartialEq)]
enum Inst {
    Alloc(i64),
    /// Registers (DWARF numbers; d registers as `None`) at `sp + at` after `sp` moved
    /// down by `pre`.
    Store {
        regs: Vec<Option<u8>>,
        at: i64,
        pre: i64,
    },
    SaveNext,
    SetFp(i64),
    Nothing,
}

fn reg(name: &str) -> Option<u8> {
    match name {
        "lr" | "x30" => Some(30),
        "fp" | "x29" => Some(29),
        x if x.starts_with('x') => x[1..].parse().ok(),
        _ => None,
    }
}

fn imm(s: &str) -> i64 {
    s.trim_matches(|c: char| c == '#' || c == ']' || c == '!' || c == ' ')
        .parse()
        .unwrap_or_else(|_| panic!("immediate {s:?}"))
}

/// llvm-readobj's text of one unwind code (`ldp`/`ldr`/`add sp` in epilogues mirror
/// `stp`/`str`/`sub sp`).
fn parse_inst(text: &str) -> Inst {
    let text = text.trim();
    let (op, rest) = text.split_once(' ').unwrap_or((text, ""));
    let args: Vec<&str> = rest.split(", ").map(str::trim).collect();
    match op {
        "sub" | "add" if args[0] == "sp" => Inst::Alloc(imm(args.last().unwrap())),
        "add" if args[0] == "fp" || args[0] == "x29" => Inst::SetFp(imm(args[2])),
        "mov" if args[0] == "fp" || args[0] == "x29" => Inst::SetFp(0),
        "stp" | "ldp" | "str" | "ldr" => {
            let n = if op.ends_with('p') { 2 } else { 1 };
            let regs = args[..n].iter().map(|r| reg(r)).collect();
            let addr = &args[n..];
            if addr.len() == 2 && addr[0] == "[sp]" {
                // post-indexed load: the pre-indexed store's mirror
                Inst::Store {
                    regs,
                    at: 0,
                    pre: imm(addr[1]),
                }
            } else if addr.len() == 2 && addr[1].ends_with('!') {
                Inst::Store {
                    regs,
                    at: 0,
                    pre: -imm(addr[1]),
                }
            } else if addr.len() == 2 {
                Inst::Store {
                    regs,
                    at: imm(addr[1]),
                    pre: 0,
                }
            } else {
                Inst::Store {
                    regs,
                    at: 0,
                    pre: 0,
                }
            }
        }
        "save" | "restore" if rest == "next" => Inst::SaveNext,
        "nop" | "end" => Inst::Nothing,
        other => panic!("unknown instruction {other:?} in {text:?}"),
    }
}

/// The frame a replay of instructions reaches: (CFA register, CFA offset, lr at CFA + n
/// or in lr, x19–x29 at CFA + n).
type Frame = (u8, i64, Option<i64>, BTreeMap<u8, i64>);

/// Replays `insts` given last first (as unwind codes are) in execution order.
fn replay(insts: &[Inst]) -> Frame {
    let (mut moved, mut fp, mut saved) = (0i64, None, BTreeMap::new());
    let mut last: Option<(Option<u8>, i64)> = None;
    let store = |saved: &mut BTreeMap<u8, i64>, r: Option<u8>, off: i64| {
        if let Some(r) = r.filter(|r| (19..=30).contains(r)) {
            saved.insert(r, off);
        }
    };
    for inst in insts.iter().rev() {
        match inst {
            Inst::Alloc(n) => moved += n,
            Inst::Store { regs, at, pre } => {
                moved += pre;
                for (k, r) in regs.iter().enumerate() {
                    store(&mut saved, *r, at + 8 * k as i64 - moved);
                }
                last = Some((regs[0], *at));
            }
            Inst::SaveNext => {
                let (r, at) = last.unwrap();
                let next = r.map(|r| r + 2).filter(|r| *r < 28);
                store(&mut saved, next, at + 16 - moved);
                store(&mut saved, next.map(|r| r + 1), at + 24 - moved);
                last = Some((next, at + 16));
            }
            Inst::SetFp(n) => fp = Some(moved - n),
            Inst::Nothing => {}
        }
    }
    let lr = saved.remove(&30);
    match fp {
        Some(k) => (29, k, lr, saved),
        None => (31, moved, lr, saved),
    }
}

/// What our rule says, in the same terms.
fn frame_of(r: &RuleRecord) -> Frame {
    let lr = (r.ra.kind() == Some(SlotKind::Offset)).then_some(i64::from(r.ra.value));
    let saved = (19u8..=29)
        .filter_map(|reg| {
            let s = r.reg(Arch::Aarch64, u16::from(reg))?;
            (s.kind() == Some(SlotKind::Offset)).then_some((reg, i64::from(s.value)))
        })
        .collect();
    (r.cfa.reg, i64::from(r.cfa.value), lr, saved)
}

/// One `RuntimeFunction` as llvm-readobj prints it.
#[derive(Debug, Default)]
struct Reference {
    rva: u64,
    length: u64,
    packed: bool,
    /// (text, code bytes) in printed order.
    prologue: Vec<(String, usize)>,
    /// (start offset, instructions) of epilogue scopes, or of the `E` bit's epilogue.
    epilogues: Vec<(u64, Vec<Inst>)>,
    /// With the `E` bit: the byte index of the epilogue's first code.
    e_index: Option<usize>,
    /// llvm-readobj prints `INVALID!` for the prologue (packed `RegI` 1 with `CR` 1: no
    /// unwind code stores x19 and lr with a pre-decrement): nothing to compare against.
    invalid: bool,
}

fn value(line: &str) -> &str {
    line.split_once(':').map_or("", |(_, v)| v.trim())
}

fn references(exe: &Path) -> Vec<Reference> {
    let text = run(Command::new("llvm-readobj").arg("--unwind").arg(exe));
    let mut out: Vec<Reference> = Vec::new();
    let mut list: Option<&str> = None;
    let mut scope_start = 0u64;
    let mut packed_epilogue = Vec::new();
    for line in text.lines().map(str::trim) {
        let cur = out.last_mut();
        match line {
            "RuntimeFunction {" => out.push(Reference::default()),
            "Prologue [" => list = Some("pro"),
            "Epilogue [" => list = Some("epi"),
            "Opcodes [" => list = Some("scope"),
            "]" => {
                if list == Some("epi") {
                    let r = cur.unwrap();
                    let words = packed_epilogue.len() as u64; // + ret - end
                    r.epilogues
                        .push((r.length - 4 * words, std::mem::take(&mut packed_epilogue)));
                }
                list = None;
            }
            l if l.starts_with("Function:") => {
                let v = value(l);
                let hex = v.rsplit("0x").next().unwrap().trim_end_matches(')');
                cur.unwrap().rva = u64::from_str_radix(hex, 16).unwrap() - IMAGE_BASE;
            }
            l if l.starts_with("FunctionLength:") => {
                cur.unwrap().length = value(l).parse().unwrap()
            }
            l if l.starts_with("Fragment:") => cur.unwrap().packed = true,
            l if l.starts_with("EpilogueOffset:") => {
                cur.unwrap().e_index = Some(value(l).parse().unwrap());
            }
            l if l.starts_with("StartOffset:") => {
                scope_start = value(l).parse::<u64>().unwrap() * 4
            }
            l if list.is_some() => {
                let (bytes, inst) = match l.split_once(';') {
                    Some((hex, t)) => ((hex.trim().len() - 2) / 2, t.trim()),
                    None => (0, l),
                };
                let r = cur.unwrap();
                r.invalid |= inst.starts_with("INVALID");
                match list {
                    Some("pro") if r.invalid => {}
                    Some("pro") if inst != "end" => r.prologue.push((inst.to_string(), bytes)),
                    Some("epi") => packed_epilogue.push(parse_inst(inst)),
                    Some("scope") if inst == "end" => {}
                    Some("scope") => match r.epilogues.last_mut() {
                        Some((s, v)) if *s == scope_start => v.push(parse_inst(inst)),
                        _ => r.epilogues.push((scope_start, vec![parse_inst(inst)])),
                    },
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // llvm-readobj prints no `E` epilogue that starts at the prologue's first code: it
    // is the prologue's codes from that byte on, ending at the function's end
    for r in out.iter_mut().filter(|r| r.epilogues.is_empty()) {
        let Some(index) = r.e_index else { continue };
        let mut at = 0;
        let mut insts = Vec::new();
        for (text, bytes) in &r.prologue {
            if at >= index {
                insts.push(parse_inst(text));
            }
            at += bytes;
        }
        let start = r.length - 4 * (insts.len() as u64 + 1);
        r.epilogues.push((start, insts));
    }
    out
}

/// The frame the reference gives at `offset` into the function, or `None` where it
/// prints nothing to check against (packed data's epilogue).
fn reference_at(r: &Reference, offset: u64) -> Option<Frame> {
    let prologue: Vec<Inst> = r.prologue.iter().map(|(t, _)| parse_inst(t)).collect();
    let n = (offset / 4) as usize;
    if n < prologue.len() {
        return Some(replay(&prologue[prologue.len() - n..]));
    }
    for (start, insts) in &r.epilogues {
        if offset >= *start && offset <= start + 4 * insts.len() as u64 {
            let k = ((offset - start) / 4) as usize;
            return Some(replay(&insts[k.min(insts.len())..]));
        }
    }
    if r.packed && offset + 4 * (prologue.len() as u64 + 1) >= r.length {
        return None;
    }
    Some(replay(&prologue))
}

struct NoCode;
impl CodeReader for NoCode {
    fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
        None
    }
}

/// `bl` call sites: callee RVA → the return address's RVA.
fn call_sites(exe: &Path) -> BTreeMap<u64, u64> {
    let text = run(Command::new("llvm-objdump").arg("-d").arg(exe));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let Some(i) = fields.iter().position(|f| *f == "bl") {
            let target = fields[i + 1].trim_start_matches("0x");
            out.insert(
                u64::from_str_radix(target, 16).unwrap() - IMAGE_BASE,
                addr + 4 - IMAGE_BASE,
            );
        }
    }
    out
}

/// Checks every instruction of every function; returns the references.
fn decode_agrees(exe: &Path, table: &UnwindTable<'_>) -> Vec<Reference> {
    let refs = references(exe);
    assert!(refs.len() >= 6, "{refs:?}");
    let mut checked = 0;
    for r in refs.iter().filter(|r| !r.invalid) {
        for offset in (0..r.length).step_by(4) {
            let Some(want) = reference_at(r, offset) else {
                continue;
            };
            let rule = table
                .find(r.rva + offset)
                .unwrap_or_else(|| panic!("no rule at {:#x}", r.rva + offset));
            assert_eq!(rule.record.source(), Some(UnwindSource::PeArm64));
            assert_eq!(
                frame_of(&rule.record),
                want,
                "{:#x} + {offset:#x}: {r:?}",
                r.rva
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked}");
    refs
}

/// A stack laid out from the reference: frame 0 at `ext`'s first instruction, each
/// caller at its `bl`'s return address. Returns the stack, registers and frames.
fn lay_out(
    refs: &[Reference],
    calls: &BTreeMap<u64, u64>,
    ext: u64,
) -> (Vec<u64>, RegisterSet, Vec<(u64, u64)>) {
    let mut frames = vec![(ext, 0u64)];
    let mut states: Vec<Frame> = vec![(31, 0, None, BTreeMap::new())];
    let mut rva = ext;
    while let Some(&ret) = calls.get(&rva) {
        let r = refs
            .iter()
            .find(|r| r.rva <= ret - 4 && ret - 4 < r.rva + r.length)
            .expect("the caller has unwind data");
        frames.push((ret, 0));
        states.push(reference_at(r, ret - 4 - r.rva).unwrap());
        rva = r.rva;
    }
    // sp of each frame: the CFA of the one before; sizes from the sp-based CFA or, for
    // an fp-based one, from how far the frame's saves reach (x29 is placed to match)
    let mut words: Vec<u64> = vec![0; 1 << 15];
    let mut sp = STACK_AT;
    let mut fps = Vec::new();
    for (i, st) in states.iter().enumerate() {
        frames[i].1 = sp;
        let size = if st.0 == 31 {
            st.1
        } else {
            0x400.max(st.1 + 64)
        };
        let cfa = sp + size as u64;
        fps.push(if st.0 == 29 {
            Some(cfa - st.1 as u64)
        } else {
            None
        });
        let ret = frames.get(i + 1).map_or(0, |f| IMAGE_BASE + f.0);
        let slot = |off: i64| ((cfa as i64 + off) as u64 - STACK_AT) as usize / 8;
        if let Some(off) = st.2 {
            words[slot(off)] = ret;
        }
        sp = cfa;
    }
    // x29 as each frame holds it: its own frame pointer, else its caller's (passed on)
    let x29_of = |i: usize| fps[i..].iter().find_map(|f| *f).unwrap_or(0);
    for (i, st) in states.iter().enumerate() {
        if let Some(off) = st.3.get(&29) {
            let cfa = if i + 1 < frames.len() {
                frames[i + 1].1
            } else {
                sp
            };
            words[((cfa as i64 + off) as u64 - STACK_AT) as usize / 8] = x29_of(i + 1);
        }
    }
    let mut regs = RegisterSet::new(Arch::Aarch64);
    regs.set(32, IMAGE_BASE + ext);
    regs.set(31, STACK_AT);
    regs.set(30, IMAGE_BASE + frames.get(1).map_or(0, |f| f.0));
    regs.set(29, x29_of(0));
    let frames = frames
        .iter()
        .map(|&(pc, sp)| (IMAGE_BASE + pc, sp))
        .collect();
    (words, regs, frames)
}

fn walk(table: &[u8], stack: &[u64], regs: &RegisterSet) -> Vec<(u64, u64)> {
    let frames = walk_frames(table, stack, regs);
    for f in frames.iter().skip(1) {
        assert_eq!(f.2, Trust::Cfi, "{frames:x?}");
    }
    frames.iter().map(|f| (f.0, f.1)).collect()
}

/// The walk of `stack` from `regs` on `table` alone: (pc, sp, trust) of each frame, every
/// caller's from the table's `.pdata` rules.
fn walk_frames(table: &[u8], stack: &[u64], regs: &RegisterSet) -> Vec<(u64, u64, Trust)> {
    let bytes: Vec<u8> = stack.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mem = MemoryMap::new(vec![(STACK_AT, &bytes[..])]);
    let modules = vec![Module {
        name: "calls.exe".into(),
        base: IMAGE_BASE,
        end: IMAGE_BASE + 0x10_0000,
        load_base: IMAGE_BASE,
        main: true,
        ..Module::default()
    }];
    let tables = vec![Some(ModuleUnwind::Table(UnwindTable::open(table).unwrap()))];
    let mut options = WalkOptions::default();
    options.enable_scan = false;
    options.enable_fp = false;
    let ctx = WalkContext {
        memory: &mem,
        modules: &modules,
        tables: &tables,
        code: &NoCode,
        options: &options,
        pac_mask: 0,
        pac_signed_seen: None,
    };
    let r = walk_thread(&Aarch64, &ctx, regs);
    for f in r.frames.iter().skip(1) {
        assert_eq!(
            f.unwind_source,
            Some(UnwindSource::PeArm64),
            "{:?}",
            r.frames
        );
    }
    r.frames
        .iter()
        .map(|f| (f.pc, f.sp.unwrap_or(0), f.trust))
        .collect()
}

fn check(name: &str, flags: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), name, flags);
    let image = std::fs::read(&exe).unwrap();
    let built = build_from_elf(&image, &[]).unwrap();
    assert_eq!(built.stats.entries_skipped, 0, "{:?}", built.stats);
    let table = UnwindTable::open(&built.bytes).unwrap();
    let refs = decode_agrees(&exe, &table);
    let calls = call_sites(&exe);
    // `ext` and `__chkstk` have no .pdata; `ext` is called first (from `inner`)
    let ext = *calls
        .iter()
        .filter(|(rva, _)| !refs.iter().any(|r| r.rva == **rva))
        .min_by_key(|(_, ret)| **ret)
        .expect("ext, a leaf without .pdata")
        .0;
    let (stack, regs, want) = lay_out(&refs, &calls, ext);
    assert!(want.len() >= 7, "{want:x?}");
    assert_eq!(walk(&built.bytes, &stack, &regs), want);
    dump_walk_equals(&exe, &image, &stack, &regs, &want);
}

/// A Windows ARM64 minidump of one thread: `SystemInfo` (ARM64, Windows NT),
/// `ThreadList` (a `CONTEXT_ARM64` with its control and integer registers, the stack),
/// `ModuleList` (the image at its base with its PE timestamp and size, no CodeView
/// record) and `MemoryList` (the stack), as dbghelp lays them out.
fn minidump(image: &[u8], module: &str, stack: &[u64], regs: &RegisterSet) -> Vec<u8> {
    let pe_u32 = |at: usize| u32::from_le_bytes(image[at..at + 4].try_into().unwrap());
    let pe = pe_u32(0x3c) as usize;
    let (timestamp, size_of_image) = (pe_u32(pe + 8), pe_u32(pe + 24 + 56));
    let mut d: Vec<u8> = vec![0; 32 + 4 * 12];
    let put = |d: &mut Vec<u8>, bytes: &[u8]| -> (u32, u32) {
        while !d.len().is_multiple_of(16) {
            d.push(0);
        }
        let at = d.len();
        d.extend_from_slice(bytes);
        (
            u32::try_from(bytes.len()).unwrap(),
            u32::try_from(at).unwrap(),
        )
    };
    let le = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|w| w.to_le_bytes()).collect() };
    // CONTEXT_ARM64 (0x390 bytes): flags (arm64 | control | integer), cpsr, x0–x28, fp,
    // lr, sp, pc, then the vector and debug registers
    let mut ctx = le(&[0x0040_0003, 0]);
    for r in 0..=32u16 {
        ctx.extend(regs.get(r).unwrap_or(0).to_le_bytes());
    }
    ctx.resize(0x390, 0);
    let ctx_loc = put(&mut d, &ctx);
    let bytes: Vec<u8> = stack.iter().flat_map(|w| w.to_le_bytes()).collect();
    let stack_loc = put(&mut d, &bytes);
    let units: Vec<u16> = module.encode_utf16().collect();
    let mut name: Vec<u8> = (units.len() as u32 * 2).to_le_bytes().to_vec();
    name.extend(units.iter().chain([&0]).flat_map(|u| u.to_le_bytes()));
    let name_loc = put(&mut d, &name);
    let stack_desc = |loc: (u32, u32)| {
        let mut v = STACK_AT.to_le_bytes().to_vec();
        v.extend(le(&[loc.0, loc.1]));
        v
    };
    let mut threads = le(&[1, 0x1234, 0, 0, 0]);
    threads.extend(0u64.to_le_bytes()); // teb
    threads.extend(stack_desc(stack_loc));
    threads.extend(le(&[ctx_loc.0, ctx_loc.1]));
    let mut modules = le(&[1]);
    modules.extend(IMAGE_BASE.to_le_bytes());
    modules.extend(le(&[size_of_image, 0, timestamp, name_loc.1]));
    modules.extend([0u8; 52]); // VS_FIXEDFILEINFO
    modules.extend(le(&[0, 0, 0, 0])); // no CodeView record, no misc record
    modules.extend([0u8; 16]);
    let mut memory = le(&[1]);
    memory.extend(stack_desc(stack_loc));
    // ARM64 (12), level 8, revision 0, 1 CPU, workstation; Windows 10.0.22621, Win32 NT
    let mut system = vec![12, 0, 8, 0, 0, 0, 1, 1];
    system.extend(le(&[10, 0, 22621, 2, 0, 0]));
    system.extend([0u8; 24]);
    let streams = [(3u32, threads), (4, modules), (5, memory), (7, system)];
    let mut dir = Vec::new();
    for (kind, bytes) in streams {
        let loc = put(&mut d, &bytes);
        dir.extend(le(&[kind, loc.0, loc.1]));
    }
    d[32..32 + dir.len()].copy_from_slice(&dir);
    let header = le(&[0x504d_444d, 0xa793, 4, 32, 0, 0, 0, 0]);
    d[..32].copy_from_slice(&header);
    d
}

/// `postmortem-walk` on a minidump of the laid-out stack gives the laid-out frames, every
/// caller from the image's own unwind data.
fn dump_walk_equals(
    exe: &Path,
    image: &[u8],
    stack: &[u64],
    regs: &RegisterSet,
    want: &[(u64, u64)],
) {
    let dir = exe.parent().unwrap();
    let module = exe.file_name().unwrap().to_str().unwrap();
    let dump = dir.join("stack.dmp");
    std::fs::write(&dump, minidump(image, module, stack, regs)).unwrap();
    let out = run(Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
        .arg(&dump)
        .arg("--symbols")
        .arg(dir)
        .args(["--no-system-debug", "--format", "json"])
        .env_remove("DEBUGINFOD_URLS"));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hex = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0)
    };
    let frames = report["threads"][0]["frames"].as_array().unwrap();
    let got: Vec<(u64, u64)> = frames
        .iter()
        .filter(|f| f["inlined"] != true)
        .map(|f| (hex(&f["pc"]), hex(&f["sp"])))
        .collect();
    assert_eq!(got, want, "postmortem-walk: {report}");
    for f in frames.iter().skip(1) {
        assert_eq!(f["unwind_source"], "pe_arm64", "{f}");
    }
}

#[test]
fn arm64_unwind_equals_llvm_readobj_optimized() {
    check("o2", &["-O2"]);
}

#[test]
fn arm64_unwind_equals_llvm_readobj_frame_pointer() {
    check("fp", &["-O1", "-fno-omit-frame-pointer"]);
}

#[test]
fn arm64_unwind_equals_llvm_readobj_branch_protection() {
    check("pac", &["-O2", "-mbranch-protection=pac-ret+b-key"]);
}

/// Every packed form clang does not emit (each `RegF`, `RegI`, `H` and `CR` 0, 1, 3, small
/// and large frames): an image whose `.pdata` holds one entry of each, over functions of
/// 128 bytes, decodes as llvm-readobj prints it, at every instruction of each prologue and
/// body.
#[test]
fn arm64_packed_forms_equal_llvm_readobj() {
    let dir = tempfile::tempdir().unwrap();
    let (mut text, mut pdata) = (
        String::from(".text\n"),
        String::from(".section .pdata,\"dr\"\n"),
    );
    let mut n = 0;
    for reg_f in 0..8u32 {
        for reg_i in 0..11u32 {
            for h in 0..2u32 {
                for cr in [0u32, 1, 3] {
                    for frame in [1u32, 2, 5, 40, 300, 511] {
                        let int = reg_i * 8 + if cr == 1 { 8 } else { 0 };
                        let fp = if reg_f > 0 { reg_f * 8 + 8 } else { 0 };
                        let save = (int + fp + 64 * h + 15) & !15;
                        if frame * 16 < save + if cr == 3 { 16 } else { 0 } {
                            continue;
                        }
                        let word = 1
                            | (128 / 4) << 2
                            | reg_f << 13
                            | reg_i << 16
                            | h << 20
                            | cr << 21
                            | frame << 23;
                        text.push_str(&format!(".globl f{n}\nf{n}:\n  .space 128\n"));
                        pdata.push_str(&format!("  .long f{n}@IMGREL\n  .long {word:#x}\n"));
                        n += 1;
                    }
                }
            }
        }
    }
    let src = dir.path().join("packed.s");
    std::fs::write(&src, text + &pdata).unwrap();
    let obj = dir.path().join("packed.obj");
    let target = "--target=aarch64-pc-windows-msvc";
    run(Command::new("clang")
        .args([target, "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    let exe = dir.path().join("packed.dll");
    run(Command::new("lld-link")
        .args(["/machine:arm64", "/dll", "/noentry", "/base:0x140000000"])
        .arg(&obj)
        .arg(format!("/out:{}", exe.display())));
    let image = std::fs::read(&exe).unwrap();
    let built = build_from_elf(&image, &[]).unwrap();
    assert_eq!(built.stats.entries, n, "{:?}", built.stats);
    let refs = decode_agrees(&exe, &UnwindTable::open(&built.bytes).unwrap());
    assert_eq!(refs.len(), n);
    // the RegI 1, CR 1 forms (stp x19, lr, [sp, #-N]!): 60 of them
    assert_eq!(refs.iter().filter(|r| r.invalid).count(), 60);
}

/// Functions whose frames hold an interrupted frame, as ntdll's dispatchers' do:
/// `dispatcher`'s `.xdata` says `MSFT_OP_CONTEXT` (an `ARM64_NT_CONTEXT` at its `sp`,
/// `KiUserExceptionDispatcher`'s form), `mframe`'s `MSFT_OP_MACHINE_FRAME` then a 32-byte
/// allocation (the interrupted `sp` and pc at `sp + 32`). `victim` is interrupted, `entry`
/// called it; `handler` is a leaf without `.pdata`.
const DISPATCH_S: &str = r#"
    .text
    .p2align 2
    .globl entry
    .def entry; .scl 2; .type 32; .endef
    .seh_proc entry
entry:
    stp x29, x30, [sp, #-16]!
    .seh_save_fplr_x 16
    mov x29, sp
    .seh_set_fp
    .seh_endprologue
    bl victim
    .seh_startepilogue
    ldp x29, x30, [sp], #16
    .seh_save_fplr_x 16
    .seh_endepilogue
    ret
    .seh_endproc

    .globl victim
    .def victim; .scl 2; .type 32; .endef
    .seh_proc victim
victim:
    stp x29, x30, [sp, #-32]!
    .seh_save_fplr_x 32
    str x19, [sp, #16]
    .seh_save_reg x19, 16
    .seh_endprologue
    bl handler
    .seh_startepilogue
    ldr x19, [sp, #16]
    .seh_save_reg x19, 16
    ldp x29, x30, [sp], #32
    .seh_save_fplr_x 32
    .seh_endepilogue
    ret
    .seh_endproc

    .globl dispatcher
    .def dispatcher; .scl 2; .type 32; .endef
    .seh_proc dispatcher
dispatcher:
    .seh_context
    .seh_endprologue
    bl handler
    brk #0xf000
    .seh_endproc

    .globl mframe
    .def mframe; .scl 2; .type 32; .endef
    .seh_proc mframe
mframe:
    .seh_pushframe
    sub sp, sp, #32
    .seh_stackalloc 32
    .seh_endprologue
    bl handler
    brk #0xf000
    .seh_endproc

    .globl handler
    .def handler; .scl 2; .type 32; .endef
handler:
    ret
"#;

/// Label → address, from `llvm-objdump -d`'s labels of `file`.
fn labels(file: &Path) -> BTreeMap<String, u64> {
    let text = run(Command::new("llvm-objdump").arg("-d").arg(file));
    text.lines()
        .filter_map(|l| {
            let (addr, name) = l.strip_suffix(">:")?.split_once(" <")?;
            Some((name.to_owned(), u64::from_str_radix(addr, 16).ok()?))
        })
        .collect()
}

/// Puts `words` into `stack` at address `at`.
fn place(stack: &mut [u64], at: u64, words: &[u64]) {
    let i = ((at - STACK_AT) / 8) as usize;
    stack[i..i + words.len()].copy_from_slice(words);
}

/// The custom stack codes: llvm-readobj names them in `dispatcher`'s and `mframe`'s
/// prologues (the reference decode), and a walk through each, on a stack laid out as the
/// program's instructions leave it, reaches the interrupted frame at its exact pc and its
/// callers: through the context, `victim` at its first instruction (its return address
/// still in the context's lr); through the machine frame, `victim` after its first
/// instruction (its lr stored, its `x19` not yet), where the rule just before it would
/// unwind otherwise. The same stacks as Windows ARM64 minidumps through
/// `postmortem-walk`.
#[test]
fn arm64_dispatcher_frames_walk_to_the_frame_they_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("dispatch.s");
    std::fs::write(&src, DISPATCH_S).unwrap();
    let obj = dir.path().join("dispatch.obj");
    run(Command::new("clang")
        .args(["--target=aarch64-pc-windows-msvc", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    let exe = dir.path().join("calls.exe");
    link(&[&obj], &exe);
    let image = std::fs::read(&exe).unwrap();
    // the image keeps no symbols: the object's, placed at the image's `.text` (its only code)
    let text = labels(&exe)[".text"] - IMAGE_BASE;
    let sym = labels(&obj);
    let at = |name: &str| {
        text + *sym
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in {sym:?}"))
    };
    let refs = references(&exe);
    let prologue = |name: &str| -> Vec<String> {
        let r = refs.iter().find(|r| r.rva == at(name)).expect(name);
        r.prologue.iter().map(|(t, _)| t.clone()).collect()
    };
    assert_eq!(prologue("dispatcher"), ["context"]);
    assert_eq!(prologue("mframe"), ["sub sp, #32", "machine frame"]);
    let built = build_from_elf(&image, &[]).unwrap();
    assert_eq!(built.stats.entries_skipped, 0, "{:?}", built.stats);
    let (entry_ret, victim) = (IMAGE_BASE + at("entry") + 12, IMAGE_BASE + at("victim"));
    let (s0, s2) = (STACK_AT, STACK_AT + 0x400);

    // through the context: victim interrupted at its first instruction
    let mut stack = vec![0u64; 0x200];
    let mut context = vec![0x0040_0003u64]; // flags (control, integer), cpsr
    context.extend((0..=28u64).map(|r| if r == 19 { 0x1919 } else { 0 }));
    context.extend([s2, entry_ret, s2, victim]); // fp, lr, sp, pc
    place(&mut stack, s0, &context);
    let mut regs = RegisterSet::new(Arch::Aarch64);
    regs.set(32, IMAGE_BASE + at("handler"));
    regs.set(31, s0);
    regs.set(30, IMAGE_BASE + at("dispatcher") + 4);
    let (cfi, context) = (Trust::Cfi, Trust::Context);
    let want = vec![
        (IMAGE_BASE + at("handler"), s0, context),
        (IMAGE_BASE + at("dispatcher") + 4, s0, cfi),
        // the context's registers: a leaf's caller in its lr, as in frame 0
        (victim, s2, context),
        (entry_ret, s2, cfi),
    ];
    let got = walk_frames(&built.bytes, &stack, &regs);
    assert_eq!(got, want, "through the context");
    let want: Vec<(u64, u64)> = want.iter().map(|f| (f.0, f.1)).collect();
    dump_walk_equals(&exe, &image, &stack, &regs, &want);

    // through the machine frame: victim interrupted after its `stp x29, x30, [sp, #-32]!`
    let mut stack = vec![0u64; 0x200];
    place(&mut stack, s0 + 32, &[s2, victim + 4]);
    place(&mut stack, s2, &[s2 + 32, entry_ret]); // victim's x29 and lr
    regs.set(30, IMAGE_BASE + at("mframe") + 8);
    let want = vec![
        (IMAGE_BASE + at("handler"), s0),
        (IMAGE_BASE + at("mframe") + 8, s0),
        (victim + 4, s2),
        (entry_ret, s2 + 32),
    ];
    assert_eq!(
        walk(&built.bytes, &stack, &regs),
        want,
        "through the machine frame"
    );
    dump_walk_equals(&exe, &image, &stack, &regs, &want);
}
