//! aarch64: the same comparison with gdb, on crash programs cross-compiled with
//! `aarch64-linux-gnu-gcc` and crashed under `qemu-aarch64-static -cpu max` (which
//! implements pointer authentication), against `gdb-multiarch`.
//!
//! QEMU's user-mode emulator writes its own core (`qemu_PROG_TIME_PID.core`, in the working
//! directory): threads, registers and writable memory, but no NT_FILE and none of the
//! read-only file mappings — not even the executable's headers. So:
//! - most programs are linked `-no-pie`: gdb 13 cannot relocate a PIE whose headers the
//!   core lacks (it prints `?? ()` for every frame), and a test that gdb cannot read
//!   proves nothing. The PIE cases (`-pie`, as every Android program is) take gdb's
//!   frames from the live process at its fault instead, through QEMU's gdbstub, and walk
//!   the core QEMU writes a moment later;
//! - the modules carry no build-id: postmortem matches the files under `--symbols` by
//!   name (the program's directory and the cross libc, `/usr/aarch64-linux-gnu/lib`),
//!   gdb finds them through `set sysroot`. Debian has no debug package for the cross
//!   libc, so libc frames are named from `.dynsym` on both sides (or not at all);
//! - the core has no siginfo (gdb: "Unable to read siginfo"), so the signal is checked
//!   against what the program is known to do;
//! - the core has no NT_ARM_PAC_MASK: where gdb cannot strip a signed return address
//!   it stops. For those cases gdb's reference is a second run of the same program
//!   under `-cpu max,pauth=off` (the PAC instructions are hints that then do nothing:
//!   same code, same addresses, unsigned return addresses), which gdb walks to the end:
//!   our walk of the signed core must show exactly those frames;
//! - gdb 13 never returns from a signal frame of a core taken with SVE enabled (its
//!   reader of the signal frame's SVE record loops), so signal cases give gdb a core of
//!   `-cpu max,sve=off` and ours are compared with it on both cores (on the second core,
//!   the crashed thread only: other threads may be caught elsewhere in another run).
//!
//! Skipped, with the reason printed, when the cross tools are absent (`test.sh` installs
//! them).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use postmortem_testsupport::gdb::{self, GdbCore};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu::{tools_present_with as tools_present, CC, GDB, SYSROOT};
use postmortem_testsupport::{compare, qemu};

use super::report;

const CXX: &str = "aarch64-linux-gnu-g++";
/// QEMU's CPU for the cores we walk: every extension, pointer authentication included.
const CPU: &str = "max";
/// The same CPU with return addresses left unsigned, for gdb's reference of PAC builds.
const CPU_NO_PAC: &str = "max,pauth=off";
/// The same CPU without SVE, for gdb's reference of signal frames.
const CPU_NO_SVE: &str = "max,sve=off";
/// Both: gdb's reference of signal frames in PAC builds.
const CPU_NO_SVE_NO_PAC: &str = "max,sve=off,pauth=off";
const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

/// Runs `exe` under QEMU's `cpu` until it dies and returns QEMU's core, renamed after the
/// CPU so that several runs can share a work directory. The host kernel may dump QEMU
/// itself as `core` too; that file is removed.
fn crash(work: &Workdir, exe: &Path, cpu: &str) -> PathBuf {
    let core = qemu::crash_on(work.path(), exe, cpu);
    let tag: String = cpu
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let renamed = work.path().join(format!("cpu-{tag}.core"));
    std::fs::rename(&core, &renamed).expect("rename the qemu core");
    renamed
}

/// gdb-multiarch's frames of a QEMU core. gdb looks for shared libraries under the
/// sysroot, and for the test's own ones in the work directory.
fn gdb_frames(work: &Workdir, exe: &Path, core: &Path) -> GdbCore {
    let sysroot = format!("set sysroot {SYSROOT}");
    let search = format!("set solib-search-path {}", work.path().display());
    gdb::frames_with(
        GDB,
        &[&sysroot, &search, "set architecture aarch64"],
        work.path(),
        exe,
        core,
    )
}

