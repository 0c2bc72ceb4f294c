//! aarch64: the minidump walk against gdb-multiarch on the QEMU core of the same crash.
//!
//! The crash programs and flags are those of the ELF-core suite's aarch64 cases
//! (`gdb_compare/aarch64.rs`): cross-compiled `-no-pie`, crashed under
//! `qemu-aarch64-static -cpu max` (`postmortem_testsupport::qemu`). ptrace does not reach a program
//! running under QEMU, so the minidump is written from QEMU's core of the crash by the
//! test converter (`postmortem_testsupport::core_to_minidump`): the registers and memory are the core's,
//! the module build-ids those of the binaries. Each case then checks
//!
//! - that rust-minidump's `minidump` crate reads the converted file (so the converter
//!   writes what real readers accept, not only ours);
//! - `postmortem walk MINIDUMP` equals gdb-multiarch on the core, every thread, frame 0
//!   from the exception context, with the rules of the ELF-core cases: where gdb stops at
//!   a PAC-signed return address it cannot strip (QEMU's core has no PAC mask), only its
//!   frames are compared and ours must still reach the outermost frame;
//! - with `dump_syms` `.sym` files of the program (the binary moved away), the same
//!   frames as with the binary wherever the `.sym` CFI found them.
//!
//! Skipped, with the reason printed, when the cross tools are absent (`test.sh` installs
//! them).

use std::path::{Path, PathBuf};

use serde_json::Value;

use postmortem_testsupport::compare;
use postmortem_testsupport::core_to_minidump::{core_to_minidump, Layout};
use postmortem_testsupport::gdb::GdbCore;
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu::{self, CC, SYSROOT};

use super::{dump_syms, walk};

const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

/// One aarch64 crash: QEMU's core, gdb's view of it, and the minidump made from it.
struct Recorded {
    work: Workdir,
    exe: PathBuf,
    minidump: PathBuf,
    gdb: GdbCore,
    signal: u64,
}

/// Compiles `sources` (`-g -no-pie` + `flags`; `-fPIE` instead where `flags` hold
/// `-pie`), crashes the program under QEMU, reads the core with gdb-multiarch (the live
/// process at its fault for a PIE), checks gdb's view with `expect` and converts the core.
/// `None` when the tools are absent.
fn record(
    name: &str,
    flags: &[&str],
    sources: &[&str],
    signal: u64,
    layout: Layout,
    expect: impl Fn(&GdbCore),
) -> Option<Recorded> {
    if !qemu::tools_present() {
        return None;
    }
    let work = Workdir::new(&format!("md-{name}"));
    let pie = flags.contains(&"-pie");
    let mut all_flags = if pie { vec!["-fPIE"] } else { vec!["-no-pie"] };
    all_flags.extend_from_slice(flags);
    let exe = work.compile(CC, &all_flags, sources, name);
    // gdb cannot relocate a PIE from QEMU's core: its frames of the live process
    let (core, gdb) = qemu::crash_aarch64_with_gdb(work.path(), &exe, pie);
    expect(&gdb);

    let core_bytes = std::fs::read(&core).expect("read the core");
    let dir = work.path().to_path_buf();
    let converted = core_to_minidump(&core_bytes, layout, |path| qemu::module_file(&dir, path));
    let exe_id = build_id(&exe);
    assert!(
        converted.build_ids.iter().any(|(_, id)| *id == exe_id),
        "the program's build-id is in the minidump: {:?}",
        converted.build_ids
    );
    let minidump = work.path().join(format!("{name}.dmp"));
    std::fs::write(&minidump, &converted.bytes).expect("write the minidump");
    check_with_rust_minidump(&converted.bytes, layout, &gdb);
    Some(Recorded {
        work,
        exe,
        minidump,
        gdb,
        signal,
    })
}

fn build_id(path: &Path) -> Vec<u8> {
    use object::Object;
    let data = std::fs::read(path).expect("read the binary");
    let file = object::File::parse(&*data).expect("an ELF file");
    file.build_id()
        .expect("readable notes")
        .expect("the cross linker writes a build-id")
        .to_vec()
}

