//! Compares `postmortem walk` with gdb on crash programs compiled at test time.
//!
//! Each case compiles a program from `tests/crashers` in a temporary directory, takes a
//! core of it (the kernel's, or `gcore`'s for a live process), asks gdb for every thread's
//! frames (`frames.py`) and runs `postmortem walk CORE --symbols DIR --format json`. The
//! report must follow `report.schema.json`, and its stacks must equal gdb's frame by frame
//! (see `compare`). gdb is the reference: no expected value comes from postmortem itself.
//! The programs, gdb's frames and the comparison are `postmortem_testsupport`'s, shared
//! with `minidump_gdb`.
//!
//! Needs gdb, gcc, g++, clang and rustc on the PATH, libc6-dbg for libc's names, and a
//! `core_pattern` that writes `core` into the working directory; `test.sh` sets all of
//! that up.

mod aarch64;
pub(crate) mod arm;
mod cli_errors;
mod i386;
mod modules;
mod report;
mod sframe;
mod unusual;

use std::path::PathBuf;

use postmortem_testsupport::compare;
use postmortem_testsupport::gdb::{self, GdbCore};
use postmortem_testsupport::program::{self, Workdir};

/// A compiled crash program and its core.
struct Crashed {
    work: Workdir,
    exe: PathBuf,
    core: PathBuf,
    /// Whether the core is a live process's (`gcore`), which has no crash.
    live: bool,
}

impl Crashed {
    /// Compiles `sources` with `compiler` and `flags` and crashes the program.
    fn c(case: &str, compiler: &str, flags: &[&str], sources: &[&str]) -> Crashed {
        let work = Workdir::new(case);
        let exe = work.compile(compiler, flags, sources, case);
        let core = work.crash(&exe);
        Crashed {
            work,
            exe,
            core,
            live: false,
        }
    }
}

/// gdb's frames of the core, checked first against what the crash program is known to
/// do (so a broken program or gdb setup cannot make a case pass vacuously), then the
/// report, then the comparison.
fn check(crashed: &Crashed, expect: impl Fn(&GdbCore)) -> (GdbCore, serde_json::Value) {
    let gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    expect(&gdb);
    let report = report::walk_report(&crashed.core, crashed.work.path());
    if crashed.live {
        assert!(
            report["crash"].is_null(),
            "a gcore of a live process has no crash: {}",
            report["crash"]
        );
    } else {
        let crash = &report["crash"];
        assert_eq!(crash["tid"].as_u64(), gdb.crashed_lwp, "crashed thread");
        assert_eq!(
            report["threads"][0]["tid"].as_u64(),
            gdb.crashed_lwp,
            "the crashed thread comes first"
        );
        assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
        assert_eq!(
            crash["signal"].as_u64(),
            gdb.signal,
            "signal number ($_siginfo.si_signo)"
        );
    }
    compare::assert_same_stacks(&gdb, &report);
    compare::assert_same_source_lines(&gdb, &report);
    (gdb, report)
}

/// [`check`], then requires gdb to have printed a source line for at least `frames`
/// frames (the program's own), so that the source-line comparison cannot pass empty.
fn check_with_source(crashed: &Crashed, frames: usize, expect: impl Fn(&GdbCore)) {
    let (gdb, report) = check(crashed, expect);
    let compared = compare::assert_same_source_lines(&gdb, &report);
    assert!(
        compared >= frames,
        "gdb printed the source line of {compared} frames, expected at least {frames}"
    );
}

/// gdb's names for the crashed thread's frames, innermost first.
fn crashed_names(gdb: &GdbCore) -> Vec<String> {
    gdb.crashed()
        .frames
        .iter()
        .map(|f| f.name.clone().unwrap_or_else(|| "??".to_owned()))
        .collect()
}

/// Asserts that `names` appear in gdb's crashed stack in this order (innermost first),
/// the first of them in frame 0.
fn expect_stack(gdb: &GdbCore, names: &[&str]) {
    let stack = crashed_names(gdb);
    assert_eq!(
        stack.first().map(String::as_str),
        names.first().copied(),
        "gdb's frame 0: {stack:?}"
    );
    let mut rest = stack.iter();
    for name in names {
        assert!(
            rest.any(|s| s == name),
            "gdb's crashed stack lacks {name} in order: {stack:?}"
        );
    }
}

const SIGSEGV: u64 = 11;
const SIGABRT: u64 = 6;

