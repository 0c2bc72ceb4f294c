//! Source bundles end to end (issue 42), each against a real `postmortem serve` on a free
//! port:
//!
//! - `uploaded_sources_give_the_service_reports_gdbs_lines`: a program compiled here and
//!   split into a stripped executable and its debug file; `postmortem upload
//!   --include-sources` sends both and a bundle of the source its line tables name (once:
//!   the second run sends nothing); `debuginfod-find source` gets the file back from
//!   `GET /buildid/ID/source/PATH` (404 for a file not in the bundle, 400 for `..`); the
//!   source is deleted, the core uploaded, and every frame for which gdb (run while the
//!   source existed) prints a line has that line as its `context_line`, with the same
//!   context as `postmortem walk` made from the file itself; and `postmortem walk
//!   --debuginfod SERVER` gets the same context from the server's source route;
//! - `a_late_bundle_requeues_the_crashes_that_name_it`: the files and the crash first,
//!   whose report has no lines; the bundle second, and the crash is processed again and
//!   its frames get gdb's lines;
//! - `requeues_past_the_allowance_are_done_later`: three crashes and a token allowed one
//!   requeue a minute: the bundle's finish requeues one and leaves two, which the
//!   requeue backlog requeues later; all three get gdb's lines;
//! - `hostile_bundles_are_refused_at_upload`: bundles with a `../` entry, an absolute
//!   entry, a zip bomb, or a manifest of another build-id end their upload session 422
//!   with the bundle's code, and nothing is stored;
//! - `source_route_needs_the_symbols_scope`: with tokens, the route answers 401 without
//!   one, 403 to an `ingest` token, the file to a `symbols` token.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common;
use common::{bin, client, compile, make_core, poll_done, upload_crash, TempServer as Server};
use postmortem_testsupport::{compare, gdb};

/// The crash program: each function on lines of its own, so that gdb's line and the
/// context around it differ per frame.
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

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (test.sh installs gcc, binutils, debuginfod)"))
}

/// The program built in a fresh directory, its core, and its split files.
struct Built {
    dir: tempfile::TempDir,
    full: PathBuf,
    source: PathBuf,
    core: PathBuf,
    /// Holds the stripped executable and its debug file, and nothing else.
    upload: PathBuf,
}

fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let full = compile(dir.path(), "prog", CRASHER);
    let core = dir.path().join("prog.core");
    std::fs::write(&core, make_core(dir.path(), &full)).unwrap();
    let upload = dir.path().join("upload");
    std::fs::create_dir(&upload).unwrap();
    for (args, to) in [
        (&["--only-keep-debug"][..], "prog.debug"),
        (&["--strip-debug"][..], "prog"),
    ] {
        let out = run(Command::new("objcopy")
            .args(args)
            .arg(&full)
            .arg(upload.join(to)));
        assert!(out.status.success(), "objcopy {args:?}: {out:?}");
    }
    Built {
        source: dir.path().join("prog.c"),
        dir,
        full,
        core,
        upload,
    }
}

/// `postmortem upload --url BASE [--token T] --include-sources EXTRA… PATH`: exit code,
/// stdout and stderr.
fn upload_tool(s: &Server, token: Option<&str>, extra: &[&str], path: &Path) -> (i32, String) {
    let mut with_sources = vec!["--include-sources"];
    with_sources.extend_from_slice(extra);
    upload_cmd(s, token, &with_sources, path)
}

