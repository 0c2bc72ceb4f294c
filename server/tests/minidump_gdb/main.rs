//! Compares `postmortem walk MINIDUMP` with gdb on the kernel core of the same crash.
//!
//! Each case compiles a crash program from `tests/crashers`, runs it under the recording
//! tool (`postmortem_testsupport::record`: a ptrace tool stops the program at its fatal
//! signal, `minidump-writer` writes a minidump, then the kernel writes a core of the same
//! crash), asks gdb for every thread's frames in the core and walks the minidump. The
//! stacks must be equal frame by frame, with the comparison code of the ELF-core suite
//! (`postmortem_testsupport::compare`), so the minidump reader's modules, threads, memory and
//! exception context are checked against gdb's reading of the core.
//!
//! The recording tool needs the crash on the main thread. Needs what `test.sh` installs
//! (gdb, gcc, g++, libc6-dbg) and a plain `core_pattern`.
//!
//! aarch64 crashes run under QEMU, which ptrace does not reach: `aarch64` converts QEMU's
//! core of the crash into the minidump instead and compares with gdb-multiarch.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

mod aarch64;

use std::path::PathBuf;

use postmortem_testsupport::gdb::{self, GdbCore};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::{compare, record, report, stackwalk};
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
    assert!(record::can_record(), "needs gcc, gdb and x86_64 Linux");
    let crash = record::record_crash(&exe);
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

/// The CLI under test (`POSTMORTEM_BIN` when set, see `report::postmortem`).
fn postmortem() -> PathBuf {
    report::postmortem(env!("CARGO_BIN_EXE_postmortem"))
}

/// Runs `postmortem walk DUMP --symbols DIR [extra…] --format json`, requires exit 0 and
/// a report valid against the schema.
fn walk(dump: &std::path::Path, symbols: &std::path::Path, extra: &[&str]) -> Value {
    report_of(
        std::process::Command::new(postmortem())
            .arg("walk")
            .arg(dump)
            .arg("--symbols")
            .arg(symbols)
            .args(extra)
            .args(["--format", "json"]),
    )
}