/// `postmortem walk CORE --symbols DIR… [extra] --format json`, checked against the
/// schema.
fn walk_report(core: &Path, symbols: &[&Path], extra: &[&str]) -> Value {
    let mut command = Command::new(report::postmortem());
    command.arg("walk").arg(core);
    for dir in symbols {
        command.arg("--symbols").arg(dir);
    }
    let out = report::output_same_with_whole_tables(
        command
            .args(extra)
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

/// What every report of a QEMU core must say, whatever the program.
fn check_report(report: &Value, signal: u64) {
    assert_eq!(report["dump"]["arch"], "aarch64");
    assert_eq!(report["dump"]["writer"], "qemu-user");
    // QEMU cores carry no PAC mask; `pac-mask-inferred` is said only where a signed
    // return address was stripped with the inferred one (issue 35 item 9), which depends
    // on how the program and its libc were built, so it is not asserted here.
    assert_eq!(report["crash"]["signal"].as_u64(), Some(signal), "signal");
    assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
    // Where gdb gave up early, ours goes on to the outermost frame.
    for thread in report["threads"].as_array().expect("threads") {
        assert_eq!(
            thread["end"], "outermost",
            "thread {} did not reach the outermost frame: {}",
            thread["tid"], thread["end_detail"]
        );
    }
}

/// gdb's view of another run of the same program, its thread ids renamed to those of
/// `report` (QEMU numbers threads in creation order, so the n-th lowest id of one run is
/// the n-th of the other).
fn renamed_to(gdb: &GdbCore, report: &Value) -> GdbCore {
    let mut ours: Vec<u64> = report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["tid"].as_u64())
        .collect();
    ours.sort_unstable();
    let mut theirs: Vec<u64> = gdb.threads.iter().map(|t| t.lwp).collect();
    theirs.sort_unstable();
    assert_eq!(ours.len(), theirs.len(), "both runs have the same threads");
    let rename = |lwp: u64| {
        theirs
            .iter()
            .position(|&t| t == lwp)
            .map_or(lwp, |i| ours[i])
    };
    let mut renamed = gdb.clone();
    renamed.crashed_lwp = gdb.crashed_lwp.map(rename);
    for t in &mut renamed.threads {
        t.lwp = rename(t.lwp);
    }
    renamed
}

/// Only the crashed thread of both sides: in a second run the other threads of a
/// multithreaded program may be caught elsewhere (a thread that sent the signal may or
/// may not have reached `pthread_join`), so only the crashed thread's stack is the same.
fn crashed_threads(gdb: &GdbCore, report: &Value) -> (GdbCore, Value) {
    let mut gdb = gdb.clone();
    gdb.threads.retain(|t| Some(t.lwp) == gdb.crashed_lwp);
    let mut report = report.clone();
    let crashed = report["threads"][0].clone();
    report["threads"] = Value::Array(vec![crashed]);
    (gdb, report)
}

/// One aarch64 case: how the program is built and which core gdb reads.
struct Case<'a> {
    name: &'a str,
    compiler: &'a str,
    /// Besides `-g -no-pie`.
    flags: &'a [&'a str],
    sources: &'a [&'a str],
    signal: u64,
    /// The CPU of gdb's reference core: [`CPU`], or a variant of it where gdb cannot
    /// read the `-cpu max` core to the end (see the module comment).
    reference_cpu: &'a str,
}

/// A case's work directory, program, `-cpu max` core and our report of that core.
struct Ran {
    work: Workdir,
    exe: PathBuf,
    core: PathBuf,
    report: Value,
}