/// rust-minidump reads the file: ARM64 Linux, gdb's threads each with an ARM64 context
/// whose pc is gdb's frame 0, an exception on gdb's crashed thread, and `BpEL` build-ids.
fn check_with_rust_minidump(bytes: &[u8], layout: Layout, gdb: &GdbCore) {
    use minidump::{
        Minidump, MinidumpException, MinidumpModuleList, MinidumpRawContext, MinidumpSystemInfo,
        MinidumpThreadList, Module as _,
    };
    let md = Minidump::read(bytes).expect("rust-minidump reads the header");
    let system: MinidumpSystemInfo = md.get_stream().expect("system info");
    assert_eq!(system.cpu, minidump::system_info::Cpu::Arm64);
    assert_eq!(system.os, minidump::system_info::Os::Linux);
    let threads: MinidumpThreadList = md.get_stream().expect("thread list");
    let memory = md.get_memory().unwrap_or_default();
    assert_eq!(threads.threads.len(), gdb.threads.len(), "thread count");
    for t in &threads.threads {
        let lwp = u64::from(t.raw.thread_id);
        let g = gdb.thread(lwp).expect("gdb knows the thread");
        let ctx = t.context(&system, None).expect("an ARM64 context");
        match (&ctx.raw, layout) {
            (MinidumpRawContext::Arm64(_), Layout::Current | Layout::Client)
            | (MinidumpRawContext::OldArm64(_), Layout::BreakpadOld) => {}
            _ => panic!("thread {lwp}: not the {layout:?} ARM64 context"),
        }
        assert_eq!(
            ctx.get_instruction_pointer(),
            g.frames[0].pc,
            "thread {lwp}'s pc"
        );
        let sp = ctx.get_stack_pointer();
        let stack = t.stack_memory(&memory).expect("the thread's stack");
        assert_eq!(
            stack.base_address(),
            sp,
            "thread {lwp}'s stack starts at sp"
        );
        assert!(
            stack.get_memory_at_address::<u64>(sp).is_some(),
            "thread {lwp}'s stack is readable"
        );
    }
    let exception: MinidumpException = md.get_stream().expect("exception stream");
    assert_eq!(
        Some(u64::from(exception.get_crashing_thread_id())),
        gdb.crashed_lwp
    );
    assert!(exception.context(&system, None).is_some());
    let modules: MinidumpModuleList = md.get_stream().expect("module list");
    assert!(
        modules.iter().any(|m| m.debug_identifier().is_some()),
        "rust-minidump reads the BpEL records"
    );
}

/// `postmortem walk MINIDUMP --symbols WORKDIR --symbols SYSROOT/lib [extra…]`.
fn walk_minidump(r: &Recorded, symbols: &Path, extra: &[&str]) -> Value {
    let lib = Path::new(SYSROOT).join("lib");
    let mut args = vec!["--symbols", lib.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    walk(&r.minidump, symbols, &args)
}

/// The minidump walk equals gdb on the core; returns the report.
fn check(r: &Recorded) -> Value {
    let report = walk_minidump(r, r.work.path(), &[]);
    assert_eq!(report["dump"]["format"], "minidump");
    assert_eq!(report["dump"]["arch"], "aarch64");
    assert_eq!(report["dump"]["os"], "linux");
    let crash = &report["crash"];
    assert_eq!(crash["signal"].as_u64(), Some(r.signal), "signal");
    assert_eq!(crash["tid"].as_u64(), r.gdb.crashed_lwp, "crashed thread");
    assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
    let exe_name = r.exe.file_name().and_then(|n| n.to_str()).expect("name");
    for m in report["modules"].as_array().expect("modules") {
        if m["name"] == exe_name || m["name"] == "libc.so.6" {
            assert_eq!(m["status"], "ok", "{m}");
            assert_eq!(m["verified"], true, "matched by build-id: {m}");
        }
    }
    compare::assert_same_stacks(&r.gdb, &report);
    for thread in report["threads"].as_array().expect("threads") {
        assert_eq!(
            thread["end"], "outermost",
            "thread {} did not reach the outermost frame: {}",
            thread["tid"], thread["end_detail"]
        );
    }
    report
}

/// A `.sym` file's `STACK CFI INIT` records: (start, size, whether rows follow it).
fn sym_cfi_records(text: &str) -> Vec<(u64, u64, bool)> {
    let mut out: Vec<(u64, u64, bool)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("STACK CFI INIT ") {
            let mut f = rest.split(' ');
            let start = f.next().and_then(|h| u64::from_str_radix(h, 16).ok());
            let size = f.next().and_then(|h| u64::from_str_radix(h, 16).ok());
            out.push((
                start.expect("INIT address"),
                size.expect("INIT size"),
                false,
            ));
        } else if line.starts_with("STACK CFI ") {
            if let Some(last) = out.last_mut() {
                last.2 = true;
            }
        }
    }
    out
}

