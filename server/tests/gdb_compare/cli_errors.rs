//! `postmortem walk` on inputs that are not (whole) cores: it must answer with exit 2 and
//! one line on stderr, or, for a truncated core, a report that says so; never exit 1 or
//! panic.

use std::path::Path;
use std::process::Output;

use super::report;
use postmortem_testsupport::program::Workdir;

/// Exit 2 and exactly one non-empty line on stderr.
fn assert_refused(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "walk on {what} must exit 2; stderr:\n{stderr}\nstdout:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "walk on {what} must say why in one line: {stderr:?}"
    );
    assert!(
        !stderr.contains("panicked"),
        "walk on {what} panicked: {stderr}"
    );
}

#[test]
fn walk_refuses_a_text_file() {
    let work = Workdir::new("not-a-core");
    let path = work.path().join("notes.txt");
    std::fs::write(&path, "this is not a core dump\n".repeat(100)).expect("write");
    assert_refused(&report::walk(&path, work.path()), "a text file");
}

#[test]
fn walk_refuses_an_empty_file() {
    let work = Workdir::new("empty");
    let path = work.path().join("empty");
    std::fs::write(&path, b"").expect("write");
    assert_refused(&report::walk(&path, work.path()), "an empty file");
}

#[test]
fn walk_refuses_an_executable() {
    let work = Workdir::new("exe-not-core");
    let exe = work.compile("gcc", &["-O0"], &["basic.c"], "basic");
    assert_refused(&report::walk(&exe, work.path()), "an executable");
}

/// The first half of a real core: the headers survive, much of the memory does not.
#[test]
fn walk_reports_a_truncated_core() {
    let work = Workdir::new("truncated");
    let exe = work.compile("gcc", &["-O0"], &["basic.c"], "basic");
    let core = work.crash(&exe);
    let bytes = std::fs::read(&core).expect("read core");
    let half = work.path().join("half.core");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).expect("write");
    std::fs::remove_file(&core).expect("remove the whole core");
    check_truncated(&half, work.path());
}

fn check_truncated(core: &Path, symbols: &Path) {
    let out = report::walk(core, symbols);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "walk panicked on a truncated core: {stderr}"
    );
    match out.status.code() {
        Some(0) => {
            let report: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("report JSON");
            report::assert_valid(&report);
            let codes: Vec<&str> = report["warnings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| w["code"].as_str())
                .collect();
            assert!(
                codes.contains(&"truncated-dump"),
                "no truncated-dump warning: {codes:?}"
            );
        }
        Some(2) => assert_eq!(
            stderr.lines().filter(|l| !l.trim().is_empty()).count(),
            1,
            "{stderr:?}"
        ),
        other => panic!("walk on a truncated core exited {other:?}:\n{stderr}"),
    }
}

/// A binary whose `.eh_frame` has one corrupt FDE (its CIE pointer points nowhere): the
/// walk still reports, with an `unwind-table-corrupt` warning naming the module, and the
/// crashed thread is still symbolized.
#[test]
fn walk_reports_a_corrupt_eh_frame() {
    use object::{Object, ObjectSection};
    let work = Workdir::new("corrupt-eh-frame");
    let exe = work.compile("gcc", &["-O2", "-g"], &["basic.c"], "basic");
    let core = work.crash(&exe);
    let mut bytes = std::fs::read(&exe).expect("read the executable");
    let (start, size) = {
        let file = object::File::parse(&*bytes).expect("parse the executable");
        let eh = file.section_by_name(".eh_frame").expect(".eh_frame");
        eh.file_range().expect(".eh_frame has file bytes")
    };
    let start = usize::try_from(start).expect("offset");
    let size = usize::try_from(size).expect("size");
    // Entry 0 is a CIE; entry 1 is an FDE: overwrite its CIE pointer (bytes 4..8).
    let cie_len = u32::from_le_bytes(bytes[start..start + 4].try_into().expect("4 bytes"));
    let fde = start + 4 + cie_len as usize;
    assert!(fde + 8 <= start + size, "the executable has an FDE");
    bytes[fde + 4..fde + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    std::fs::write(&exe, &bytes).expect("write the corrupted executable");

    let out = report::walk(&core, work.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    report::assert_valid(&report);
    let corrupt: Vec<&serde_json::Value> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["code"] == "unwind-table-corrupt")
        .collect();
    assert_eq!(corrupt.len(), 1, "{}", report["warnings"]);
    let module = corrupt[0]["module"]
        .as_u64()
        .expect("the warning names a module") as usize;
    assert_eq!(report["modules"][module]["name"], "basic");
    assert_eq!(
        report["threads"][0]["frames"][0]["function"], "crash_here",
        "{}",
        report["threads"][0]
    );
}