/// The JSON report a walk command prints (it must succeed and the report be valid).
fn report_of(command: &mut std::process::Command) -> Value {
    report::walk_report(command).0
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
    let sym_path = if direct { &sym } else { syms.path() };
    let with_sym = walk_no_system_debug(&r.minidump, sym_path);
    // only the records the walk needs are built from the .sym: the report is the same as
    // with the whole tables the service builds
    let whole = walk(
        &r.minidump,
        sym_path,
        &["--no-system-debug", "--whole-tables"],
    );
    assert_eq!(with_sym, whole, "report with whole .sym tables");
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

/// `postmortem walk` builds only the `.sym` records its walk needs
/// (`engine::breakpad_index`): with the program's and libc's `.sym` files (libc's with
/// libc6-dbg's functions, lines and inlines when installed) the report equals the one from
/// the whole tables the service builds, and the one of `postmortem-walk`.
#[test]
fn indexed_sym_files_give_the_whole_tables_report() {
    let cases: [(&str, &str, &[&str], &str); 3] = [
        ("ix_o2", "gcc", &["-O2", "-fomit-frame-pointer"], "basic.c"),
        ("ix_threads", "gcc", &["-O0", "-pthread"], "md_threads.c"),
        ("ix_cpp", "g++", &["-O2"], "virtual.cpp"),
    ];
    for (case, compiler, flags, source) in cases {
        let r = compile(case, compiler, flags, source);
        let store = tempfile::tempdir().unwrap();
        dump_syms(&r.exe, store.path());
        let with_paths = walk(&r.minidump, r.work.path(), &[]);
        for m in with_paths["modules"].as_array().unwrap() {
            if m["name"] == "libc.so.6" {
                dump_syms_library(
                    std::path::Path::new(m["path"].as_str().unwrap()),
                    store.path(),
                );
            }
        }
        let args = ["--no-system-debug", "--no-dump-paths"];
        let indexed = walk(&r.minidump, store.path(), &args);
        let whole = walk(
            &r.minidump,
            store.path(),
            &[&args[..], &["--whole-tables"]].concat(),
        );
        let libc = indexed["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "libc.so.6")
            .expect("libc in the dump");
        assert_eq!(libc["symbols"], serde_json::json!(["breakpad"]), "{libc}");
        assert_eq!(libc["unwind"], serde_json::json!(["breakpad"]), "{libc}");
        let libc_frames = indexed["threads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["frames"].as_array().unwrap())
            .filter(|f| f["module"] == "libc.so.6" && f["function"].is_string())
            .count();
        assert!(
            libc_frames > 0,
            "{case}: libc frames are symbolized from its .sym"
        );
        assert_eq!(indexed, whole, "{case}: report with whole .sym tables");
        // the walk-only binary gives the same report, with the store listed (--symbols)
        // and with the files read from its layout paths (--symbols-path)
        for option in ["--symbols", "--symbols-path"] {
            let alone = report_of(
                std::process::Command::new(walk_only_binary())
                    .arg(&r.minidump)
                    .arg(option)
                    .arg(store.path())
                    .args(args),
            );
            assert_eq!(indexed, alone, "{case}: report of postmortem-walk {option}");
        }
    }
}

/// The walk-only binary under test: this build's (the `postmortem-walk` package's, beside
/// `postmortem` in the target directory: `cargo test --workspace` builds it), or the one
/// `POSTMORTEM_WALK_BIN` names (test.sh runs these tests again with the statically linked
/// build the Dockerfile ships).
fn walk_only_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("POSTMORTEM_WALK_BIN") {
        return p.into();
    }
    let p =
        std::path::Path::new(env!("CARGO_BIN_EXE_postmortem")).with_file_name("postmortem-walk");
    assert!(
        p.is_file(),
        "{} is not built: cargo build -p postmortem-cli, or set POSTMORTEM_WALK_BIN",
        p.display()
    );
    p
}

/// `dump_syms` of a shared library the dump loaded, into the store: when the system has
/// its separate debug file (`/usr/lib/debug/.build-id/xx/yyyy.debug`, e.g. libc6-dbg) the
/// `.sym` has that file's functions and lines plus the library's own `STACK CFI` (the
/// debug file has no `.eh_frame`), under the library's name; else only the library's.
fn dump_syms_library(library: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    let sym = dump_syms(library, dir);
    let own = std::fs::read_to_string(&sym).unwrap();
    let Some(build_id) = own
        .lines()
        .find_map(|l| l.strip_prefix("INFO CODE_ID "))
        .map(str::to_lowercase)
    else {
        return sym;
    };
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &build_id[..2],
        &build_id[2..]
    ));
    if !debug.is_file() {
        return sym;
    }
    let out = std::process::Command::new("dump_syms")
        .arg(&debug)
        .output()
        .expect("run dump_syms");
    assert!(out.status.success(), "dump_syms {}", debug.display());
    let debug_text = String::from_utf8(out.stdout).unwrap();
    let mut merged = String::new();
    for (n, line) in debug_text.lines().enumerate() {
        if n == 0 {
            merged.push_str(own.lines().next().unwrap());
        } else if !line.starts_with("STACK ") {
            merged.push_str(line);
        } else {
            continue;
        }
        merged.push('\n');
    }
    for line in own.lines().filter(|l| l.starts_with("STACK ")) {
        merged.push_str(line);
        merged.push('\n');
    }
    std::fs::write(&sym, merged).unwrap();
    sym
}