/// The pc ranges of the binary's FDEs that sign their return address
/// (`DW_CFA_AARCH64_negate_ra_state`), as `aarch64-linux-gnu-readelf` prints them.
fn signing_fdes(binary: &Path) -> Vec<(u64, u64)> {
    // readelf prints link-time addresses.
    let out = std::process::Command::new("aarch64-linux-gnu-readelf")
        .arg("--debug-dump=frames")
        .arg(binary)
        .output()
        .expect("run aarch64-linux-gnu-readelf (binutils-aarch64-linux-gnu)");
    assert!(out.status.success(), "readelf failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ranges = Vec::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(pcs) = line.split_once(" pc=").map(|(_, r)| r) {
            current = pcs.split_once("..").and_then(|(a, b)| {
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b.trim(), 16).ok()?,
                ))
            });
        } else if line.contains("DW_CFA_AARCH64_negate_ra_state") {
            if let Some(r) = current.take() {
                ranges.push(r);
            }
        }
    }
    ranges
}

/// What a `.sym` file and its binary say about one module's CFI, for
/// [`breakpad_equals_binary`]. Addresses are relative to the link-time base, as in `.sym`
/// files.
struct SymCfi {
    name: String,
    base: u64,
    records: Vec<(u64, u64, bool)>,
    signing: Vec<(u64, u64)>,
}

impl SymCfi {
    /// Reads the `.sym` written for `binary` and the binary's signing FDEs; `base` is
    /// where the walk says the module is loaded.
    fn new(name: &str, base: u64, binary: &Path, sym: &Path) -> SymCfi {
        use object::{Object, ObjectSegment};
        let text = std::fs::read_to_string(sym).expect("read the .sym");
        assert!(
            text.lines()
                .next()
                .is_some_and(|l| l.starts_with("MODULE Linux arm64 ")),
            "an arm64 .sym: {}",
            text.lines().next().unwrap_or_default()
        );
        assert!(text.contains("\nSTACK CFI INIT "), "{name}'s .sym has CFI");
        let data = std::fs::read(binary).expect("read the binary");
        let file = object::File::parse(&*data).expect("an ELF file");
        let link_base = file
            .segments()
            .map(|s| s.address() & !0xfff)
            .min()
            .expect("PT_LOAD segments");
        let signing = signing_fdes(binary)
            .into_iter()
            .map(|(lo, hi)| (lo - link_base, hi - link_base))
            .collect();
        SymCfi {
            name: name.to_owned(),
            base,
            records: sym_cfi_records(&text),
            signing,
        }
    }

    /// Whether `pc` (a frame's lookup address) lies in a function that signs its return
    /// address, past its entry, where the .sym has no rule or only the entry rule.
    fn lacks_cfi(&self, pc: u64) -> bool {
        let rel = pc.wrapping_sub(self.base);
        let missing_or_entry_only = self
            .records
            .iter()
            .find(|(start, size, _)| *start <= rel && rel < start + size)
            .is_none_or(|(start, _, rows)| !rows && rel > *start);
        missing_or_entry_only && self.signing.iter().any(|&(lo, hi)| lo <= rel && rel < hi)
    }
}

