//! 32-bit arm (armhf): the same comparison with gdb, on crash programs cross-compiled
//! with `arm-linux-gnueabihf-gcc` (ARM and Thumb code) and crashed under
//! `qemu-arm-static`, against `gdb-multiarch`.
//!
//! QEMU's core is as the aarch64 comparison describes (no NT_FILE, no read-only file
//! mappings, no siginfo), so most programs are linked `-no-pie` and found by name under
//! `--symbols`, and gdb reads their frames from the core. gdb cannot relocate a
//! position-independent program from that core (frame 0 `??`), so the PIE cases (as every
//! Android program is) take gdb's frames from the live process at its fault, through
//! QEMU's gdbstub, and walk the core QEMU writes a moment later. Debian's armhf libc carries no DWARF CFI at all (its `.eh_frame` is the
//! 4-byte terminator): every libc frame is unwound from its EHABI tables
//! (`.ARM.exidx`/`.ARM.extab`), on both sides. The EHABI-only cases build with
//! `-funwind-tables -fno-asynchronous-unwind-tables` and drop the `.debug_frame` that
//! `-g` adds, so the program's own frames are unwound from EHABI too.
//!
//! Skipped, with the reason printed, when the cross tools are absent (`test.sh` installs
//! `gcc-arm-linux-gnueabihf`).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use postmortem_testsupport::compare;
use postmortem_testsupport::core_to_minidump::{core_to_minidump, Layout};
use postmortem_testsupport::gdb::{self, GdbCore};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu;

use super::report;

pub(crate) const CC: &str = "arm-linux-gnueabihf-gcc";
const CXX: &str = "arm-linux-gnueabihf-g++";
pub(crate) const OBJCOPY: &str = "arm-linux-gnueabihf-objcopy";
pub(crate) const QEMU: &str = "qemu-arm-static";
pub(crate) const GDB: &str = "gdb-multiarch";
/// The cross libc: QEMU's `-L` prefix, gdb's sysroot.
pub(crate) const SYSROOT: &str = "/usr/arm-linux-gnueabihf";
/// An ARMv7-A CPU with VFP and NEON, as armhf needs.
pub(crate) const CPU: &str = "cortex-a15";
const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

/// Whether the cross compiler, QEMU and gdb-multiarch can run; prints why not.
pub(crate) fn tools_present() -> bool {
    for tool in [CC, CXX, OBJCOPY, QEMU, GDB] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping the arm gdb comparison: {tool} is not installed (see test.sh)");
            return false;
        }
    }
    if !Path::new(SYSROOT).join("lib/libc.so.6").is_file() {
        eprintln!("skipping the arm gdb comparison: no cross libc under {SYSROOT}");
        return false;
    }
    true
}

/// How a case's program is built.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unwind {
    /// As the compiler leaves it with `-g`: `.debug_frame` for the program's own code.
    Dwarf,
    /// EHABI tables only: `-funwind-tables -fno-asynchronous-unwind-tables`, and the
    /// `.debug_frame` `-g` adds removed.
    EhabiOnly,
}

/// A case's program, QEMU's core, gdb's frames and our report.
struct Ran {
    report: Value,
    gdb: GdbCore,
    work: Workdir,
    exe: std::path::PathBuf,
    core: std::path::PathBuf,
}