/// A function name without its parameter list (Breakpad's C++ names have one, gdb's not).
fn bare_function(name: &str) -> &str {
    match name.find('(') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// A thread of one tool's walk: tid, and its physical frames' (pc, function).
type ToolThread = (u64, Vec<(u64, Option<String>)>);

/// One tool's walk compared with gdb's physical frames of the core, thread by thread and
/// position by position.
#[derive(Default)]
struct Counts {
    gdb: usize,
    tool: usize,
    /// Same pc as gdb's frame at that position.
    pc: usize,
    /// Same pc and same function name (parameter lists dropped).
    pc_function: usize,
    /// Frames after the last one of a thread gdb walked to its end.
    extra: usize,
    /// (gdb's name, the tool's name) where the pc matches and the names do not.
    renamed: Vec<(String, String)>,
}

fn count_matching(gdb: &gdb::GdbCore, threads: &[ToolThread]) -> Counts {
    let mut c = Counts::default();
    for g in &gdb.threads {
        let want: Vec<(u64, Option<&str>)> = g
            .frames
            .iter()
            .filter(|f| f.kind != "INLINE" && f.kind != "TAILCALL")
            .map(|f| (f.pc, f.name.as_deref().map(bare_function)))
            .collect();
        c.gdb += want.len();
        let Some((_, have)) = threads.iter().find(|(tid, _)| *tid == g.lwp) else {
            continue;
        };
        c.tool += have.len();
        if g.complete {
            c.extra += have.len().saturating_sub(want.len());
        }
        for (w, h) in want.iter().zip(have) {
            if w.0 != h.0 {
                continue;
            }
            c.pc += 1;
            let theirs = h.1.as_deref().map(bare_function);
            if w.1.is_some() && w.1 == theirs {
                c.pc_function += 1;
            } else {
                c.renamed.push((
                    w.1.unwrap_or("??").to_owned(),
                    theirs.unwrap_or("??").to_owned(),
                ));
            }
        }
    }
    c
}

/// A report's threads as (tid, physical frames' (pc, function)).
fn physical_threads(report: &Value) -> Vec<ToolThread> {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let frames = t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| !f["inlined"].as_bool().unwrap_or(false))
                .map(|f| {
                    (
                        compare::parse_hex(f["pc"].as_str().unwrap()).unwrap(),
                        f["function"].as_str().map(str::to_owned),
                    )
                })
                .collect();
            (t["tid"].as_u64().unwrap(), frames)
        })
        .collect()
}

/// `minidump-stackwalk --json --symbols-path STORE MINIDUMP`'s threads. Its `offset` of a
/// caller frame is the lookup address, the return address minus `caller_offset` (1 on
/// x86_64, one instruction, 4, on arm64), which is added back.
fn stackwalk_threads(
    store: &std::path::Path,
    minidump: &std::path::Path,
    caller_offset: u64,
) -> Vec<ToolThread> {
    let sw = std::process::Command::new("minidump-stackwalk")
        .args(["--json", "--symbols-path"])
        .arg(store)
        .arg(minidump)
        .output()
        .expect("run minidump-stackwalk");
    assert!(
        sw.status.success(),
        "{}",
        String::from_utf8_lossy(&sw.stderr)
    );
    let theirs: Value = serde_json::from_slice(&sw.stdout).unwrap();
    theirs["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let frames = t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let pc = compare::parse_hex(f["offset"].as_str().unwrap()).unwrap();
                    let pc = if f["trust"] == "context" {
                        pc
                    } else {
                        pc + caller_offset
                    };
                    (pc, f["function"].as_str().map(str::to_owned))
                })
                .collect();
            (t["thread_id"].as_u64().unwrap(), frames)
        })
        .collect()
}