/// The walk with only `dump_syms` `.sym` files (of the program, the dynamic linker and
/// libc; the program moved away and the sysroot not given) equals the walk with the
/// binaries on every frame the `.sym` CFI can find: same pc and sp on every frame of
/// every thread, the same function, file and line in the program's frames, and at least
/// `min_cfi` callers of the program's frames found by its `.sym` file's `STACK CFI`.
///
/// dump_syms 2.3 does not read the CFI of functions that sign their return address
/// (`pac-ret`): with key A it drops the rest of the FDE from
/// `DW_CFA_AARCH64_negate_ra_state` on, keeping only the entry rule `.cfa: sp 0 + .ra:
/// x30`; with key B it rejects the CIE's `B` augmentation and writes no record at all.
/// Past such a function's first instruction the `.sym` has no CFI for it, so a thread is
/// compared up to that function's frame (its caller, found from a wrong rule or
/// otherwise, is not compared).
fn breakpad_equals_binary(r: &Recorded, min_cfi: usize) {
    let with_binary = walk_minidump(r, r.work.path(), &["--no-system-debug"]);
    let syms = tempfile::tempdir().expect("temporary directory");
    let mut modules = Vec::new();
    for m in with_binary["modules"].as_array().expect("modules") {
        let name = m["name"].as_str().expect("module name");
        let path = m["path"].as_str().expect("module path");
        let base = m["base"]
            .as_str()
            .and_then(compare::parse_hex)
            .expect("module base");
        let binary =
            qemu::module_file(r.work.path(), path).unwrap_or_else(|| panic!("no file for {path}"));
        let sym = dump_syms(&binary, syms.path());
        modules.push(SymCfi::new(name, base, &binary, &sym));
    }
    let moved = r.work.path().join("moved-away");
    std::fs::rename(&r.exe, &moved).expect("move the binary away");
    let with_sym = walk(
        &r.minidump,
        syms.path(),
        &["--no-system-debug", "--no-dump-paths"],
    );
    // only the records the walk needs are built from the .sym files: the report is the
    // same as with the whole tables the service builds
    let whole = walk(
        &r.minidump,
        syms.path(),
        &["--no-system-debug", "--no-dump-paths", "--whole-tables"],
    );
    assert_eq!(with_sym, whole, "report with whole .sym tables");
    std::fs::rename(&moved, &r.exe).expect("move the binary back");

    let exe_name = r.exe.file_name().and_then(|n| n.to_str()).expect("name");
    for m in with_sym["modules"].as_array().expect("modules") {
        assert_eq!(m["status"], "ok", "{m}");
        assert_eq!(m["unwind"], serde_json::json!(["breakpad"]), "{m}");
        assert_eq!(m["symbols"], serde_json::json!(["breakpad"]), "{m}");
        assert_eq!(m["verified"], true, "{m}");
    }
    let sym_lacks_cfi = |module: &Value, pc: u64| {
        modules
            .iter()
            .find(|m| *module == m.name.as_str())
            .is_some_and(|m| m.lacks_cfi(pc))
    };

    let threads_a = with_binary["threads"].as_array().expect("threads");
    let threads_b = with_sym["threads"].as_array().expect("threads");
    assert_eq!(threads_a.len(), threads_b.len());
    let mut breakpad_cfi_frames = 0;
    let mut cut_short = 0;
    for (a, b) in threads_a.iter().zip(threads_b) {
        let fa = a["frames"].as_array().expect("frames");
        let fb = b["frames"].as_array().expect("frames");
        let show = || {
            let row = |f: &Value| {
                format!(
                    "{} {} {} {} {}",
                    f["pc"], f["sp"], f["trust"], f["unwind_source"], f["function"]
                )
            };
            format!(
                "binary:\n{}\n.sym:\n{}",
                fa.iter().map(row).collect::<Vec<_>>().join("\n"),
                fb.iter().map(row).collect::<Vec<_>>().join("\n")
            )
        };
        let mut compared = fa.len();
        for i in 1..fa.len().min(fb.len()) {
            let callee = &fb[i - 1];
            let pc = callee["pc"]
                .as_str()
                .and_then(compare::parse_hex)
                .expect("pc");
            let lookup = if i == 1 { pc } else { pc - 1 };
            if !fb[i]["inlined"].as_bool().unwrap_or(false)
                && sym_lacks_cfi(&callee["module"], lookup)
            {
                compared = i;
                cut_short += 1;
                break;
            }
        }
        if compared == fa.len() {
            assert_eq!(fa.len(), fb.len(), "thread {}: {}", a["tid"], show());
            assert_eq!(a["end"], b["end"], "thread {}: {}", a["tid"], show());
        }
        for (x, y) in fa.iter().zip(fb).take(compared) {
            assert_eq!(x["pc"], y["pc"], "thread {}: {}", a["tid"], show());
            assert_eq!(x["sp"], y["sp"], "thread {}: {}", a["tid"], show());
            if x["module"] == exe_name {
                for key in ["function", "file", "line", "inlined", "function_offset"] {
                    assert_eq!(x[key], y[key], "{key} of {x} vs {y}");
                }
                assert_eq!(y["symbol_source"], "breakpad");
            }
        }
        for (callee, caller) in fb.iter().zip(fb.iter().skip(1)).take(compared - 1) {
            if callee["module"] == exe_name
                && !caller["inlined"].as_bool().unwrap_or(false)
                && caller["unwind_source"] == "breakpad"
            {
                breakpad_cfi_frames += 1;
            }
        }
    }
    eprintln!(
        "{}: {breakpad_cfi_frames} frames found by the .sym CFI; {cut_short} thread(s) \
         compared up to a function the .sym has no CFI for",
        exe_name
    );
    assert!(
        breakpad_cfi_frames >= min_cfi,
        "the .sym file's CFI found the program's callers ({breakpad_cfi_frames})"
    );
}

