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

/// The CLI under test: `POSTMORTEM_BIN` when set (a copy kept out of a target directory
/// that other builds share), else the one cargo built for this test binary.
fn postmortem() -> PathBuf {
    std::env::var_os("POSTMORTEM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(report::POSTMORTEM))
}

/// Runs `postmortem walk DUMP --symbols DIR [extra…] --format json`, requires exit 0 and
/// a report valid against the schema.
fn walk(dump: &std::path::Path, symbols: &std::path::Path, extra: &[&str]) -> Value {
    let out = std::process::Command::new(postmortem())
        .arg("walk")
        .arg(dump)
        .arg("--symbols")
        .arg(symbols)
        .args(extra)
        .args(["--format", "json"])
        .output()
        .expect("run postmortem");
    assert_eq!(
        out.status.code(),
        Some(0),
        "postmortem walk failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    report::assert_valid(&report);
    report
}

/// Walks the minidump with the work directory as `--symbols`, checks the crash facts
/// against gdb's, then the stacks.
fn check(r: &Recorded) -> Value {
    let report = walk(&r.minidump, r.work.path(), &[]);
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

fn walk_no_system_debug(dump: &std::path::Path, symbols: &std::path::Path) -> Value {
    walk(dump, symbols, &["--no-system-debug"])
}

/// Writes `dump_syms BINARY` into `DIR/<name>/<DEBUG_ID>/<name>.sym` (Breakpad's symbol
/// store layout) and returns the `.sym` path.
fn dump_syms(binary: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    let out = std::process::Command::new("dump_syms")
        .arg(binary)
        .output()
        .expect("run dump_syms (cargo install --locked dump_syms; see test.sh)");
    assert!(
        out.status.success(),
        "dump_syms failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("a .sym file is text");
    let module = text.lines().next().expect("MODULE line");
    let fields: Vec<&str> = module.split(' ').collect();
    assert_eq!(fields.first(), Some(&"MODULE"), "{module}");
    let (id, name) = (fields[3], fields[4]);
    let path = dir.join(name).join(id).join(format!("{name}.sym"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// The crash program's frames walked with only its Breakpad `.sym` file (the binary moved
/// away, so the path in the dump does not resolve) equal the walk with the binary: same
/// frames (pc, sp) on every thread, and in the program's own frames the same function,
/// file and line, with the unwind rules taken from the `.sym` file's `STACK CFI`.
/// With `direct`, `--symbols` names the `.sym` file itself rather than the store.
fn breakpad_equals_binary(case: &str, flags: &[&str], source: &str, direct: bool) {
    let r = compile(case, "gcc", flags, source);
    let with_binary = check(&r);
    let with_binary_nosys = walk_no_system_debug(&r.minidump, r.work.path());
    let syms = tempfile::tempdir().unwrap();
    let sym = dump_syms(&r.exe, syms.path());
    let text = std::fs::read_to_string(&sym).unwrap();
    assert!(text.contains("\nSTACK CFI INIT "), "the .sym has CFI");
    let moved = r.work.path().join("moved-away");
    std::fs::rename(&r.exe, &moved).unwrap();
    let with_sym = walk_no_system_debug(&r.minidump, if direct { &sym } else { syms.path() });
    std::fs::rename(&moved, &r.exe).unwrap();

    let exe_name = r.exe.file_name().unwrap().to_str().unwrap();
    let module = with_sym["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == exe_name)
        .expect("the program's module");
    assert_eq!(module["status"], "ok", "{module}");
    assert_eq!(module["unwind"], serde_json::json!(["breakpad"]));
    assert_eq!(module["symbols"], serde_json::json!(["breakpad"]));
    assert_eq!(module["verified"], true);

    let threads_a = with_binary_nosys["threads"].as_array().unwrap();
    let threads_b = with_sym["threads"].as_array().unwrap();
    assert_eq!(threads_a.len(), threads_b.len());
    assert_eq!(
        with_binary["threads"].as_array().unwrap().len(),
        threads_a.len()
    );
    let mut breakpad_cfi_frames = 0;
    for (a, b) in threads_a.iter().zip(threads_b) {
        let fa = a["frames"].as_array().unwrap();
        let fb = b["frames"].as_array().unwrap();
        let show = || {
            let row = |f: &Value| {
                format!(
                    "{} {} {} {}",
                    f["pc"], f["trust"], f["unwind_source"], f["function"]
                )
            };
            format!(
                "binary:\n{}\n.sym:\n{}",
                fa.iter().map(row).collect::<Vec<_>>().join("\n"),
                fb.iter().map(row).collect::<Vec<_>>().join("\n")
            )
        };
        assert_eq!(fa.len(), fb.len(), "thread {}: {}", a["tid"], show());
        assert_eq!(a["end"], b["end"], "thread {}", a["tid"]);
        for (x, y) in fa.iter().zip(fb) {
            assert_eq!(x["pc"], y["pc"], "thread {}: {}", a["tid"], show());
            assert_eq!(x["sp"], y["sp"], "thread {}: {}", a["tid"], show());
            if x["module"] == exe_name {
                for key in ["function", "file", "line", "inlined", "function_offset"] {
                    assert_eq!(x[key], y[key], "{key} of {x} vs {y}");
                }
                assert_eq!(y["symbol_source"], "breakpad");
            }
        }
        // frames found by the program's .sym CFI: the callers of its frames
        for (callee, caller) in fb.iter().zip(fb.iter().skip(1)) {
            if callee["module"] == exe_name
                && !caller["inlined"].as_bool().unwrap()
                && caller["unwind_source"] == "breakpad"
            {
                breakpad_cfi_frames += 1;
            }
        }
    }
    assert!(
        breakpad_cfi_frames >= 2,
        "the .sym file's CFI found the program's callers ({breakpad_cfi_frames})"
    );
}

#[test]
fn breakpad_sym_walk_equals_binary_walk_o2_omit_fp() {
    breakpad_equals_binary("bp_o2", &["-O2", "-fomit-frame-pointer"], "basic.c", false);
}

#[test]
fn breakpad_sym_walk_equals_binary_walk_threads() {
    breakpad_equals_binary("bp_threads", &["-O0", "-pthread"], "md_threads.c", true);
}

/// minidump-stackwalk (rust-minidump) on the same minidump and `.sym` files: where its
/// walk has frames, their addresses must be gdb's; prints both tools' wall times (median
/// of 5 runs, the first run separately as "cold") for the README.
/// Needs `cargo install --locked minidump-stackwalk`; run with `--ignored`.
#[test]
#[ignore = "needs minidump-stackwalk (cargo install --locked minidump-stackwalk)"]
fn minidump_stackwalk_frames_and_timing() {
    let r = compile("stackwalk", "gcc", &["-O2", "-pthread"], "md_threads.c");
    check(&r);
    let syms = tempfile::tempdir().unwrap();
    dump_syms(&r.exe, syms.path());
    let run_stackwalk = || {
        let out = std::process::Command::new("minidump-stackwalk")
            .args(["--json", "--symbols-path"])
            .arg(syms.path())
            .arg(&r.minidump)
            .output()
            .expect("run minidump-stackwalk");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let theirs: Value = serde_json::from_slice(&run_stackwalk()).unwrap();
    let mut compared = 0;
    for t in theirs["threads"].as_array().unwrap() {
        let tid = t["thread_id"].as_u64().unwrap();
        let gdb = r.gdb.thread(tid).expect("gdb has the thread");
        // its `offset` of a caller frame is the lookup address, return address - 1; only
        // the frames its CFI found are compared (without libc's .sym it scans beyond)
        let pcs: Vec<u64> = t["frames"]
            .as_array()
            .unwrap()
            .iter()
            .take_while(|f| f["trust"] == "context" || f["trust"] == "cfi")
            .map(|f| {
                let pc = compare::parse_hex(f["offset"].as_str().unwrap()).unwrap();
                if f["trust"] == "context" {
                    pc
                } else {
                    pc + 1
                }
            })
            .collect();
        let gdb_pcs: Vec<u64> = gdb
            .frames
            .iter()
            .filter(|f| f.kind != "INLINE" && f.kind != "TAILCALL")
            .map(|f| f.pc)
            .collect();
        eprintln!("thread {tid}: minidump-stackwalk {pcs:x?}\n              gdb {gdb_pcs:x?}");
        for (a, b) in pcs.iter().zip(&gdb_pcs) {
            assert_eq!(a, b, "thread {tid}");
            compared += 1;
        }
    }
    assert!(compared > 0);

    let time = |f: &dyn Fn()| {
        let mut runs: Vec<std::time::Duration> = (0..6)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        let cold = runs.remove(0);
        runs.sort();
        (cold, runs[runs.len() / 2])
    };
    let ours = time(&|| {
        walk(&r.minidump, syms.path(), &["--no-system-debug"]);
    });
    let theirs = time(&|| {
        run_stackwalk();
    });
    eprintln!(
        "postmortem walk: first {:?}, median {:?}; minidump-stackwalk: first {:?}, median {:?}",
        ours.0, ours.1, theirs.0, theirs.1
    );
}
