//! A Windows x86 walk from a PDB's frame data is the walk from the `.sym` file dump_syms
//! makes of the same PDB (issue 39).
//!
//! Each case compiles `CRASH_C` for `i686-pc-windows-msvc` with clang (`-O2 -g
//! -gcodeview`, with and without `-fomit-frame-pointer`; clang emits `.cv_fpo_data`) and
//! links it with `lld-link /debug` (which writes the PDB's FrameData stream), without a C
//! runtime (`/nodefaultlib`, an explicit entry point). Then:
//!
//! - the records `engine::unwind::builders::pdb_frame_data` reads from the PDB equal the
//!   `STACK WIN` records of `dump_syms PDB`, one for one, and every function the `.sym`
//!   file names (`FUNC`) is covered by them;
//! - the unwind table built from the PDB and the one built from the `.sym` file give the
//!   same frame data at every byte of the image's code, and a module's tables made from
//!   the image and its PDB, or from the PDB alone, are that table;
//! - for every record, a stack is laid out as that record (frame 0 at its first byte) and
//!   the records at the program's real call sites say (`llvm-objdump -d` gives the calls:
//!   `middle` calls `leaf`, `outer` calls `middle`): both walks give exactly the laid-out
//!   frames, pc and stack pointer, in order; and so does `postmortem-walk` on a Windows
//!   x86 minidump of that stack, from the image and its PDB and from the `.sym` file, as
//!   minidump-stackwalk does from the `.sym` file.
//!
//! Damaged copies of each PDB are read too: an error or records, never a panic.
//!
//! Needs clang, lld-link, llvm-objdump, dump_syms and minidump-stackwalk (what `test.sh` installs): a
//! machine without them fails here, with a message saying which.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use engine::binary::FileBytes;
use engine::breakpad::stack_win::{self, WinKind, WinRecord};
use engine::breakpad::unwind::build_from_breakpad;
use engine::dump::{Arch, MemoryMap, Module, RegisterSet};
use engine::process::{build_tables, on_demand_tables, TableInput};
use engine::unwind::builders::pdb_frame_data;
use engine::unwind::{UnwindSource, UnwindTable};
use engine::walk::x86::X86;
use engine::walk::{walk_thread, CodeReader, ModuleUnwind, Trust, WalkContext, WalkOptions};

/// The image base lld-link gives a 32-bit executable.
const IMAGE_BASE: u64 = 0x40_0000;

/// Where the laid-out stacks start.
const STACK_AT: u64 = 0x10_0000;

