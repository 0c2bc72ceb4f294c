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
