//! The corpus: dumps other projects wrote for their own tests, walked as a new user would
//! (`postmortem-walk DUMP --symbols-path STORE`, with only the symbol files that project's
//! test used) and compared with that project's own statement of the right frames
//! (`expected/CASE.json`). Nothing here compares with our own earlier output.
//!
//! The corpus is other people's files and is not in the repository: it is read from the
//! directory in `POSTMORTEM_CORPUS` (`.ci/run` sets it when the corpus lies beside the clone);
//! without it the test says it was skipped. Per case it prints what the origin asserts,
//! how much of it the walk matched, and the frames past an origin's complete list; it
//! fails on any case from a platform postmortem claims (Linux x86_64/aarch64 cores and
//! minidumps, Windows x64 and x86 and macOS x86_64 minidumps, Linux i386 dumps) that does
//! not hold, unless the case
//! is in [`KNOWN_OPEN`].
//!
//! Conventions of the origins (the corpus README): a caller frame's pc is the return
//! address (minidump_stackwalk, lldb) or one instruction step below it (eu-stack); inlined
//! calls are frames of their own; a trailing parameter list in a name (`crash()`,
//! `cxxfunc(int)`) is the origin's printing, not part of the function's name as our
//! report gives it. Frames the origin found by stack scanning are its guesswork: only the
//! frames before the first of them are asserted, and that no frame of ours lies in a
//! module's headers. Where the case's symbol files are not in the corpus (the elfutils
//! and lldb cases used executables, which are not), names, files and lines cannot be
//! checked: the frames are compared without inlined entries, by pc where the origin
//! gives one, and by count where it asserts the whole list.
//!
//! With `POSTMORTEM_STACKWALK=PATH-TO-minidump-stackwalk`, every minidump case is also
//! walked by minidump-stackwalk with the same store and scored the same way (the table
//! of `docs/dumps-from-other-tools.md`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use engine::dump::compressed::{self, Compression, Limit};
use serde_json::Value;

/// Cases of claimed platforms known to fail for a reason an open issue names, and the
/// failures excused (by their wording): any other failure of the case still fails the
/// test, so a regression cannot hide behind an entry. An entry goes when its case holds
/// (the test says so), and each is printed loudly.
struct Open {
    case: &'static str,
    why: &'static str,
    excuses: &'static [&'static str],
}

// Empty since the scan rules (issue 35 item 4) landed: every claimed case holds. An entry
// names a case, why it is open and the failure texts it excuses, e.g.
// `Open { case: "rm-linux-mini", why: "…", excuses: &["frames past the origin's complete list"] }`.
const KNOWN_OPEN: &[Open] = &[];

/// Failures printed per case and tool.
const MAX_SHOWN: usize = 6;

#[derive(Default, Debug)]
struct Score {
    /// Facts of the origin's list checked (a frame's presence, pc, name, …).
    asserted: usize,
    matched: usize,
    /// Frames past the origin's complete list (the walk went on past the outermost one).
    extra: usize,
    /// Names, files and lines the origin gives that cannot be checked without its files.
    unverifiable: usize,
    failures: Vec<String>,
}

struct Case {
    name: String,
    os: String,
    arch: String,
    dump: PathBuf,
    symbols: Vec<PathBuf>,
    expected: Value,
}

fn corpus() -> Option<PathBuf> {
    match std::env::var_os("POSTMORTEM_CORPUS") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!(
                "skipped: POSTMORTEM_CORPUS is not set (the corpus of other projects' dumps)"
            );
            None
        }
    }
}

fn cases(root: &Path) -> Vec<Case> {
    let manifest = std::fs::read_to_string(root.join("manifest.tsv")).unwrap();
    let mut lines = manifest.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c_case, c_dump, c_sym, c_os, c_arch, c_exp) = (
        col("case"),
        col("dump"),
        col("symbols"),
        col("os"),
        col("arch"),
        col("expected"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let expected = std::fs::read_to_string(root.join(f[c_exp])).unwrap();
            Case {
                name: f[c_case].to_string(),
                os: f[c_os].to_string(),
                arch: f[c_arch].to_string(),
                dump: root.join(f[c_dump]),
                symbols: f[c_sym]
                    .split(',')
                    .filter(|s| *s != "-" && !s.is_empty())
                    .map(|s| root.join(s))
                    .collect(),
                expected: serde_json::from_str(&expected).unwrap(),
            }
        })
        .collect()
}

/// Whether postmortem claims the case's platform (docs/dumps-from-other-tools.md).
fn claimed(c: &Case) -> Result<(), String> {
    match (c.os.as_str(), c.arch.as_str()) {
        ("linux", "x86_64" | "aarch64") | ("windows" | "macos", "x86_64") => Ok(()),
        // issue 39: both Windows x86 cases match all their origin's facts, as
        // minidump-stackwalk does (docs/dumps-from-other-tools.md)
        ("windows" | "linux", "x86") => Ok(()),
        (os, arch) => Err(format!("{os} {arch}: not claimed")),
    }
}

