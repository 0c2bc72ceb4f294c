//! Source context from a debuginfod server's `buildid/ID/source/PATH` route in the
//! service's reports (issue 42), against elfutils' own `debuginfod` (`-F`: it serves the
//! ELF files of a directory and the source files their DWARF names) on a free port.
//!
//! `debuginfods_sources_give_the_service_reports_gdbs_lines`: a program compiled here,
//! its core, and gdb's frames of it; the program uploaded to two `postmortem serve`s, one
//! with `--debuginfod URL` and one without. With it, every frame for which gdb gives a
//! line of the program's source has that line, the source file's own text at it as its
//! `context_line` and the file's five lines before and after; without it (the service
//! reads no local file), no frame has context — so the lines came from the debuginfod.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common;
use common::{client, make_core, poll_done, upload_binary, upload_crash, TempServer as Server};
use postmortem_testsupport::gdb;

/// Each function on lines of its own, so that each frame's line and context differ.
const CRASHER: &str = r#"#include <stdio.h>

__attribute__((noinline)) void crash(volatile int *p)
{
    *p = 42; /* SIGSEGV */
}

__attribute__((noinline)) void middle(volatile int *p)
{
    crash(p);
    puts("");
}

int main(void)
{
    middle((volatile int *)0);
    return 0;
}
"#;

struct Built {
    dir: tempfile::TempDir,
    /// The directory debuginfod serves: the program alone.
    served: PathBuf,
    prog: PathBuf,
    source: PathBuf,
    core: Vec<u8>,
    gdb: gdb::GdbCore,
}

fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let (src, served, run) = (
        dir.path().join("src"),
        dir.path().join("served"),
        dir.path().join("run"),
    );
    for d in [&src, &served, &run] {
        std::fs::create_dir(d).unwrap();
    }
    let source = src.join("prog.c");
    std::fs::write(&source, CRASHER).unwrap();
    let prog = served.join("prog");
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-Wl,--build-id", "-o"])
        .arg(&prog)
        .arg(&source)
        .status()
        .expect("gcc (test.sh installs it)");
    assert!(st.success());
    let core = make_core(&run, &prog);
    let core_path = run.join("prog.core");
    std::fs::write(&core_path, &core).unwrap();
    let gdb = gdb::frames(&run, &prog, &core_path);
    Built {
        dir,
        served,
        prog,
        source,
        core,
        gdb,
    }
}

/// The crash's report from a fresh server started with `args`, the program uploaded.
async fn report(b: &Built, args: &[&str]) -> Value {
    let s = Server::start(&[&["--workers", "1"][..], args].concat());
    let c = client();
    upload_binary(&c, &s.base, &b.prog, "prog").await;
    let id = upload_crash(&c, &s.base, &b.core).await;
    let done = poll_done(&c, &s.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    done["report"].clone()
}

/// Checks every frame gdb gives a line of the source in against `report`: that line,
/// the file's own text at it and its five lines before and after. Returns how many.
fn assert_lines(b: &Built, report: &Value) -> usize {
    let text = std::fs::read_to_string(&b.source).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let frames = report["threads"][0]["frames"].as_array().unwrap();
    let mut compared = 0;
    for g in &b.gdb.crashed().frames {
        let (Some(file), Some(line)) = (g.file.as_deref(), g.line) else {
            continue;
        };
        if file != b.source.to_str().unwrap() {
            continue;
        }
        let line = usize::try_from(line).unwrap();
        let f = frames
            .iter()
            .find(|f| f["function"].as_str() == g.name.as_deref())
            .unwrap_or_else(|| panic!("no frame {:?} in {report}", g.name));
        assert_eq!(f["line"], line, "{f}");
        assert_eq!(f["context_line"], lines[line - 1], "{f}");
        let pre: Vec<&str> = lines[line.saturating_sub(6)..line - 1].to_vec();
        let post: Vec<&str> = lines[line..(line + 5).min(lines.len())].to_vec();
        assert_eq!(f["pre_context"], serde_json::json!(pre), "{f}");
        assert_eq!(f["post_context"], serde_json::json!(post), "{f}");
        compared += 1;
    }
    assert!(compared >= 3, "only {compared} frames of prog.c: {report}");
    compared
}

#[tokio::test(flavor = "multi_thread")]
async fn debuginfods_sources_give_the_service_reports_gdbs_lines() {
    let b = build();
    let (_debuginfod, url) =
        crate::sources::start_debuginfod(&b.served, &b.dir.path().join("db.sqlite"), 1);

    let with = report(&b, &["--debuginfod", &url]).await;
    assert_lines(&b, &with);

    let without = report(&b, &[]).await;
    let frames = without["threads"][0]["frames"].as_array().unwrap();
    assert!(frames.iter().any(|f| f["line"].is_u64()), "{without}");
    assert!(
        frames.iter().all(|f| f["context_line"].is_null()),
        "context without a debuginfod: {without}"
    );
}