fn basic(case: &str, compiler: &str, flags: &[&str]) {
    let crashed = Crashed::c(case, compiler, flags, &["basic.c"]);
    // crash_here, middle, outer and main show their lines (inlined or not)
    check_with_source(&crashed, 4, |gdb| {
        assert_eq!(gdb.signal, Some(SIGSEGV));
        expect_stack(gdb, &["crash_here", "middle", "outer", "main", "_start"]);
    });
}

#[test]
fn gdb_harness_sees_the_crash() {
    // The reference side alone, without postmortem: the program crashes where it should
    // and gdb, with libc's debug info, names every frame down to _start.
    let crashed = Crashed::c("harness", "gcc", &["-O0"], &["basic.c"]);
    let gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    assert_eq!(gdb.signal, Some(SIGSEGV));
    assert_eq!(gdb.threads.len(), 1);
    let thread = gdb.crashed();
    assert!(thread.complete, "gdb stopped on an error: {}", thread.stop);
    let frame0 = &thread.frames[0];
    assert_eq!(frame0.name.as_deref(), Some("crash_here"));
    assert!(frame0
        .file
        .as_deref()
        .is_some_and(|f| f.ends_with("basic.c")));
    let source =
        std::fs::read_to_string(program::crashers_dir().join("basic.c")).expect("read basic.c");
    let fault_line = source
        .lines()
        .position(|l| l.contains("SIGSEGV: p is null"))
        .expect("marker")
        + 1;
    assert_eq!(frame0.line, Some(fault_line as u64));
    expect_stack(
        &gdb,
        &[
            "crash_here",
            "middle",
            "outer",
            "main",
            "__libc_start_call_main",
            "_start",
        ],
    );
}