/// The case's Breakpad store in `dir`: its `.sym` files (decompressed where the corpus
/// keeps them as `.xz`) at their store paths. Whether any symbol file was there.
fn store(c: &Case, dir: &Path) -> bool {
    let mut any = false;
    for s in &c.symbols {
        let text = s.to_string_lossy();
        let Some(at) = text.find("/symbols/") else {
            continue;
        };
        let rel = text[at + "/symbols/".len()..].to_string();
        if !rel.ends_with(".sym") && !rel.ends_with(".sym.xz") {
            continue; // an executable the corpus does not hold
        }
        let Ok(bytes) = std::fs::read(s) else {
            continue;
        };
        let rel = rel.trim_end_matches(".xz");
        let out = dir.join(rel);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let mut file = std::fs::File::create(&out).unwrap();
        match Compression::of(&bytes) {
            Some(f) => {
                compressed::decompress(f, &bytes[..], &mut file, Limit(1 << 30)).unwrap();
            }
            None => std::io::Write::write_all(&mut file, &bytes).unwrap(),
        }
        any = true;
    }
    any
}

/// Our walk of the case: the report, or the walk's error line.
fn walk(c: &Case, store: &Path) -> Result<Value, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
        .arg(&c.dump)
        .arg("--symbols-path")
        .arg(store)
        .args(["--no-dump-paths", "--no-system-debug", "--format", "json"])
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// minidump-stackwalk's walk of the same minidump with the same store, its frames turned
/// into our report's shape (inlined entries as frames, caller pcs as return addresses).
fn stackwalk(tool: &Path, c: &Case, store: &Path) -> Result<Value, String> {
    let out = Command::new(tool)
        .arg("--json")
        .arg(&c.dump)
        .arg(store)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let doc: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let step = if c.arch == "aarch64" { 4 } else { 1 };
    let crashed = doc["crash_info"]["crashing_thread"].as_u64();
    let threads: Vec<Value> = doc["threads"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut frames = Vec::new();
            for f in t["frames"].as_array().cloned().unwrap_or_default() {
                let caller = f["trust"] != "context";
                for inl in f["inlines"].as_array().cloned().unwrap_or_default() {
                    frames.push(serde_json::json!({
                        "function": inl["function"], "file": inl["file"],
                        "line": inl["line"], "inlined": true, "module": f["module"],
                        "pc": Value::Null, "module_offset": Value::Null,
                    }));
                }
                let pc = hex(&f["offset"]).map(|o| if caller { o + step } else { o });
                let module_offset = hex(&f["module_offset"]);
                frames.push(serde_json::json!({
                    "function": f["function"], "file": f["file"], "line": f["line"],
                    "inlined": false, "module": f["module"],
                    "pc": pc.map(|p| format!("{p:#x}")),
                    "module_offset": module_offset.map(|p| format!("{p:#x}")),
                }));
            }
            serde_json::json!({
                "index": i, "tid": t["thread_id"],
                "crashed": crashed == Some(i as u64), "frames": frames,
            })
        })
        .collect();
    Ok(serde_json::json!({ "threads": threads }))
}

fn hex(v: &Value) -> Option<u64> {
    let s = v.as_str()?;
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// A name as the origin prints it, less a trailing parameter list.
fn bare(name: &str) -> &str {
    let n = name.trim();
    if !n.ends_with(')') {
        return n;
    }
    let mut depth = 0i32;
    for (i, ch) in n.char_indices().rev() {
        match ch {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return n[..i].trim_end();
                }
            }
            _ => {}
        }
    }
    n
}

fn base_name(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

fn select<'r>(report: &'r Value, select: &Value) -> Option<&'r Value> {
    let threads = report["threads"].as_array()?;
    if select["crashed"] == true {
        threads.iter().find(|t| t["crashed"] == true)
    } else if let Some(tid) = select["tid"].as_u64() {
        threads.iter().find(|t| t["tid"].as_u64() == Some(tid))
    } else {
        threads.get(usize::try_from(select["index"].as_u64()?).ok()?)
    }
}

