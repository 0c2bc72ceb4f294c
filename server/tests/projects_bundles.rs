//! Source bundles per project (issue 41) against a real `postmortem serve`, on SQLite and
//! on PostgreSQL (`projects.rs`'s server: a server-wide admin token and tokens of team-a,
//! team-b and team-c).
//!
//! One program compiled here (shared by the admin, so that every project's crashes are
//! symbolized and their frames have lines), crashed for team-a and for team-b; the bundles
//! of its build-id hold the program's source path with lines that say whose bundle they
//! are (`team-b line 3`), so a report's `context_line` names the bundle it was read from.
//!
//! - team-b's bundle gives team-b's crash its lines and requeues team-b's crash only;
//!   to team-a it does not exist: the debuginfod `source` route answers byte for byte the
//!   404 it answered before the upload, the upload client's `missing` query says
//!   `missing`, and team-a's crash gets no lines from it;
//! - team-a's bundle of the same build-id and path (shadowing) is stored beside it (201,
//!   not team-b's row), gives team-a's crash team-a's lines, and team-b's crash and
//!   source route keep team-b's;
//! - the admin shares team-b's bundle: team-c's crash gets its lines, team-a keeps its
//!   own; a project token may not share.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::Write;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::client;
use crate::projects::{
    both, finished, get, json_of, real_core, send, upload_id, Answer, Env, A, B, C, ROOT,
};
use crate::source_bundles::{manifest, raw_zip};

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A bundle of `build_id` holding `path`, whose every line says `whose`.
fn bundle(build_id: &str, path: &str, whose: &str) -> Vec<u8> {
    let text: String = (1..=40)
        .map(|n| format!("/* {whose} line {n} */\n"))
        .collect();
    let entry = format!("files/{}", path.trim_start_matches('/'));
    raw_zip(&[
        (entry.as_str(), text.as_bytes()),
        ("manifest.json", &manifest(build_id, &[path])),
    ])
}

/// Sends `bundle` as the source bundle of `build_id` with `token` through an upload
/// session; the finish's status and answer.
async fn send_bundle(
    c: &reqwest::Client,
    e: &Env,
    token: &str,
    build_id: &str,
    bundle: &[u8],
) -> (StatusCode, Value) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bundle).unwrap();
    let packed = gz.finish().unwrap();
    let body = json!({
        "file_name": "sources.zip", "size": bundle.len(), "sha256": sha(bundle),
        "encoding": "gzip", "compressed_size": packed.len(),
        "compressed_sha256": sha(&packed), "source_bundle": build_id,
    });
    let created = send(
        c,
        Method::POST,
        &e.url("/api/v1/upload-sessions"),
        token,
        |r| r.json(&body),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let session = json_of(&created)["id"].as_str().unwrap().to_string();
    let url = e.url(&format!("/api/v1/upload-sessions/{session}?offset=0"));
    let put = send(c, Method::PUT, &url, token, |r| r.body(packed)).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    let url = e.url(&format!("/api/v1/upload-sessions/{session}/finish"));
    let done = send(c, Method::POST, &url, token, |r| r).await;
    (done.status, json_of(&done))
}