/// Three functions of three calling conventions, with locals, saved registers and
/// parameters; `entry` jumps to `outer` (a tail call), so `outer` is the outermost frame.
const CRASH_C: &str = r#"
static volatile int sink;
__declspec(noinline) int __stdcall leaf(int *p, int a, int b) {
    int v[8];
    for (int i = 0; i < 8; i++) v[i] = a * i + b;
    sink = v[a & 7];
    return *p + v[b & 7];
}
__declspec(noinline) int __cdecl middle(int *p, int n) {
    int acc = 0;
    for (int i = 0; i < n; i++) acc += leaf(p, i, n - i);
    return acc;
}
__declspec(noinline) int __fastcall outer(int *p, int n) {
    int r = middle(p, n) + 1;
    sink = r;
    return r * 3;
}
int __stdcall entry(void) { return outer((int *)0, 3); }
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {cmd:?} ({e}; see test.sh for the tools)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Builds `CRASH_C` with `flags`: the image and its PDB.
fn build(dir: &Path, name: &str, flags: &[&str]) -> (PathBuf, PathBuf) {
    let src = dir.join("crash.c");
    std::fs::write(&src, CRASH_C).unwrap();
    let obj = dir.join(format!("{name}.obj"));
    let (exe, pdb) = (
        dir.join(format!("{name}.exe")),
        dir.join(format!("{name}.pdb")),
    );
    run(Command::new("clang")
        .args([
            "--target=i686-pc-windows-msvc",
            "-O2",
            "-g",
            "-gcodeview",
            "-c",
        ])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    run(Command::new("lld-link")
        .args([
            "/debug",
            "/entry:entry",
            "/subsystem:console",
            "/nodefaultlib",
        ])
        .arg(&obj)
        .arg(format!("/out:{}", exe.display()))
        .arg(format!("/pdb:{}", pdb.display())));
    (exe, pdb)
}

/// A record with its program owned, comparable across the two readers.
type Owned = (u8, u64, u64, u32, u32, u32, Option<String>, bool);

fn owned(r: &WinRecord<'_>) -> Owned {
    let f = &r.frame;
    let kind = match f.kind {
        WinKind::Fpo => 0,
        WinKind::FrameData => 4,
    };
    (
        kind,
        r.rva,
        r.size,
        f.parameter_size,
        f.saved_register_size,
        f.local_size,
        f.program.map(str::to_string),
        f.allocates_base_pointer,
    )
}

/// The `FUNC` records of a `.sym` file: start, size and name.
fn functions(sym: &str) -> Vec<(u64, u64, String)> {
    sym.lines()
        .filter_map(|l| l.strip_prefix("FUNC "))
        .map(|l| {
            let l = l.strip_prefix("m ").unwrap_or(l);
            let f: Vec<&str> = l.splitn(4, ' ').collect();
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            (hex(f[0]), hex(f[1]), f[3].to_string())
        })
        .collect()
}

/// The image's calls: the return address of each call, by the callee's address.
fn call_sites(exe: &Path) -> BTreeMap<u64, u64> {
    let text = run(Command::new("llvm-objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(exe));
    let insns: Vec<(u64, &str)> = text
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim().split_once(':')?;
            Some((u64::from_str_radix(addr, 16).ok()?, rest.trim()))
        })
        .collect();
    let mut calls = BTreeMap::new();
    for w in insns.windows(2) {
        let (_, insn) = w[0];
        let Some(target) = insn.strip_prefix("calll") else {
            continue;
        };
        let target = target.split_whitespace().next().unwrap();
        let target = u64::from_str_radix(target.trim_start_matches("0x"), 16).unwrap();
        calls.insert(target, w[1].0);
    }
    calls
}

/// The innermost record of `kind` holding `rva`: FrameData before FPO, as the table.
fn record_at(records: &[Owned], rva: u64) -> Option<&Owned> {
    [4u8, 0].iter().find_map(|&kind| {
        records
            .iter()
            .filter(|r| r.0 == kind && r.1 <= rva && rva < r.1 + r.2)
            .min_by_key(|r| r.2)
    })
}

struct Case {
    sym: String,
    pdb: Vec<u8>,
    exe: PathBuf,
    _dir: tempfile::TempDir,
}

fn case(name: &str, flags: &[&str]) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let (exe, pdb) = build(dir.path(), name, flags);
    let sym = run(Command::new("dump_syms").arg(&pdb));
    Case {
        sym,
        pdb: std::fs::read(&pdb).unwrap(),
        exe,
        _dir: dir,
    }
}

/// The PDB's records equal the `.sym` file's, and cover every function it names.
fn records_equal(c: &Case) -> Vec<Owned> {
    let from_sym: Vec<Owned> = c
        .sym
        .lines()
        .filter_map(|l| l.strip_prefix("STACK "))
        .filter_map(stack_win::parse)
        .map(|r| owned(&r))
        .collect();
    let read = pdb_frame_data::read(&c.pdb).unwrap();
    assert_eq!(read.skipped, 0, "{:?}", read.first_skip);
    let from_pdb: Vec<Owned> = read.records.iter().map(|r| owned(&r.as_win())).collect();
    assert_eq!(
        from_pdb, from_sym,
        "the PDB's records differ from dump_syms'"
    );
    let funcs = functions(&c.sym);
    assert!(funcs.len() >= 4, "dump_syms named {funcs:?}");
    for (start, size, name) in &funcs {
        for rva in *start..start + size {
            assert!(
                record_at(&from_pdb, rva).is_some(),
                "{name}: no frame data at {rva:#x}"
            );
        }
    }
    from_pdb
}

/// Both tables give the same frame data at every byte of the functions.
fn tables_equal(c: &Case) {
    let sym_table = build_from_breakpad(c.sym.as_bytes()).unwrap();
    let pdb_table = pdb_frame_data::build_from_pdb(&c.pdb).unwrap();
    assert_eq!(pdb_table.stats.entries_skipped, 0);
    let (s, p) = (
        UnwindTable::open(&sym_table.bytes).unwrap(),
        UnwindTable::open(&pdb_table.bytes).unwrap(),
    );
    for (start, size, name) in functions(&c.sym) {
        for rva in start..start + size {
            let (a, b) = (s.find(rva).unwrap(), p.find(rva).unwrap());
            assert_eq!(
                a.expression(a.record.cfa),
                b.expression(b.record.cfa),
                "{name} at {rva:#x}"
            );
            assert_eq!(b.record.source(), Some(UnwindSource::PdbFrameData));
        }
    }
}