/// Scores one thread of ours against the origin's frames for it.
fn score_thread(
    ours: &Value,
    want: &Value,
    with_symbols: bool,
    step: u64,
    what: &str,
    s: &mut Score,
) {
    let all: Vec<&Value> = want["frames"].as_array().unwrap().iter().collect();
    // The origin's guesswork: its frames from the first one found by scanning on.
    let scanned = all.iter().position(|f| f["found_by"] == "stack scanning");
    let trusted = &all[..scanned.unwrap_or(all.len())];
    let complete = want["complete"] == true && scanned.is_none();
    // Without the symbol files, inlined entries cannot exist on our side: compare frames.
    let wanted: Vec<&Value> = if with_symbols {
        trusted.to_vec()
    } else {
        trusted
            .iter()
            .copied()
            .filter(|f| f["inlined"] != true)
            .collect()
    };
    let ours: Vec<&Value> = ours["frames"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter(|f| with_symbols || f["inlined"] != true)
                .collect()
        })
        .unwrap_or_default();
    for (i, w) in wanted.iter().enumerate() {
        // the origin's frame number; without symbols, less the inlined entries before it
        let index = w["index"].as_u64().map_or(i, |n| n as usize);
        let at = if with_symbols {
            index
        } else {
            index
                - trusted
                    .iter()
                    .filter(|f| f["inlined"] == true)
                    .filter(|f| f["index"].as_u64().is_some_and(|n| (n as usize) < index))
                    .count()
        };
        check_frame(w, ours.get(at).copied(), at, with_symbols, step, what, s);
    }
    if complete && ours.len() > wanted.len() {
        s.extra += ours.len() - wanted.len();
        s.failures.push(format!(
            "{what}: {} frames past the origin's complete list of {}",
            ours.len() - wanted.len(),
            wanted.len()
        ));
    }
    if scanned.is_some() {
        // no frame of ours in a module's headers (offset under 0x100): never code
        for (i, o) in ours.iter().enumerate().skip(1) {
            if hex(&o["module_offset"]).is_some_and(|off| off < 0x100) {
                s.extra += 1;
                s.failures.push(format!(
                    "{what}: frame {i} at {} is in a module's headers",
                    o["pc"]
                ));
            }
        }
    }
}

/// Scores one frame of the origin's (`want`) against ours at the same place (`ours`,
/// `None` where we have none): its presence, its pc, and, with the symbol files, its
/// function, file and line; its module always. Each fact the origin gives is asserted,
/// whether or not our frame is there.
fn check_frame(
    want: &Value,
    ours: Option<&Value>,
    at: usize,
    with_symbols: bool,
    step: u64,
    what: &str,
    s: &mut Score,
) {
    let null = Value::Null;
    let o = ours.unwrap_or(&null);
    let mut facts: Vec<(String, bool)> = vec![(format!("frame {at} missing"), ours.is_some())];
    if let Some(pc) = want["pc"].as_str().and_then(|p| hex(&Value::from(p))) {
        let our = hex(&o["pc"]);
        let ok = our == Some(pc) || (at > 0 && our.and_then(|p| p.checked_sub(step)) == Some(pc));
        facts.push((
            format!("frame {at} pc {pc:#x} wanted, {} walked", o["pc"]),
            ok,
        ));
    }
    let fields = [
        (
            "function",
            want["function"].as_str().map(bare),
            o["function"].as_str().map(bare),
        ),
        ("module", want["module"].as_str(), o["module"].as_str()),
        (
            "file",
            want["file"].as_str().map(base_name),
            o["file"].as_str().map(base_name),
        ),
    ];
    for (field, want_v, our_v) in fields {
        let Some(want_v) = want_v else { continue };
        if field != "module" && !with_symbols {
            s.unverifiable += 1;
            continue;
        }
        facts.push((
            format!("frame {at} {field} {want_v:?} wanted, {our_v:?} walked"),
            our_v == Some(want_v),
        ));
    }
    if let Some(line) = want["line"].as_u64() {
        if with_symbols {
            facts.push((
                format!("frame {at} line {line} wanted, {} walked", o["line"]),
                o["line"].as_u64() == Some(line),
            ));
        } else {
            s.unverifiable += 1;
        }
    }
    for (text, ok) in facts {
        s.asserted += 1;
        if ok {
            s.matched += 1;
        } else if ours.is_some() || text.ends_with("missing") {
            s.failures.push(format!("{what}: {text}"));
        }
    }
}