/// Whose lines the crashed thread's frames have (`team-b`, …), one per frame with a line.
fn whose_lines(record: &Value) -> Vec<String> {
    record["report"]["threads"][0]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["context_line"].as_str())
        .map(|l| {
            l.trim_start_matches("/* ")
                .split(" line")
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Waits until `id`'s report has lines of `whose` only.
async fn lines_of(c: &reqwest::Client, e: &Env, token: &str, id: &str, whose: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = finished(c, e, token, id).await;
        let got = whose_lines(&v);
        if !got.is_empty() && got.iter().all(|w| w == whose) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "crash {id}: lines of {got:?}, not {whose}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The upload client's question about `build_id`'s bundle, as `token` asks it.
async fn bundle_state(c: &reqwest::Client, e: &Env, token: &str, build_id: &str) -> String {
    let body = json!({ "source_bundles": [build_id] });
    let a = send(
        c,
        Method::POST,
        &e.url("/api/v1/binaries/missing"),
        token,
        |r| r.json(&body),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    json_of(&a)["source_bundles"][0]["state"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn bundles_per_project(pg: bool) {
    let Some(e) = Env::start(pg, &["--workers", "1"]).await else {
        return;
    };
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let core = real_core(&c, &e, work.path()).await;
    let mine = upload_id(&c, &e, A, &core).await;
    let theirs = upload_id(&c, &e, B, &core).await;
    let first = finished(&c, &e, B, &theirs).await;
    assert_eq!(finished(&c, &e, A, &mine).await["status"], "done");
    assert_eq!(whose_lines(&first), Vec::<String>::new(), "no bundle yet");
    let frame = &first["report"]["threads"][0]["frames"][0];
    let path = frame["file"].as_str().expect("frame 0's file").to_string();
    let build_id = first["report"]["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["main"] == true)
        .and_then(|m| m["build_id"].as_str())
        .unwrap()
        .to_string();
    let route = e.url(&format!(
        "/buildid/{build_id}/source/{}",
        path.trim_start_matches('/')
    ));
    let never: Answer = get(&c, &route, A).await;
    assert_eq!(never.status, StatusCode::NOT_FOUND, "{}", never.body);

    // team-b's bundle: team-b's crash gets its lines, and only team-b's is requeued.
    let b_bundle = bundle(&build_id, &path, "team-b");
    let (st, v) = send_bundle(&c, &e, B, &build_id, &b_bundle).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (&v["requeued"], &v["requeue_left"]),
        (&json!(1), &json!(0)),
        "{v}"
    );
    lines_of(&c, &e, B, &theirs, "team-b").await;
    assert!(get(&c, &route, B).await.body.contains("team-b line 1"));
    // to team-a it does not exist
    let now = get(&c, &route, A).await;
    assert_eq!(
        (now.status, &now.body),
        (never.status, &never.body),
        "the source route"
    );
    assert_eq!(bundle_state(&c, &e, A, &build_id).await, "missing");
    assert_eq!(bundle_state(&c, &e, B, &build_id).await, "present");
    assert_eq!(
        whose_lines(&finished(&c, &e, A, &mine).await),
        Vec::<String>::new()
    );

    // team-a's own bundle of the same build-id and path: stored beside team-b's.
    let a_bundle = bundle(&build_id, &path, "team-a");
    let (st, v) = send_bundle(&c, &e, A, &build_id, &a_bundle).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["source_bundle"]["sha256"], sha(&a_bundle), "{v}");
    assert_eq!(v["requeued"], 1, "{v}");
    lines_of(&c, &e, A, &mine, "team-a").await;
    assert!(get(&c, &route, A).await.body.contains("team-a line 1"));
    assert!(get(&c, &route, B).await.body.contains("team-b line 1"));
    lines_of(&c, &e, B, &theirs, "team-b").await;
    // first upload wins within team-b
    let (st, v) = send_bundle(&c, &e, B, &build_id, &bundle(&build_id, &path, "team-x")).await;
    assert_eq!(
        (st, v["source_bundle"]["sha256"].as_str()),
        (StatusCode::OK, Some(sha(&b_bundle).as_str())),
        "{v}"
    );

    shared(&c, &e, &core, &sha(&b_bundle), &mine).await;
    e.finish().await;
}
both!(
    bundles_per_project_sqlite,
    bundles_per_project_postgres,
    bundles_per_project
);

/// The admin shares team-b's bundle: team-c's crash reads it, team-a keeps its own; a
/// project token may not share.
async fn shared(c: &reqwest::Client, e: &Env, core: &[u8], b_sha: &str, mine: &str) {
    let url = e.url(&format!("/api/v1/source-bundles/{b_sha}/shared"));
    let refused = send(c, Method::POST, &url, B, |r| r).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let missing = e.url(&format!("/api/v1/source-bundles/{}/shared", "0".repeat(64)));
    assert_eq!(
        send(c, Method::POST, &missing, ROOT, |r| r).await.status,
        StatusCode::NOT_FOUND
    );
    let ok = send(c, Method::POST, &url, ROOT, |r| r).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(json_of(&ok)["changed"], true);
    let cs = upload_id(c, e, C, core).await;
    lines_of(c, e, C, &cs, "team-b").await;
    let again = send(c, Method::POST, &e.url("/api/v1/reprocess"), A, |r| {
        r.json(&json!({ "all": true }))
    })
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    lines_of(c, e, A, mine, "team-a").await;
}
