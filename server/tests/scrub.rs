//! Scrubbing (issue 41) against a real `postmortem serve` on SQLite and on PostgreSQL: a
//! crash program compiled here plants secrets (a bearer token and an e-mail address on its
//! stack, a marker no rule matches on its heap, the same token and address in an upload
//! field) and crashes; the recording tool (`postmortem_testsupport::record`) takes a
//! minidump and a kernel core of that one crash. Each dump is uploaded, as Crashpad does
//! (multipart with the field), to three projects:
//!
//! - `team-a`, scrubbed (`--scrub team-a:builtin:bearer`, `builtin:email`): the stored
//!   blob holds neither the token nor the address, the stored field neither;
//! - `team-b`, not scrubbed: the stored blob is the dump's bytes, secrets and all;
//! - `team-c`, `--scrub-core-heap team-c`: its core's heap marker is gone, its stack
//!   secrets (no rules) are kept.
//!
//! Every report's walk is compared frame for frame with gdb's walk of the unscrubbed core
//! (`postmortem_testsupport::compare`, the reference walk), the program and the system
//! libraries it ran with uploaded and shared. `/metrics` counts the matches per project.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::files_under;
use crate::projects::{finished, get, send, Env, A, B, C, ROOT};
use postmortem_testsupport::gdb::{self, GdbCore};
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::{compare, record};

const TOKEN: &str = "stk7Tq9ZpW2xLm4Kd8vR";
const EMAIL: &str = "jane.roe@example.com";
const HEAP_MARKER: &str = "heap-only-marker-Q7xZ3nV8";

/// `s` with every byte one higher, as a C string literal: the program takes one off at
/// run time, so the secret is never in its file (nor in the core's copy of its pages).
fn shifted(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        let c = char::from(b + 1);
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn program_source() -> String {
    format!(
        r#"#include <stdio.h>
#include <stdlib.h>
volatile int sink;
static void reveal(char *out, const char *shifted) {{
    int i;
    for (i = 0; shifted[i]; i++) out[i] = shifted[i] - 1;
    out[i] = 0;
}}
__attribute__((noinline)) void crash_here(char *stack_secret, char *heap_secret) {{
    sink = stack_secret[0] + heap_secret[0];
    *(volatile int *)0 = 1;
}}
__attribute__((noinline)) void middle(char *heap_secret) {{
    char stack_secret[128];
    reveal(stack_secret, {stack});
    crash_here(stack_secret, heap_secret);
    sink += stack_secret[1];
}}
int main(void) {{
    char *heap_secret = malloc(4096);
    reveal(heap_secret, {heap});
    middle(heap_secret);
    free(heap_secret);
    return 0;
}}
"#,
        stack = shifted(&format!("Authorization: Bearer {TOKEN} user {EMAIL}")),
        heap = shifted(HEAP_MARKER),
    )
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One crash, recorded as a minidump and a core, with gdb's walk of the core.
struct Recorded {
    _work: Workdir,
    exe: std::path::PathBuf,
    minidump: Vec<u8>,
    core: Vec<u8>,
    gdb: GdbCore,
}

fn recorded() -> Recorded {
    assert!(record::can_record(), "needs gcc, gdb and x86_64 Linux");
    let work = Workdir::new("scrub");
    let source = work.path().join("secrets.c");
    std::fs::write(&source, program_source()).unwrap();
    let exe = work.path().join("secrets");
    record::compile_c(&source, &exe, &["-g", "-O0", "-Wl,--build-id"]);
    let exe_bytes = std::fs::read(&exe).unwrap();
    for s in [TOKEN, EMAIL, HEAP_MARKER] {
        assert!(!contains(&exe_bytes, s), "{s} is in the program's file");
    }
    let crash = record::record_crash(&exe);
    let gdb = gdb::frames(work.path(), &exe, &crash.core);
    Recorded {
        minidump: std::fs::read(&crash.minidump).unwrap(),
        core: std::fs::read(&crash.core).unwrap(),
        exe,
        gdb,
        _work: work,
    }
}

/// Uploads `path` with the server-wide token and shares it with every project.
async fn upload_shared(c: &reqwest::Client, e: &Env, path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let a = send(c, Method::POST, &e.url("/api/v1/binaries"), ROOT, |r| {
        r.header("x-file-name", name).body(bytes.clone())
    })
    .await;
    assert!(a.status.is_success(), "{}: {}", path.display(), a.body);
    let url = e.url(&format!("/api/v1/binaries/{}/shared", sha256(&bytes)));
    let a = send(c, Method::POST, &url, ROOT, |r| r).await;
    assert!(a.status.is_success(), "{}", a.body);
}

/// The separate debug file of `lib` under `/usr/lib/debug/.build-id`, by its build-id as
/// `readelf -n` prints it.
fn debug_file(lib: &Path) -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("readelf")
        .arg("-n")
        .arg(lib)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))?
        .trim()
        .to_string();
    let path = Path::new("/usr/lib/debug/.build-id")
        .join(id.get(..2)?)
        .join(format!("{}.debug", id.get(2..)?));
    path.exists().then_some(path)
}

