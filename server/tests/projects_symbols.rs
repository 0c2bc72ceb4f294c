//! Symbol files per project (issue 41) against a real `postmortem serve`, on SQLite and on
//! PostgreSQL (`projects.rs`'s server: a server-wide admin token and tokens of team-a,
//! team-b and team-c).
//!
//! The programs are compiled here twice from one source with one forced build-id: the
//! code is byte for byte the same, the function names differ (`bee_crash` in team-b's
//! build, `ay_crash` in team-a's), so a crash symbolized with the wrong project's file
//! names the wrong function. What a report must name comes from the source each build
//! was made from.
//!
//! - team-a uploads a file of team-b's build-id: stored beside it (never refused, never
//!   instead), and team-b's crashes are still symbolized with team-b's file, before and
//!   after team-a's tables were built; team-a's crash of the same core with team-a's;
//! - team-a's token against team-b's symbol routes (`/api/v1/binaries` list, filters and
//!   `{build_id}`, the debuginfod routes, the upload client's `missing` query, the
//!   missing-modules list): another project's file answers as one that is not stored,
//!   byte for byte; team-a's crash of a program only team-b uploaded has it missing, and
//!   once team-a sends the same bytes they are stored for it, in the one blob;
//! - a file the server-wide admin marks shared symbolizes the crashes of both projects
//!   that missed it (they are queued again), and a project token may not share.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{client, make_core};
use crate::projects::{finished, get, json_of, send, upload_id, Answer, Env, A, B, C, ROOT};

/// The crash program, its functions named `TAG_crash`, `TAG_middle` (`-DTAG=…`).
const TAGGED: &str = r#"
#include <stdio.h>
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define F(n) CAT(TAG, n)
__attribute__((noinline)) void F(_crash)(volatile int *p) { *p = 42; }
__attribute__((noinline)) void F(_middle)(volatile int *p) { F(_crash)(p); puts(""); }
int main(void) { F(_middle)((volatile int *)0); return 0; }
"#;

/// The build-id team-b and team-a both build (a shadowing upload's).
const SHADOWED: &str = "5ca1ab1e0000000000000000000000000000b01d";
/// Built and uploaded by team-b only.
const ONLY_B: &str = "5ca1ab1e000000000000000000000000000000bb";
/// The program whose file the admin shares.
const SHARED_ID: &str = "5ca1ab1e0000000000000000000000000000005e";
/// Nobody's.
const NOBODYS: &str = "5ca1ab1e00000000000000000000000000000000";

