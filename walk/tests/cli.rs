//! `postmortem-walk` as a user runs it: its version, and the exit status and one-line
//! message the README promises for input no report can be made from (2), never a panic.
//! (The reports themselves are compared with gdb's and with `postmortem walk`'s in the
//! server's minidump tests, which run this binary.)

#![allow(clippy::unwrap_used)]

use std::process::Command;

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
    // the running test's package, not a compiled-in path (another clone's, when builds
    // are shared)
    let package = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let dump = std::path::Path::new(&package).join("../fixtures/reports/dumps/x86_64.dmp");
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
