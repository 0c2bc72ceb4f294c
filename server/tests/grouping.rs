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
//! libraries are not looked at), the service's pipeline without the service; then the
//! same crashes are uploaded to a real `postmortem serve` with the programs' files only,
//! their groups read from the API and scored, the system libraries' files uploaded, the
//! crashes reprocessed, and the groups read and scored again (`through_the_server`).
//!
//! The other tests here: `--explain` and the crash page's explanation, the preview of a
//! rules change, and groups people merge and split through the API (kept across
//! reprocessing and rule changes).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
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

/// One crash of the suite: its bug, how it was crashed, its core, its signatures.
struct Crashed {
    bug: u32,
    how: &'static str,
    core: PathBuf,
    without: String,
    with: String,
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_groups_mean_one_bug_each_with_and_without_the_systems_files() {
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
    // the system libraries the dumps name: path → build-id
    let mut libraries = BTreeMap::new();
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
                    libraries.insert(
                        PathBuf::from(path),
                        m["build_id"].as_str().unwrap_or_default().to_string(),
                    );
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
                core,
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
    let programs: Vec<&PathBuf> = p.exes.values().flatten().collect();
    through_the_server(&programs, &crashes, &libraries).await;
}

/// The suite as a service sees it: the 51 crashes uploaded to a real `postmortem serve`
/// that has the programs' files and not the system's, their groups read back from the
/// API (`GET /api/v1/groups`, then each group's crashes) and scored; then libc's,
/// libstdc++'s and libgcc's files uploaded (the files the crashing machine had, and
/// libc's debug file from libc6-dbg where installed), every crash reprocessed, and the
/// groups read and scored again, with the crashes whose group changed counted.
async fn through_the_server(
    programs: &[&PathBuf],
    crashes: &[Crashed],
    libraries: &BTreeMap<PathBuf, String>,
) {
    let started = std::time::Instant::now();
    let server = common::TempServer::start(&[]);
    let c = common::client();
    for exe in programs {
        let name = exe.file_name().unwrap().to_str().unwrap();
        common::upload_binary(&c, &server.base, exe, name).await;
    }
    let mut ids = Vec::new();
    for cr in crashes {
        let dump = std::fs::read(&cr.core).unwrap();
        ids.push(common::upload_crash(&c, &server.base, &dump).await);
    }
    for id in &ids {
        let done = common::poll_done(&c, &server.base, id).await;
        assert_eq!(done["status"], "done", "{done}");
    }
    let bugs: Vec<u32> = crashes.iter().map(|c| c.bug).collect();
    let before = groups_by_crash(&c, &server.base, &ids).await;
    let (p0, r0) = pairwise(&bugs, &before);
    let uploaded_in = started.elapsed();

    // the system's files arrive: each library, and its debug file where there is one
    let mut system_files = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (path, build_id) in libraries {
        if !build_id.is_empty() && !seen.insert(build_id.clone()) {
            continue; // one library under two paths
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        system_files.push((path.clone(), name.clone()));
        if build_id.len() > 2 {
            let debug = Path::new("/usr/lib/debug/.build-id")
                .join(&build_id[..2])
                .join(format!("{}.debug", &build_id[2..]));
            if debug.exists() {
                system_files.push((debug, format!("{name}.debug")));
            }
        }
    }
    for (path, name) in &system_files {
        common::upload_binary(&c, &server.base, path, name).await;
        println!("uploaded {name} ({})", path.display());
    }
    // the uploads requeue the crashes that missed a library; once the queue is idle,
    // everything is reprocessed once more, so that every crash saw every file whatever
    // the order they arrived in
    wait_idle(&c, &server.base).await;
    reprocess_all(&c, &server.base, &ids).await;
    let after = groups_by_crash(&c, &server.base, &ids).await;
    let (p1, r1) = pairwise(&bugs, &after);
    let changed = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    // the system's files were used: libc's frames have names now
    let mut named_libc = 0;
    for id in &ids {
        let v = common::get_json(&c, server.url(&format!("/api/v1/crashes/{id}"))).await;
        let frames = v["report"]["threads"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["frames"].as_array().into_iter().flatten());
        if frames
            .filter(|f| {
                f["module"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("libc.so"))
            })
            .any(|f| f["function"].is_string())
        {
            named_libc += 1;
        }
    }
    for ((cr, b), a) in crashes.iter().zip(&before).zip(&after) {
        println!("server: bug {:>2} {:<6} {b:?} -> {a:?}", cr.bug, cr.how);
    }
    println!(
        "through the server: {} crashes of {} bugs in {} groups; without the system's files \
         precision {p0:.3} recall {r0:.3}; with them ({} files) precision {p1:.3} recall \
         {r1:.3}; {changed} crashes changed group; libc named in {named_libc}; uploaded and \
         processed in {:.1} s, all in {:.1} s",
        ids.len(),
        BUGS.len(),
        before
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        system_files.len(),
        uploaded_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        named_libc > 0,
        "no report names a libc function: the system's files were not used"
    );
    assert!(
        p0 >= 0.98 && r0 >= 0.98,
        "server, without: precision {p0}, recall {r0}"
    );
    assert!(
        p1 >= 0.98 && r1 >= 0.98,
        "server, with: precision {p1}, recall {r1}"
    );
    assert!(
        changed * 20 <= ids.len(),
        "{changed} of {} crashes changed group when the system's files arrived",
        ids.len()
    );
}

/// Each crash's group as the API says: every group of `GET /api/v1/groups`, and each
/// group's crashes from `GET /api/v1/crashes?signature=GROUP`; in the order of `ids`.
async fn groups_by_crash(c: &reqwest::Client, base: &str, ids: &[String]) -> Vec<String> {
    let mut of = std::collections::HashMap::new();
    for group in api_groups(c, base).await.keys() {
        let mut cursor = String::new();
        loop {
            let url = format!(
                "{base}/api/v1/crashes?limit=100&signature={}{}",
                common_url_component(group),
                if cursor.is_empty() {
                    String::new()
                } else {
                    format!("&cursor={}", common_url_component(&cursor))
                }
            );
            let page = common::get_json(c, url).await;
            for cr in page["crashes"].as_array().unwrap() {
                of.insert(cr["id"].as_str().unwrap().to_string(), group.clone());
            }
            match page["next_cursor"].as_str() {
                Some(n) => cursor = n.to_string(),
                None => break,
            }
        }
    }
    ids.iter()
        .map(|id| {
            of.get(id)
                .cloned()
                .unwrap_or_else(|| panic!("crash {id} is in no group"))
        })
        .collect()
}

/// Waits until no crash is pending or being processed (at most 5 minutes).
async fn wait_idle(c: &reqwest::Client, base: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let mut busy = 0;
        for status in ["pending", "processing"] {
            let page =
                common::get_json(c, format!("{base}/api/v1/crashes?limit=1&status={status}")).await;
            busy += page["crashes"].as_array().map_or(0, Vec::len);
        }
        if busy == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the queue is still busy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
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

/// A client that sends `Authorization: Bearer TOKEN` with every request.
fn client_as(token: &str) -> reqwest::Client {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(h)
        .timeout(std::time::Duration::from_secs(60))
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Every group of `GET /api/v1/groups`, page by page: group → count.
async fn api_groups(c: &reqwest::Client, base: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut after = String::new();
    loop {
        let url = format!(
            "{base}/api/v1/groups?limit=50&after={}",
            common_url_component(&after)
        );
        let page = common::get_json(c, url).await;
        for g in page["groups"].as_array().unwrap() {
            out.insert(
                g["group"].as_str().unwrap().to_string(),
                g["count"].as_i64().unwrap(),
            );
        }
        match page["next"].as_str() {
            Some(n) => after = n.to_string(),
            None => return out,
        }
    }
}

/// Percent-encodes a query value.
fn common_url_component(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `POST /api/v1/reprocess {"all": true}`, then waits until every crash in `ids` was
/// processed once more.
async fn reprocess_all(c: &reqwest::Client, base: &str, ids: &[String]) {
    let mut before = Vec::new();
    for id in ids {
        let v = common::get_json(c, format!("{base}/api/v1/crashes/{id}")).await;
        before.push(v["finished_at"].as_i64().unwrap());
    }
    let r = c
        .post(format!("{base}/api/v1/reprocess"))
        .json(&serde_json::json!({ "all": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    for (id, was) in ids.iter().zip(before) {
        loop {
            let v = common::get_json(c, format!("{base}/api/v1/crashes/{id}")).await;
            if v["status"] == "done" && v["finished_at"].as_i64().unwrap_or(0) > was {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not reprocessed: {v}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

async fn post_json(c: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = c.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Merge and split through the HTTP API (issue 37), on a server with tokens: two
/// assertion bugs merged by hand, one of two crashes of a null dereference split out;
/// both decisions survive reprocessing and a restart under signature rules that give
/// every crash another signature (the unpinned crash follows the rules); undoing the
/// merge gives its crash back; `signature --preview` counts only the crash no decision
/// holds. Only the admin scope may decide.
#[tokio::test(flavor = "multi_thread")]
async fn merges_and_splits_through_the_api_survive_reprocessing_and_rule_changes() {
    let work = Workdir::new("grouping-decisions");
    let exe = work.compile("gcc", &["-O1", "-pthread"], &["group_suite.c"], "gc");
    let data = work.path().join("data");
    let data_s = data.to_str().unwrap().to_string();
    let tokens = ["--token", "adm:admin", "--token", "ing:ingest,symbols"];
    let serve = |rules: Option<&Path>| {
        let mut args = vec!["--data-dir", data_s.as_str()];
        args.extend_from_slice(&tokens);
        if let Some(r) = rules {
            args.extend_from_slice(&["--signature-rules", r.to_str().unwrap()]);
        }
        common::start_serve(&args)
    };
    let (proc, base) = serve(None);
    let c = client_as("adm");
    let r = c
        .post(format!("{base}/api/v1/binaries"))
        .header("x-file-name", "gc")
        .body(std::fs::read(&exe).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let mut ids = Vec::new();
    for (i, (bug, thread)) in [(1, false), (2, false), (4, false), (4, true)]
        .into_iter()
        .enumerate()
    {
        let (core, _) = crash(&work.path().join(format!("crash{i}")), &exe, bug, thread);
        let id = common::upload_crash(&c, &base, &std::fs::read(&core).unwrap()).await;
        assert_eq!(common::poll_done(&c, &base, &id).await["status"], "done");
        ids.push(id);
    }
    let groups = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
        pairs.iter().map(|(g, n)| (g.to_string(), *n)).collect()
    };
    assert_eq!(
        api_groups(&c, &base).await,
        groups(&[
            ("read_field", 2),
            ("validate_order", 1),
            ("validate_user", 1)
        ])
    );

    // only the admin scope decides
    let merge = serde_json::json!({ "into": "validate_order", "groups": ["validate_user"] });
    let (st, _) = post_json(
        &client_as("ing"),
        format!("{base}/api/v1/groups/merge"),
        merge.clone(),
    )
    .await;
    assert_eq!(st, 403);
    let (st, _) = post_json(
        &c,
        format!("{base}/api/v1/groups/merge"),
        serde_json::json!({ "into": "validate_order", "groups": ["no such group"] }),
    )
    .await;
    assert_eq!(st, 404);
    let (st, moved) = post_json(&c, format!("{base}/api/v1/groups/merge"), merge).await;
    assert_eq!(
        (st, &moved),
        (
            200,
            &serde_json::json!({ "group": "validate_order", "crashes": 1 })
        )
    );
    let (st, moved) = post_json(
        &c,
        format!("{base}/api/v1/groups/split"),
        serde_json::json!({ "group": "read_field", "crashes": [ids[3]] }),
    )
    .await;
    assert_eq!(
        (st, &moved),
        (
            200,
            &serde_json::json!({ "group": "read_field (split)", "crashes": 1 })
        )
    );
    let decided = groups(&[
        ("read_field", 1),
        ("read_field (split)", 1),
        ("validate_order", 2),
    ]);
    assert_eq!(api_groups(&c, &base).await, decided);
    let merged = common::get_json(&c, format!("{base}/api/v1/crashes/{}", ids[1])).await;
    assert_eq!(merged["signature"], "validate_order");
    assert_eq!(merged["computed_signature"], "validate_user");
    // the crash list by group (the dashboard's group page) follows
    let list = common::get_json(
        &c,
        format!("{base}/api/v1/crashes?signature=validate_order"),
    )
    .await;
    assert_eq!(list["crashes"].as_array().map(Vec::len), Some(2), "{list}");

    // reprocessing: the same groups
    reprocess_all(&c, &base, &ids).await;
    assert_eq!(api_groups(&c, &base).await, decided);

    // rules that set the bugs' own functions aside: every crash gets a new signature,
    // the decisions hold, the crash no decision holds follows the rules
    drop(proc);
    let rules = work.path().join("rules.txt");
    std::fs::write(
        &rules,
        "extends builtin\nirrelevant validate_*\nirrelevant read_field\n",
    )
    .unwrap();
    let (proc, base) = serve(Some(rules.as_path()));
    reprocess_all(&c, &base, &ids).await;
    let computed: Vec<String> = {
        let mut v = Vec::new();
        for id in &ids {
            let r = common::get_json(&c, format!("{base}/api/v1/crashes/{id}")).await;
            v.push(r["computed_signature"].as_str().unwrap().to_string());
        }
        v
    };
    assert_eq!(computed, ["run", "run", "from_config", "from_request"]);
    assert_eq!(
        api_groups(&c, &base).await,
        groups(&[
            ("from_config", 1),
            ("read_field (split)", 1),
            ("validate_order", 2),
        ])
    );

    // undoing the merge gives validate_user's crash back, and it stays there
    let (st, moved) = post_json(
        &c,
        format!("{base}/api/v1/groups/split"),
        serde_json::json!({ "group": "validate_order", "undo_merge_of": "validate_user" }),
    )
    .await;
    assert_eq!(
        (st, &moved),
        (
            200,
            &serde_json::json!({ "group": "validate_user", "crashes": 1 })
        )
    );
    let undone = groups(&[
        ("from_config", 1),
        ("read_field (split)", 1),
        ("validate_order", 1),
        ("validate_user", 1),
    ]);
    assert_eq!(api_groups(&c, &base).await, undone);
    reprocess_all(&c, &base, &ids).await;
    assert_eq!(api_groups(&c, &base).await, undone);
    drop(proc);

    // the preview of going back to the built-in rules: only the unpinned crash moves
    // (from_config -> read_field); the pinned ones stay where people put them
    let out = Command::new(bin())
        .args(["signature", "--preview", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("crashes: 4 (unreadable reports: 0)"),
        "{text}"
    );
    assert!(text.contains("signature changed: 1\n"), "{text}");
}