struct NoCode;
impl CodeReader for NoCode {
    fn bytes_before(&self, _addr: u64, _len: usize) -> Option<Vec<u8>> {
        None
    }
}

/// A stack laid out as the records say, frame 0 at `pc0`: each frame's outgoing
/// parameters, locals and saved registers, then its return address. A frame whose
/// program restores `ebp` from its frame has its saved `ebp` just below the return
/// address, pointing at the next such word (so `ebp`-based programs and `.raSearch`-based
/// ones agree); `ebp` passes through the others. Returns the stack, the registers and
/// the frames (pc, sp) a walk must give.
fn lay_out(
    records: &[Owned],
    callers: &BTreeMap<u64, u64>,
    funcs: &[(u64, u64, String)],
    pc0: u64,
) -> (Vec<u32>, RegisterSet, Vec<(u64, u64)>) {
    let mut words: Vec<u32> = Vec::new();
    let mut frames = Vec::new();
    let mut pc = pc0;
    let mut callee_params = 0u32;
    let mut ebp_slots: Vec<Option<usize>> = Vec::new();
    loop {
        let sp = STACK_AT + 4 * words.len() as u64;
        frames.push((pc, sp));
        // a caller's pc is a return address: its rule is the call's
        let rva = pc - IMAGE_BASE - u64::from(frames.len() > 1);
        let r = record_at(records, rva).expect("frame data at the pc");
        let (params, saved, locals) = (r.3, r.4, r.5);
        let saves_ebp = r.6.as_deref().is_some_and(|p| p.contains("$ebp $T0"));
        words.extend(std::iter::repeat_n(
            0,
            ((callee_params + locals + saved) / 4) as usize,
        ));
        ebp_slots.push(saves_ebp.then(|| words.len() - 1));
        // the caller: where the function holding `pc` was called from
        let func = funcs
            .iter()
            .find(|f| f.0 <= rva && rva < f.0 + f.1)
            .unwrap();
        let ret = callers.get(&(IMAGE_BASE + func.0)).copied();
        words.push(ret.map_or(0, |r| u32::try_from(r).unwrap()));
        callee_params = params;
        match ret {
            Some(r) => pc = r,
            None => break,
        }
    }
    // the outermost frame's outgoing area
    words.extend(std::iter::repeat_n(0, 8 + callee_params as usize / 4));
    // the slot whose address frame i's ebp holds: its own, else its caller's
    let slot_of = |i: usize| ebp_slots[i..].iter().find_map(|s| *s);
    let addr = |slot: Option<usize>| slot.map_or(0, |n| STACK_AT + 4 * n as u64);
    for (i, slot) in ebp_slots.iter().enumerate() {
        if let Some(slot) = *slot {
            words[slot] = u32::try_from(addr(slot_of(i + 1))).unwrap();
        }
    }
    let mut regs = RegisterSet::new(Arch::X86);
    regs.set(engine::arch::x86::Reg::Eip, pc0);
    regs.set(engine::arch::x86::Reg::Esp, STACK_AT);
    regs.set(engine::arch::x86::Reg::Ebp, addr(slot_of(0)));
    (words, regs, frames)
}