/// The text report follows the crashed frame with its source line as gdb prints it where
/// the program stopped (`frame 0`: `LINE<tab>TEXT`); `--no-source-context` leaves every
/// frame without context, and the JSON report has up to five lines either side, as the
/// file itself has them.
#[test]
fn source_context_in_text_and_off() {
    let crashed = Crashed::c("source_text", "gcc", &["-O0"], &["basic.c"]);
    let gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    let frame0 = &gdb.crashed().frames[0];
    let (line, text) = (
        frame0.line.expect("gdb's frame 0 line"),
        frame0
            .source_text
            .clone()
            .expect("gdb prints frame 0's line"),
    );
    let walk = |extra: &[&str]| {
        let out = std::process::Command::new(report::postmortem())
            .arg("walk")
            .arg(&crashed.core)
            .arg("--symbols")
            .arg(crashed.work.path())
            .args(extra)
            .output()
            .expect("run postmortem walk");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let rendered = walk(&["--format", "text"]);
    let after_frame0: Vec<&str> = rendered
        .lines()
        .skip_while(|l| !l.starts_with("#0 "))
        .take(2)
        .collect();
    assert_eq!(
        after_frame0.get(1).copied(),
        Some(format!("{line}\t{text}").as_str()),
        "the line after frame 0:\n{rendered}"
    );

    let report: serde_json::Value =
        serde_json::from_str(&walk(&["--format", "json"])).expect("JSON");
    let f0 = &report["threads"][0]["frames"][0];
    let file = f0["file"].as_str().expect("frame 0's file");
    let source = std::fs::read_to_string(file).expect("read frame 0's source file");
    let lines: Vec<&str> = source.lines().collect();
    let at = usize::try_from(line).expect("a line number") - 1;
    let strings = |v: &[&str]| serde_json::json!(v);
    assert_eq!(f0["pre_context"], strings(&lines[at.saturating_sub(5)..at]));
    assert_eq!(f0["context_line"], serde_json::json!(lines[at]));
    assert_eq!(
        f0["post_context"],
        strings(&lines[at + 1..lines.len().min(at + 6)])
    );

    let off: serde_json::Value =
        serde_json::from_str(&walk(&["--format", "json", "--no-source-context"])).expect("JSON");
    report::assert_valid(&off);
    for f in off["threads"][0]["frames"].as_array().expect("frames") {
        assert_eq!(f["context_line"], serde_json::Value::Null, "{f}");
        assert_eq!(f["pre_context"], serde_json::json!([]), "{f}");
    }
    assert!(!walk(&["--format", "text", "--no-source-context"]).contains(&format!("{line}\t")));
}

/// A source bundle of the crash's sources gives every frame gdb's source line once the
/// sources themselves are gone (so the lines came from the bundle): gdb reads the files
/// first, the bundle is made of them, they are deleted, and the walk is given the bundle.
/// A bundle escaping itself is refused with a message naming it and exit status 2.
#[test]
fn source_context_from_a_bundle() {
    let crashed = Crashed::c("source_bundle", "gcc", &["-O0"], &["basic.c"]);
    let gdb = gdb::frames(crashed.work.path(), &crashed.exe, &crashed.core);
    let walk = |extra: &[&str]| {
        std::process::Command::new(report::postmortem())
            .arg("walk")
            .arg(&crashed.core)
            .arg("--symbols")
            .arg(crashed.work.path())
            .args(["--format", "json"])
            .args(extra)
            .output()
            .expect("run postmortem walk")
    };
    let json = |out: std::process::Output| -> serde_json::Value {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let before = json(walk(&["--no-source-context"]));
    let main = before["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .find(|m| m["main"] == true)
        .expect("a main module");
    let build_id = main["build_id"].as_str().expect("the program's build-id");
    let file = before["threads"][0]["frames"][0]["file"]
        .as_str()
        .expect("frame 0's file")
        .to_owned();
    let bytes = std::fs::read(&file).expect("read the source");
    let bundle = crashed.work.path().join("sources.zip");
    let out = std::fs::File::create(&bundle).expect("create the bundle");
    engine::source_bundle::write(out, build_id, &[(file.clone(), bytes)]).expect("write it");
    std::fs::remove_file(&file).expect("delete the source");

    let bundle_arg = bundle.to_str().expect("a UTF-8 path");
    let with = json(walk(&["--source-bundle", bundle_arg]));
    report::assert_valid(&with);
    let compared = compare::assert_same_source_lines(&gdb, &with);
    assert!(compared >= 4, "gdb printed {compared} source lines");
    let without = json(walk(&[]));
    assert_eq!(
        without["threads"][0]["frames"][0]["context_line"],
        serde_json::Value::Null,
        "the source is gone: only the bundle can give its lines"
    );

    let hostile = crashed.work.path().join("hostile.zip");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&hostile).expect("create"));
    zip.start_file("../escape.c", zip::write::SimpleFileOptions::default())
        .expect("an entry");
    zip.finish().expect("finish");
    let out = walk(&["--source-bundle", hostile.to_str().expect("a UTF-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("hostile.zip") && stderr.contains("outside the bundle"),
        "{stderr}"
    );
}

#[test]
fn c_o0_gcc() {
    basic("c_o0_gcc", "gcc", &["-O0"]);
}

/// Linked by lld, which packs segments without page-aligning their file offsets: the
/// program's read-only, code and data segments all map its first file page (each at its
/// own address), so every mapping of it in NT_FILE has file offset 0. It is one module,
/// from the first of them (its code's mapping was taken as a module of its own, based a
/// page too high: frame 0 unnamed, the walk lost).
#[test]
fn c_linked_by_lld() {
    basic("c_lld_o0", "gcc", &["-O0", "-fuse-ld=lld"]);
    basic("c_lld_o2", "gcc", &["-O2", "-fuse-ld=lld"]);
}

#[test]
fn c_o0_clang() {
    basic("c_o0_clang", "clang", &["-O0"]);
}

#[test]
fn c_o2_omit_frame_pointer() {
    basic("c_o2_omit_fp", "gcc", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn c_o2_no_omit_frame_pointer() {
    basic(
        "c_o2_no_omit_fp",
        "gcc",
        &["-O2", "-fno-omit-frame-pointer"],
    );
}

#[test]
fn c_o3_inlined_functions() {
    let crashed = Crashed::c("c_o3_inline", "gcc", &["-O3"], &["inline.c"]);
    check_with_source(&crashed, 5, |gdb| {
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
        let kinds: Vec<&str> = gdb
            .crashed()
            .frames
            .iter()
            .take(4)
            .map(|f| f.kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            ["INLINE", "INLINE", "INLINE", "NORMAL"],
            "gdb's inline frames"
        );
    });
}

fn cpp_virtual(case: &str, compiler: &str) {
    let crashed = Crashed::c(case, compiler, &["-O0"], &["virtual.cpp"]);
    check(&crashed, |gdb| {
        expect_stack(gdb, &["shapes::Square::area", "shapes::total_area", "main"]);
    });
}

#[test]
fn cpp_virtual_method_gxx() {
    cpp_virtual("cpp_virtual_gxx", "g++");
}

#[test]
fn cpp_virtual_method_clangxx() {
    cpp_virtual("cpp_virtual_clangxx", "clang++");
}

#[test]
fn abort_from_failed_assert() {
    let crashed = Crashed::c("assert_abort", "gcc", &["-O0"], &["assert.c"]);
    check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGABRT));
        expect_stack(
            gdb,
            &[
                "__pthread_kill_implementation",
                "__GI_raise",
                "__GI_abort",
                "check_invariant",
                "main",
            ],
        );
    });
}

#[test]
fn threads_blocked_in_syscalls() {
    let crashed = Crashed::c("threads", "gcc", &["-O0", "-pthread"], &["threads.c"]);
    check(&crashed, |gdb| {
        assert_eq!(
            gdb.threads.len(),
            5,
            "main, three parked threads and the crasher"
        );
        expect_stack(gdb, &["fault", "crasher", "start_thread"]);
        for parked in ["wait_on_cond", "sleep_long", "read_pipe", "main"] {
            assert!(
                gdb.threads
                    .iter()
                    .any(|t| t.frames.iter().any(|f| f.name.as_deref() == Some(parked))),
                "gdb sees no thread in {parked}"
            );
        }
    });
}

#[test]
fn deep_recursion() {
    let crashed = Crashed::c("recursion", "gcc", &["-O0"], &["recursion.c"]);
    check(&crashed, |gdb| {
        let depth = crashed_names(gdb)
            .iter()
            .filter(|n| *n == "recurse")
            .count();
        assert_eq!(depth, 251, "gdb's recursion depth");
    });
}

/// Builds `plt_lib.c` with `opt` as `libcrashlib.so` in `work`.
fn build_crashlib(work: &Workdir, opt: &str) {
    work.source("plt_lib.c");
    work.run_tool(
        "gcc",
        &[
            "-g",
            opt,
            "-fPIC",
            "-shared",
            "plt_lib.c",
            "-o",
            "libcrashlib.so",
        ],
    );
}

/// Builds `libcrashlib.so` and `plt_main.c` linked to it (found beside the program) in
/// `work`; returns the program.
fn build_plt_program(work: &Workdir) -> PathBuf {
    build_crashlib(work, "-O1");
    work.source("plt_main.c");
    work.run_tool(
        "gcc",
        &[
            "-g",
            "-O0",
            "plt_main.c",
            "-o",
            "plt",
            "-L.",
            "-lcrashlib",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    work.path().join("plt")
}

#[test]
fn crash_in_own_shared_library_through_plt() {
    let work = Workdir::new("plt");
    let exe = build_plt_program(&work);
    let core = work.crash(&exe);
    let crashed = Crashed {
        work,
        exe,
        core,
        live: false,
    };
    check(&crashed, |gdb| {
        expect_stack(gdb, &["lib_store", "lib_entry", "call_library", "main"]);
    });
}

#[test]
fn crash_inside_signal_handler() {
    let crashed = Crashed::c("sighandler", "gcc", &["-O0"], &["sighandler.c"]);
    check(&crashed, |gdb| {
        expect_stack(
            gdb,
            &["handler_fault", "on_segv", "__restore_rt", "victim", "main"],
        );
        assert!(
            gdb.crashed().frames.iter().any(|f| f.kind == "SIGTRAMP"),
            "gdb sees the signal frame"
        );
    });
}

#[test]
fn rust_panic_abort() {
    let work = Workdir::new("rust");
    let exe = work.rustc(
        "rust_panic.rs",
        &["-C", "panic=abort", "-C", "opt-level=0"],
        "rust_panic",
    );
    let core = work.crash(&exe);
    let crashed = Crashed {
        work,
        exe,
        core,
        live: false,
    };
    check(&crashed, |gdb| {
        assert_eq!(gdb.signal, Some(SIGABRT));
        expect_stack(
            gdb,
            &[
                "__pthread_kill_implementation",
                "__GI_abort",
                "rust_panic::validate",
                "rust_panic::parse_config",
                "rust_panic::main",
                "main",
            ],
        );
    });
}

#[test]
fn gcore_of_live_multithreaded_process() {
    let work = Workdir::new("live");
    let exe = work.compile("gcc", &["-O0", "-pthread"], &["live.c"], "live");
    let core = work.gcore_live(&exe);
    let crashed = Crashed {
        work,
        exe,
        core,
        live: true,
    };
    check(&crashed, |gdb| {
        assert_eq!(gdb.threads.len(), 4, "main and three parked threads");
        for parked in ["wait_on_cond", "sleep_long", "read_pipe", "main"] {
            assert!(
                gdb.threads
                    .iter()
                    .any(|t| t.frames.iter().any(|f| f.name.as_deref() == Some(parked))),
                "gdb sees no thread in {parked}"
            );
        }
    });
}