/// gdb's names for the crashed thread's frames.
fn names(gdb: &GdbCore) -> Vec<String> {
    gdb.crashed()
        .frames
        .iter()
        .map(|f| f.name.clone().unwrap_or_else(|| "??".to_owned()))
        .collect()
}

/// gdb's crashed stack holds `expected` in order, the first in frame 0.
fn expect_stack(gdb: &GdbCore, expected: &[&str]) {
    let stack = names(gdb);
    assert_eq!(
        stack.first().map(String::as_str),
        expected.first().copied(),
        "gdb's frame 0: {stack:?}"
    );
    let mut rest = stack.iter();
    for name in expected {
        assert!(
            rest.any(|s| s == name),
            "gdb's crashed stack lacks {name} in order: {stack:?}"
        );
    }
}

fn basic(name: &str, flags: &[&str]) -> Option<Recorded> {
    let r = record(name, flags, &["basic.c"], SIGSEGV, Layout::Current, |gdb| {
        expect_stack(gdb, &["crash_here", "middle"])
    })?;
    check(&r);
    Some(r)
}

#[test]
fn minidump_aarch64_c_o0() {
    if let Some(r) = basic("a64_o0", &["-O0"]) {
        breakpad_equals_binary(&r, 2);
    }
}

#[test]
fn minidump_aarch64_c_o2_omit_frame_pointer() {
    if let Some(r) = basic("a64_o2_omit_fp", &["-O2", "-fomit-frame-pointer"]) {
        breakpad_equals_binary(&r, 2);
    }
}

#[test]
fn minidump_aarch64_c_o2_no_omit_frame_pointer() {
    if let Some(r) = basic("a64_o2_no_omit_fp", &["-O2", "-fno-omit-frame-pointer"]) {
        breakpad_equals_binary(&r, 2);
    }
}

/// A position-independent program, as every Android program is (gdb's frames from the
/// live process); its `.sym` walk equals its binary's too.
#[test]
fn minidump_aarch64_pie_o2() {
    if let Some(r) = basic("a64_pie_o2", &["-O2", "-pie"]) {
        breakpad_equals_binary(&r, 2);
    }
}

