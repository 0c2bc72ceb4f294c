//! The service driven in-process: `postmortem_server::cli::serve::in_process` assembles the
//! same state `postmortem serve` does (database, blobs, tokens, workers), and the requests
//! go to `postmortem_server::app`'s router through `tower::ServiceExt::oneshot`, with no socket and no
//! child process. It checks what a caller meets first — health, a token's refusal, another
//! project's crash answered as a missing one — and one crash from upload to report, whose
//! frames are compared with the program's source (`fixtures/reports/src/crash.c`), not
//! with an earlier report of ours.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use clap::Parser;
use http_body_util::BodyExt;
use postmortem_server::cli::serve::{in_process, ServeArgs};
use tower::ServiceExt;

/// `postmortem serve`'s arguments, parsed as its command line parses them.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

const ADMIN: &str = "adm1n-secret";
const TEAM_A: &str = "team-a-secret";
const TEAM_B: &str = "team-b-secret";

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/reports")
}

/// One request through the router: the status and the body's bytes.
async fn call(
    app: &axum::Router,
    method: Method,
    uri: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:8080");
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(bytes));
    })
}

/// The line of `crash.c` that holds `needle`: where gdb and the line table put the frame.
fn source_line(needle: &str) -> u64 {
    let src = std::fs::read_to_string(fixtures().join("src/crash.c")).unwrap();
    let at = src.lines().position(|l| l.contains(needle)).unwrap();
    at as u64 + 1
}

#[tokio::test]
async fn a_crash_goes_from_upload_to_report_through_the_router_without_a_socket() {
    let data = tempfile::tempdir().unwrap();
    let serve = Serve::parse_from([
        "serve",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--workers",
        "1",
        "--token",
        &format!("{ADMIN}:ingest,symbols,read,admin"),
        "--token",
        &format!("{TEAM_A}:ingest,symbols,read:team-a"),
        "--token",
        &format!("{TEAM_B}:ingest,read:team-b"),
    ]);
    let (service, stop) = in_process(&serve.args).await.unwrap();
    let app = service.app();

    let (status, body) = call(&app, Method::GET, "/healthz", None, &[], vec![]).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, &b"ok\n"[..]));
    let (status, _) = call(&app, Method::GET, "/api/v1/crashes", None, &[], vec![]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // the program first (team-a's, with the symbols scope), then its crash
    let program = std::fs::read(fixtures().join("bin/crash")).unwrap();
    let (status, body) = call(
        &app,
        Method::POST,
        "/api/v1/binaries",
        Some(TEAM_A),
        &[("x-file-name", "crash")],
        program,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let dump = std::fs::read(fixtures().join("dumps/x86_64.dmp")).unwrap();
    let (status, body) = call(
        &app,
        Method::POST,
        "/api/v1/crashes",
        Some(TEAM_A),
        &[],
        dump,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let id = json(&body)["id"].as_str().unwrap().to_string();
    let uri = format!("/api/v1/crashes/{id}");

    // the in-process worker takes it
    let started = Instant::now();
    let crash = loop {
        let (status, body) = call(&app, Method::GET, &uri, Some(TEAM_A), &[], vec![]).await;
        assert_eq!(status, StatusCode::OK);
        let v = json(&body);
        if v["status"] == "done" || v["status"] == "failed" {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "not processed: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(crash["status"], "done", "{crash}");
    let report = &crash["report"];
    let thread = report["crash"]["thread"].as_u64().unwrap() as usize;
    let frames = report["threads"][thread]["frames"].as_array().unwrap();
    let names: Vec<&str> = frames
        .iter()
        .take(3)
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect();
    // crash.c: `store` inlined into `fill`, called from `main`
    assert_eq!(names, ["store", "fill", "main"], "{report}");
    assert_eq!(frames[0]["line"], source_line("{ *p = v; }"));
    assert_eq!(
        frames[2]["line"],
        source_line("fill((volatile int *)0, 4);")
    );

    // another project's crash answers as a missing one does, byte for byte
    let none = worker::store::crashes::new_id();
    let (other, other_body) = call(&app, Method::GET, &uri, Some(TEAM_B), &[], vec![]).await;
    let (missing, missing_body) = call(
        &app,
        Method::GET,
        &format!("/api/v1/crashes/{none}"),
        Some(TEAM_B),
        &[],
        vec![],
    )
    .await;
    assert_eq!(other, StatusCode::NOT_FOUND);
    assert_eq!(
        (
            other,
            String::from_utf8_lossy(&other_body).replace(&id, "ID")
        ),
        (
            missing,
            String::from_utf8_lossy(&missing_body).replace(&none, "ID")
        )
    );
    let _ = stop.send(true);
}
