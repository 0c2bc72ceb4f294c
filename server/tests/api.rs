//! API tests against the real `postmortem serve` binary on a free port (SQLite in a temp
//! dir), with real HTTP requests: binaries, a real core from a crashed C program, Crashpad
//! gzip multipart, bad uploads, tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common;
use common::{bin, client, compile, make_core, poll_done, TempServer as Server, CRASHER};

/// Until the engine's ELF core reader lands on this branch, the adapter's `read_dump`
/// refuses cores as "not supported yet": accept exactly that failure, nothing else.
// ENGINE HOOK: once merged with the engine, require `done` unconditionally.
fn assert_processed(v: &Value) {
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["report"]["schema"], "postmortem.report/1");
}

#[tokio::test]
async fn binary_upload_is_idempotent() {
    let s = Server::start(&[]);
    let c = client();
    let prog = compile(s.dir.path(), "prog", CRASHER);
    let bytes = std::fs::read(&prog).unwrap();
    let r1 = c
        .post(s.url("/api/v1/binaries"))
        .header("x-file-name", "prog")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r1.status(), 201);
    let v1: Value = r1.json().await.unwrap();
    let b = &v1["binaries"][0];
    assert_eq!(b["kind"], "executable");
    assert_eq!(b["arch"], "x86_64");
    assert_eq!(b["created"], true);
    assert!(b["sections"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "eh_frame"));
    assert!(b["sections"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "debug_info"));
    let build_id = b["build_id"].as_str().unwrap().to_string();

    let r2 = c
        .post(s.url("/api/v1/binaries"))
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(r2.status(), 200);
    let v2: Value = r2.json().await.unwrap();
    assert_eq!(v2["binaries"][0]["created"], false);
    assert_eq!(v2["binaries"][0]["sha256"], b["sha256"]);

    let got: Value = c
        .get(s.url(&format!("/api/v1/binaries/{build_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["binaries"].as_array().unwrap().len(), 1);
    let q: Value = c
        .get(s.url(&format!("/api/v1/binaries?build_id={build_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(q["binaries"].as_array().unwrap().len(), 1);
    let nf = c.get(s.url("/api/v1/binaries/00ff")).send().await.unwrap();
    assert_eq!(nf.status(), 404);
    assert_eq!(nf.headers()["content-type"], "application/problem+json");

    // Multipart with two files: one known (200 alone), one new → 201.
    let lib = compile(s.dir.path(), "other", "int main(void){return 1;}");
    let form = reqwest::multipart::Form::new()
        .part(
            "a",
            reqwest::multipart::Part::bytes(std::fs::read(&prog).unwrap()).file_name("prog"),
        )
        .part(
            "b",
            reqwest::multipart::Part::bytes(std::fs::read(&lib).unwrap()).file_name("other"),
        );
    let r3 = c
        .post(s.url("/api/v1/binaries"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r3.status(), 201);
    let v3: Value = r3.json().await.unwrap();
    assert_eq!(v3["binaries"][0]["created"], false);
    assert_eq!(v3["binaries"][1]["created"], true);

    // Not a binary; a core file as a binary.
    let r = c
        .post(s.url("/api/v1/binaries"))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "not-a-binary");
}

/// Runs `tool ARGS` in `dir`; panics with its stderr on failure; returns its stdout.
fn run_tool(dir: &Path, tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run {tool} (see test.sh): {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Mach-O uploads: a thin executable (clang + ld64.lld) is stored with its LC_UUID, as
/// llvm-objdump prints it, as build-id and (upper-case, age 0) as debug-id, and found by
/// either; a universal (fat) file is taken apart, each slice filed by its own UUID (the slice
/// already stored is not stored twice).
#[tokio::test]
async fn macho_upload_is_identified_by_its_uuid() {
    let s = Server::start(&[]);
    let c = client();
    let dir = s.dir.path();
    std::fs::write(dir.join("m.c"), "int main(void) { return 0; }\n").unwrap();
    for (target, out) in [
        ("--target=x86_64-apple-macos11", "m.x86_64"),
        ("--target=arm64-apple-macos11", "m.arm64"),
    ] {
        run_tool(
            dir,
            "clang",
            &[
                target,
                "-fuse-ld=lld",
                "-nostdlib",
                "-Wl,-e,_main",
                "m.c",
                "-o",
                out,
            ],
        );
    }
    let headers = run_tool(
        dir,
        "llvm-objdump",
        &["--macho", "--private-headers", "m.x86_64"],
    );
    let uuid = headers
        .lines()
        .find_map(|l| l.trim().strip_prefix("uuid "))
        .unwrap()
        .replace('-', "");
    let r = c
        .post(s.url("/api/v1/binaries"))
        .header("x-file-name", "m")
        .body(std::fs::read(dir.join("m.x86_64")).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let b = &v["binaries"][0];
    assert_eq!(b["format"], "macho");
    assert_eq!(b["arch"], "x86_64");
    assert_eq!(b["kind"], "executable");
    assert_eq!(b["build_id"], uuid.to_lowercase());
    let debug_id = format!("{}0", uuid.to_uppercase());
    assert_eq!(b["debug_id"], debug_id.as_str());
    let sections = b["sections"].as_array().unwrap();
    assert!(
        sections.iter().any(|x| x == "compact_unwind") && sections.iter().any(|x| x == "symtab"),
        "{b}"
    );
    let by_debug: Value = c
        .get(s.url(&format!(
            "/api/v1/binaries?debug_id={}",
            debug_id.to_lowercase()
        )))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_debug["binaries"][0]["sha256"], b["sha256"]);

    // The universal file as lipo lays it out: a big-endian fat header, then each slice
    // at a 2^14-aligned offset.
    let slices = [
        (
            0x0100_0007u32,
            3u32,
            std::fs::read(dir.join("m.x86_64")).unwrap(),
        ),
        (0x0100_000c, 0, std::fs::read(dir.join("m.arm64")).unwrap()),
    ];
    let mut fat = Vec::new();
    fat.extend_from_slice(&0xcafe_babeu32.to_be_bytes());
    fat.extend_from_slice(&2u32.to_be_bytes());
    let mut offset = 1u32 << 14;
    let mut body = Vec::new();
    for (cpu, sub, bytes) in &slices {
        for v in [*cpu, *sub, offset, bytes.len() as u32, 14] {
            fat.extend_from_slice(&v.to_be_bytes());
        }
        body.resize((offset - (1 << 14)) as usize, 0);
        body.extend_from_slice(bytes);
        offset = ((1 << 14) + body.len() as u32).next_multiple_of(1 << 14);
    }
    fat.resize(1 << 14, 0);
    fat.extend_from_slice(&body);
    let r = c
        .post(s.url("/api/v1/binaries"))
        .body(fat)
        .send()
        .await
        .unwrap();
    // taken apart: each slice filed by its own UUID, the x86_64 one already there
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let arm64_headers = run_tool(
        dir,
        "llvm-objdump",
        &["--macho", "--private-headers", "m.arm64"],
    );
    let arm64_uuid = arm64_headers
        .lines()
        .find_map(|l| l.trim().strip_prefix("uuid "))
        .unwrap()
        .replace('-', "")
        .to_lowercase();
    let mut slices: Vec<(String, String, bool)> = v["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["arch"].as_str().unwrap().to_string(),
                b["build_id"].as_str().unwrap().to_string(),
                b["created"].as_bool().unwrap(),
            )
        })
        .collect();
    slices.sort();
    assert_eq!(
        slices,
        [
            ("aarch64".to_string(), arm64_uuid, true),
            ("x86_64".to_string(), uuid.to_lowercase(), false)
        ],
        "{v}"
    );
    let all: Value = c
        .get(s.url("/api/v1/binaries"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(all["binaries"].as_array().unwrap().len(), 2, "{all}");
}

#[tokio::test]
async fn core_upload_is_processed() {
    let s = Server::start(&[]);
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);
    let r = c
        .post(s.url("/api/v1/binaries"))
        .body(std::fs::read(&prog).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    let r = c
        .post(s.url("/api/v1/crashes"))
        .body(core.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "pending");
    let id = v["id"].as_str().unwrap().to_string();
    let done = poll_done(&c, &s.base, &id).await;
    assert_processed(&done);
    assert_eq!(done["dump"]["format"], "elf-core");
    assert_eq!(done["dump"]["size"], core.len());
    // a server without tokens has no token to name: its uploads write no audit entry
    // (a server with tokens records each use: projects.rs, `audit`)
    let url = format!(
        "sqlite://{}",
        s.dir.path().join("data/postmortem.db").display()
    );
    let db = worker::store::Db::connect(&url).await.unwrap();
    let audited = worker::store::audit::newest(&db, 10).await.unwrap();
    assert!(audited.is_empty(), "{audited:?}");
    db.close().await;

    // ?wait= answers with the finished crash.
    let r = c
        .post(s.url("/api/v1/crashes?wait=30"))
        .body(core.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_processed(&v);

    // Crashpad: gzip-encoded multipart with annotations → plain-text id.
    let boundary = "----pmtestboundary";
    let mut mp = Vec::new();
    for (k, val) in [("prod", "myapp"), ("ver", "1.2.3")] {
        write!(
            mp,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{val}\r\n"
        )
        .unwrap();
    }
    write!(mp, "--{boundary}\r\nContent-Disposition: form-data; name=\"upload_file_minidump\"; filename=\"dump\"\r\nContent-Type: application/octet-stream\r\n\r\n").unwrap();
    mp.extend_from_slice(&core);
    write!(mp, "\r\n--{boundary}--\r\n").unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&mp).unwrap();
    let body = gz.finish().unwrap();
    let r = c
        .post(s.url("/api/v1/crashes"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let id = r.text().await.unwrap().trim().to_string();
    let v = poll_done(&c, &s.base, &id).await;
    assert_eq!(v["annotations"]["prod"], "myapp");
    assert_eq!(v["annotations"]["ver"], "1.2.3");
    assert_eq!(v["dump"]["size"], core.len());

    // Listing, newest first, keyset pages of one.
    let page: Value = c
        .get(s.url("/api/v1/crashes?limit=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["crashes"][0]["id"], id);
    let cursor = page["next_cursor"].as_str().unwrap();
    let page2: Value = c
        .get(s.url(&format!("/api/v1/crashes?limit=5&cursor={cursor}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page2["crashes"].as_array().unwrap().len(), 2);
    assert!(page2["next_cursor"].is_null());

    let metrics = c
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("postmortem_uploads_total{kind=\"crash\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("postmortem_processing_seconds_count"),
        "{metrics}"
    );
    let spec = c
        .get(s.url("/api/v1/openapi.yaml"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(spec.starts_with("openapi: 3.1.0"));
}

/// Sends a request by hand (for a Content-Length the body does not have) and returns the
/// status line and body.
/// Issue 35 item 10: a core uploaded compressed as systems store it (gzip here, and
/// systemd-coredump's zstd where the `zstd` tool is installed), with no Content-Encoding,
/// is stored decompressed and processed as the core itself; a compressed bomb past the
/// decompressed limit is refused with 413 and nothing is stored.
#[tokio::test]
async fn compressed_core_upload_is_stored_decompressed() {
    let s = Server::start(&["--max-decompressed-mb", "4"]);
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&core).unwrap();
    let mut packed = vec![("gzip", gz.finish().unwrap())];
    let plain = work.path().join("uploaded-core");
    std::fs::write(&plain, &core).unwrap();
    let zst = Command::new("zstd").arg("-c").arg(&plain).output();
    match zst {
        Ok(o) if o.status.success() => packed.push(("zstd", o.stdout)),
        _ => eprintln!("zstd not installed: its case is skipped"),
    }
    for (tool, body) in packed {
        assert!(body.len() < core.len(), "{tool}");
        let r = c
            .post(s.url("/api/v1/crashes"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "{tool}: {}", r.text().await.unwrap());
        let v: Value = r.json().await.unwrap();
        let done = poll_done(&c, &s.base, v["id"].as_str().unwrap()).await;
        assert_processed(&done);
        assert_eq!(done["dump"]["format"], "elf-core", "{tool}");
        assert_eq!(done["dump"]["size"], core.len(), "{tool}");
    }

    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![0u8; 64 << 20]).unwrap();
    let r = c
        .post(s.url("/api/v1/crashes"))
        .body(bomb.finish().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body = r.text().await.unwrap();
    assert!(body.contains("decompressed-too-large"), "{body}");
}

fn raw_request(addr: &str, head: &str, body: &[u8]) -> (String, String) {
    let mut sock = std::net::TcpStream::connect(addr).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    sock.write_all(head.as_bytes()).unwrap();
    let _ = sock.write_all(body);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        if out.windows(4).any(|w| w == b"\r\n\r\n") && out.ends_with(b"}") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn bad_uploads_are_refused_and_store_nothing() {
    let s = Server::start(&["--max-body-mb", "16", "--max-decompressed-mb", "4"]);
    let c = client();
    let work = tempfile::tempdir().unwrap();
    let prog = compile(work.path(), "prog", CRASHER);
    let core = make_core(work.path(), &prog);

    let check = |status: u16, code: &'static str| {
        move |(st, v): (u16, Value)| {
            assert_eq!(st, status, "{v}");
            assert_eq!(v["code"], code, "{v}");
            assert!(!v["detail"].as_str().unwrap_or_default().is_empty());
            v
        }
    };
    async fn post(
        c: &reqwest::Client,
        url: String,
        rb: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> (u16, Value) {
        let r = rb(c.post(url)).send().await.unwrap();
        let st = r.status().as_u16();
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        (st, r.json().await.unwrap())
    }
    let url = s.url("/api/v1/crashes");
    check(422, "not-a-dump")(post(&c, url.clone(), |r| r.body("this is not a dump")).await);
    check(422, "not-a-core")(
        post(&c, url.clone(), |r| r.body(std::fs::read(&prog).unwrap())).await,
    );
    let v =
        check(422, "truncated-dump")(post(&c, url.clone(), |r| r.body(core[..100].to_vec())).await);
    assert!(v["detail"].as_str().unwrap().contains("truncated"));
    // A truncated gzip stream.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&core).unwrap();
    let gz = gz.finish().unwrap();
    check(400, "bad-encoding")(
        post(&c, url.clone(), |r| {
            r.header("content-encoding", "gzip")
                .body(gz[..gz.len() / 2].to_vec())
        })
        .await,
    );
    // Refused from the headers alone, before the body is read: a small body, so the
    // server can drain it and keep the connection (a large unread body makes it close
    // the connection mid-upload, and the client may lose the answer to the reset).
    check(415, "unsupported-encoding")(
        post(&c, url.clone(), |r| {
            r.header("content-encoding", "br")
                .body(core[..1024].to_vec())
        })
        .await,
    );
    // A multipart upload without the dump part.
    let form = reqwest::multipart::Form::new().text("prod", "x");
    check(400, "missing-minidump")(post(&c, url.clone(), |r| r.multipart(form)).await);

    // A gzip bomb: 64 MiB of zeros in ~64 KiB, against a 4 MiB decompressed limit.
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        bomb.write_all(&zeros).unwrap();
    }
    let bomb = bomb.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    // The server answers as soon as the limit is passed, possibly before the client has
    // sent everything, so this goes over a raw socket that ignores a closed write side.
    let head = format!(
        "POST /api/v1/crashes HTTP/1.1\r\nHost: {}\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        s.addr(),
        bomb.len()
    );
    let (status, body) = raw_request(&s.addr(), &head, &bomb);
    assert!(status.contains("413"), "{status} {body}");
    assert!(
        body.contains("decompressed-too-large") && body.contains(&(4u64 << 20).to_string()),
        "{body}"
    );

    // The same bomb inside a Crashpad multipart body: cut off at the limit too.
    let boundary = "----pmbombboundary";
    let mut mp = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    write!(
        mp,
        "--{boundary}\r\nContent-Disposition: form-data; name=\"prod\"\r\n\r\nx\r\n"
    )
    .unwrap();
    write!(mp, "--{boundary}\r\nContent-Disposition: form-data; name=\"upload_file_minidump\"; filename=\"dump\"\r\n\r\nMDMP").unwrap();
    for _ in 0..64 {
        mp.write_all(&zeros).unwrap();
    }
    write!(mp, "\r\n--{boundary}--\r\n").unwrap();
    let mp = mp.finish().unwrap();
    let head = format!(
        "POST /api/v1/crashes HTTP/1.1\r\nHost: {}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        s.addr(),
        mp.len()
    );
    let (status, body) = raw_request(&s.addr(), &head, &mp);
    assert!(status.contains("413"), "{status} {body}");
    assert!(
        body.contains("decompressed-too-large") && body.contains(&(4u64 << 20).to_string()),
        "{body}"
    );

    // 10 GB claimed: refused before the body is read.
    let head = format!(
        "POST /api/v1/crashes HTTP/1.1\r\nHost: {}\r\nContent-Length: 10737418240\r\nConnection: close\r\n\r\n",
        s.addr()
    );
    let (status, body) = raw_request(&s.addr(), &head, b"MDMP");
    assert!(status.contains("413"), "{status} {body}");
    assert!(
        body.contains("body-too-large") && body.contains(&(16u64 << 20).to_string()),
        "{body}"
    );

    // Nothing was stored: no crash rows, no dump blobs.
    let list: Value = c
        .get(s.url("/api/v1/crashes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["crashes"].as_array().unwrap().len(), 0, "{list}");
    let blobs = s.dir.path().join("data/blobs");
    let stored = common::files_under(&blobs);
    assert!(stored.is_empty(), "blobs stored: {stored:?}");
    // Nor staging files: each refused upload's file was removed with the refusal.
    let staged = common::files_under(&s.dir.path().join("data/tmp"));
    assert!(staged.is_empty(), "staging files left: {staged:?}");
}

#[tokio::test]
async fn tokens_and_scopes() {
    let s = Server::start(&["--token", "ing:ingest", "--token", "adm:admin"]);
    let c = client();
    let r = c.get(s.url("/api/v1/crashes")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .get(s.url("/api/v1/crashes"))
        .bearer_auth("ing")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = c
        .get(s.url("/api/v1/crashes"))
        .bearer_auth("adm")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .post(s.url("/api/v1/binaries"))
        .bearer_auth("ing")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(c.get(s.url("/readyz")).send().await.unwrap().status(), 200);
}

#[test]
fn no_tokens_refuses_non_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without tokens"), "{err}");
}
