//! Source-link mappings end to end (issue 42). A program compiled here with
//! `-fdebug-prefix-map=DIR=/build/src`, so that its line tables name `/build/src/prog.c`, a
//! path that does not exist on this machine; its source served by Python's `http.server`
//! (not ours) at `/raw/COMMIT/prog.c` on a free port. gdb gives each frame's function and
//! line; the text at that line and the lines around it are read from the source file
//! itself.
//!
//! - `a_mapping_gives_the_walk_its_lines`: `postmortem walk --source-link MAP
//!   --source-commit C` gives every frame gdb shows a line of `prog.c` for that line, the
//!   file's text at it as `context_line`, the file's own lines around it, and as
//!   `source_url` the web template's URL at the commit and line; without the commit the
//!   template cannot be filled: nothing is fetched and no frame is linked;
//! - `a_mapping_gives_the_service_its_lines_and_the_page_its_link`: a real `postmortem
//!   serve --source-link MAP` with the crash uploaded with a `commit` field: the same
//!   lines in the stored report, and the crash page links the source block's file to
//!   the web template's URL at the line.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
use common::{bin, client, make_core, poll_done, upload_binary, TempServer as Server};
use postmortem_testsupport::gdb;
use postmortem_testsupport::http_dir::HttpDir;

const COMMIT: &str = "4f2a9c0d";

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
    prog: PathBuf,
    core: PathBuf,
    source: PathBuf,
    /// Serves `raw/COMMIT/prog.c`.
    http: HttpDir,
    gdb: gdb::GdbCore,
}

fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    std::fs::create_dir(&build).unwrap();
    let source = build.join("prog.c");
    std::fs::write(&source, CRASHER).unwrap();
    let prog = build.join("prog");
    let map = format!("-fdebug-prefix-map={}=/build/src", build.display());
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-Wl,--build-id", &map, "-o"])
        .arg(&prog)
        .arg(&source)
        .status()
        .expect("gcc (test.sh installs it)");
    assert!(st.success());
    let core = dir.path().join("prog.core");
    std::fs::write(&core, make_core(&build, &prog)).unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir_all(www.join("raw").join(COMMIT)).unwrap();
    std::fs::copy(&source, www.join("raw").join(COMMIT).join("prog.c")).unwrap();
    let http = HttpDir::serve(&www, dir.path().join("http.log"));
    let gdb = gdb::frames(&build, &prog, &core);
    Built {
        dir,
        prog,
        core,
        source,
        http,
        gdb,
    }
}

fn mapping(http: &HttpDir) -> String {
    format!(
        "/build/src/={0}/raw/{{commit}}/{{path}} {0}/web/{{commit}}/{{path}}",
        http.url
    )
}

/// Checks every frame gdb gives a line in `/build/src/prog.c` (gdb cannot read that
/// path, so it gives the line, not its text) against the report: the same line, its
/// text as the source file itself has it, and the file's five lines before and after.
/// Returns how many frames were compared.
fn assert_lines(b: &Built, report: &Value) -> usize {
    let text = std::fs::read_to_string(&b.source).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let frames = report["threads"][0]["frames"].as_array().unwrap();
    let mut from_file = 0;
    for g in &b.gdb.crashed().frames {
        let (Some("/build/src/prog.c"), Some(line)) = (g.file.as_deref(), g.line) else {
            continue;
        };
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
        // the repository link: the web template at the build's commit, at gdb's line
        let web = format!("{}/web/{COMMIT}/prog.c#L{line}", b.http.url);
        assert_eq!(f["source_url"], web.as_str(), "{f}");
        from_file += 1;
    }
    assert!(from_file >= 3, "only {from_file} frames of prog.c");
    from_file
}

fn walk(b: &Built, extra: &[&str]) -> Value {
    let out = Command::new(bin())
        .arg("walk")
        .arg(&b.core)
        .arg("--symbols")
        .arg(b.prog.parent().unwrap())
        .args(["--format", "json", "--no-system-debug"])
        .args(extra)
        .env_remove("DEBUGINFOD_URLS")
        .env("POSTMORTEM_CACHE_DIR", b.dir.path().join("walk-cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Frames with context, or with a repository link.
fn with_context(report: &Value) -> usize {
    report["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["context_line"].is_null() || !f["source_url"].is_null())
        .count()
}

#[test]
fn a_mapping_gives_the_walk_its_lines() {
    let b = build();
    assert!(!Path::new("/build/src/prog.c").exists());
    let map = mapping(&b.http);
    // without the commit the template names, nothing is asked
    let none = walk(&b, &["--source-link", &map]);
    assert_eq!(with_context(&none), 0, "{none}");
    assert_eq!(b.http.asked(), Vec::<String>::new());
    let report = walk(&b, &["--source-link", &map, "--source-commit", COMMIT]);
    assert_lines(&b, &report);
    // one file, asked once
    assert_eq!(b.http.asked(), [format!("/raw/{COMMIT}/prog.c")]);
}

#[tokio::test]
async fn a_mapping_gives_the_service_its_lines_and_the_page_its_link() {
    let b = build();
    let map = mapping(&b.http);
    let s = Server::start(&["--workers", "1", "--source-link", &map]);
    let c = client();
    upload_binary(&c, &s.base, &b.prog, "prog").await;
    let form = reqwest::multipart::Form::new().text("commit", COMMIT).part(
        "upload_file_minidump",
        reqwest::multipart::Part::bytes(std::fs::read(&b.core).unwrap()).file_name("core"),
    );
    let r = c
        .post(s.url("/api/v1/crashes"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    // a multipart upload is answered as Breakpad clients expect (200, the id)
    assert!(r.status().is_success(), "{}", r.status());
    let text = r.text().await.unwrap();
    let id = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_string))
        .unwrap_or(text)
        .trim()
        .to_string();
    let done = poll_done(&c, &s.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_lines(&b, &done["report"]);
    assert_eq!(b.http.asked(), [format!("/raw/{COMMIT}/prog.c")]);

    // the crash page links the source block's file to the web URL at the line
    let line = b.gdb.crashed().frames[0].line.unwrap();
    let page = common::get_text(&c, &s.url(&format!("/crashes/{id}"))).await;
    let block = page.split("id=\"source\"").nth(1).expect("a source block");
    let href = format!("{}/web/{COMMIT}/prog.c#L{line}", b.http.url);
    assert!(
        block.contains(&format!("href=\"{href}\"")),
        "no link to {href} in {block}"
    );
}