impl Case<'_> {
    /// Compiles the program, crashes it under QEMU, checks gdb's frames with `expect` and
    /// compares ours with them on every thread. Returns `None` when the tools are absent
    /// and the case was skipped.
    fn run(&self, expect: impl Fn(&GdbCore)) -> Option<Ran> {
        if !tools_present(self.compiler) {
            return None;
        }
        let work = Workdir::new(self.name);
        let mut flags = if self.pie() {
            vec!["-fPIE"]
        } else {
            vec!["-no-pie"]
        };
        flags.extend_from_slice(self.flags);
        let exe = work.compile(self.compiler, &flags, self.sources, self.name);
        Some(self.run_built(work, exe, expect))
    }

    /// [`Case::run`] for a program already built in `work` (`compiler`, `flags` and
    /// `sources` are not used).
    fn run_built(&self, work: Workdir, exe: PathBuf, expect: impl Fn(&GdbCore)) -> Ran {
        let symbols = [work.path(), &Path::new(SYSROOT).join("lib")];
        let (reference, gdb) = if self.pie() {
            crash_under_live_gdb(&work, &exe, self.reference_cpu)
        } else {
            let reference = crash(&work, &exe, self.reference_cpu);
            let gdb = gdb_frames(&work, &exe, &reference);
            (reference, gdb)
        };
        expect(&gdb);
        let report = walk_report(&reference, &symbols, &[]);
        check_report(&report, self.signal);
        assert_eq!(
            report["crash"]["tid"].as_u64(),
            gdb.crashed_lwp,
            "crashed thread"
        );
        compare::assert_same_stacks(&gdb, &report);
        if self.reference_cpu == CPU {
            return Ran {
                work,
                exe,
                core: reference,
                report,
            };
        }
        let core = crash(&work, &exe, CPU);
        let report = walk_report(&core, &symbols, &[]);
        check_report(&report, self.signal);
        let (gdb, ours) = crashed_threads(&renamed_to(&gdb, &report), &report);
        compare::assert_same_stacks(&gdb, &ours);
        Ran {
            work,
            exe,
            core,
            report,
        }
    }
}

impl Case<'_> {
    /// A position-independent program (`-pie` among the flags): gdb's frames come from
    /// the live process ([`crash_under_live_gdb`]).
    fn pie(&self) -> bool {
        self.flags.contains(&"-pie")
    }
}

/// Runs a position-independent program under QEMU's `cpu` with gdb-multiarch at its
/// gdbstub: gdb's frames at the fault, read from the live process, and the core QEMU
/// writes when the signal goes through. From QEMU's core alone gdb cannot relocate a PIE
/// (every frame `??`); the live stub tells it where the program and libraries were loaded.
fn crash_under_live_gdb(work: &Workdir, exe: &Path, cpu: &str) -> (PathBuf, GdbCore) {
    let sysroot = format!("set sysroot {SYSROOT}");
    let search = format!("set solib-search-path {}", work.path().display());
    let setup = [
        sysroot.as_str(),
        search.as_str(),
        "set architecture aarch64",
    ];
    qemu::crash_under_live_gdb(qemu::QEMU, work.path(), exe, cpu, SYSROOT, GDB, &setup)
}