/// Uploads `dump` as Crashpad does, with a field naming the secrets; the finished crash.
async fn crashpad_upload(c: &reqwest::Client, e: &Env, token: &str, dump: &[u8]) -> Value {
    let note = format!("user {EMAIL} sent Bearer {TOKEN}");
    let form = reqwest::multipart::Form::new().text("note", note).part(
        "upload_file_minidump",
        reqwest::multipart::Part::bytes(dump.to_vec()).file_name("crash.dmp"),
    );
    let a = send(c, Method::POST, &e.url("/api/v1/crashes"), token, |r| {
        r.multipart(form)
    })
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let id = a.body.trim().to_string();
    let crash = finished(c, e, token, &id).await;
    assert_eq!(crash["status"], "done", "{crash}");
    crash
}

/// The stored blob of `crash`: read from the blob store's files (by its sha256), and
/// checked to be what the dump route serves.
async fn stored(c: &reqwest::Client, e: &Env, token: &str, crash: &Value) -> Vec<u8> {
    let sha = crash["dump"]["sha256"].as_str().unwrap();
    let file = files_under(&e.blobs_dir())
        .into_iter()
        .find(|p| p.to_string_lossy().contains(sha))
        .unwrap_or_else(|| panic!("no blob file named {sha}"));
    let bytes = std::fs::read(file).unwrap();
    assert_eq!(sha256(&bytes), sha);
    let id = crash["id"].as_str().unwrap();
    let r = c
        .get(e.url(&format!("/api/v1/crashes/{id}/dump")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), bytes.as_slice());
    bytes
}

