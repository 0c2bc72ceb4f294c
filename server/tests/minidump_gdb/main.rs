//! Compares `postmortem walk MINIDUMP` with gdb on the kernel core of the same crash.
//!
//! Each case compiles a crash program from `tests/crashers`, runs it under the worker's
//! recording tool (`worker/tests/support`: a ptrace tool stops the program at its fatal
//! signal, `minidump-writer` writes a minidump, then the kernel writes a core of the same
//! crash), asks gdb for every thread's frames in the core and walks the minidump. The
//! stacks must be equal frame by frame, with the comparison code of the ELF-core suite
//! (`gdb_compare/compare.rs`), so the minidump reader's modules, threads, memory and
//! exception context are checked against gdb's reading of the core.
//!
//! The recording tool needs the crash on the main thread. Needs what `test.sh` installs
//! (gdb, gcc, g++, libc6-dbg) and a plain `core_pattern`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

#[path = "../gdb_compare/compare.rs"]
mod compare;
#[path = "../gdb_compare/gdb.rs"]
mod gdb;
#[path = "../gdb_compare/program.rs"]
mod program;
#[path = "../gdb_compare/report.rs"]
mod report;
#[path = "../../../worker/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use gdb::GdbCore;
use program::Workdir;
use serde_json::Value;

/// One crash recorded twice, with gdb's view of the core and our report of the minidump.
struct Recorded {
    work: Workdir,
    exe: PathBuf,
    minidump: PathBuf,
    core: PathBuf,
    gdb: GdbCore,
}

fn record(work: Workdir, exe: PathBuf) -> Recorded {
    assert!(support::can_record(), "needs gcc, gdb and x86_64 Linux");
    let crash = support::record_crash(&exe);
    let gdb = gdb::frames(work.path(), &exe, &crash.core);
    Recorded {
        work,
        exe,
        minidump: crash.minidump,
        core: crash.core,
        gdb,
    }
}

fn compile(case: &str, compiler: &str, flags: &[&str], source: &str) -> Recorded {
    let work = Workdir::new(&format!("md-{case}"));
    let exe = work.compile(compiler, flags, &[source], case);
    record(work, exe)
}

/// Walks the minidump with the work directory as `--symbols`, checks the crash facts
/// against gdb's, then the stacks.
fn check(r: &Recorded) -> Value {
    let report = report::walk_report(&r.minidump, r.work.path());
    assert_eq!(report["dump"]["format"], "minidump");
    let crash = &report["crash"];
    assert_eq!(crash["tid"].as_u64(), r.gdb.crashed_lwp, "crashed thread");
    assert_eq!(report["threads"][0]["crashed"].as_bool(), Some(true));
    assert_eq!(crash["signal"].as_u64(), r.gdb.signal, "signal number");
    compare::assert_same_stacks(&r.gdb, &report);
    report
}

fn names(gdb: &GdbCore) -> Vec<String> {
    gdb.crashed()
        .frames
        .iter()
        .map(|f| f.name.clone().unwrap_or_else(|| "??".to_owned()))
        .collect()
}

/// `want` appears in gdb's crashed stack in this order, the first in frame 0.
fn expect_stack(gdb: &GdbCore, want: &[&str]) {
    let stack = names(gdb);
    assert_eq!(stack.first().map(String::as_str), want.first().copied());
    let mut rest = stack.iter();
    for name in want {
        assert!(rest.any(|s| s == name), "gdb lacks {name}: {stack:?}");
    }
}

fn basic(case: &str, compiler: &str, flags: &[&str]) {
    let r = compile(case, compiler, flags, "basic.c");
    expect_stack(&r.gdb, &["crash_here", "middle", "outer", "main", "_start"]);
    check(&r);
}

#[test]
fn minidump_c_o0() {
    basic("c_o0", "gcc", &["-O0"]);
}

#[test]
fn minidump_c_o2_omit_frame_pointer() {
    basic("c_o2_omit_fp", "gcc", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn minidump_cpp_virtual_method() {
    let r = compile("cpp_virtual", "g++", &["-O0"], "virtual.cpp");
    expect_stack(
        &r.gdb,
        &["shapes::Square::area", "shapes::total_area", "main"],
    );
    check(&r);
}

#[test]
fn minidump_threads_blocked_in_syscalls() {
    let r = compile("threads", "gcc", &["-O0", "-pthread"], "md_threads.c");
    assert_eq!(r.gdb.threads.len(), 4, "main and three parked threads");
    expect_stack(&r.gdb, &["fault", "main"]);
    for parked in ["wait_on_cond", "sleep_long", "read_pipe"] {
        assert!(
            r.gdb
                .threads
                .iter()
                .any(|t| t.frames.iter().any(|f| f.name.as_deref() == Some(parked))),
            "gdb sees no thread in {parked}"
        );
    }
    check(&r);
}