/// A C program built with the cross gcc and compared on the `-cpu max` core.
fn case(
    name: &str,
    flags: &[&str],
    sources: &[&str],
    signal: u64,
    expect: impl Fn(&GdbCore),
) -> Option<Ran> {
    Case {
        name,
        compiler: CC,
        flags,
        sources,
        signal,
        reference_cpu: CPU,
    }
    .run(expect)
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

fn basic(name: &str, flags: &[&str]) {
    case(name, flags, &["basic.c"], SIGSEGV, |gdb| {
        expect_stack(gdb, &["crash_here", "middle", "outer", "main", "_start"]);
    });
}

#[test]
fn aarch64_c_o0() {
    basic("a64_o0", &["-O0"]);
}

/// Position-independent programs, as every Android program and library is: the same
/// stacks against gdb's walk of the live process (QEMU's core has no NT_FILE and not
/// even the program's headers).
#[test]
fn aarch64_pie_o0() {
    basic("a64_pie_o0", &["-O0", "-pie"]);
}

#[test]
fn aarch64_pie_o2_omit_frame_pointer() {
    basic(
        "a64_pie_o2_omit_fp",
        &["-O2", "-fomit-frame-pointer", "-pie"],
    );
}

#[test]
fn aarch64_pie_threads() {
    case(
        "a64_pie_threads",
        &["-O0", "-pthread", "-pie"],
        &["threads.c"],
        SIGSEGV,
        |gdb| assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher"),
    );
}

#[test]
fn aarch64_c_o2_omit_frame_pointer() {
    basic("a64_o2_omit_fp", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn aarch64_c_o2_no_omit_frame_pointer() {
    basic("a64_o2_no_omit_fp", &["-O2", "-fno-omit-frame-pointer"]);
}

/// Signed return addresses. gdb's reference is the `pauth=off` run, walked to `_start`;
/// on the signed core gdb stops early for want of a PAC mask (which shows the return
/// addresses really were signed), and ours must show the reference's frames.
fn pac(name: &str, compiler: &str, flags: &[&str], sources: &[&str], expected: &[&str]) {
    let ran = Case {
        name,
        compiler,
        flags,
        sources,
        signal: SIGSEGV,
        reference_cpu: CPU_NO_PAC,
    }
    .run(|gdb| {
        expect_stack(gdb, expected);
        assert!(
            gdb.crashed().complete,
            "gdb stopped: {}",
            gdb.crashed().stop
        );
    });
    let Some(ran) = ran else { return };
    let signed = gdb_frames(&ran.work, &ran.exe, &ran.core);
    let stack = names(&signed);
    assert_eq!(stack.first().map(String::as_str), expected.first().copied());
    assert!(
        !stack.iter().any(|n| n == "main"),
        "gdb unwound past a signed return address without a PAC mask: {stack:?}"
    );
    let frames = ran.report["threads"][0]["frames"]
        .as_array()
        .expect("frames");
    // The callers were found by their CFI, which gimli reads only once the aarch64 pass
    // has made the `B` augmentation (key B) readable.
    for f in frames.iter().skip(1) {
        if matches!(f["function"].as_str(), Some("middle" | "main")) {
            assert_eq!(f["trust"], "cfi", "frame {f}");
        }
    }
    for f in frames {
        let pc = f["pc"]
            .as_str()
            .and_then(compare::parse_hex)
            .expect("hex pc");
        assert!(pc < 1 << 48, "a pc kept its PAC bits: {pc:#x}");
    }
}

const BASIC_STACK: &[&str] = &["crash_here", "middle", "outer", "main", "_start"];

#[test]
fn aarch64_pac_ret_key_a() {
    pac(
        "a64_pac_ret",
        CC,
        &["-O2", "-mbranch-protection=pac-ret"],
        &["basic.c"],
        BASIC_STACK,
    );
}

#[test]
fn aarch64_pac_ret_key_b() {
    pac(
        "a64_pac_ret_b",
        CC,
        &["-O2", "-mbranch-protection=pac-ret+b-key"],
        &["basic.c"],
        BASIC_STACK,
    );
}

#[test]
fn aarch64_pac_ret_o0_frame_records() {
    pac(
        "a64_pac_ret_o0",
        CC,
        &["-O0", "-mbranch-protection=pac-ret+leaf"],
        &["basic.c"],
        BASIC_STACK,
    );
}

#[test]
fn aarch64_abort_from_failed_assert() {
    case("a64_assert", &["-O0"], &["assert.c"], SIGABRT, |gdb| {
        let stack = names(gdb);
        assert!(
            stack.iter().any(|n| n == "check_invariant"),
            "gdb's stack: {stack:?}"
        );
    });
}

#[test]
fn aarch64_threads_blocked_in_syscalls() {
    case(
        "a64_threads",
        &["-O0", "-pthread"],
        &["threads.c"],
        SIGSEGV,
        |gdb| {
            assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
            expect_stack(gdb, &["fault", "crasher"]);
        },
    );
}

/// A crash in a signal handler: the walk goes through QEMU's sigreturn trampoline (an
/// anonymous page, no symbol: gdb shows a nameless `SIGTRAMP` frame) to the frame the
/// signal interrupted, at the interrupted instruction. gdb reads a core of
/// `reference_cpu` ([`CPU_NO_SVE`], or [`CPU_NO_SVE_NO_PAC`] for PAC builds).
fn signal_case(name: &str, flags: &[&str], source: &str, reference_cpu: &str, expected: &[&str]) {
    let ran = Case {
        name,
        compiler: CC,
        flags,
        sources: &[source],
        signal: SIGSEGV,
        reference_cpu,
    }
    .run(|gdb| {
        expect_stack(gdb, expected);
        let frames = &gdb.crashed().frames;
        let tramp = frames
            .iter()
            .position(|f| f.kind == "SIGTRAMP")
            .unwrap_or_else(|| panic!("gdb sees no signal frame: {:?}", names(gdb)));
        assert_eq!(frames[tramp].name, None, "QEMU's trampoline has no symbol");
        assert!(
            gdb.crashed().complete,
            "gdb stopped: {}",
            gdb.crashed().stop
        );
    });
    let Some(ran) = ran else { return };
    let frames = ran.report["threads"][0]["frames"]
        .as_array()
        .expect("frames");
    let tramp = frames
        .iter()
        .position(|f| f["module"].is_null() && f["function"].is_null())
        .expect("our signal frame");
    let interrupted = &frames[tramp + 1];
    assert_eq!(
        interrupted["trust"], "context",
        "the interrupted frame's registers come from the signal frame: {interrupted}"
    );
}

#[test]
fn aarch64_crash_inside_sigsegv_handler() {
    signal_case(
        "a64_sighandler",
        &["-O0"],
        "sighandler.c",
        CPU_NO_SVE,
        &["handler_fault", "on_segv", "??", "victim", "main", "_start"],
    );
}

#[test]
fn aarch64_sigsegv_while_handling_sigusr1() {
    signal_case(
        "a64_sigusr1",
        &["-O0"],
        "sigusr1.c",
        CPU_NO_SVE,
        &[
            "handler_store",
            "on_usr1",
            "??",
            "raise",
            "send_signal",
            "main",
            "_start",
        ],
    );
}

#[test]
fn aarch64_sigsegv_while_handling_sigusr1_o2() {
    signal_case(
        "a64_sigusr1_o2",
        &["-O2", "-fomit-frame-pointer"],
        "sigusr1.c",
        CPU_NO_SVE,
        &[
            "handler_store",
            "??",
            "raise",
            "send_signal",
            "main",
            "_start",
        ],
    );
}

#[test]
fn aarch64_sigsegv_while_handling_sigusr1_pac_ret() {
    signal_case(
        "a64_sigusr1_pac",
        &["-O2", "-mbranch-protection=pac-ret+leaf"],
        "sigusr1.c",
        CPU_NO_SVE_NO_PAC,
        &[
            "handler_store",
            "??",
            "raise",
            "send_signal",
            "main",
            "_start",
        ],
    );
}

#[test]
fn aarch64_handler_on_alternate_signal_stack() {
    signal_case(
        "a64_sigaltstack",
        &["-O0"],
        "sigaltstack.c",
        CPU_NO_SVE,
        &[
            "deep_in_handler",
            "on_segv",
            "??",
            "victim",
            "main",
            "_start",
        ],
    );
}

#[test]
fn aarch64_handler_on_alternate_signal_stack_pac_b_key() {
    signal_case(
        "a64_sigaltstack_pac_b",
        &["-O2", "-mbranch-protection=pac-ret+b-key"],
        "sigaltstack.c",
        CPU_NO_SVE_NO_PAC,
        &["deep_in_handler", "on_segv", "??", "main", "_start"],
    );
}

#[test]
fn aarch64_frameless_leaf_handler() {
    signal_case(
        "a64_leaf_handler",
        &["-O2"],
        "leaf_handler.c",
        CPU_NO_SVE,
        &["on_segv", "??", "victim", "caller", "main", "_start"],
    );
}

#[test]
fn aarch64_handler_faults_on_a_thread_interrupted_in_read() {
    signal_case(
        "a64_thread_signal",
        &["-O0", "-pthread"],
        "thread_signal.c",
        CPU_NO_SVE,
        &[
            "fault_in_handler",
            "on_usr1",
            "??",
            "read",
            "blocked_reader",
        ],
    );
}

#[test]
fn aarch64_qsort_comparator_faults_inside_libc() {
    case("a64_qsort", &["-O0"], &["qsort_cmp.c"], SIGSEGV, |gdb| {
        expect_stack(
            gdb,
            &["by_weight", "qsort_r", "sort_records", "main", "_start"],
        );
        let in_libc = gdb
            .crashed()
            .frames
            .iter()
            .filter(|f| f.file.is_none() && f.name.as_deref() != Some("_start"))
            .count();
        assert!(in_libc >= 3, "gdb's frames in libc: {:?}", names(gdb));
    });
}

fn cpp_virtual(name: &str, compiler: &str, flags: &[&str]) {
    Case {
        name,
        compiler,
        flags,
        sources: &["virtual.cpp"],
        signal: SIGSEGV,
        reference_cpu: CPU,
    }
    .run(|gdb| {
        expect_stack(
            gdb,
            &[
                "shapes::Square::area",
                "shapes::total_area",
                "main",
                "_start",
            ],
        );
    });
}

#[test]
fn aarch64_cpp_virtual_method_gxx() {
    cpp_virtual("a64_virtual_gxx", CXX, &["-O0"]);
}

#[test]
fn aarch64_cpp_virtual_method_gxx_o2() {
    cpp_virtual("a64_virtual_gxx_o2", CXX, &["-O2"]);
}

#[test]
fn aarch64_cpp_throw_terminate_abort() {
    Case {
        name: "a64_terminate",
        compiler: CXX,
        flags: &["-O0"],
        sources: &["terminate.cpp"],
        signal: SIGABRT,
        reference_cpu: CPU,
    }
    .run(|gdb| {
        expect_stack(
            gdb,
            &[
                "??",
                "raise",
                "abort",
                "__gnu_cxx::__verbose_terminate_handler()",
                "_Unwind_RaiseException",
                "__cxa_throw",
                "config::parse_setting",
                "config::load_config",
                "main",
                "_start",
            ],
        );
    });
}

/// A destructor that faults while an exception unwinds through its frame: the C++
/// unwinder's cleanup phase resumes `io::fill` at its landing pad, which calls it (the
/// unwinder's own frames are gone by then), so the caller's pc is in landing-pad code.
fn cpp_dtor_during_unwind(name: &str, flags: &[&str], reference_cpu: &str) {
    Case {
        name,
        compiler: CXX,
        flags,
        sources: &["dtor_throw.cpp"],
        signal: SIGSEGV,
        reference_cpu,
    }
    .run(|gdb| {
        expect_stack(gdb, &["io::Buffer::~Buffer", "io::fill", "main", "_start"]);
    });
}

#[test]
fn aarch64_cpp_destructor_faults_during_unwinding() {
    cpp_dtor_during_unwind("a64_dtor_throw", &["-O0"], CPU);
}

#[test]
fn aarch64_cpp_destructor_faults_during_unwinding_o2_pac_ret() {
    cpp_dtor_during_unwind(
        "a64_dtor_throw_pac",
        &["-O2", "-mbranch-protection=pac-ret"],
        CPU_NO_PAC,
    );
}

/// clang for aarch64: `--target` alone finds Debian's cross gcc installation (crt files,
/// libgcc, the cross libc under /usr/aarch64-linux-gnu) and links with its ld.
const CLANG: &str = "clang";
const CLANGXX: &str = "clang++";

fn clang_flags<'a>(flags: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--target=aarch64-linux-gnu"];
    all.extend_from_slice(flags);
    all
}

#[test]
fn aarch64_clang_o0() {
    let flags = clang_flags(&["-O0"]);
    Case {
        name: "a64_clang_o0",
        compiler: CLANG,
        flags: &flags,
        sources: &["basic.c"],
        signal: SIGSEGV,
        reference_cpu: CPU,
    }
    .run(|gdb| expect_stack(gdb, BASIC_STACK));
}

#[test]
fn aarch64_clang_o2_pac_ret_b_key() {
    pac(
        "a64_clang_o2_pac_b",
        CLANG,
        &clang_flags(&["-O2", "-mbranch-protection=pac-ret+b-key"]),
        &["basic.c"],
        BASIC_STACK,
    );
}

#[test]
fn aarch64_clangxx_virtual_method_o0() {
    cpp_virtual("a64_virtual_clangxx", CLANGXX, &clang_flags(&["-O0"]));
}

#[test]
fn aarch64_clangxx_virtual_method_o2_pac_ret_b_key() {
    pac(
        "a64_virtual_clangxx_pac_b",
        CLANGXX,
        &clang_flags(&["-O2", "-mbranch-protection=pac-ret+b-key"]),
        &["virtual.cpp"],
        &[
            "shapes::Square::area",
            "shapes::total_area",
            "main",
            "_start",
        ],
    );
}

#[test]
fn aarch64_static_glibc_pac_ret() {
    pac(
        "a64_static_pac",
        CC,
        &["-O2", "-static", "-mbranch-protection=pac-ret"],
        &["basic.c"],
        BASIC_STACK,
    );
}

#[test]
fn aarch64_c_o3_inlined_functions() {
    case("a64_o3_inline", &["-O3"], &["inline.c"], SIGSEGV, |gdb| {
        expect_stack(
            gdb,
            &[
                "store_value",
                "scale_and_store",
                "prepare",
                "compute",
                "main",
            ],
        );
        assert!(
            gdb.crashed().frames.iter().any(|f| f.kind == "INLINE"),
            "gdb shows inline frames"
        );
    });
}

#[test]
fn aarch64_deep_recursion() {
    case(
        "a64_recursion",
        &["-O0"],
        &["recursion.c"],
        SIGSEGV,
        |gdb| {
            let depth = names(gdb).iter().filter(|n| *n == "recurse").count();
            assert_eq!(depth, 251, "gdb's recursion depth");
        },
    );
}

#[test]
fn aarch64_clang_os_omit_frame_pointer() {
    let flags = clang_flags(&["-Os", "-fomit-frame-pointer"]);
    Case {
        name: "a64_clang_os",
        compiler: CLANG,
        flags: &flags,
        sources: &["basic.c"],
        signal: SIGSEGV,
        reference_cpu: CPU,
    }
    .run(|gdb| expect_stack(gdb, BASIC_STACK));
}

#[test]
fn aarch64_clang_threads_o2() {
    let flags = clang_flags(&["-O2", "-pthread"]);
    Case {
        name: "a64_clang_threads",
        compiler: CLANG,
        flags: &flags,
        sources: &["threads.c"],
        signal: SIGSEGV,
        reference_cpu: CPU,
    }
    .run(|gdb| {
        assert_eq!(gdb.threads.len(), 5, "main, three parked threads, crasher");
        expect_stack(gdb, &["fault", "crasher"]);
    });
}

/// A crash in the test's own shared library (signed return addresses), called through
/// the PLT.
#[test]
fn aarch64_crash_in_own_shared_library_pac_ret() {
    if !tools_present(CC) {
        return;
    }
    let work = Workdir::new("a64_plt");
    work.source("plt_lib.c");
    work.source("plt_main.c");
    work.run_tool(
        CC,
        &[
            "-g",
            "-O1",
            "-fPIC",
            "-shared",
            "-mbranch-protection=pac-ret",
            "plt_lib.c",
            "-o",
            "libcrashlib.so",
        ],
    );
    work.run_tool(
        CC,
        &[
            "-g",
            "-O0",
            "-no-pie",
            "plt_main.c",
            "-o",
            "plt",
            "-L.",
            "-lcrashlib",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    let exe = work.path().join("plt");
    Case {
        name: "a64_plt",
        compiler: CC,
        flags: &[],
        sources: &[],
        signal: SIGSEGV,
        reference_cpu: CPU_NO_PAC,
    }
    .run_built(work, exe, |gdb| {
        expect_stack(
            gdb,
            &["lib_store", "lib_entry", "call_library", "main", "_start"],
        );
    });
}

/// (pc, function) of every frame of every thread.
fn pcs_and_names(report: &Value) -> Vec<Vec<(String, Option<String>)>> {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| {
            t["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .map(|f| {
                    (
                        f["pc"].as_str().expect("pc").to_owned(),
                        f["function"].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .collect()
}

/// SFrame alone on aarch64: the binutils-built fixture `crash_a64` (static glibc,
/// `-mbranch-protection=pac-ret`, SFrame v3 with the mangled-RA bit) and its copy without
/// `.eh_frame` are crashed under `-cpu max`, so the saved return addresses are signed.
/// The `.sframe`-only walk must equal the `.eh_frame` walk frame by frame, take the
/// program's callers from SFrame rows, and both must equal gdb's frames of the unsigned
/// (`pauth=off`) run. libc's start code from Debian's `libc.a` has no SFrame: below
/// `main` the stripped copy's walk continues by frame records, as gdb's does by
/// prologue analysis.
#[test]
fn aarch64_sframe_only_walk_equals_eh_frame_walk() {
    if !tools_present(CC) {
        return;
    }
    let fixtures = postmortem_testsupport::workspace_root().join("fixtures/sframe/walk");
    let work = Workdir::new("a64_sframe");
    let eh = work.path().join("eh");
    let sf = work.path().join("sf");
    for (dir, file) in [(&eh, "crash_a64"), (&sf, "crash_a64.noeh")] {
        let from = fixtures.join(file);
        assert!(
            from.is_file(),
            "missing fixture {} (the shared/ folder must sit beside the repository)",
            from.display()
        );
        std::fs::create_dir_all(dir).expect("mkdir");
        // Both under the name the core records for the program.
        let to = dir.join("crash_a64");
        std::fs::copy(&from, &to).expect("copy the fixture");
        work.run_tool("chmod", &["+x", to.to_str().expect("utf-8 path")]);
    }
    let exe = eh.join("crash_a64");
    let reference = crash(&work, &exe, CPU_NO_PAC);
    let gdb = gdb_frames(&work, &exe, &reference);
    expect_stack(
        &gdb,
        &[
            "a64_crash",
            "a64_level3",
            "a64_level2",
            "a64_level1",
            "main",
            "_start",
        ],
    );
    assert!(
        gdb.crashed().complete,
        "gdb stopped: {}",
        gdb.crashed().stop
    );
    let core = crash(&work, &exe, CPU);
    // Only the files under --symbols: the core records the program's path, which must
    // not be opened for the stripped copy's walk.
    let with_eh = walk_report(&core, &[&eh], &["--no-dump-paths"]);
    let with_sframe = walk_report(&core, &[&sf], &["--no-dump-paths"]);
    for report in [&with_eh, &with_sframe] {
        check_report(report, SIGSEGV);
        compare::assert_same_stacks(&renamed_to(&gdb, report), report);
    }
    assert_eq!(
        pcs_and_names(&with_sframe),
        pcs_and_names(&with_eh),
        "the .sframe-only walk differs from the .eh_frame walk"
    );
    let frames = with_sframe["threads"][0]["frames"]
        .as_array()
        .expect("frames");
    for f in frames {
        if matches!(
            f["function"].as_str(),
            Some("a64_level3" | "a64_level2" | "a64_level1" | "main")
        ) {
            assert_eq!(f["unwind_source"], "sframe", "frame {f}");
        }
    }
}

/// Where test.sh unpacks the target's own libc and its debug package (Debian's
/// `libc6:arm64` and `libc6-dbg:arm64`): a root with `lib/aarch64-linux-gnu/libc.so.6`
/// and `usr/lib/debug/.build-id/`.
fn multiarch_root() -> PathBuf {
    std::env::var_os("POSTMORTEM_ARM64_ROOT")
        .map_or_else(|| "/var/cache/postmortem-arm64-root".into(), PathBuf::from)
}

/// A QEMU core names its modules by path only (no headers, so no build-id, in memory).
/// gdb loads the library at that path and then its separate debug file by *that file's*
/// build-id; so must we, or libc's static functions (`__libc_start_call_main`), which
/// only the debug file names, come out unnamed.
#[test]
fn aarch64_qemu_core_on_the_targets_own_libc_uses_its_debug_file() {
    if !tools_present(CC) {
        return;
    }
    let root = multiarch_root();
    assert!(
        root.join("lib/aarch64-linux-gnu/libc.so.6").is_file(),
        "no libc6:arm64 under {}: test.sh unpacks libc6:arm64 and libc6-dbg:arm64 there",
        root.display()
    );
    let root_str = root.to_str().expect("a UTF-8 path");
    let work = Workdir::new("a64_multiarch");
    let exe = work.compile(CC, &["-no-pie", "-O1"], &["basic.c"], "a64_multiarch");
    let core = qemu::crash_in(work.path(), &exe, CPU, root_str);
    let debug_dir = format!("set debug-file-directory {root_str}/usr/lib/debug");
    let gdb = gdb::frames_with(
        GDB,
        // the debug directory first: setting the sysroot loads the libraries
        &[
            &debug_dir,
            &format!("set sysroot {root_str}"),
            "set architecture aarch64",
        ],
        work.path(),
        &exe,
        &core,
    );
    // gdb found libc's debug file: it names a static function only that file has
    expect_stack(&gdb, &["crash_here", "middle", "outer", "main"]);
    assert!(
        names(&gdb).iter().any(|n| n == "__libc_start_call_main"),
        "gdb names libc's static functions from the debug file: {:?}",
        names(&gdb)
    );
    let libs = root.join("lib");
    let debug = root.join("usr/lib/debug");
    let report = walk_report(&core, &[work.path(), &libs, &debug], &[]);
    check_report(&report, SIGSEGV);
    let libc = report["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .find(|m| m["name"] == "libc.so.6")
        .expect("libc is a module");
    assert_eq!(
        libc["identity"], "path",
        "a QEMU core has no build-ids: {libc}"
    );
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_modules(&gdb, &report);
}