async fn scrubbed_dumps(pg: bool) {
    let r = recorded();
    for (what, dump) in [("minidump", &r.minidump), ("core", &r.core)] {
        assert!(contains(dump, TOKEN), "the {what} holds the stack's token");
        assert!(
            contains(dump, EMAIL),
            "the {what} holds the stack's address"
        );
    }
    assert!(contains(&r.core, HEAP_MARKER), "the core holds the heap");
    let Some(e) = Env::start(
        pg,
        &[
            "--scrub",
            "team-a:builtin:bearer",
            "--scrub",
            "team-a:builtin:email",
            "--scrub-core-heap",
            "team-c",
        ],
    )
    .await
    else {
        return;
    };
    let c = crate::common::client();
    upload_shared(&c, &e, &r.exe).await;
    for lib in &r.gdb.solibs {
        upload_shared(&c, &e, Path::new(lib)).await;
        // gdb reads libc6-dbg's files: the service gets them too.
        if let Some(debug) = debug_file(Path::new(lib)) {
            upload_shared(&c, &e, &debug).await;
        }
    }
    for (what, dump) in [("minidump", &r.minidump), ("core", &r.core)] {
        // team-a: scrubbed by its rules, the same walk as gdb's of the unscrubbed core.
        let crash = crashpad_upload(&c, &e, A, dump).await;
        let blob = stored(&c, &e, A, &crash).await;
        assert_eq!(blob.len(), dump.len(), "{what}: scrubbed in place");
        for s in [TOKEN, EMAIL] {
            assert!(!contains(&blob, s), "{what}: team-a's blob holds {s}");
        }
        let note = crash["annotations"]["note"].as_str().unwrap();
        assert_eq!(note, "user [scrubbed] sent [scrubbed]", "{what}");
        assert!(!crash.to_string().contains(TOKEN) && !crash.to_string().contains(EMAIL));
        compare::assert_same_stacks(&r.gdb, &crash["report"]);

        // team-b: stored as uploaded.
        let crash = crashpad_upload(&c, &e, B, dump).await;
        assert_eq!(
            stored(&c, &e, B, &crash).await,
            *dump,
            "{what}: team-b's blob"
        );
        assert!(crash["annotations"]["note"]
            .as_str()
            .unwrap()
            .contains(TOKEN));
        compare::assert_same_stacks(&r.gdb, &crash["report"]);

        // team-c: no rules; a core keeps no heap, its stacks stay.
        let crash = crashpad_upload(&c, &e, C, dump).await;
        let blob = stored(&c, &e, C, &crash).await;
        assert!(contains(&blob, TOKEN), "{what}: team-c has no rules");
        if what == "core" {
            assert!(
                !contains(&blob, HEAP_MARKER),
                "team-c's core keeps its heap"
            );
        } else {
            assert_eq!(blob, *dump, "a minidump has no heap option");
        }
        compare::assert_same_stacks(&r.gdb, &crash["report"]);
    }
    let metrics = get(&c, &e.url("/metrics"), ROOT).await;
    assert_eq!(metrics.status, StatusCode::OK);
    let line = |l: &str| {
        metrics
            .body
            .lines()
            .find_map(|m| m.strip_prefix(l).map(|n| n.trim().parse::<u64>().unwrap()))
            .unwrap_or_else(|| panic!("no {l} in /metrics:\n{}", metrics.body))
    };
    // Each dump holds the token and the address at least once, each field both once.
    assert!(line(r#"postmortem_scrubbed_matches_total{project="team-a",in="dump"}"#) >= 4);
    assert_eq!(
        line(r#"postmortem_scrubbed_matches_total{project="team-a",in="fields"}"#),
        4
    );
    assert!(line(r#"postmortem_scrubbed_heap_segments_total{project="team-c"}"#) >= 1);
    println!(
        "scrub ({}): minidump {} bytes, core {} bytes; team-a matches in dumps {}, in fields {}; \
         team-c core segments dropped as heap {}",
        if pg { "PostgreSQL" } else { "SQLite" },
        r.minidump.len(),
        r.core.len(),
        line(r#"postmortem_scrubbed_matches_total{project="team-a",in="dump"}"#),
        line(r#"postmortem_scrubbed_matches_total{project="team-a",in="fields"}"#),
        line(r#"postmortem_scrubbed_heap_segments_total{project="team-c"}"#),
    );
    assert!(!metrics
        .body
        .contains(r#"postmortem_scrubbed_matches_total{project="team-b""#));
    e.finish().await;
}

#[tokio::test]
async fn scrubbed_dumps_sqlite() {
    scrubbed_dumps(false).await;
}

#[tokio::test]
async fn scrubbed_dumps_postgres() {
    scrubbed_dumps(true).await;
}

/// A rule that does not compile stops `serve` at start with the regex crate's message.
#[test]
fn a_bad_rule_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |rule: &str| {
        std::process::Command::new(crate::common::bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(["--scrub", rule])
            .output()
            .unwrap()
    };
    let out = serve("team-a:regex:(unclosed");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(unclosed") && err.contains("does not compile"),
        "{err}"
    );
    let out = serve("team-a:builtin:ssn");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no built-in scrubbing rule \"ssn\""));
}
