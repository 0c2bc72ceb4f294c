//! `postmortem-walk` as a user runs it: its version, and the exit status and one-line
//! message docs/walking.md promises for input no report can be made from (2), never a panic;
//! and minidump-stackwalk's output and diagnostics flags (`--cyborg`, `--pretty`,
//! `--output-file`, `--log-file`, `--verbose`, `--features`) doing what
//! `cli/src/stackwalk.rs` documents. (The reports and documents themselves are compared
//! with gdb's, minidump-stackwalk's and `postmortem walk`'s in the server's minidump
//! tests, which run this binary.)

#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn walk(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn prints_its_version() {
    let out = walk(&["--version".as_ref()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        format!("postmortem-walk {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn input_that_is_no_dump_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.dmp");
    std::fs::write(&garbage, b"this is not a crash dump at all").unwrap();
    let missing = dir.path().join("missing.dmp");
    for input in [&garbage, &missing] {
        let out = walk(&[input.as_os_str()]);
        assert_eq!(out.status.code(), Some(2), "{}", input.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty(), "no report");
    }
}

/// The dump's SHA-256 is in the report only on request (`--sha256`): hashing reads the
/// whole dump, which a walk otherwise does not. With it, `dump.sha256` is what
/// `sha256sum` says; without it the key is absent and the rest of the report is the same.
#[test]
fn sha256_is_computed_on_request_only() {
    let dump = fixture_dump();
    let report = |extra: &[&str]| -> serde_json::Value {
        let mut args: Vec<&std::ffi::OsStr> = vec![dump.as_os_str(), "--no-dump-paths".as_ref()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let out = walk(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let sum = Command::new("sha256sum").arg(&dump).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    let expected = sum.split_whitespace().next().unwrap();
    assert_eq!(expected.len(), 64);

    let mut with = report(&["--sha256"]);
    assert_eq!(with["dump"]["sha256"], expected);
    let without = report(&[]);
    assert!(
        without["dump"].get("sha256").is_none(),
        "{}",
        without["dump"]
    );
    with["dump"].as_object_mut().unwrap().remove("sha256");
    assert_eq!(with, without);
}

/// The x86_64 minidump of `fixtures/reports/`, from the running test's package, not a
/// compiled-in path (another clone's, when builds are shared).
fn fixture_dump() -> PathBuf {
    let package = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    Path::new(&package).join("../fixtures/reports/dumps/x86_64.dmp")
}

/// `postmortem-walk DUMP ARGS…` with no file of this machine's (the dump's recorded
/// paths, /usr/lib/debug), so every run says the same; its output, which must be a
/// success.
fn walk_fixture(args: &[&OsStr]) -> std::process::Output {
    let dump = fixture_dump();
    let mut all: Vec<&OsStr> = vec![
        dump.as_os_str(),
        "--no-dump-paths".as_ref(),
        "--no-system-debug".as_ref(),
    ];
    all.extend_from_slice(args);
    let out = walk(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn os(s: &str) -> &OsStr {
    s.as_ref()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `--cyborg FILE` prints the human-readable text, as `--human` does, and writes the
/// JSON document to FILE, as `--json` prints it (pretty with `--pretty`).
#[test]
fn cyborg_writes_the_json_to_its_file_and_the_text_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cyborg.json");
    let human = walk_fixture(&[os("--human")]).stdout;
    let json = walk_fixture(&[os("--json")]).stdout;
    let pretty = walk_fixture(&[os("--json"), os("--pretty")]).stdout;
    assert!(text(&human).contains("Crash reason:"), "{}", text(&human));

    let out = walk_fixture(&[os("--cyborg"), file.as_os_str()]);
    assert_eq!(text(&out.stdout), text(&human));
    assert_eq!(text(&std::fs::read(&file).unwrap()), text(&json));

    let out = walk_fixture(&[os("--cyborg"), file.as_os_str(), os("--pretty")]);
    assert_eq!(text(&out.stdout), text(&human));
    assert_eq!(text(&std::fs::read(&file).unwrap()), text(&pretty));
}

/// `--pretty` indents the `--json` document: the same value, on many lines, where the
/// document without it is one line.
#[test]
fn pretty_is_the_json_document_indented() {
    let compact = text(&walk_fixture(&[os("--json")]).stdout);
    let pretty = text(&walk_fixture(&[os("--json"), os("--pretty")]).stdout);
    assert_eq!(compact.lines().count(), 1, "{compact}");
    assert!(pretty.lines().count() > 50, "{pretty}");
    assert!(
        pretty
            .lines()
            .skip(1)
            .all(|l| l.starts_with("  ") || l == "}"),
        "{pretty}"
    );
    let (a, b): (Value, Value) = (
        serde_json::from_str(&compact).unwrap(),
        serde_json::from_str(&pretty).unwrap(),
    );
    assert!(a["crashing_thread"]["frames"].is_array(), "{a}");
    assert_eq!(a, b);
}

/// `--output-file FILE` writes what standard output would have had, in each format,
/// and leaves standard output empty; with `--cyborg` the text goes to FILE and the JSON
/// to the cyborg file still.
#[test]
fn output_file_holds_what_stdout_would() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out");
    for args in [
        &[os("--json")][..],
        &[os("--json"), os("--pretty")],
        &[os("--human")],
        &[os("--human"), os("--brief")],
        &[],
        &[os("--format"), os("text")],
    ] {
        let expected = walk_fixture(args).stdout;
        let mut with: Vec<&OsStr> = args.to_vec();
        with.extend([os("--output-file"), file.as_os_str()]);
        let out = walk_fixture(&with);
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        assert_eq!(
            text(&std::fs::read(&file).unwrap()),
            text(&expected),
            "{args:?}"
        );
    }

    let cyborg = dir.path().join("cyborg.json");
    let out = walk_fixture(&[
        os("--cyborg"),
        cyborg.as_os_str(),
        os("--output-file"),
        file.as_os_str(),
    ]);
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&std::fs::read(&file).unwrap()),
        text(&walk_fixture(&[os("--human")]).stdout)
    );
    assert_eq!(
        text(&std::fs::read(&cyborg).unwrap()),
        text(&walk_fixture(&[os("--json")]).stdout)
    );
}

/// The lines `--verbose LEVEL` asks for, from the `--format json` report of the same
/// walk: `warn` the report's warnings, `info` each module's status too, `debug` (and
/// `trace`) each thread's end too; `error`, the default, nothing for a walk that works.
fn expected_log(report: &Value, level: &str) -> Vec<String> {
    let rank = |l: &str| {
        ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .position(|x| *x == l)
            .unwrap()
    };
    let mut lines = Vec::new();
    if rank(level) >= rank("warn") {
        for w in report["warnings"].as_array().unwrap() {
            lines.push(format!(
                "warn: {}: {}",
                w["code"].as_str().unwrap(),
                w["message"].as_str().unwrap()
            ));
        }
    }
    if rank(level) >= rank("info") {
        for m in report["modules"].as_array().unwrap() {
            lines.push(format!(
                "info: module {} {} ({})",
                m["name"].as_str().unwrap(),
                m["status"].as_str().unwrap(),
                m["base"].as_str().unwrap()
            ));
            // the fixture's modules are looked up nowhere (no files, no servers)
            assert!(
                m.get("lookups")
                    .is_none_or(|l| l.as_array().unwrap().is_empty()),
                "{m}"
            );
        }
    }
    if rank(level) >= rank("debug") {
        for t in report["threads"].as_array().unwrap() {
            lines.push(format!(
                "debug: thread {} (tid {}): {} frames, walk ended: {}",
                t["index"],
                t["tid"],
                t["frames"].as_array().unwrap().len(),
                t["end"].as_str().unwrap()
            ));
        }
    }
    lines
}

#[test]
fn verbose_levels_add_warnings_modules_and_threads() {
    let report: Value = serde_json::from_slice(&walk_fixture(&[]).stdout).unwrap();
    // the fixture walked with no files: every module is missing, with a warning each
    assert!(!report["warnings"].as_array().unwrap().is_empty());
    let stdout = walk_fixture(&[os("--json")]).stdout;
    for level in ["off", "error", "warn", "info", "debug", "trace"] {
        let out = walk_fixture(&[os("--json"), os("--verbose"), os(level)]);
        // diagnostics never change the document
        assert_eq!(text(&out.stdout), text(&stdout), "{level}");
        let err = text(&out.stderr);
        let got: Vec<&str> = err.lines().collect();
        let expected = expected_log(&report, level);
        assert_eq!(got.len(), expected.len(), "{level}: {err}");
        for (g, e) in got.iter().zip(&expected) {
            // a thread's line may say why its walk ended, after the end's code
            assert!(
                *g == e || (e.starts_with("debug: ") && g.starts_with(&format!("{e} ("))),
                "{level}: {g:?} is not {e:?}"
            );
        }
    }
    // the default is `error`: nothing for a walk that works
    assert!(walk_fixture(&[os("--json")]).stderr.is_empty());

    // a walk that fails says why at `error` and above, and nothing at `off`
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.dmp");
    for (level, lines) in [("off", 0), ("error", 1), ("debug", 1)] {
        let out = walk(&[missing.as_os_str(), os("--verbose"), os(level)]);
        assert_eq!(out.status.code(), Some(2), "{level}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), lines, "{level}: {err}");
    }
    // a level minidump-stackwalk does not have is refused
    let out = walk(&[missing.as_os_str(), os("--verbose"), os("loud")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("loud"), "{}", text(&out.stderr));
}

/// `--log-file FILE` takes the diagnostics standard error would have had, at every
/// level, and standard error stays empty.
#[test]
fn log_file_takes_the_diagnostics_stderr_would_get() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("walk.log");
    for level in ["warn", "info", "debug"] {
        let plain = walk_fixture(&[os("--json"), os("--verbose"), os(level)]);
        assert!(!plain.stderr.is_empty(), "{level}");
        let logged = walk_fixture(&[
            os("--json"),
            os("--verbose"),
            os(level),
            os("--log-file"),
            log.as_os_str(),
        ]);
        assert!(
            logged.stderr.is_empty(),
            "{level}: {}",
            text(&logged.stderr)
        );
        assert_eq!(text(&logged.stdout), text(&plain.stdout), "{level}");
        assert_eq!(
            text(&std::fs::read(&log).unwrap()),
            text(&plain.stderr),
            "{level}"
        );
    }
    // the one line a failed walk says, too (the file is truncated first)
    let missing = dir.path().join("missing.dmp");
    let out = walk(&[missing.as_os_str(), os("--log-file"), log.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let said = text(&std::fs::read(&log).unwrap());
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("missing.dmp"), "{said}");
}

/// minidump-stackwalk's `--features` families are accepted and give the document the
/// default gives (postmortem's analysis is always complete); anything else is refused.
#[test]
fn features_sets_all_give_the_same_document() {
    let default = text(&walk_fixture(&[os("--json")]).stdout);
    for set in ["stable-basic", "stable-all", "unstable-all"] {
        let out = walk_fixture(&[os("--json"), os("--features"), os(set)]);
        assert_eq!(text(&out.stdout), default, "{set}");
    }
    let out = walk(&[
        fixture_dump().as_os_str(),
        os("--features"),
        os("everything"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("everything") && err.contains("stable-basic"),
        "{err}"
    );
}

/// Issue 35 item 10: a dump compressed as systems store them (systemd-coredump's zstd,
/// xz and lz4; bzip2 as elfutils ships cores; gzip), by each format's own tool, walks as
/// it is: the report is the uncompressed dump's, but for its size (the decompressed
/// dump's). A decompression limit below the dump's size ends the walk with exit 2 and
/// one line saying so.
#[test]
fn compressed_dumps_walk_as_they_are() {
    let dump = fixture_dump();
    let dir = tempfile::tempdir().unwrap();
    let report_of = |path: &Path, extra: &[&str]| {
        let mut args: Vec<&OsStr> = vec![
            path.as_os_str(),
            "--no-dump-paths".as_ref(),
            "--no-system-debug".as_ref(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        walk(&args)
    };
    let plain = report_of(&dump, &[]);
    assert!(plain.status.success());
    let plain: Value = serde_json::from_slice(&plain.stdout).unwrap();
    for (tool, ext) in [
        ("zstd", "zst"),
        ("xz", "xz"),
        ("lz4", "lz4"),
        ("bzip2", "bz2"),
        ("gzip", "gz"),
    ] {
        let packed = dir.path().join(format!("core.{ext}"));
        let out = Command::new(tool).arg("-c").arg(&dump).output();
        let Some(out) = out.ok().filter(|o| o.status.success()) else {
            eprintln!("skipped {tool}: not installed");
            continue;
        };
        std::fs::write(&packed, &out.stdout).unwrap();
        let got = report_of(&packed, &[]);
        assert!(
            got.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        let got: Value = serde_json::from_slice(&got.stdout).unwrap();
        assert_eq!(got["threads"], plain["threads"], "{tool}");
        assert_eq!(got["modules"], plain["modules"], "{tool}");
        assert_eq!(got["dump"]["size"], plain["dump"]["size"], "{tool}");

        let cut = report_of(&packed, &["--max-decompressed-size", "4K"]);
        assert_eq!(cut.status.code(), Some(2), "{tool}");
        let err = String::from_utf8_lossy(&cut.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{tool}: {err}");
        assert!(err.contains("more than 4096 bytes"), "{tool}: {err}");
    }
}