fn walk(table: &[u8], stack: &[u32], regs: &RegisterSet) -> Vec<(u64, u64)> {
    let bytes: Vec<u8> = stack.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mem = MemoryMap::new(vec![(STACK_AT, &bytes[..])]);
    let modules = vec![Module {
        name: "crash.exe".into(),
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
    let r = walk_thread(&X86, &ctx, regs);
    for f in r.frames.iter().skip(1) {
        assert_eq!(f.trust, Trust::Cfi, "{:?}", r.frames);
    }
    r.frames.iter().map(|f| (f.pc, f.sp.unwrap_or(0))).collect()
}

/// For every record: a stack laid out from it and the call sites' records walks to the
/// laid-out frames, from the `.sym` file and from the PDB alike.
fn walks_equal(c: &Case, records: &[Owned]) {
    let sym_table = build_from_breakpad(c.sym.as_bytes()).unwrap().bytes;
    let pdb_table = pdb_frame_data::build_from_pdb(&c.pdb).unwrap().bytes;
    let callers = call_sites(&c.exe);
    let funcs = functions(&c.sym);
    assert!(callers.len() >= 2, "calls: {callers:?}");
    let mut walked = 0;
    for r in records {
        let pc0 = IMAGE_BASE + r.1;
        if !funcs.iter().any(|f| f.0 <= r.1 && r.1 < f.0 + f.1) {
            continue;
        }
        let (stack, regs, want) = lay_out(records, &callers, &funcs, pc0);
        let from_sym = walk(&sym_table, &stack, &regs);
        let from_pdb = walk(&pdb_table, &stack, &regs);
        assert_eq!(from_sym, want, "the .sym walk from {pc0:#x}");
        assert_eq!(from_pdb, from_sym, "the PDB walk from {pc0:#x}");
        dump_walks_equal(c, &stack, &regs, &want);
        walked += 1;
        if want.len() >= 3 {
            walked += 1000;
        }
    }
    assert!(walked > 1000, "no walk went through three frames");
}

/// The `MODULE` line's debug id (GUID and age) and debug file.
fn module_line(sym: &str) -> (String, String) {
    let f: Vec<&str> = sym.lines().next().unwrap().split(' ').collect();
    (f[3].to_string(), f[4].to_string())
}

/// A little-endian u16/u32 of a PE's headers.
fn pe_u32(image: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(image[at..at + 4].try_into().unwrap())
}

/// A Windows x86 minidump of one thread: `SystemInfo` (x86, Windows NT), `ThreadList`
/// (a `CONTEXT_X86` with its control and integer registers, the stack), `ModuleList`
/// (the image at its base, its PE timestamp and size, an `RSDS` CodeView record naming
/// the PDB) and `MemoryList` (the stack), as dbghelp lays them out.
fn minidump(image: &[u8], sym: &str, module: &str, stack: &[u32], regs: &RegisterSet) -> Vec<u8> {
    use engine::arch::x86::Reg;
    let (debug_id, pdb_name) = module_line(sym);
    let pe = pe_u32(image, 0x3c) as usize;
    let (timestamp, size_of_image) = (pe_u32(image, pe + 8), pe_u32(image, pe + 24 + 56));
    let reg = |r: Reg| u32::try_from(regs.get(r).unwrap_or(0)).unwrap();
    let mut d: Vec<u8> = vec![0; 32 + 4 * 12];
    let put = |d: &mut Vec<u8>, bytes: &[u8]| -> (u32, u32) {
        while !d.len().is_multiple_of(4) {
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
    // CONTEXT_X86: flags (i386 | control | integer), debug registers, float save area,
    // segments, edi esi ebx edx ecx eax, ebp eip cs eflags esp ss, extended registers
    let mut ctx = le(&[0x0001_0003]);
    ctx.resize(156, 0);
    ctx.extend(le(&[
        0,
        0,
        0,
        0,
        0,
        0,
        reg(Reg::Ebp),
        reg(Reg::Eip),
        0x23,
        0x202,
    ]));
    ctx.extend(le(&[reg(Reg::Esp), 0x2b]));
    ctx.resize(716, 0);
    let ctx_loc = put(&mut d, &ctx);
    let stack_loc = put(&mut d, &le(stack));
    let mut name: Vec<u8> = Vec::new();
    let units: Vec<u16> = module.encode_utf16().collect();
    name.extend((units.len() as u32 * 2).to_le_bytes());
    name.extend(units.iter().chain([&0]).flat_map(|u| u.to_le_bytes()));
    let name_loc = put(&mut d, &name);
    let guid = |i: usize| u32::from_str_radix(&debug_id[i..i + 8], 16).unwrap();
    let mut cv = b"RSDS".to_vec();
    cv.extend(guid(0).to_le_bytes());
    cv.extend((u16::from_str_radix(&debug_id[8..12], 16).unwrap()).to_le_bytes());
    cv.extend((u16::from_str_radix(&debug_id[12..16], 16).unwrap()).to_le_bytes());
    cv.extend(
        (16..32)
            .step_by(2)
            .map(|i| u8::from_str_radix(&debug_id[i..i + 2], 16).unwrap()),
    );
    cv.extend(
        u32::from_str_radix(&debug_id[32..], 16)
            .unwrap()
            .to_le_bytes(),
    );
    cv.extend(pdb_name.as_bytes());
    cv.push(0);
    let cv_loc = put(&mut d, &cv);
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
    modules.extend(le(&[cv_loc.0, cv_loc.1, 0, 0]));
    modules.extend([0u8; 16]);
    let mut memory = le(&[1]);
    memory.extend(stack_desc(stack_loc));
    // x86, level 6, revision 0, 1 CPU, workstation; Windows 10.0.19041, Win32 NT
    let mut system = vec![0, 0, 6, 0, 0, 0, 1, 1];
    system.extend(le(&[10, 0, 19041, 2, 0, 0]));
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

/// The thread's frames (pc, sp) in a `postmortem-walk --format json` report.
fn report_frames(report: &serde_json::Value) -> Vec<(u64, u64)> {
    let hex = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0)
    };
    report["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["inlined"] != true)
        .map(|f| (hex(&f["pc"]), hex(&f["sp"])))
        .collect()
}

/// A dump of the laid-out stack walks to the laid-out frames with `postmortem-walk`, from
/// the image and its PDB (`--symbols`, every caller `unwind_source: pdb_frame_data`) and
/// from the `.sym` file (`--symbols-path`), and with minidump-stackwalk from the `.sym`
/// file (pcs: it gives no stack pointer).
fn dump_walks_equal(c: &Case, stack: &[u32], regs: &RegisterSet, want: &[(u64, u64)]) {
    let image = std::fs::read(&c.exe).unwrap();
    let module = c.exe.file_name().unwrap().to_str().unwrap();
    let dir = c.exe.parent().unwrap();
    let dump = dir.join("stack.dmp");
    std::fs::write(&dump, minidump(&image, &c.sym, module, stack, regs)).unwrap();
    let (debug_id, pdb_name) = module_line(&c.sym);
    let store = dir.join("store");
    let sym_dir = store.join(&pdb_name).join(&debug_id);
    std::fs::create_dir_all(&sym_dir).unwrap();
    let sym_file = format!("{}.sym", pdb_name.trim_end_matches(".pdb"));
    std::fs::write(sym_dir.join(sym_file), &c.sym).unwrap();
    let walk = |flag: &str, path: &Path| -> serde_json::Value {
        let out = run(Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
            .arg(&dump)
            .arg(flag)
            .arg(path)
            .args(["--no-system-debug", "--format", "json"])
            .env_remove("DEBUGINFOD_URLS"));
        serde_json::from_str(&out).unwrap()
    };
    let from_pdb = walk("--symbols", dir);
    assert_eq!(
        report_frames(&from_pdb),
        want,
        "postmortem-walk --symbols (the PDB)"
    );
    for f in from_pdb["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
    {
        assert_eq!(f["unwind_source"], "pdb_frame_data", "{f}");
    }
    let from_sym = walk("--symbols-path", &store);
    assert_eq!(
        report_frames(&from_sym),
        want,
        "postmortem-walk --symbols-path (the .sym)"
    );
    let out = run(Command::new("minidump-stackwalk")
        .arg("--json")
        .arg(&dump)
        .arg(&store));
    let theirs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pcs: Vec<u64> = theirs["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let pc = f["offset"].as_str().unwrap().trim_start_matches("0x");
            let pc = u64::from_str_radix(pc, 16).unwrap();
            // minidump-stackwalk gives a caller's pc as the return address minus one
            pc + u64::from(f["trust"] != "context")
        })
        .collect();
    let want_pcs: Vec<u64> = want.iter().map(|f| f.0).collect();
    assert_eq!(pcs, want_pcs, "minidump-stackwalk (the .sym):\n{out}");
}

/// A module's tables, as the service (`build_tables`) and a one-shot walk
/// (`on_demand_tables`) make them from the image and its PDB, or from the PDB alone,
/// hold the PDB's frame data.
fn module_tables_hold_it(c: &Case) {
    let want = pdb_frame_data::build_from_pdb(&c.pdb).unwrap().bytes;
    let image = std::fs::read(&c.exe).unwrap();
    let (image_fb, pdb_fb) = (FileBytes::new(image.clone()), FileBytes::new(c.pdb.clone()));
    let input = |name, bytes| TableInput { name, bytes };
    let made = [
        build_tables(
            Some(input("crash.exe", &image)),
            &[input("crash.pdb", &c.pdb)],
        ),
        build_tables(None, &[input("crash.pdb", &c.pdb)]),
        on_demand_tables(Some(("crash.exe", &image_fb)), &[("crash.pdb", &pdb_fb)]),
        on_demand_tables(None, &[("crash.pdb", &pdb_fb)]),
    ];
    for (i, t) in made.iter().enumerate() {
        let unwind = t
            .whole_unwind()
            .unwrap_or_else(|| panic!("tables {i}: no unwind"));
        let bytes: &[u8] = (**unwind).as_ref();
        assert_eq!(bytes, &want[..], "tables {i}");
        assert!(t.warnings.is_empty(), "tables {i}: {:?}", t.warnings);
    }
}

/// Damaged copies of the PDB (cut short every 4 KiB, one byte changed every 61) give
/// records or an error, never a panic, and a table that opens.
fn damaged_copies_do_not_break_it(c: &Case) {
    let cuts = (0..c.pdb.len()).step_by(4096).map(|n| c.pdb[..n].to_vec());
    let flips = (0..c.pdb.len()).step_by(61).map(|i| {
        let mut d = c.pdb.clone();
        d[i] ^= 0xa5;
        d
    });
    for data in cuts.chain(flips) {
        if let Ok(frames) = pdb_frame_data::read(&data) {
            assert!(frames
                .records
                .iter()
                .all(|r| r.size > 0 && r.rva + r.size <= 1 << 32));
        }
        if let Ok(built) = pdb_frame_data::build_from_pdb(&data) {
            UnwindTable::open(&built.bytes).unwrap();
        }
    }
}

fn check(name: &str, flags: &[&str]) {
    let c = case(name, flags);
    let records = records_equal(&c);
    tables_equal(&c);
    module_tables_hold_it(&c);
    walks_equal(&c, &records);
    damaged_copies_do_not_break_it(&c);
}

#[test]
fn pdb_frame_data_equals_dump_syms_omitted_frame_pointer() {
    check("nofp", &["-fomit-frame-pointer"]);
}

#[test]
fn pdb_frame_data_equals_dump_syms_frame_pointer() {
    check("fp", &["-fno-omit-frame-pointer"]);
}

/// Real MSVC-built x86 PDBs other projects publish (never in this repository): the paths
/// in `POSTMORTEM_REAL_PDBS` (separated by `:`). For each, the records read from the PDB
/// equal the `STACK WIN` records `dump_syms PDB` writes, one for one, and the tables built
/// from the PDB and from that `.sym` file give the same frame data at every byte of every
/// function the `.sym` file names. docs/dumps-from-other-tools.md names the PDBs tried.
#[test]
fn real_pdbs_frame_data_equals_dump_syms() {
    let Ok(paths) = std::env::var("POSTMORTEM_REAL_PDBS") else {
        eprintln!("skipped: POSTMORTEM_REAL_PDBS is not set");
        return;
    };
    for path in paths.split(':').filter(|p| !p.is_empty()) {
        let sym = run(Command::new("dump_syms").arg(path));
        let pdb = std::fs::read(path).unwrap();
        let from_sym: Vec<Owned> = sym
            .lines()
            .filter_map(|l| l.strip_prefix("STACK "))
            .filter_map(stack_win::parse)
            .map(|r| owned(&r))
            .collect();
        let read = pdb_frame_data::read(&pdb).unwrap();
        assert_eq!(read.skipped, 0, "{path}: {:?}", read.first_skip);
        let from_pdb: Vec<Owned> = read.records.iter().map(|r| owned(&r.as_win())).collect();
        assert_eq!(
            from_pdb, from_sym,
            "{path}: the PDB's records differ from dump_syms'"
        );
        let sym_table = build_from_breakpad(sym.as_bytes()).unwrap();
        let pdb_table = pdb_frame_data::build_from_pdb(&pdb).unwrap();
        let (s, p) = (
            UnwindTable::open(&sym_table.bytes).unwrap(),
            UnwindTable::open(&pdb_table.bytes).unwrap(),
        );
        let mut bytes = 0usize;
        for (start, size, name) in functions(&sym) {
            for rva in start..start + size {
                let (a, b) = (s.find(rva), p.find(rva));
                assert_eq!(
                    a.as_ref().and_then(|a| a.expression(a.record.cfa)),
                    b.as_ref().and_then(|b| b.expression(b.record.cfa)),
                    "{path}: {name} at {rva:#x}"
                );
                bytes += usize::from(b.is_some());
            }
        }
        eprintln!(
            "{path}: {} records equal dump_syms', frame data equal at {bytes} bytes of code",
            from_pdb.len()
        );
    }
}