/// Signed return addresses: gdb stops after frame 0 (no PAC mask in the core), ours
/// names every caller down to `_start`, by CFI, with the PAC bits stripped.
fn pac(name: &str, flags: &[&str]) -> Option<Recorded> {
    let r = record(name, flags, &["basic.c"], SIGSEGV, Layout::Current, |gdb| {
        let stack = names(gdb);
        assert_eq!(stack.first().map(String::as_str), Some("crash_here"));
        assert!(
            !stack.iter().any(|n| n == "main"),
            "gdb unwound past a signed return address without a PAC mask: {stack:?}"
        );
    })?;
    let report = check(&r);
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    let functions: Vec<&str> = frames
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("??"))
        .collect();
    for (i, expected) in ["crash_here", "middle"].iter().enumerate() {
        assert_eq!(functions.get(i), Some(expected), "our stack: {functions:?}");
    }
    assert!(functions.contains(&"main"), "our stack: {functions:?}");
    assert_eq!(
        functions.last(),
        Some(&"_start"),
        "our stack: {functions:?}"
    );
    for f in frames.iter().skip(1) {
        if matches!(f["function"].as_str(), Some("middle" | "main")) {
            assert_eq!(f["trust"], "cfi", "frame {f}");
        }
        let pc = f["pc"].as_str().and_then(compare::parse_hex).expect("pc");
        assert!(pc < 1 << 48, "a pc kept its PAC bits: {pc:#x}");
    }
    Some(r)
}

#[test]
fn minidump_aarch64_pac_ret_key_a() {
    if let Some(r) = pac("a64_pac_ret", &["-O2", "-mbranch-protection=pac-ret"]) {
        breakpad_equals_binary(&r, 1);
    }
}

#[test]
fn minidump_aarch64_pac_ret_key_b() {
    if let Some(r) = pac(
        "a64_pac_ret_b",
        &["-O2", "-mbranch-protection=pac-ret+b-key"],
    ) {
        breakpad_equals_binary(&r, 1);
    }
}

#[test]
fn minidump_aarch64_pac_ret_o0_frame_records() {
    if let Some(r) = pac(
        "a64_pac_ret_o0",
        &["-O0", "-mbranch-protection=pac-ret+leaf"],
    ) {
        // Every function signs (`+leaf`), so the .sym has CFI for none past its entry:
        // only the frames up to the first such one are compared.
        breakpad_equals_binary(&r, 0);
    }
}

#[test]
fn minidump_aarch64_abort_from_failed_assert() {
    let r = record(
        "a64_assert",
        &["-O0"],
        &["assert.c"],
        SIGABRT,
        Layout::Current,
        |gdb| {
            let stack = names(gdb);
            assert!(
                stack.iter().any(|n| n == "check_invariant"),
                "gdb's stack: {stack:?}"
            );
        },
    );
    if let Some(r) = r {
        check(&r);
        breakpad_equals_binary(&r, 1);
    }
}

fn threads(name: &str, layout: Layout) {
    let r = record(
        name,
        &["-O0", "-pthread"],
        &["threads.c"],
        SIGSEGV,
        layout,
        |gdb| {
            assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
            expect_stack(gdb, &["fault", "crasher"]);
        },
    );
    if let Some(r) = r {
        check(&r);
        breakpad_equals_binary(&r, 2);
    }
}

#[test]
fn minidump_aarch64_threads_blocked_in_syscalls() {
    threads("a64_threads", Layout::Current);
}

/// The same crash in Breakpad's old arm64 context layout and CPU id, stacks only.
#[test]
fn minidump_aarch64_breakpad_old_context_layout() {
    threads("a64_threads_old", Layout::BreakpadOld);
}