/// Scores a report (ours or minidump-stackwalk's) against the case's expectations.
fn score(c: &Case, report: &Value, with_symbols: bool) -> Score {
    let mut s = Score::default();
    let step = if c.arch == "aarch64" { 4 } else { 1 };
    for want in c.expected["threads"].as_array().unwrap() {
        let what = format!("thread {}", want["select"]);
        match select(report, &want["select"]) {
            Some(t) => score_thread(t, want, with_symbols, step, &what, &mut s),
            None => {
                s.asserted += 1;
                s.failures.push(format!("{what}: no such thread"));
            }
        }
    }
    let names: Vec<&str> = report["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["frames"].as_array().into_iter().flatten())
        .filter_map(|f| f["function"].as_str().map(bare))
        .collect();
    for name in c.expected["any_thread_has"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(name) = name.as_str() else { continue };
        if !with_symbols {
            s.unverifiable += 1;
            continue;
        }
        s.asserted += 1;
        if names.contains(&bare(name)) {
            s.matched += 1;
        } else {
            s.failures.push(format!("no thread has {name}"));
        }
    }
    for name in c.expected["nowhere"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        if !with_symbols {
            s.unverifiable += 1;
            continue;
        }
        s.asserted += 1;
        if names.contains(&bare(name)) {
            s.failures.push(format!("{name} is in a thread"));
        } else {
            s.matched += 1;
        }
    }
    s
}

/// The aarch64 cores of elfutils' backtrace tests were written before pointer
/// authentication existed (ARMv8.3; Linux signs user return addresses from 5.0, 2019):
/// they hold no signed return address, so no warning may say one was stripped (issue 35
/// item 9). `Err` names the cases this holds for.
fn pre_pac_warning(c: &Case) -> Result<(), String> {
    if c.arch == "aarch64" && c.name.starts_with("eu-backtrace-aarch64") {
        Err("pac-mask-inferred on a core from before pointer authentication".into())
    } else {
        Ok(())
    }
}

fn has_warning(report: &Value, code: &str) -> bool {
    report["warnings"]
        .as_array()
        .is_some_and(|w| w.iter().any(|w| w["code"] == code))
}

fn line(who: &str, c: &Case, s: &Score) -> String {
    format!(
        "{:<42} {:<12} asserted {:>3}  matched {:>3}  extra {:>2}  unverifiable {:>2}",
        c.name, who, s.asserted, s.matched, s.extra, s.unverifiable
    )
}

#[test]
fn every_claimed_dump_walks_as_its_origin_says() {
    let Some(root) = corpus() else { return };
    let stackwalk_tool = std::env::var_os("POSTMORTEM_STACKWALK").map(PathBuf::from);
    let mut failed = Vec::new();
    let mut open = Vec::new();
    for c in cases(&root) {
        let dir = tempfile::tempdir().unwrap();
        let with_symbols = store(&c, dir.path());
        let ours = walk(&c, dir.path());
        let scored = match (&ours, claimed(&c)) {
            (Ok(report), _) => Some(score(&c, report, with_symbols)),
            (Err(e), Err(why)) => {
                println!("{:<42} not claimed ({why}); the walk says: {e}", c.name);
                // refused: it must say what is unsupported, never "malformed"
                if e.contains("malformed") {
                    failed.push(format!("{}: refused as malformed: {e}", c.name));
                }
                None
            }
            (Err(e), Ok(())) => {
                failed.push(format!("{}: the walk failed: {e}", c.name));
                None
            }
        };
        if let (Ok(report), Err(e)) = (&ours, pre_pac_warning(&c)) {
            if has_warning(report, "pac-mask-inferred") {
                failed.push(format!("{}: {e}", c.name));
            }
        }
        if let Some(s) = &scored {
            println!("{}", line("postmortem", &c, s));
            for f in s.failures.iter().take(MAX_SHOWN) {
                println!("    {f}");
            }
            if s.failures.len() > MAX_SHOWN {
                println!("    … and {} more", s.failures.len() - MAX_SHOWN);
            }
            let known = KNOWN_OPEN.iter().find(|o| o.case == c.name);
            match (claimed(&c), s.failures.is_empty()) {
                (Ok(()), false) => {
                    let excused =
                        |f: &String| known.is_some_and(|o| o.excuses.iter().any(|e| f.contains(e)));
                    let unexcused: Vec<&str> = s
                        .failures
                        .iter()
                        .filter(|f| !excused(f))
                        .map(String::as_str)
                        .collect();
                    match known {
                        Some(o) if unexcused.is_empty() => {
                            open.push(format!("{} ({})", c.name, o.why));
                        }
                        _ => failed.push(format!("{}: {}", c.name, unexcused.join("; "))),
                    }
                }
                (Ok(()), true) if known.is_some() => {
                    println!("!!! {} now holds: take it off KNOWN_OPEN", c.name);
                }
                (Err(why), _) => println!("    (not claimed: {why})"),
                _ => {}
            }
        }
        if let Some(tool) = &stackwalk_tool {
            if c.expected["dump_kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("minidump"))
            {
                match stackwalk(tool, &c, dir.path()) {
                    Ok(report) => {
                        let s = score(&c, &report, with_symbols);
                        println!("{}", line("stackwalk", &c, &s));
                        for f in s.failures.iter().take(MAX_SHOWN) {
                            println!("    {f}");
                        }
                    }
                    Err(e) => println!("{:<42} stackwalk    failed: {e}", c.name),
                }
            }
        }
    }
    for o in &open {
        println!("!!! KNOWN OPEN, not counted as passing: {o}");
    }
    assert!(
        failed.is_empty(),
        "cases that do not hold:\n{}",
        failed.join("\n")
    );
}