/// Compiles [`TAGGED`] with `-DTAG=tag` and the build-id `build_id` into `dir/tag/prog`
/// (the same source path for every tag).
fn build(dir: &Path, tag: &str, build_id: &str) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, TAGGED).unwrap();
    let out_dir = dir.join(tag);
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("prog");
    let st = Command::new("gcc")
        .args(["-g", "-O0", &format!("-DTAG={tag}")])
        .arg(format!("-Wl,--build-id=0x{build_id}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .current_dir(dir)
        .status()
        .expect("gcc must be installed");
    assert!(st.success(), "gcc failed");
    out
}

/// The core of `prog` crashed in a directory of its own.
fn core_of(prog: &Path, dir: &Path) -> Vec<u8> {
    std::fs::create_dir_all(dir).unwrap();
    make_core(dir, prog)
}

fn sha_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// Uploads the file at `path` as `prog` with `token` (and `query`).
async fn upload_file(
    c: &reqwest::Client,
    e: &Env,
    token: &str,
    query: &str,
    path: &Path,
) -> Answer {
    let bytes = std::fs::read(path).unwrap();
    let url = e.url(&format!("/api/v1/binaries{query}"));
    send(c, Method::POST, &url, token, |r| {
        r.header("x-file-name", "prog").body(bytes)
    })
    .await
}

/// The function of each frame of the crashed thread of a finished crash's report.
fn functions(record: &Value) -> Vec<String> {
    assert_eq!(record["status"], "done", "{record}");
    let threads = record["report"]["threads"].as_array().unwrap();
    let thread = threads
        .iter()
        .find(|t| t["crashed"] == true)
        .unwrap_or(&threads[0]);
    thread["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Whether the crashed thread's frames are the program's `TAG_crash`, `TAG_middle`, `main`,
/// from the top.
fn symbolized_as(record: &Value, tag: &str) -> bool {
    let f = functions(record);
    f.len() >= 3
        && f[..3]
            == [
                format!("{tag}_crash"),
                format!("{tag}_middle"),
                "main".into(),
            ]
}

/// The status of the report's module with `build_id`.
fn module_status(record: &Value, build_id: &str) -> String {
    record["report"]["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["build_id"] == build_id)
        .map(|m| m["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no module {build_id}: {record}"))
}

/// The sha256 of each file a `{"binaries": […]}` answer lists.
fn shas(a: &Answer) -> Vec<String> {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    json_of(a)["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["sha256"].as_str().unwrap().to_string())
        .collect()
}

/// The build-ids of a token's missing-modules list, with their crash counts.
async fn missing_list(c: &reqwest::Client, e: &Env, token: &str) -> Vec<(String, i64)> {
    let a = get(c, &e.url("/api/v1/modules/missing"), token).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    json_of(&a)["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["build_id"].as_str().unwrap().to_string();
            (id, m["crash_count"].as_i64().unwrap())
        })
        .collect()
}

macro_rules! both {
    ($sqlite:ident, $pg:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread")]
        async fn $sqlite() {
            $body(false).await;
        }
        #[tokio::test(flavor = "multi_thread")]
        async fn $pg() {
            $body(true).await;
        }
    };
}

/// A project's upload of another's build-id never shadows the other's lookups, and each
/// project's crash is symbolized with its own file.
async fn shadowing(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let theirs = build(work.path(), "bee", SHADOWED);
    let mine = build(work.path(), "ay", SHADOWED);
    let again = build(work.path(), "zz", SHADOWED);
    assert_ne!(sha_of(&theirs), sha_of(&mine));
    let core = core_of(&theirs, &work.path().join("core-b"));

    let up = upload_file(&c, &e, B, "", &theirs).await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    // team-a's file of team-b's build-id: stored beside team-b's, not refused
    let up = upload_file(&c, &e, A, "", &mine).await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    // first upload wins within team-a, and the refusal names team-a's file only
    let up = upload_file(&c, &e, A, "", &again).await;
    assert_eq!(up.status, StatusCode::CONFLICT, "{}", up.body);
    assert!(up.body.contains(&sha_of(&mine)), "{}", up.body);
    assert!(!up.body.contains(&sha_of(&theirs)), "{}", up.body);

    let b1 = upload_id(&c, &e, B, &core).await;
    let rec = finished(&c, &e, B, &b1).await;
    assert!(
        symbolized_as(&rec, "bee"),
        "team-b's crash: {:?}",
        functions(&rec)
    );
    let a1 = upload_id(&c, &e, A, &core).await;
    let rec = finished(&c, &e, A, &a1).await;
    assert!(
        symbolized_as(&rec, "ay"),
        "team-a's crash: {:?}",
        functions(&rec)
    );
    // team-a's tables are built and cached now: team-b's next crash still uses its own
    let b2 = upload_id(&c, &e, B, &core).await;
    let rec = finished(&c, &e, B, &b2).await;
    assert!(
        symbolized_as(&rec, "bee"),
        "team-b's second crash: {:?}",
        functions(&rec)
    );
    // a project without a file of the build-id uses neither
    let c1 = upload_id(&c, &e, C, &core).await;
    let rec = finished(&c, &e, C, &c1).await;
    assert_eq!(
        module_status(&rec, SHADOWED),
        "missing",
        "{:?}",
        functions(&rec)
    );
    assert!(
        functions(&rec).iter().all(|f| !f.contains("_crash")),
        "{rec}"
    );

    // each project reads its own file of the build-id, the server-wide token both
    let url = |q: &str| e.url(&format!("/api/v1/binaries{q}"));
    let q = format!("?build_id={SHADOWED}");
    assert_eq!(shas(&get(&c, &url(&q), A).await), [sha_of(&mine)]);
    assert_eq!(shas(&get(&c, &url(&q), B).await), [sha_of(&theirs)]);
    let mut all = shas(&get(&c, &url(&q), ROOT).await);
    all.sort();
    let mut want = vec![sha_of(&mine), sha_of(&theirs)];
    want.sort();
    assert_eq!(all, want);
    for (token, file) in [(A, &mine), (B, &theirs)] {
        let url = e.url(&format!("/buildid/{SHADOWED}/executable"));
        let r = c.get(&url).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.bytes().await.unwrap(), std::fs::read(file).unwrap());
    }
    e.finish().await;
}
both!(shadowing_sqlite, shadowing_postgres, shadowing);

/// team-a's token against team-b's symbol routes: answered as for a file never stored.
async fn hostile_reads(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let only_b = build(work.path(), "only", ONLY_B);
    let up = upload_file(&c, &e, B, "", &only_b).await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    let sha_b = sha_of(&only_b);

    // every read route: team-b's build-id answers team-a as nobody's does
    for route in [
        "/api/v1/binaries/{id}",
        "/api/v1/binaries?build_id={id}",
        "/buildid/{id}/executable",
        "/buildid/{id}/debuginfo",
    ] {
        let theirs = get(&c, &e.url(&route.replace("{id}", ONLY_B)), A).await;
        let none = get(&c, &e.url(&route.replace("{id}", NOBODYS)), A).await;
        assert_eq!(theirs.status, none.status, "{route}: {}", theirs.body);
        assert_eq!(theirs.content_type, none.content_type, "{route}");
        assert_eq!(
            theirs.body.replace(ONLY_B, "ID"),
            none.body.replace(NOBODYS, "ID"),
            "{route}"
        );
        let own = get(&c, &e.url(&route.replace("{id}", ONLY_B)), B).await;
        assert_eq!(own.status, StatusCode::OK, "{route}: {}", own.body);
    }
    assert!(!get(&c, &e.url("/api/v1/binaries"), A)
        .await
        .body
        .contains(&sha_b));
    assert!(shas(&get(&c, &e.url("/api/v1/binaries"), B).await).contains(&sha_b));
    // the upload client's question: team-a lacks the file (it must send the bytes), and
    // no other file holds its identity for team-a
    let described = json!({"files": [{
        "sha256": sha_b, "format": "elf", "kind": "executable", "build_id": ONLY_B,
        "sections": ["eh_frame", "symtab", "debug_info"],
    }]});
    let url = e.url("/api/v1/binaries/missing");
    for (token, state) in [(A, "missing"), (B, "present")] {
        let body = described.to_string();
        let a = send(&c, Method::POST, &url, token, move |r| r.body(body)).await;
        assert_eq!(json_of(&a)["files"][0]["state"], state, "{}", a.body);
    }
    // team-c may read crashes but not symbol files
    let no = get(&c, &e.url("/api/v1/binaries"), C).await;
    assert_eq!(no.status, StatusCode::FORBIDDEN);

    // team-a's crash of team-b's program: its module is missing, and listed for team-a
    // only; team-b has it, so team-b lists nothing
    let core = core_of(&only_b, &work.path().join("core"));
    let a1 = upload_id(&c, &e, A, &core).await;
    let rec = finished(&c, &e, A, &a1).await;
    assert_eq!(module_status(&rec, ONLY_B), "missing");
    assert!(
        functions(&rec).iter().all(|f| !f.starts_with("only_")),
        "{rec}"
    );
    let b1 = upload_id(&c, &e, B, &core).await;
    assert!(symbolized_as(&finished(&c, &e, B, &b1).await, "only"));
    assert!(missing_list(&c, &e, A)
        .await
        .contains(&(ONLY_B.to_string(), 1)));
    assert!(!missing_list(&c, &e, B)
        .await
        .iter()
        .any(|(id, _)| id == ONLY_B));

    // team-a sends the very bytes team-b holds: stored for team-a (201, `created`), and
    // still one blob; team-a's next crash of the program is symbolized with it
    let blobs = e.blob_files();
    let up = upload_file(&c, &e, A, "", &only_b).await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    assert_eq!(json_of(&up)["binaries"][0]["created"], true, "{}", up.body);
    assert_eq!(e.blob_files(), blobs, "the bytes are stored once");
    let q = format!("/api/v1/binaries?build_id={ONLY_B}");
    assert_eq!(shas(&get(&c, &e.url(&q), A).await), [sha_b]);
    let a2 = upload_id(&c, &e, A, &core).await;
    assert!(symbolized_as(&finished(&c, &e, A, &a2).await, "only"));
    e.finish().await;
}
both!(hostile_reads_sqlite, hostile_reads_postgres, hostile_reads);

/// A file the admin shares serves both projects' crashes, which are queued again when it
/// is shared; a project token may not share.
async fn shared_files(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let lib = build(work.path(), "sys", SHARED_ID);
    let sha = sha_of(&lib);
    let up = upload_file(&c, &e, ROOT, "", &lib).await;
    assert_eq!(up.status, StatusCode::CREATED, "{}", up.body);
    let core = core_of(&lib, &work.path().join("core"));
    let a1 = upload_id(&c, &e, A, &core).await;
    let b1 = upload_id(&c, &e, B, &core).await;
    for (token, id) in [(A, &a1), (B, &b1)] {
        let rec = finished(&c, &e, token, id).await;
        assert_eq!(module_status(&rec, SHARED_ID), "missing", "{rec}");
    }
    // each project counts its own crash only
    assert!(missing_list(&c, &e, A)
        .await
        .contains(&(SHARED_ID.to_string(), 1)));
    assert!(missing_list(&c, &e, ROOT)
        .await
        .contains(&(SHARED_ID.to_string(), 2)));
    let exe = format!("/buildid/{SHARED_ID}/executable");
    assert_eq!(get(&c, &e.url(&exe), A).await.status, StatusCode::NOT_FOUND);

    let share = e.url(&format!("/api/v1/binaries/{sha}/shared"));
    let no = send(&c, Method::POST, &share, A, |r| r).await;
    assert_eq!(no.status, StatusCode::FORBIDDEN, "{}", no.body);
    let yes = send(&c, Method::POST, &share, ROOT, |r| r).await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.body);
    assert_eq!(json_of(&yes)["requeued"], 2, "{}", yes.body);
    for (token, id) in [(A, &a1), (B, &b1)] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let rec = finished(&c, &e, token, id).await;
            if symbolized_as(&rec, "sys") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                functions(&rec)
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    let r = c.get(e.url(&exe)).bearer_auth(A).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.bytes().await.unwrap(), std::fs::read(&lib).unwrap());
    assert!(!missing_list(&c, &e, ROOT)
        .await
        .iter()
        .any(|(id, _)| id == SHARED_ID));
    // shared, then not: the project that did not upload it no longer sees it
    let un = send(&c, Method::DELETE, &share, ROOT, |r| r).await;
    assert_eq!(un.status, StatusCode::OK, "{}", un.body);
    assert_eq!(get(&c, &e.url(&exe), A).await.status, StatusCode::NOT_FOUND);
    e.finish().await;
}
both!(shared_files_sqlite, shared_files_postgres, shared_files);
