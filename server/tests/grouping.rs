//! Issue 37: crash groups that mean one bug each. A suite of crash programs with known
//! bug ids (`crashers/group_suite.{c,cpp,rs}`), each bug crashed three ways — on the main
//! thread, on a worker thread, and from a rebuilt binary whose code moved — and each
//! crash walked twice: with the programs' files only (no libc, libstdc++ or libgcc: the
//! usual server), then with the system libraries' files too (their binaries, and
//! libc6-dbg's debug files under /usr/lib/debug where installed). The signatures are
//! scored against the bug ids by pairwise precision and recall, and the signatures that
//! change when the system's files arrive are counted. Every run has its own ASLR.
//!
//! Scoring rules (which crashes are one bug): a bug is one fault at one place in the
//! source, whatever called it and on whichever thread:
//! - an `assert` or `abort()` is a bug of the function that calls it (ids 1, 2, 3);
//! - a null dereference is a bug of the function that dereferences: `read_field` reached
//!   from `from_config` and from `from_request` is one bug (4);
//! - a crash inside libc (strlen of a null string) is a bug of the program's function that
//!   passed the bad argument: two callers are two bugs (6, 7);
//! - a recursion that overflows the stack is one bug (8); a double free is a bug of the
//!   function that frees twice (9);
//! - `vector::at` out of range is a bug of the function that indexes (10, 11); an uncaught
//!   exception of one type is a bug of the function that throws it (12, 13);
//! - a Rust `unwrap`, `panic!` or index out of bounds is a bug of the function that
//!   panics (14 to 17).
//!
//! Each crash is walked with `postmortem walk --no-dump-paths` (the machine's own
//! libraries are not looked at), the service's pipeline without the service.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::bin;
use postmortem_testsupport::program::Workdir;

/// (bug id, program) of the suite: C bugs 1 to 9, C++ 10 to 13, Rust 14 to 17.
const BUGS: [(u32, &str); 17] = [
    (1, "c"),
    (2, "c"),
    (3, "c"),
    (4, "c"),
    (5, "c"),
    (6, "c"),
    (7, "c"),
    (8, "c"),
    (9, "c"),
    (10, "cpp"),
    (11, "cpp"),
    (12, "cpp"),
    (13, "cpp"),
    (14, "rs"),
    (15, "rs"),
    (16, "rs"),
    (17, "rs"),
];

/// The suite's programs, each built twice (the second time with its code moved).
struct Programs {
    work: Workdir,
    /// program kind → [normal, moved]
    exes: BTreeMap<&'static str, [PathBuf; 2]>,
}

fn build() -> Programs {
    let work = Workdir::new("grouping");
    let c = |flags: &[&str], out: &str| {
        let mut f = vec!["-O1", "-pthread"];
        f.extend_from_slice(flags);
        work.compile("gcc", &f, &["group_suite.c"], out)
    };
    let cpp = |flags: &[&str], out: &str| {
        let mut f = vec!["-O1", "-pthread"];
        f.extend_from_slice(flags);
        work.compile("g++", &f, &["group_suite.cpp"], out)
    };
    let rs = |flags: &[&str], out: &str| {
        let mut f = vec!["--edition", "2021", "-C", "panic=abort"];
        f.extend_from_slice(flags);
        work.rustc("group_suite.rs", &f, out)
    };
    let mut exes = BTreeMap::new();
    exes.insert("c", [c(&[], "gc"), c(&["-DMOVED"], "gc_moved")]);
    exes.insert("cpp", [cpp(&[], "gx"), cpp(&["-DMOVED"], "gx_moved")]);
    exes.insert("rs", [rs(&[], "gr"), rs(&["--cfg", "moved"], "gr_moved")]);
    Programs { work, exes }
}