/// `postmortem upload --url BASE [--token T] ARGS… PATH`: exit code, stdout and stderr.
fn upload_cmd(s: &Server, token: Option<&str>, args: &[&str], path: &Path) -> (i32, String) {
    let mut cmd = Command::new(bin());
    cmd.args(["upload", "--url", &s.base])
        .args(args)
        .arg(path)
        .env_remove("POSTMORTEM_TOKEN");
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    let out = run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// `postmortem walk CORE --symbols DIR --format json` (sources read where they lie).
fn cli_report(b: &Built) -> Value {
    let out = run(Command::new(bin())
        .arg("walk")
        .arg(&b.core)
        .arg("--symbols")
        .arg(b.dir.path())
        .args(["--format", "json"]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn main_build_id(report: &Value) -> String {
    report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["main"] == true)
        .and_then(|m| m["build_id"].as_str())
        .expect("the program's build-id")
        .to_string()
}

/// The source-context fields of the crashed thread's frames that have a line.
fn context_of(report: &Value) -> Vec<Value> {
    report["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["context_line"].is_null())
        .map(|f| {
            json!([
                f["function"],
                f["line"],
                f["pre_context"],
                f["context_line"],
                f["post_context"]
            ])
        })
        .collect()
}

async fn get(s: &Server, path: &str, token: Option<&str>) -> (u16, Vec<u8>) {
    let mut req = client().get(s.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// `debuginfod-find source ID PATH` against `s`: the file's bytes, or `None`.
fn debuginfod_source(s: &Server, id: &str, path: &Path) -> Option<Vec<u8>> {
    let cache = tempfile::tempdir().unwrap();
    let out = run(Command::new("debuginfod-find")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cache.path())
        .env("DEBUGINFOD_URLS", &s.base)
        .env("DEBUGINFOD_CACHE_PATH", cache.path())
        .env("DEBUGINFOD_TIMEOUT", "30")
        .args(["source", id])
        .arg(path));
    if !out.status.success() {
        return None;
    }
    let at = String::from_utf8(out.stdout).unwrap();
    Some(std::fs::read(at.trim()).unwrap())
}

#[tokio::test]
async fn uploaded_sources_give_the_service_reports_gdbs_lines() {
    let b = build();
    // the reference: gdb's frames and source lines, and the CLI's context, both read
    // from the source file while it exists
    let gdb = gdb::frames(b.dir.path(), &b.full, &b.core);
    let cli = cli_report(&b);
    let build_id = main_build_id(&cli);
    let expected = context_of(&cli);
    assert!(expected.len() >= 3, "the CLI's context: {expected:?}");

    let s = Server::start(&["--workers", "1"]);
    let (code, dry) = upload_tool(&s, None, &["--dry-run"], &b.upload);
    assert_eq!(code, 0, "{dry}");
    assert!(
        dry.contains(&format!("would upload the source bundle of {build_id} ("))
            && dry.contains("source bundles: 1 to upload, 0 already there"),
        "{dry}"
    );
    let (code, out) = upload_tool(&s, None, &[], &b.upload);
    assert_eq!(code, 0, "{out}");
    // the program's source, and the system headers its line tables name
    assert!(
        out.contains(&format!("uploaded the source bundle of {build_id} (")),
        "{out}"
    );
    assert!(
        out.contains("source bundles: 1 uploaded, 0 already there"),
        "{out}"
    );
    let (code, again) = upload_tool(&s, None, &[], &b.upload);
    assert_eq!(code, 0, "{again}");
    assert!(
        again.contains("2 files: 2 already there, 0 uploaded")
            && again.contains("source bundles: 0 uploaded, 1 already there"),
        "{again}"
    );

    // the debuginfod route serves the file, as elfutils' client asks for it
    let source = std::fs::read(&b.source).unwrap();
    assert_eq!(
        debuginfod_source(&s, &build_id, &b.source).as_deref(),
        Some(&source[..])
    );
    let route = format!("/buildid/{build_id}/source");
    let (st, body) = get(&s, &format!("{route}{}", b.source.display()), None).await;
    assert_eq!((st, body), (200, source.clone()));
    let missing = b.dir.path().join("not-there.c");
    assert_eq!(
        get(&s, &format!("{route}{}", missing.display()), None)
            .await
            .0,
        404
    );
    let escaping = format!("{route}{}%2F..%2F..%2Fetc%2Fpasswd", b.dir.path().display());
    assert_eq!(get(&s, &escaping, None).await.0, 400);
    let other = "0123456789abcdef0123456789abcdef01234567";
    let (st, _) = get(
        &s,
        &format!("/buildid/{other}/source{}", b.source.display()),
        None,
    )
    .await;
    assert_eq!(st, 404);

    // the source gone, only the bundle can give the lines
    std::fs::remove_file(&b.source).unwrap();
    let c = client();
    let id = upload_crash(&c, &s.base, &std::fs::read(&b.core).unwrap()).await;
    let done = poll_done(&c, &s.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let report = &done["report"];
    let compared = compare::assert_same_source_lines(&gdb, report);
    assert!(compared >= 3, "gdb printed {compared} source lines");
    assert_eq!(
        context_of(report),
        expected,
        "the service's context vs the CLI's"
    );
    // the crash page shows the crashed frame's line, marked, as gdb prints it
    let gdb0 = &gdb.crashed().frames[0];
    let (line, text) = (gdb0.line.unwrap(), gdb0.source_text.clone().unwrap());
    let page = common::get_text(&c, &s.url(&format!("/crashes/{id}"))).await;
    let block = page.split("id=\"source\"").nth(1).expect("a source block");
    assert!(
        block.contains(&format!("<mark><i>{line}</i>{text}</mark>")),
        "{block}"
    );

    // postmortem walk with the server as its debuginfod gets the same lines from the
    // server's source route, the file itself being gone; without it, none
    let walk = |extra: &[&str]| -> Value {
        let out = run(Command::new(bin())
            .arg("walk")
            .arg(&b.core)
            .arg("--symbols")
            .arg(&b.upload)
            .args(["--format", "json", "--no-system-debug"])
            .args(extra)
            .env_remove("DEBUGINFOD_URLS")
            .env("POSTMORTEM_CACHE_DIR", b.dir.path().join("walk-cache")));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let fetched = walk(&["--debuginfod", &s.base]);
    assert_eq!(compare::assert_same_source_lines(&gdb, &fetched), compared);
    assert_eq!(
        context_of(&fetched),
        expected,
        "the walk's context from the server"
    );
    assert_eq!(context_of(&walk(&[])), Vec::<Value>::new());
}

#[tokio::test]
async fn a_late_bundle_requeues_the_crashes_that_name_it() {
    let b = build();
    let gdb = gdb::frames(b.dir.path(), &b.full, &b.core);
    let s = Server::start(&["--workers", "1"]);
    // the binary and its debug file first, without sources, then the crash
    let (code, out) = upload_cmd(&s, None, &[], &b.upload);
    assert_eq!(code, 0, "{out}");
    let c = client();
    let id = upload_crash(&c, &s.base, &std::fs::read(&b.core).unwrap()).await;
    let first = poll_done(&c, &s.base, &id).await;
    assert_eq!(first["status"], "done", "{first}");
    assert_eq!(
        context_of(&first["report"]),
        Vec::<Value>::new(),
        "no bundle yet, no lines (the server reads no local file)"
    );
    // the bundle second: the crash is queued again and its report gains gdb's lines
    let (code, out) = upload_tool(&s, None, &[], &b.upload);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("source bundles: 1 uploaded"), "{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let report = loop {
        let v = poll_done(&c, &s.base, &id).await;
        if !context_of(&v["report"]).is_empty() {
            break v["report"].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the crash was not reprocessed with the bundle: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let compared = compare::assert_same_source_lines(&gdb, &report);
    assert!(compared >= 3, "gdb printed {compared} source lines");
}

/// More crashes name a late bundle's build-id than the uploading token's allowance takes
/// (`--requeue-per-minute 1`): the finish answers 1 requeued and 2 left, the 2 are
/// remembered, and the requeue backlog's pass (every second here, 1 crash a pass)
/// requeues them later: every crash's report gains gdb's lines.
#[tokio::test(flavor = "multi_thread")]
async fn requeues_past_the_allowance_are_done_later() {
    let b = build();
    let gdb = gdb::frames(b.dir.path(), &b.full, &b.core);
    let s = Server::start(&[
        "--workers",
        "1",
        "--requeue-per-minute",
        "1",
        "--requeue-backlog-interval-secs",
        "1",
    ]);
    let (code, out) = upload_cmd(&s, None, &[], &b.upload);
    assert_eq!(code, 0, "{out}");
    let c = client();
    // three crashes of the program (three runs: three cores)
    let mut ids = vec![upload_crash(&c, &s.base, &std::fs::read(&b.core).unwrap()).await];
    for i in 1..3 {
        let run = b.dir.path().join(format!("run{i}"));
        std::fs::create_dir(&run).unwrap();
        ids.push(upload_crash(&c, &s.base, &make_core(&run, &b.full)).await);
    }
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{ids:?}");
    let mut first = Value::Null;
    for id in &ids {
        let v = poll_done(&c, &s.base, id).await;
        assert_eq!(v["status"], "done", "{v}");
        assert_eq!(context_of(&v["report"]), Vec::<Value>::new(), "{v}");
        first = v["report"].clone();
    }
    // the bundle of the program's one source, as its frames name it
    let build_id = main_build_id(&first);
    let path = first["threads"][0]["frames"][0]["file"]
        .as_str()
        .expect("frame 0's file")
        .to_string();
    let entry = format!("files/{}", path.trim_start_matches('/'));
    let source = std::fs::read(&b.source).unwrap();
    let bundle = raw_zip(&[
        (entry.as_str(), &source),
        ("manifest.json", &manifest(&build_id, &[&path])),
    ]);
    let (status, answer) = send_bundle(&s, &build_id, &bundle).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        (answer["requeued"].as_u64(), answer["requeue_left"].as_u64()),
        (Some(1), Some(2)),
        "{answer}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let mut reports = Vec::new();
    for id in &ids {
        let report = loop {
            let v = poll_done(&c, &s.base, id).await;
            if !context_of(&v["report"]).is_empty() {
                break v["report"].clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "crash {id} was not requeued for the bundle: {v}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        reports.push(report);
    }
    // gdb's lines in the core gdb read (threads are paired by id: the other runs' differ)
    let compared = compare::assert_same_source_lines(&gdb, &reports[0]);
    assert!(compared >= 3, "gdb printed {compared} source lines");
    // and the same lines in the other runs' crashes, whose stacks are the same
    for r in &reports[1..] {
        assert_eq!(context_of(r), context_of(&reports[0]));
    }
}

/// A zip of raw entries (name, bytes), written as they are.
pub(crate) fn raw_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        zip.start_file(*name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

pub(crate) fn manifest(build_id: &str, files: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schema": "postmortem.source-bundle/1", "build_id": build_id, "files": files,
    }))
    .unwrap()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Sends `bundle` as the source bundle of `build_id` through an upload session; the
/// finish's status and answer.
async fn send_bundle(s: &Server, build_id: &str, bundle: &[u8]) -> (u16, Value) {
    let c = client();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bundle).unwrap();
    let packed = gz.finish().unwrap();
    let created: Value = c
        .post(s.url("/api/v1/upload-sessions"))
        .json(&json!({
            "file_name": "sources.zip", "size": bundle.len(), "sha256": sha(bundle),
            "encoding": "gzip", "compressed_size": packed.len(),
            "compressed_sha256": sha(&packed), "source_bundle": build_id,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = created["id"].as_str().expect("a session").to_string();
    let put = c
        .put(s.url(&format!("/api/v1/upload-sessions/{session}?offset=0")))
        .body(packed)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let r = c
        .post(s.url(&format!("/api/v1/upload-sessions/{session}/finish")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn hostile_bundles_are_refused_at_upload() {
    let s = Server::start(&["--workers", "0"]);
    let id = "ab".repeat(20);
    let m = manifest(&id, &["/src/a.c"]);
    let zeros = vec![0u8; 20 << 20];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a ../ entry",
            raw_zip(&[
                ("files/src/a.c", b"x"),
                ("../escape.c", b"x"),
                ("manifest.json", &m),
            ]),
            "zip-unsafe-path",
        ),
        (
            "an absolute entry",
            raw_zip(&[
                ("files/src/a.c", b"x"),
                ("/etc/cron.d/x", b"x"),
                ("manifest.json", &m),
            ]),
            "zip-unsafe-path",
        ),
        (
            "a zip bomb",
            raw_zip(&[("files/src/a.c", &zeros), ("manifest.json", &m)]),
            "zip-bomb",
        ),
        (
            "another build's manifest",
            raw_zip(&[
                ("files/src/a.c", b"x"),
                ("manifest.json", &manifest(&"cd".repeat(20), &["/src/a.c"])),
            ]),
            "bad-bundle-manifest",
        ),
        ("no zip", b"int main;".to_vec(), "malformed-zip"),
    ];
    for (what, bundle, code) in cases {
        let (st, v) = send_bundle(&s, &id, &bundle).await;
        assert_eq!((st, v["code"].as_str()), (422, Some(code)), "{what}: {v}");
    }
    // nothing was stored: the route finds no bundle, and a good one is still taken
    let route = format!("/buildid/{id}/source/src/a.c");
    assert_eq!(get(&s, &route, None).await.0, 404);
    let good = raw_zip(&[("files/src/a.c", b"int a;\n"), ("manifest.json", &m)]);
    let (st, v) = send_bundle(&s, &id, &good).await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["source_bundle"]["files"], 1, "{v}");
    // no crash names this build-id: nothing to requeue
    assert_eq!(
        (&v["requeued"], &v["requeue_left"]),
        (&json!(0), &json!(0)),
        "{v}"
    );
    assert_eq!(get(&s, &route, None).await, (200, b"int a;\n".to_vec()));
    // first upload wins: another bundle for the build-id is answered with the first
    let other = raw_zip(&[("files/src/a.c", b"int b;\n"), ("manifest.json", &m)]);
    let (st, v) = send_bundle(&s, &id, &other).await;
    assert_eq!(
        (st, v["source_bundle"]["sha256"].as_str()),
        (200, Some(sha(&good).as_str()))
    );
    assert_eq!(get(&s, &route, None).await, (200, b"int a;\n".to_vec()));
}

#[tokio::test]
async fn source_route_needs_the_symbols_scope() {
    let b = build();
    let s = Server::start(&[
        "--workers",
        "0",
        "--token",
        "sym-secret:symbols",
        "--token",
        "in-secret:ingest",
    ]);
    let (code, out) = upload_tool(&s, Some("sym-secret"), &[], &b.upload);
    assert_eq!(code, 0, "{out}");
    let build_id = main_build_id(&cli_report(&b));
    let route = format!("/buildid/{build_id}/source{}", b.source.display());
    assert_eq!(get(&s, &route, None).await.0, 401);
    assert_eq!(get(&s, &route, Some("in-secret")).await.0, 403);
    let source = std::fs::read(&b.source).unwrap();
    assert_eq!(get(&s, &route, Some("sym-secret")).await, (200, source));
}
