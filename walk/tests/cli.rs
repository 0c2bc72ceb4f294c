//! `postmortem-walk` as a user runs it: its version, and the exit status and one-line
//! message the README promises for input no report can be made from (2), never a panic;
//! and minidump-stackwalk's output and diagnostics flags (`--cyborg`, `--pretty`,
//! `--output-file`, `--log-file`, `--verbose`, `--features`) doing what
//! `walk/src/stackwalk.rs` documents. (The reports and documents themselves are compared
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