/// Compiles `sources` with `flags` (besides `-g` and `-no-pie`, or `-fPIE` where `flags`
/// hold `-pie`), crashes the program under QEMU, checks gdb's frames with `expect` and
/// compares ours with them on every thread. gdb reads a fixed-address program's frames
/// from QEMU's core, and a position-independent one's from the live process at its fault
/// ([`crash_under_live_gdb`]).
fn run(
    name: &str,
    flags: &[&str],
    unwind: Unwind,
    sources: &[&str],
    signal: u64,
    expect: impl Fn(&GdbCore),
) -> Option<Ran> {
    if !tools_present() {
        return None;
    }
    let work = Workdir::new(name);
    let pie = flags.contains(&"-pie");
    let mut all = if pie { vec!["-fPIE"] } else { vec!["-no-pie"] };
    if unwind == Unwind::EhabiOnly {
        all.extend(["-funwind-tables", "-fno-asynchronous-unwind-tables"]);
    }
    all.extend_from_slice(flags);
    let cxx = sources.iter().any(|s| s.ends_with(".cpp"));
    let exe = work.compile(if cxx { CXX } else { CC }, &all, sources, name);
    if unwind == Unwind::EhabiOnly {
        let path = exe.to_string_lossy().into_owned();
        work.run_tool(OBJCOPY, &["--remove-section=.debug_frame", &path]);
        assert_ehabi_only(&exe);
    }
    let (core, gdb) = if pie {
        crash_under_live_gdb(&work, &exe)
    } else {
        let core = qemu::crash_under(QEMU, work.path(), &exe, CPU, SYSROOT);
        let gdb = gdb_frames(&work, &exe, &core);
        (core, gdb)
    };
    expect(&gdb);
    let symbols = [work.path(), &Path::new(SYSROOT).join("lib")];
    let report = walk_report(&core, &symbols);
    check_report(&report, signal);
    assert_eq!(
        report["crash"]["tid"].as_u64(),
        gdb.crashed_lwp,
        "crashed thread"
    );
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_source_lines(&gdb, &report);
    // the same crash as a Breakpad/Crashpad arm minidump walks to the same frames
    let minidump = arm_minidump(&work, &core);
    let from_minidump = walk_report(&minidump, &symbols);
    assert_eq!(from_minidump["dump"]["format"], "minidump");
    assert_eq!(from_minidump["dump"]["arch"], "arm");
    compare::assert_same_stacks(&gdb, &from_minidump);
    Some(Ran {
        report,
        gdb,
        work,
        exe,
        core,
    })
}

/// The minidump a Breakpad/Crashpad client would have written of `core`'s crash
/// ([`Layout::Arm32`]), with the modules' build-ids from their files.
fn arm_minidump(work: &Workdir, core: &Path) -> std::path::PathBuf {
    let bytes = std::fs::read(core).expect("read the core");
    let dir = work.path().to_path_buf();
    let module_file = |path: &str| {
        let name = Path::new(path).file_name()?;
        [
            dir.join(name),
            Path::new(SYSROOT).join(path.trim_start_matches('/')),
            Path::new(SYSROOT).join("lib").join(name),
        ]
        .into_iter()
        .find(|p| p.is_file())
    };
    let converted = core_to_minidump(&bytes, Layout::Arm32, module_file);
    let out = work.path().join("crash.dmp");
    std::fs::write(&out, &converted.bytes).expect("write the minidump");
    // MDBENCH_OUT=DIR keeps each case's minidump and program (for minidump-stackwalk
    // side by side, as docs/arm.md measures it)
    if let Some(keep) = std::env::var_os("MDBENCH_OUT") {
        let case = work
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let dir = Path::new(&keep).join(case.unwrap_or_default());
        std::fs::create_dir_all(&dir).expect("create the kept directory");
        std::fs::copy(&out, dir.join("minidump.dmp")).expect("keep the minidump");
        for entry in std::fs::read_dir(work.path()).expect("the work directory") {
            let path = entry.expect("an entry").path();
            let program = path.extension().is_none() && path.is_file();
            if let (true, Some(name)) = (program, path.file_name()) {
                std::fs::copy(&path, dir.join(name)).expect("keep the program");
            }
        }
    }
    out
}

/// The program has EHABI tables and no DWARF CFI: no `.debug_frame`, and an `.eh_frame`
/// of at most crt's 4-byte terminator.
pub(crate) fn assert_ehabi_only(exe: &Path) {
    let bytes = std::fs::read(exe).expect("read the program");
    let file = object::File::parse(&*bytes).expect("an ELF file");
    use object::{Object, ObjectSection};
    let size = |name: &str| file.section_by_name(name).map(|s| s.size());
    assert!(size(".ARM.exidx").is_some_and(|n| n > 8), "EHABI index");
    assert_eq!(size(".debug_frame"), None, ".debug_frame left");
    assert!(
        size(".eh_frame").is_none_or(|n| n <= 4),
        ".eh_frame holds CFI: {:?}",
        size(".eh_frame")
    );
}