/// Side by side with minidump-stackwalk on the aarch64 cases: each case's minidump (made
/// from its QEMU core) is walked by both tools with one Breakpad store holding the `.sym`
/// files of the program, the dynamic linker and libc (postmortem with
/// `--no-system-debug --no-dump-paths`), and each tool's physical frames equal to
/// gdb-multiarch's on the core (pc and function) are counted per case. With
/// `MDBENCH_OUT=DIR` the minidumps, the store and the counts (`frames-aarch64.tsv`) are
/// kept in DIR. Needs `cargo install --locked minidump-stackwalk dump_syms`.
#[test]
#[ignore = "needs minidump-stackwalk (cargo install --locked minidump-stackwalk)"]
fn minidump_stackwalk_side_by_side_aarch64() {
    if !qemu::tools_present() {
        return;
    }
    let keep = std::env::var_os("MDBENCH_OUT").map(PathBuf::from);
    let tmp = tempfile::tempdir().expect("temporary directory");
    let out_dir = keep.unwrap_or_else(|| tmp.path().to_path_buf());
    let store = out_dir.join("store-aarch64");
    std::fs::create_dir_all(&store).expect("create the store");
    let cases: [(&str, &[&str], &str, u64); 8] = [
        ("a64_o0", &["-O0"], "basic.c", SIGSEGV),
        (
            "a64_o2_omit_fp",
            &["-O2", "-fomit-frame-pointer"],
            "basic.c",
            SIGSEGV,
        ),
        (
            "a64_o2_no_omit_fp",
            &["-O2", "-fno-omit-frame-pointer"],
            "basic.c",
            SIGSEGV,
        ),
        (
            "a64_pac_ret",
            &["-O2", "-mbranch-protection=pac-ret"],
            "basic.c",
            SIGSEGV,
        ),
        (
            "a64_pac_ret_b",
            &["-O2", "-mbranch-protection=pac-ret+b-key"],
            "basic.c",
            SIGSEGV,
        ),
        (
            "a64_pac_ret_o0",
            &["-O0", "-mbranch-protection=pac-ret+leaf"],
            "basic.c",
            SIGSEGV,
        ),
        ("a64_assert", &["-O0"], "assert.c", SIGABRT),
        ("a64_threads", &["-O0", "-pthread"], "threads.c", SIGSEGV),
    ];
    let mut table = String::from(
        "case\ttool\tgdb_frames\tframes\tpc_match\tpc_function_match\textra_after_gdb_end\tnames_differing(gdb/tool)\n",
    );
    for (case, flags, source, signal) in cases {
        // stacks only, as a client writes them (the x86_64 cases are minidump-writer's own)
        let r = record(case, flags, &[source], signal, Layout::Client, |_| {})
            .expect("the tools are present");
        let with_paths = walk_minidump(&r, r.work.path(), &[]);
        for m in with_paths["modules"].as_array().expect("modules") {
            let path = m["path"].as_str().expect("module path");
            let binary = qemu::module_file(r.work.path(), path)
                .unwrap_or_else(|| panic!("no file for {path}"));
            dump_syms(&binary, &store);
        }
        let dir = out_dir.join(case);
        std::fs::create_dir_all(&dir).expect("create the case directory");
        std::fs::copy(&r.minidump, dir.join("minidump.dmp")).expect("keep the minidump");

        let ours = walk(
            &r.minidump,
            &store,
            &["--no-system-debug", "--no-dump-paths"],
        );
        for m in ours["modules"].as_array().expect("modules") {
            assert_eq!(m["symbols"], serde_json::json!(["breakpad"]), "{m}");
        }
        let our_threads = super::physical_threads(&ours);
        let their_threads = super::stackwalk_threads(&store, &r.minidump, 4);
        table.push_str(&super::side_by_side_rows(
            case,
            &r.gdb,
            &our_threads,
            &their_threads,
        ));
    }
    eprint!("{table}");
    std::fs::write(out_dir.join("frames-aarch64.tsv"), &table).expect("write the counts");
}

