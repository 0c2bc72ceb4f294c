//! Reports unchanged (issue 17's acceptance): `postmortem walk` and the service give, for
//! every dump of the committed corpus in `fixtures/reports/`, exactly the reports
//! committed beside it, byte for byte.
//!
//! - `walk_reports_are_unchanged`: the CLI's JSON and text reports of each case equal
//!   `expected/CASE.json` and `expected/CASE.txt`;
//! - `service_reports_are_unchanged`: each case's dump and files uploaded to a fresh
//!   `postmortem serve` (on a free port, SQLite in a temporary directory): the report it
//!   stores (`/crashes/ID/report.json`, the stored bytes: compact JSON) equals
//!   `expected/CASE.service.json`. It is the CLI's JSON report but for whitespace, except
//!   where the service legitimately differs: it matches files by build-id only, so the
//!   aarch64 program, whose dumps record no build-id, stays `missing` there while the CLI
//!   matches it by path (`unverified`).
//!
//! The dumps are committed (made by `fixtures/reports/make.sh`), not made at test time,
//! because compilers, libc and kernels differ between machines. The walk reads nothing of
//! the host: `--no-dump-paths` (the module paths recorded in the dumps are not opened, so
//! this machine's `/lib/…/libc.so.6` is never used) and `--no-system-debug`; the symbol
//! files are named relative to `fixtures/reports/` (the working directory), and no report
//! field holds them. So nothing is normalized.
//!
//! A change that alters a report fails here with a unified diff per file. If the change
//! is meant, rerun with `POSTMORTEM_BLESS=1` and commit the rewritten expectations: the
//! commit's diff shows what changed in the reports.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::Command;

use postmortem_testsupport::golden;

use crate::common;
use common::{bin, client, poll_done, TempServer};

/// One dump of the corpus and the files it is walked with.
struct Case {
    /// Names its expectations, `expected/NAME.*`.
    name: &'static str,
    /// Relative to `fixtures/reports/`.
    dump: &'static str,
    /// Each given as `--symbols` and uploaded to the service; relative to
    /// `fixtures/reports/` (files, or directories of files).
    symbols: &'static [&'static str],
}

const CASES: &[Case] = &[
    // A kernel core of a threaded x86_64 program: DWARF with an inlined frame; libc and
    // the loader missing (their frames by CFI-less scanning).
    Case {
        name: "x86_64-core",
        dump: "dumps/x86_64.core",
        symbols: &["bin/crash"],
    },
    // The same crash as a minidump (minidump-writer), with the ELF binary.
    Case {
        name: "x86_64-minidump-elf",
        dump: "dumps/x86_64.dmp",
        symbols: &["bin/crash"],
    },
    // The minidump with only the binary's `dump_syms` file.
    Case {
        name: "x86_64-minidump-sym",
        dump: "dumps/x86_64.dmp",
        symbols: &["sym"],
    },
    // A static, libc-free program walked with SFrame only (its `.eh_frame` removed).
    Case {
        name: "x86_64-sframe-core",
        dump: "dumps/x86_64-sframe.core",
        symbols: &["../sframe/walk/crash_mixed.noeh"],
    },
    // QEMU's core of a static aarch64 program with signed return addresses (pac-ret).
    Case {
        name: "aarch64-core",
        dump: "dumps/aarch64.core",
        symbols: &["../sframe/walk/crash_a64"],
    },
    // That core as a minidump, with only the stacks.
    Case {
        name: "aarch64-minidump",
        dump: "dumps/aarch64.dmp",
        symbols: &["../sframe/walk/crash_a64"],
    },
];

/// `fixtures/reports/`.
fn corpus() -> PathBuf {
    postmortem_testsupport::workspace_root().join("fixtures/reports")
}

/// The expectation `expected/NAME.EXT`.
fn expected(case: &Case, ext: &str) -> PathBuf {
    corpus()
        .join("expected")
        .join(format!("{}.{ext}", case.name))
}

/// Panics with every difference, or says what was blessed.
fn finish(what: &str, diffs: Vec<String>) {
    if golden::blessing() {
        eprintln!(
            "{what}: expectations rewritten under {}",
            corpus().display()
        );
        return;
    }
    assert!(
        diffs.is_empty(),
        "{what} changed ({} files). If that is meant, rerun with {}=1 and commit the new \
         expectations:\n\n{}",
        diffs.len(),
        golden::BLESS_VAR,
        diffs.join("\n")
    );
}

/// `postmortem walk DUMP --symbols … --no-dump-paths --no-system-debug --sha256 --format FORMAT`
/// in `fixtures/reports/`; its standard output.
fn walk(case: &Case, format: &str) -> Vec<u8> {
    let mut cmd = Command::new(bin());
    cmd.current_dir(corpus()).arg("walk").arg(case.dump);
    for s in case.symbols {
        cmd.arg("--symbols").arg(s);
    }
    let out = cmd
        .args([
            "--no-dump-paths",
            "--no-system-debug",
            "--sha256",
            "--format",
            format,
        ])
        .output()
        .expect("run postmortem walk");
    assert!(
        out.status.success(),
        "{}: walk failed: {}",
        case.name,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn walk_reports_are_unchanged() {
    let mut diffs = Vec::new();
    for case in CASES {
        for (format, ext) in [("json", "json"), ("text", "txt")] {
            let got = walk(case, format);
            diffs.extend(golden::check(&expected(case, ext), &got));
        }
    }
    finish("postmortem walk's reports", diffs);
}

/// The files of `paths` (relative to `fixtures/reports/`; directories walked).
fn files_of(paths: &[&str]) -> Vec<PathBuf> {
    fn add(path: PathBuf, out: &mut Vec<PathBuf>) {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for e in entries {
                add(e, out);
            }
        } else {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    for p in paths {
        add(corpus().join(p), &mut out);
    }
    out
}

/// Uploads the case's files and dump to `server` and returns the stored report's bytes.
async fn service_report(server: &TempServer, case: &Case) -> Vec<u8> {
    let c = client();
    for file in files_of(case.symbols) {
        let name = file.file_name().unwrap().to_str().unwrap().to_string();
        let r = c
            .post(server.url("/api/v1/binaries"))
            .header("x-file-name", name)
            .body(std::fs::read(&file).unwrap())
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert!(
            status == 200 || status == 201,
            "{}: upload of {}: {status} {}",
            case.name,
            file.display(),
            r.text().await.unwrap()
        );
    }
    let r = c
        .post(server.url("/api/v1/crashes"))
        .body(std::fs::read(corpus().join(case.dump)).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{}: crash upload", case.name);
    let id = r.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = poll_done(&c, &server.base, &id).await;
    assert_eq!(done["status"], "done", "{}: {done}", case.name);
    let r = c
        .get(server.url(&format!("/crashes/{id}/report.json")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}: stored report", case.name);
    r.bytes().await.unwrap().to_vec()
}

/// The service stores compact JSON, one line: a diff of it would show one changed line.
/// For the failure message only, both sides are shown pretty-printed (keys sorted, as
/// serde_json's `Value` holds them); the comparison is of the stored bytes.
fn pretty(bytes: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap() + "\n",
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[tokio::test]
async fn service_reports_are_unchanged() {
    let mut diffs = Vec::new();
    for case in CASES {
        // A server per case: files uploaded for one case must not serve another.
        let server = TempServer::start(&["--workers", "1"]);
        let got = service_report(&server, case).await;
        diffs.extend(golden::check_rendered(
            &expected(case, "service.json"),
            &got,
            pretty,
        ));
    }
    finish("the service's stored reports", diffs);
}