/// Prints both tools' frames beside gdb's and returns the case's two `frames.tsv` rows.
fn side_by_side_rows(
    case: &str,
    gdb: &gdb::GdbCore,
    our_threads: &[ToolThread],
    their_threads: &[ToolThread],
) -> String {
    let mut table = String::new();
    for (tool, threads) in [
        ("postmortem", our_threads),
        ("minidump-stackwalk", their_threads),
    ] {
        for (tid, frames) in threads {
            let gdb_frames: Vec<String> = gdb
                .thread(*tid)
                .map(|t| {
                    t.frames
                        .iter()
                        .filter(|f| f.kind != "INLINE" && f.kind != "TAILCALL")
                        .map(|f| format!("{:#x} {}", f.pc, f.name.as_deref().unwrap_or("??")))
                        .collect()
                })
                .unwrap_or_default();
            let tool_frames: Vec<String> = frames
                .iter()
                .map(|(pc, f)| format!("{pc:#x} {}", f.as_deref().unwrap_or("??")))
                .collect();
            eprintln!("{case} {tool} thread {tid}:\n  tool {tool_frames:?}\n  gdb  {gdb_frames:?}");
        }
    }
    for (tool, threads) in [
        ("postmortem", our_threads),
        ("minidump-stackwalk", their_threads),
    ] {
        let c = count_matching(gdb, threads);
        assert!(c.pc > 0, "{tool} found none of gdb's frames");
        let renamed: Vec<String> = c.renamed.iter().map(|(g, t)| format!("{g}/{t}")).collect();
        table.push_str(&format!(
            "{case}\t{tool}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            c.gdb,
            c.tool,
            c.pc,
            c.pc_function,
            c.extra,
            renamed.join(" ")
        ));
    }
    table
}

/// Side by side with minidump-stackwalk (rust-minidump), for `bench/minidump-stackwalk.sh`:
/// each crash program of this suite is recorded (minidump + core), its `.sym` file and
/// libc's (with libc6-dbg's functions and lines) written into one Breakpad symbol store,
/// and both tools walk the minidump with exactly that store (postmortem with
/// `--no-system-debug --no-dump-paths`). Per case, the physical frames equal to gdb's on
/// the core (pc and function, from the top of each thread) are counted for both tools.
/// With `MDBENCH_OUT=DIR` the minidumps, cores, programs (`CASE/bin/`), store and the
/// counts (`frames.tsv`) are kept in DIR for timing. Needs `cargo install --locked minidump-stackwalk dump_syms`.
#[test]
#[ignore = "needs minidump-stackwalk (cargo install --locked minidump-stackwalk)"]
fn minidump_stackwalk_side_by_side() {
    let keep = std::env::var_os("MDBENCH_OUT").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let store = out_dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let cases: [(&str, &str, &[&str], &str); 4] = [
        ("c_o0", "gcc", &["-O0"], "basic.c"),
        (
            "c_o2_omit_fp",
            "gcc",
            &["-O2", "-fomit-frame-pointer"],
            "basic.c",
        ),
        ("threads", "gcc", &["-O0", "-pthread"], "md_threads.c"),
        ("cpp_virtual", "g++", &["-O0"], "virtual.cpp"),
    ];
    let mut table = String::from(
        "case\ttool\tgdb_frames\tframes\tpc_match\tpc_function_match\textra_after_gdb_end\tnames_differing(gdb/tool)\n",
    );
    for (case, compiler, flags, source) in cases {
        let r = compile(case, compiler, flags, source);
        let dir = out_dir.join(case);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&r.minidump, dir.join("minidump.dmp")).unwrap();
        std::fs::copy(&r.core, dir.join("core")).unwrap();
        // the program, for walks with the files on this machine (libc by the path the
        // dump records and its debug file in /usr/lib/debug)
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::copy(&r.exe, dir.join("bin").join(r.exe.file_name().unwrap())).unwrap();
        dump_syms(&r.exe, &store);
        let with_paths = walk(&r.minidump, r.work.path(), &[]);
        for m in with_paths["modules"].as_array().unwrap() {
            if m["name"] == "libc.so.6" {
                dump_syms_library(std::path::Path::new(m["path"].as_str().unwrap()), &store);
            }
        }

        let ours = walk(
            &r.minidump,
            &store,
            &["--no-system-debug", "--no-dump-paths"],
        );
        for m in ours["modules"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            if name == "libc.so.6" || r.exe.ends_with(name) {
                assert_eq!(m["symbols"], serde_json::json!(["breakpad"]), "{m}");
            }
        }
        let our_threads = physical_threads(&ours);

        let their_threads = stackwalk_threads(&store, &r.minidump, 1);

        table.push_str(&side_by_side_rows(
            case,
            &r.gdb,
            &our_threads,
            &their_threads,
        ));
    }
    eprint!("{table}");
    std::fs::write(out_dir.join("frames.tsv"), &table).unwrap();
}