/// Issue 21 on aarch64: `postmortem walk --json DUMP STORE` against `minidump-stackwalk
/// --json DUMP STORE`, field by field as `postmortem_testsupport::stackwalk` lays down,
/// and the `--human` texts the same way, on minidumps made from QEMU cores (full dumps,
/// as minidump-writer writes them). The store holds the `.sym` files (dump_syms) of every
/// module: the program, the dynamic linker and the cross libc. Where the walks part,
/// ours must be gdb-multiarch's frames on the core. Cases: C at -O0 and at -O2 without
/// frame pointers, an `assert`, and four threads blocked in system calls. Not the
/// `pac-ret` builds: gdb stops at their first signed return address, and dump_syms
/// writes only the entry rule of a function that signs its return address, so the walk
/// from the `.sym` files finds those frames by frame pointers and ends at a wrong `_start`
/// pc (see docs/stackwalk-drop-in.md).
#[test]
fn stackwalk_json_agrees_with_minidump_stackwalk_aarch64() {
    use postmortem_testsupport::stackwalk;
    if !qemu::tools_present() {
        return;
    }
    let cases: [(&str, &[&str], &str, u64); 4] = [
        ("sw64_o0", &["-O0"], "basic.c", SIGSEGV),
        (
            "sw64_o2_omit_fp",
            &["-O2", "-fomit-frame-pointer"],
            "basic.c",
            SIGSEGV,
        ),
        ("sw64_assert", &["-O0"], "assert.c", SIGABRT),
        ("sw64_threads", &["-O0", "-pthread"], "threads.c", SIGSEGV),
    ];
    let mut totals = stackwalk::Differences::default();
    for (case, flags, source, signal) in cases {
        let r = record(case, flags, &[source], signal, Layout::Current, |_| {})
            .expect("the tools are present");
        let store = r.work.path().join("store");
        let with_paths = walk_minidump(&r, r.work.path(), &[]);
        for m in with_paths["modules"].as_array().expect("modules") {
            let path = m["path"].as_str().expect("module path");
            let binary = qemu::module_file(r.work.path(), path)
                .unwrap_or_else(|| panic!("no file for {path}"));
            dump_syms(&binary, &store);
        }
        let os = std::ffi::OsStr::new;
        let (dump, store) = (r.minidump.as_os_str(), store.as_os_str());
        let theirs: Value = serde_json::from_str(&stackwalk::run(
            Path::new("minidump-stackwalk"),
            &[os("--json"), dump, store],
        ))
        .expect("their JSON");
        let postmortem = super::postmortem();
        let local_off = [os("--no-dump-paths"), os("--no-system-debug")];
        let ours: Value = serde_json::from_str(&stackwalk::run(
            &postmortem,
            &[&[os("walk"), os("--json"), dump, store][..], &local_off].concat(),
        ))
        .expect("our JSON");
        // gdb's frames; where gdb stops at a PAC-signed return address it cannot strip
        // (QEMU's core has no PAC mask), the walk with the binaries instead, which
        // `check` compares with gdb's frames and requires to reach the outermost frame
        let reference = |tid: u64| {
            let g = stackwalk::gdb_reference(&r.gdb, tid)?;
            if g.complete {
                return Some(g);
            }
            let t = with_paths["threads"]
                .as_array()?
                .iter()
                .find(|t| t["tid"].as_u64() == Some(tid))?;
            let pcs = t["frames"]
                .as_array()?
                .iter()
                .filter(|f| f["inlined"] == false)
                .filter_map(|f| compare::parse_hex(f["pc"].as_str()?))
                .collect::<Vec<u64>>();
            assert!(
                pcs.starts_with(&g.pcs),
                "{case}: the walk with the binaries is gdb's as far as gdb goes"
            );
            Some(stackwalk::Reference {
                pcs,
                complete: t["end"] == "outermost",
                stop: format!("the walk with the binaries ({}); gdb: {}", t["end"], g.stop),
                names: Vec::new(),
            })
        };
        let d = stackwalk::assert_agree(case, &theirs, &ours, &reference);
        eprintln!("{case}: {d:?}");
        totals += &d;
        stackwalk::assert_human_text_agrees(
            case,
            (dump, store),
            (
                &postmortem,
                &[&[os("walk"), os("--human"), dump, store][..], &local_off].concat(),
            ),
            &ours,
            &theirs,
        );
    }
    eprintln!("all cases: {totals:?}");
    assert!(totals.same_frames > 10, "{totals:?}");
}