/// gdb-multiarch's frames of a QEMU core (libraries under the sysroot, the test's own in
/// the work directory).
pub(crate) fn gdb_frames(work: &Workdir, exe: &Path, core: &Path) -> GdbCore {
    let sysroot = format!("set sysroot {SYSROOT}");
    let search = format!("set solib-search-path {}", work.path().display());
    gdb::frames_with(GDB, &[&sysroot, &search], work.path(), exe, core)
}

/// Runs a position-independent program under QEMU with gdb-multiarch at its gdbstub:
/// gdb's frames at the fault, read from the live process, and the core QEMU writes when
/// the signal goes through. From QEMU's core alone gdb cannot relocate a PIE (no NT_FILE:
/// frame 0 `??`); the live stub tells it where the program and libraries were loaded.
pub(crate) fn crash_under_live_gdb(work: &Workdir, exe: &Path) -> (std::path::PathBuf, GdbCore) {
    let sysroot = format!("set sysroot {SYSROOT}");
    let search = format!("set solib-search-path {}", work.path().display());
    qemu::crash_under_live_gdb(
        QEMU,
        work.path(),
        exe,
        CPU,
        SYSROOT,
        GDB,
        &[&sysroot, &search],
    )
}

/// `postmortem walk CORE --symbols DIR… --format json`, checked against the schema.
fn walk_report(core: &Path, symbols: &[&Path]) -> Value {
    let mut command = Command::new(report::postmortem());
    command.arg("walk").arg(core);
    for dir in symbols {
        command.arg("--symbols").arg(dir);
    }
    let out = report::output_same_with_whole_tables(
        command
            .args(["--format", "json"])
            .env("RUST_BACKTRACE", "1"),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "postmortem walk {} failed:\n{}",
        core.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    report::assert_valid(&report);
    report
}

/// What every report of a QEMU arm core must say.
fn check_report(report: &Value, signal: u64) {
    assert_eq!(report["dump"]["arch"], "arm");
    assert_eq!(report["dump"]["writer"], "qemu-user");
    assert_eq!(report["crash"]["signal"].as_u64(), Some(signal), "signal");
    assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
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
pub(crate) fn expect_stack(gdb: &GdbCore, expected: &[&str]) {
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

pub(crate) const BASIC_STACK: &[&str] = &[
    "crash_here",
    "middle",
    "outer",
    "main",
    "__libc_start_main",
    "_start",
];

/// The crashed thread has a caller frame of each of `functions`, and each was unwound
/// from `source`.
fn assert_unwound_from(report: &Value, functions: &[&str], source: &str) {
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    for name in functions {
        let f = frames
            .iter()
            .skip(1)
            .find(|f| f["function"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no frame of {name}"));
        assert_eq!(f["unwind_source"], source, "frame {f}");
    }
}

fn basic(name: &str, flags: &[&str], unwind: Unwind) -> Option<Ran> {
    run(name, flags, unwind, &["basic.c"], SIGSEGV, |gdb| {
        expect_stack(gdb, BASIC_STACK)
    })
}

#[test]
fn arm_c_o0_arm() {
    let Some(ran) = basic("arm_o0_arm", &["-O0", "-marm"], Unwind::Dwarf) else {
        return;
    };
    assert_unwound_from(&ran.report, &["middle", "outer", "main"], "debug_frame");
    // libc has EHABI tables only
    assert_unwound_from(&ran.report, &["__libc_start_main"], "arm_exidx");
}

#[test]
fn arm_c_o0_thumb() {
    basic("arm_o0_thumb", &["-O0", "-mthumb"], Unwind::Dwarf);
}

#[test]
fn arm_c_o2_thumb() {
    basic("arm_o2_thumb", &["-O2", "-mthumb"], Unwind::Dwarf);
}

#[test]
fn arm_c_o2_arm_frame_pointer() {
    basic(
        "arm_o2_arm_fp",
        &["-O2", "-marm", "-fno-omit-frame-pointer"],
        Unwind::Dwarf,
    );
}

/// Position-independent programs, as every Android program and library is: the same
/// stacks against gdb's walk of the live process (QEMU's core has no NT_FILE; the walk
/// finds the program's load address from the core's auxiliary vector and link map).
#[test]
fn arm_pie_o2_thumb() {
    basic(
        "arm_pie_o2_thumb",
        &["-O2", "-mthumb", "-pie"],
        Unwind::Dwarf,
    );
}

#[test]
fn arm_pie_o0_arm() {
    basic("arm_pie_o0_arm", &["-O0", "-marm", "-pie"], Unwind::Dwarf);
}

#[test]
fn arm_pie_ehabi_only_thumb() {
    let Some(ran) = basic(
        "arm_pie_ehabi_thumb",
        &["-O2", "-mthumb", "-pie"],
        Unwind::EhabiOnly,
    ) else {
        return;
    };
    assert_unwound_from(&ran.report, &["middle", "outer", "main"], "arm_exidx");
}

#[test]
fn arm_pie_threads_blocked_in_syscalls() {
    run(
        "arm_pie_threads",
        &["-O0", "-pthread", "-pie"],
        Unwind::Dwarf,
        &["threads.c"],
        SIGSEGV,
        |gdb| {
            assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
        },
    );
}

#[test]
fn arm_ehabi_only_arm() {
    let Some(ran) = basic("arm_ehabi_arm", &["-O2", "-marm"], Unwind::EhabiOnly) else {
        return;
    };
    assert_unwound_from(&ran.report, &["middle", "outer", "main"], "arm_exidx");
}

#[test]
fn arm_ehabi_only_thumb() {
    let Some(ran) = basic("arm_ehabi_thumb", &["-O0", "-mthumb"], Unwind::EhabiOnly) else {
        return;
    };
    assert_unwound_from(&ran.report, &["middle", "outer", "main"], "arm_exidx");
}

/// An EHABI-only program whose section headers are gone (`llvm-objcopy
/// --strip-sections`, as `sstrip` leaves a binary): its index is found through the
/// `PT_ARM_EXIDX` program header, its names in its debug file (`--only-keep-debug`, found
/// by build-id). Every frame as gdb shows on the program as it was built.
#[test]
fn arm_ehabi_only_without_section_headers() {
    if Command::new("llvm-objcopy")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: llvm-objcopy is needed (see test.sh)");
        return;
    }
    let Some(ran) = basic("arm_ehabi_nosections", &["-O2", "-marm"], Unwind::EhabiOnly) else {
        return;
    };
    let stripped = ran.work.path().join("stripped");
    let debug = ran.work.path().join("debug");
    std::fs::create_dir_all(&stripped).unwrap();
    std::fs::create_dir_all(&debug).unwrap();
    let name = ran.exe.file_name().unwrap().to_string_lossy().into_owned();
    let exe = ran.exe.to_string_lossy().into_owned();
    let debug_file = debug.join(format!("{name}.debug"));
    let stripped_file = stripped.join(&name);
    ran.work.run_tool(
        OBJCOPY,
        &["--only-keep-debug", &exe, &debug_file.to_string_lossy()],
    );
    ran.work.run_tool(
        "llvm-objcopy",
        &["--strip-sections", &exe, &stripped_file.to_string_lossy()],
    );
    // the walk would find the program as built where the core names it (the working
    // directory): only the copies are left
    std::fs::remove_file(&ran.exe).unwrap();
    // no section headers left: e_shoff and e_shnum are 0
    let bytes = std::fs::read(&stripped_file).unwrap();
    assert_eq!(&bytes[0x20..0x24], &[0; 4], "e_shoff");
    assert_eq!(&bytes[0x30..0x32], &[0; 2], "e_shnum");
    let lib = Path::new(SYSROOT).join("lib");
    let report = walk_report(&ran.core, &[&stripped, &debug, &lib]);
    compare::assert_same_stacks(&ran.gdb, &report);
    assert_unwound_from(&report, &["middle", "outer", "main"], "arm_exidx");
}

/// abort's caller is found from its prologue: without it the scan finds stale
/// return addresses between abort and __assert_fail.
///
/// gdb stops in abort's caller, glibc's static `__assert_fail_base`: the libc has no
/// symbol for it, so gdb knows no function start to read a prologue from (and it has no
/// EHABI entry: `EXIDX_CANTUNWIND` covers it). That is gdb's limitation, not a corrupt
/// stack: given the function's bounds in a debug file ([`assert_fail_base_debug_dir`]:
/// from the target of `__assert_fail`'s `bl`, as objdump disassembles it, to
/// `__assert_fail`), gdb reads its prologue (`push {r7, lr}`, `sub sp, #40`) and walks on
/// to `__assert_fail`, `check_invariant`, `main` and `_start`. Ours, walking the plain
/// libc, must give every one of those frames, pc for pc, none extra; only the name of
/// `__assert_fail_base` (which the plain libc does not have) is left out of the reference.
/// The crashed thread of `report` (assert.c's failed assertion) names, in this order
/// with others between, the frames from `abort` to `_start`: those past where gdb stops.
pub(crate) fn expect_assert_frames_in_order(report: &Value) {
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    let ours: Vec<&str> = frames
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    let mut rest = ours.iter();
    for name in [
        "abort",
        "__assert_fail",
        "check_invariant",
        "main",
        "_start",
    ] {
        assert!(
            rest.any(|n| *n == name),
            "ours lack {name} in order: {ours:?}"
        );
    }
}

#[test]
fn arm_abort_through_libc() {
    let ran = run(
        "arm_assert",
        &["-O0", "-mthumb"],
        Unwind::Dwarf,
        &["assert.c"],
        SIGABRT,
        |gdb| {
            // glibc's abort has no unwind table: gdb reads its prologue to reach its
            // caller (and stops after it, in __assert_fail_base, which has no symbol)
            expect_stack(gdb, &["??", "??", "raise", "abort", "??"]);
        },
    );
    let Some(ran) = ran else { return };
    // where gdb stopped, ours goes on to the program's frames
    expect_assert_frames_in_order(&ran.report);
    // gdb, told where __assert_fail_base starts and ends, walks on from where it stopped
    let debug = assert_fail_base_debug_dir(&ran.work);
    let sysroot = format!("set sysroot {SYSROOT}");
    let search = format!("set solib-search-path {}", ran.work.path().display());
    let debug_dir = format!("set debug-file-directory {}", debug.display());
    let mut aided = gdb::frames_with(
        GDB,
        // before the sysroot, which loads the libraries (and looks for their debug files)
        &[&debug_dir, &sysroot, &search],
        ran.work.path(),
        &ran.exe,
        &ran.core,
    );
    expect_stack(
        &aided,
        &[
            "??",
            "??",
            "raise",
            "abort",
            "__assert_fail_base",
            "__assert_fail",
            "check_invariant",
            "main",
            "__libc_start_main",
            "_start",
        ],
    );
    let plain = ran.gdb.crashed();
    let crashed = aided.crashed_lwp;
    let thread = aided
        .threads
        .iter_mut()
        .find(|t| Some(t.lwp) == crashed)
        .expect("the crashed thread");
    // the frames the plain gdb shows are the aided gdb's first ones, pc for pc
    let pcs = |frames: &[gdb::GdbFrame]| frames.iter().map(|f| f.pc).collect::<Vec<_>>();
    assert_eq!(
        pcs(&plain.frames),
        pcs(&thread.frames[..plain.frames.len()]),
        "the aided gdb's first frames"
    );
    let base = plain.frames.len() - 1;
    assert_eq!(
        thread.frames[base].name.as_deref(),
        Some("__assert_fail_base")
    );
    thread.frames[base].name = None;
    compare::assert_same_stacks(&aided, &ran.report);
}

/// A debug file for the armhf libc, found by gdb by its build-id under the returned
/// directory (`debug-file-directory`), whose only symbol is the static function
/// `__assert_fail` calls (`__assert_fail_base`, which `.dynsym` does not name): it starts
/// at the target of `__assert_fail`'s `bl` to an address no dynamic symbol names (as
/// `arm-linux-gnueabihf-objdump -d` disassembles `__assert_fail`) and ends where
/// `__assert_fail` starts (the code between them is that function's, as the disassembly
/// shows: `__assert_fail_base` is placed just before its one caller). The symbol is added
/// by `objcopy --add-symbol` to the `--only-keep-debug` copy of the libc, its size then
/// written into the symbol table (objcopy sets none; gdb reads a sizeless symbol as
/// reaching the next one, which here is far away).
fn assert_fail_base_debug_dir(work: &Workdir) -> std::path::PathBuf {
    use object::{Object, ObjectSection, ObjectSymbol};
    let libc = Path::new(SYSROOT).join("lib/libc.so.6");
    let bytes = std::fs::read(&libc).expect("read the armhf libc");
    let file = object::File::parse(&*bytes).expect("the libc is ELF");
    let named: Vec<u64> = file.dynamic_symbols().map(|s| s.address() & !1).collect();
    let assert_fail = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("__assert_fail"))
        .expect("__assert_fail in .dynsym");
    let (start, size) = (assert_fail.address() & !1, assert_fail.size());
    let out = Command::new("arm-linux-gnueabihf-objdump")
        .args(["-d", "-M", "force-thumb"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={:#x}", start + size))
        .arg(&libc)
        .output()
        .expect("run arm-linux-gnueabihf-objdump");
    let text = String::from_utf8_lossy(&out.stdout);
    let base = text
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("\tbl\t")?;
            u64::from_str_radix(rest.split_whitespace().next()?, 16).ok()
        })
        .find(|target| !named.contains(target))
        .unwrap_or_else(|| panic!("__assert_fail calls no unnamed function:\n{text}"));
    assert!(
        base < start,
        "__assert_fail_base is not before __assert_fail"
    );
    let text_section = file.section_by_name(".text").expect(".text");
    let build_id = file.build_id().ok().flatten().expect("a build-id");
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let dir = work.path().join("debug-aid");
    let into = dir.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&into).expect("create the debug directory");
    let debug = into.join(format!("{}.debug", &hex[2..]));
    // Thumb code: the symbol's low bit set, as the libc's own symbols have it
    let symbol = format!(
        "__assert_fail_base=.text:{:#x},function,local",
        (base - text_section.address()) | 1
    );
    work.run_tool(
        OBJCOPY,
        &[
            "--only-keep-debug",
            "--add-symbol",
            &symbol,
            &libc.to_string_lossy(),
            &debug.to_string_lossy(),
        ],
    );
    set_symbol_size(&debug, "__assert_fail_base", start - base);
    dir
}

/// Writes `size` into the `st_size` of the symbol `name` in the ELF32 little-endian file's
/// `.symtab`.
fn set_symbol_size(path: &Path, name: &str, size: u64) {
    use object::{Object, ObjectSection};
    let mut bytes = std::fs::read(path).expect("read the debug file");
    let (symtab, strtab) = {
        let file = object::File::parse(&*bytes).expect("ELF");
        let range = |s: &str| {
            let section = file.section_by_name(s).unwrap_or_else(|| panic!("no {s}"));
            let (offset, len) = section.file_range().expect("in the file");
            (offset as usize, len as usize)
        };
        (range(".symtab"), range(".strtab"))
    };
    let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let entry = (symtab.0..symtab.0 + symtab.1)
        .step_by(16)
        .find(|&at| {
            let name_at = strtab.0 + word(&bytes, at) as usize;
            bytes[name_at..].split(|&b| b == 0).next() == Some(name.as_bytes())
        })
        .unwrap_or_else(|| panic!("no {name} in .symtab"));
    let size = u32::try_from(size).expect("a 32-bit size");
    bytes[entry + 8..entry + 12].copy_from_slice(&size.to_le_bytes());
    std::fs::write(path, &bytes).expect("write the debug file");
}

/// A crash inside a SIGSEGV handler. QEMU writes the signal frame with `uc_flags` 0,
/// where the kernel writes a magic number, and gdb then reads the interrupted registers
/// in the layout of kernels before 2.6.18 (its next frame's pc is 0): gdb's frames are
/// compared up to its signal frame, and ours must go on to the interrupted `victim`, at
/// the faulting line, and `main`.
fn signal_case(name: &str, flags: &[&str]) {
    if !tools_present() {
        return;
    }
    let work = Workdir::new(name);
    let mut all = vec!["-no-pie"];
    all.extend_from_slice(flags);
    let exe = work.compile(CC, &all, &["sighandler.c"], name);
    let core = qemu::crash_under(QEMU, work.path(), &exe, CPU, SYSROOT);
    let mut gdb = gdb_frames(&work, &exe, &core);
    expect_stack(&gdb, &["handler_fault", "on_segv"]);
    let crashed = gdb.crashed_lwp;
    let thread = gdb
        .threads
        .iter_mut()
        .find(|t| Some(t.lwp) == crashed)
        .expect("the crashed thread");
    let tramp = thread
        .frames
        .iter()
        .position(|f| f.kind == "SIGTRAMP")
        .expect("gdb sees the signal frame");
    thread.frames.truncate(tramp + 1);
    thread.complete = false;
    let symbols = [work.path(), &Path::new(SYSROOT).join("lib")];
    let report = walk_report(&core, &symbols);
    check_report(&report, SIGSEGV);
    compare::assert_same_stacks(&gdb, &report);
    let frames = report["threads"][0]["frames"].as_array().expect("frames");
    let interrupted = &frames[tramp + 1];
    assert_eq!(interrupted["function"], "victim", "{interrupted}");
    assert_eq!(interrupted["line"], 24, "the first fault's line");
    assert_eq!(interrupted["trust"], "context");
    assert_eq!(frames[tramp + 2]["function"], "main");
}

#[test]
fn arm_crash_inside_signal_handler() {
    signal_case("arm_sighandler", &["-O0", "-marm"]);
}

#[test]
fn arm_crash_inside_signal_handler_thumb() {
    signal_case("arm_sighandler_thumb", &["-O0", "-mthumb"]);
}

/// C++: an uncaught exception through libstdc++'s EHABI tables (its personality
/// routine's entries are the generic model) to std::terminate and abort.
fn uncaught(name: &str, unwind: Unwind) -> Option<Ran> {
    run(
        name,
        &["-O0", "-mthumb"],
        unwind,
        &["uncaught.cpp"],
        SIGABRT,
        |gdb| {
            let stack = names(gdb);
            let mut rest = stack.iter();
            for name in [
                "abort",
                "std::terminate()",
                "__cxa_throw",
                "net::connect_to",
            ] {
                assert!(
                    rest.any(|n| n == name),
                    "gdb's stack lacks {name}: {stack:?}"
                );
            }
        },
    )
}

#[test]
fn arm_cxx_uncaught_exception() {
    uncaught("arm_uncaught", Unwind::Dwarf);
}

#[test]
fn arm_cxx_uncaught_exception_ehabi_only() {
    let Some(ran) = uncaught("arm_uncaught_ehabi", Unwind::EhabiOnly) else {
        return;
    };
    assert_unwound_from(
        &ran.report,
        &["net::connect_to", "net::open_session", "main"],
        "arm_exidx",
    );
}

#[test]
fn arm_threads_blocked_in_syscalls() {
    run(
        "arm_threads",
        &["-O0", "-pthread"],
        Unwind::Dwarf,
        &["threads.c"],
        SIGSEGV,
        |gdb| {
            assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
        },
    );
}