/// Runs `exe bug [thread]` in a directory of its own until it dumps core; the core's path
/// and what it printed on stderr.
fn crash(dir: &Path, exe: &Path, bug: u32, thread: bool) -> (PathBuf, String) {
    std::fs::create_dir_all(dir).unwrap();
    let script = format!(
        "ulimit -c unlimited; exec '{}' {bug} {}",
        exe.display(),
        if thread { "thread" } else { "main" }
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "{} {bug} did not crash",
        exe.display()
    );
    let core = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "core" || n.starts_with("core."))
        })
        .unwrap_or_else(|| panic!("no core in {} (see test.sh's core_pattern)", dir.display()));
    (core, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The report of `postmortem walk CORE --symbols DIR --no-dump-paths`, with or without
/// the system debug root.
fn walk(core: &Path, symbols: &Path, system_debug: bool) -> Value {
    let mut cmd = Command::new(bin());
    cmd.arg("walk")
        .arg(core)
        .arg("--symbols")
        .arg(symbols)
        .args(["--offline", "--no-dump-paths"]);
    if !system_debug {
        cmd.arg("--no-system-debug");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn signature(report: &Value) -> String {
    report["signature"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no signature: {}", report["signature"]))
        .to_string()
}

/// Pairwise precision and recall of `groups` (one signature per crash) against `bugs`.
fn pairwise(bugs: &[u32], groups: &[String]) -> (f64, f64) {
    let (mut both, mut same_group, mut same_bug) = (0u32, 0u32, 0u32);
    for i in 0..bugs.len() {
        for j in i + 1..bugs.len() {
            let g = groups[i] == groups[j];
            let b = bugs[i] == bugs[j];
            same_group += u32::from(g);
            same_bug += u32::from(b);
            both += u32::from(g && b);
        }
    }
    let ratio = |n: u32, d: u32| {
        if d == 0 {
            1.0
        } else {
            f64::from(n) / f64::from(d)
        }
    };
    (ratio(both, same_group), ratio(both, same_bug))
}

/// One crash of the suite: its bug, how it was crashed, its signatures.
struct Crashed {
    bug: u32,
    how: &'static str,
    without: String,
    with: String,
}

#[test]
fn crash_groups_mean_one_bug_each_with_and_without_the_systems_files() {
    let p = build();
    let programs = p.work.path().join("programs");
    let system = p.work.path().join("system");
    std::fs::create_dir_all(&programs).unwrap();
    std::fs::create_dir_all(&system).unwrap();
    for exe in p.exes.values().flatten() {
        let name = exe.file_name().unwrap();
        std::fs::copy(exe, programs.join(name)).unwrap();
        std::fs::copy(exe, system.join(name)).unwrap();
    }
    let mut crashes = Vec::new();
    for (bug, kind) in BUGS {
        let [normal, moved] = &p.exes[kind];
        for (how, exe, thread) in [
            ("main", normal, false),
            ("thread", normal, true),
            ("moved", moved, false),
        ] {
            let dir = p.work.path().join(format!("crash-{bug}-{how}"));
            let (core, _) = crash(&dir, exe, bug, thread);
            let without_report = walk(&core, &programs, false);
            // the system's files: the libraries the dump names, as the crashing machine
            // had them (a deployment uploads its distribution's)
            for m in without_report["modules"].as_array().unwrap() {
                if let (Some(path), Some("missing")) = (m["path"].as_str(), m["status"].as_str()) {
                    let name = Path::new(path).file_name().unwrap();
                    if !system.join(name).exists() {
                        std::fs::copy(path, system.join(name)).unwrap();
                    }
                }
            }
            let with = signature(&walk(&core, &system, true));
            crashes.push(Crashed {
                bug,
                how,
                without: signature(&without_report),
                with,
            });
        }
    }
    for c in &crashes {
        println!(
            "bug {:>2} {:<6} {:?} -> {:?}",
            c.bug, c.how, c.without, c.with
        );
    }
    // no signature holds an offset or an address
    for c in &crashes {
        for s in [&c.without, &c.with] {
            assert!(!s.contains("0x"), "bug {} {}: {s}", c.bug, c.how);
        }
    }
    let bugs: Vec<u32> = crashes.iter().map(|c| c.bug).collect();
    let without: Vec<String> = crashes.iter().map(|c| c.without.clone()).collect();
    let with: Vec<String> = crashes.iter().map(|c| c.with.clone()).collect();
    let changed = crashes.iter().filter(|c| c.without != c.with).count();
    let (p0, r0) = pairwise(&bugs, &without);
    let (p1, r1) = pairwise(&bugs, &with);
    println!(
        "{} crashes of {} bugs: without the system's files precision {p0:.3} recall {r0:.3}; \
         with them precision {p1:.3} recall {r1:.3}; {changed} signatures changed when they \
         arrived",
        crashes.len(),
        BUGS.len()
    );
    assert!(
        p1 >= 0.98 && r1 >= 0.98,
        "with: precision {p1}, recall {r1}"
    );
    assert!(
        p0 >= 0.98 && r0 >= 0.98,
        "without: precision {p0}, recall {r0}"
    );
    assert!(
        changed * 20 <= crashes.len(),
        "{changed} of {} signatures changed when the system's files arrived",
        crashes.len()
    );
}

/// `postmortem signature --explain` on a failed assertion's report: the signature is the
/// function glibc's message names, and every frame has a line saying which rule decided.
#[test]
fn signature_explain_says_which_rule_decided_each_frame() {
    let work = Workdir::new("grouping-explain");
    let exe = work.compile("gcc", &["-O1", "-pthread"], &["group_suite.c"], "gc");
    let (core, stderr) = crash(&work.path().join("crash"), &exe, 1, false);
    // glibc: "gc: group_suite.c:NN: validate_order: Assertion `…' failed."
    let function = stderr
        .split(": ")
        .nth(2)
        .unwrap_or_else(|| panic!("no assertion message: {stderr}"))
        .to_string();
    assert_eq!(function, "validate_order", "{stderr}");
    let symbols = work.path().join("symbols");
    std::fs::create_dir_all(&symbols).unwrap();
    std::fs::copy(&exe, symbols.join("gc")).unwrap();
    let report = walk(&core, &symbols, false);
    let path = work.path().join("report.json");
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();
    let out = Command::new(bin())
        .args(["signature", "--explain"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("signature: {function}\n")),
        "{text}"
    );
    let frames = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["crashed"] == true)
        .unwrap()["frames"]
        .as_array()
        .unwrap()
        .len();
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(lines.len(), frames, "{text}");
    // `#N  VERDICT  FRAME  <- WHY`
    let verdict = |l: &str| l.split_whitespace().nth(1).unwrap_or("").to_string();
    let significant: Vec<&&str> = lines
        .iter()
        .filter(|l| verdict(l) == "significant")
        .collect();
    assert_eq!(significant.len(), 1, "{text}");
    assert!(significant[0].contains(&function), "{text}");
    // the frames above it, libc's abort machinery without names, say why they are aside
    let above = lines
        .iter()
        .take_while(|l| verdict(l) != "significant")
        .collect::<Vec<_>>();
    assert!(!above.is_empty(), "{text}");
    for l in above {
        assert_eq!(verdict(l), "aside", "{l}");
        assert!(l.contains("<- "), "{l}");
    }
    // the plain form prints the signature alone, and agrees with the report's
    let out = Command::new(bin())
        .arg("signature")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        signature(&report)
    );
}

/// The crash page has the same explanation, under the rules the service runs with: a
/// failed assertion's page names `validate_order` as the significant frame, and each of
/// libc's frames above it (libc's files are not uploaded) as set aside, with the rule.
#[tokio::test(flavor = "multi_thread")]
async fn the_crash_page_explains_the_signature() {
    let work = Workdir::new("grouping-page");
    let exe = work.compile("gcc", &["-O1", "-pthread"], &["group_suite.c"], "gc");
    let (core, _) = crash(&work.path().join("crash"), &exe, 1, false);
    let server = common::TempServer::start(&[]);
    let c = common::client();
    common::upload_binary(&c, &server.base, &exe, "gc").await;
    let id = common::upload_crash(&c, &server.base, &std::fs::read(&core).unwrap()).await;
    let done = common::poll_done(&c, &server.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["report"]["signature"]["text"], "validate_order");
    let page = common::get_text(&c, &server.url(&format!("/crashes/{id}"))).await;
    let section = page
        .split("id=\"signature-explained\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no explanation on the crash page"));
    let section = section.split("</details>").next().unwrap();
    let rows: Vec<&str> = section.split("<tr class=\"verdict-").skip(1).collect();
    let frames = done["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["crashed"] == true)
        .unwrap()["frames"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(rows.len(), frames, "{section}");
    let significant: Vec<&&str> = rows
        .iter()
        .filter(|r| r.starts_with("significant"))
        .collect();
    assert_eq!(significant.len(), 1, "{section}");
    assert!(significant[0].contains("validate_order"), "{section}");
    for r in rows.iter().take_while(|r| !r.starts_with("significant")) {
        assert!(r.starts_with("aside"), "{r}");
        assert!(r.contains("libc.so.6+0x"), "{r}");
    }
}

/// `postmortem signature --preview` on a service's stored crashes: processed under rules
/// that set the assertion's and the null dereference's functions aside (so two assertion
/// bugs share their caller's group, and one null dereference reached from two callers is
/// two groups), the built-in rules would split the first group and merge the second.
#[tokio::test(flavor = "multi_thread")]
async fn a_rules_change_is_previewed_on_stored_crashes() {
    let work = Workdir::new("grouping-preview");
    let exe = work.compile("gcc", &["-O1", "-pthread"], &["group_suite.c"], "gc");
    let old_rules = work.path().join("old.txt");
    std::fs::write(&old_rules, "irrelevant validate_*\nirrelevant read_field\n").unwrap();
    let server = common::TempServer::start(&["--signature-rules", old_rules.to_str().unwrap()]);
    let c = common::client();
    common::upload_binary(&c, &server.base, &exe, "gc").await;
    let mut before = Vec::new();
    for (i, (bug, thread)) in [(1, false), (2, false), (4, false), (4, true)]
        .into_iter()
        .enumerate()
    {
        let (core, _) = crash(&work.path().join(format!("crash{i}")), &exe, bug, thread);
        let id = common::upload_crash(&c, &server.base, &std::fs::read(&core).unwrap()).await;
        let done = common::poll_done(&c, &server.base, &id).await;
        before.push(signature(&done["report"]));
    }
    // the old rules' groups: the assertions' caller, and the dereference's two callers
    assert_eq!(before, ["run", "run", "from_config", "from_request"]);
    let out = Command::new(bin())
        .args(["signature", "--preview", "--data-dir"])
        .arg(server.dir.path().join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("crashes: 4 (unreadable reports: 0)"),
        "{text}"
    );
    assert!(text.contains("signature changed: 4"), "{text}");
    assert!(
        text.contains("groups that split: 1\ngroups that merge: 1"),
        "{text}"
    );
    assert!(
        text.contains(r#"split "run" -> {"validate_order", "validate_user"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"merge {"from_config", "from_request"} -> "read_field""#),
        "{text}"
    );
}