/// `postmortem-walk --json DUMP STORE` against `minidump-stackwalk --json DUMP STORE` on
/// the same minidumps and the same Breakpad symbol store (the program's and libc's `.sym`
/// files, libc's with libc6-dbg's functions and lines): the documents agree field by field
/// as `postmortem_testsupport::stackwalk` lays down, and so do the `--human` texts. Cases: this suite's C
/// programs at -O0 and -O2 without frame pointers, four threads blocked in system calls, a
/// C++ virtual call, a fault in three functions inlined into one, and a read through a
/// non-canonical pointer.
#[test]
fn stackwalk_json_agrees_with_minidump_stackwalk() {
    let cases: [(&str, &str, &[&str], &str); 6] = [
        ("sw_c_o0", "gcc", &["-O0"], "basic.c"),
        (
            "sw_c_o2_omit_fp",
            "gcc",
            &["-O2", "-fomit-frame-pointer"],
            "basic.c",
        ),
        ("sw_threads", "gcc", &["-O0", "-pthread"], "md_threads.c"),
        ("sw_cpp_virtual", "g++", &["-O0"], "virtual.cpp"),
        ("sw_inline", "gcc", &["-O3", "-g"], "inline.c"),
        // a general-protection fault: no address reported, the operand gives it
        ("sw_noncanon", "gcc", &["-O0", "-g"], "noncanon.c"),
    ];
    let walk_only = walk_only_binary();
    let mut totals = stackwalk::Differences::default();
    for (case, compiler, flags, source) in cases {
        let r = compile(case, compiler, flags, source);
        let store = r.work.path().join("store");
        dump_syms(&r.exe, &store);
        let with_paths = walk(&r.minidump, r.work.path(), &[]);
        for m in with_paths["modules"].as_array().unwrap() {
            if m["name"] == "libc.so.6" {
                dump_syms_library(std::path::Path::new(m["path"].as_str().unwrap()), &store);
            }
        }
        let os = |s: &'static str| std::ffi::OsStr::new(s);
        let (dump, store) = (r.minidump.as_os_str(), store.as_os_str());
        let theirs: Value = serde_json::from_str(&stackwalk::run(
            std::path::Path::new("minidump-stackwalk"),
            &[os("--json"), dump, store],
        ))
        .unwrap();
        // minidump-stackwalk's own command line; only the local files it never reads
        // (the dump's paths, /usr/lib/debug) are turned off
        let local_off = [os("--no-dump-paths"), os("--no-system-debug")];
        let ours: Value = serde_json::from_str(&stackwalk::run(
            &walk_only,
            &[&[os("--json"), dump, store][..], &local_off].concat(),
        ))
        .unwrap();
        let d = stackwalk::assert_agree(case, &theirs, &ours, &|tid| {
            stackwalk::gdb_reference(&r.gdb, tid)
        });
        // the core of the same crash gives a document with the same fields
        let of_core: Value = serde_json::from_str(&stackwalk::run(
            &walk_only,
            &[&[os("--json"), r.core.as_os_str()][..], &local_off].concat(),
        ))
        .unwrap();
        stackwalk::assert_same_shape(case, &ours, &of_core);
        eprintln!("{case}: {d:?}");
        totals += &d;
        stackwalk::assert_human_text_agrees(
            case,
            (dump, store),
            (
                &walk_only,
                &[&[os("--human"), dump, store][..], &local_off].concat(),
            ),
            &ours,
            &theirs,
        );
    }
    eprintln!("all cases: {totals:?}");
    assert!(totals.same_frames > 20, "{totals:?}");
}
