//! `postmortem upload` against a real server: a build tree compiled with gcc here
//! (stripped programs and libraries, their debug files split off with objcopy, an
//! unstripped library, a Breakpad `.sym` file) is sent whole the first time, not at all
//! the second, and only a rebuilt library the third; an upload whose connection a proxy
//! cuts resumes from the server's byte count (checked on the server: no byte arrives
//! twice); a file over the server's body limit goes up in chunks; an upload session
//! outlives a SIGKILLed server, and an abandoned one expires with its chunks; hostile
//! chunk requests are refused with typed problems.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const TOKEN: &str = "up-token";

fn gcc(dir: &Path, args: &[&str]) {
    let st = Command::new("gcc")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {args:?} failed");
}

fn run(dir: &Path, prog: &str, args: &[&str]) {
    let st = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap_or_else(|e| panic!("run {prog}: {e}"));
    assert!(st.success(), "{prog} {args:?} failed");
}

/// Builds `libfoo.so` from `foo_body` (the rebuild changes it).
fn build_libfoo(dir: &Path, foo_body: &str) {
    std::fs::write(
        dir.join("foo.c"),
        format!("int foo(int x) {{ {foo_body} }}\n"),
    )
    .unwrap();
    // shipped unstripped: one file per build
    gcc(
        dir,
        &[
            "-g",
            "-O1",
            "-fPIC",
            "-shared",
            "-Wl,--build-id",
            "-o",
            "libfoo.so",
            "foo.c",
        ],
    );
}

/// A build tree: two programs and a library, stripped with their debug files split off;
/// an unstripped library; a `.sym` file; object files and sources (not sent).
fn build_tree(dir: &Path) -> usize {
    std::fs::write(dir.join("bar.c"), "int bar(int x) { return x * 3 + 1; }\n").unwrap();
    std::fs::write(
        dir.join("one.c"),
        "int foo(int);\nint main(int c, char **v) { (void)v; return foo(c); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("two.c"),
        "int bar(int);\nint main(int c, char **v) { (void)v; return bar(c) & 1; }\n",
    )
    .unwrap();
    build_libfoo(dir, "return x + 41;");
    gcc(dir, &["-g", "-O1", "-fPIC", "-c", "-o", "bar.o", "bar.c"]);
    gcc(
        dir,
        &["-shared", "-Wl,--build-id", "-o", "libbar.so", "bar.o"],
    );
    gcc(
        dir,
        &[
            "-g",
            "-O1",
            "-Wl,--build-id",
            "-o",
            "one",
            "one.c",
            "-L.",
            "-lfoo",
        ],
    );
    gcc(
        dir,
        &[
            "-g",
            "-O1",
            "-Wl,--build-id",
            "-o",
            "two",
            "two.c",
            "-L.",
            "-lbar",
        ],
    );
    for f in ["libbar.so", "one", "two"] {
        run(
            dir,
            "objcopy",
            &["--only-keep-debug", f, &format!("{f}.debug")],
        );
        run(dir, "strip", &["--strip-debug", "--strip-unneeded", f]);
    }
    std::fs::create_dir_all(dir.join("symbols")).unwrap();
    std::fs::write(
        dir.join("symbols/app.sym"),
        "MODULE windows x86_64 3F2A9C1B5D7E4F60A1B2C3D4E5F60718 1 app.pdb\n\
         INFO CODE_ID 5F3A1B2C4000 app.exe\n\
         FUNC 1000 20 0 main\n1000 20 10 0\nPUBLIC 1000 0 main\n",
    )
    .unwrap();
    // 3 stripped + 3 debug files + libfoo.so + app.sym
    8
}

struct Outcome {
    code: i32,
    stdout: String,
}

fn upload(url: &str, args: &[&str]) -> Outcome {
    let out = Command::new(common::bin())
        .arg("upload")
        .args(["--url", url, "--token", TOKEN])
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run postmortem upload");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "postmortem upload {args:?}:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout,
    }
}

/// The summary's counts: (files, already there, uploaded).
fn counts(out: &Outcome) -> (usize, usize, usize) {
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains(" files: "))
        .unwrap_or_else(|| panic!("no summary in {:?}", out.stdout));
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(3)
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1], nums[2])
}

fn uploaded_paths(out: &Outcome) -> Vec<String> {
    let mut v: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("uploaded "))
        .map(|l| l.split(" (").next().unwrap().to_string())
        .map(|p| {
            Path::new(&p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

fn sha256_file(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

fn build_id(p: &Path) -> String {
    // readelf's answer, not ours
    let out = Command::new("readelf")
        .args(["-n"])
        .arg(p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build id in {}", p.display()))
        .trim()
        .to_string()
}

async fn binaries_of(base: &str, build_id: &str) -> Vec<Value> {
    let res = common::client()
        .get(format!("{base}/api/v1/binaries?build_id={build_id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let v: Value = res.json().await.unwrap();
    v["binaries"].as_array().cloned().unwrap_or_default()
}

fn serve(dir: &Path, extra: &[&str]) -> (common::Proc, String) {
    let data = dir.join("data");
    let token = format!("{TOKEN}:symbols");
    let mut args = vec![
        "--data-dir",
        data.to_str().unwrap(),
        "--workers",
        "0",
        "--token",
        &token,
        "--token",
        "other-token:symbols",
        "--token",
        "ingest-token:ingest",
    ];
    args.extend_from_slice(extra);
    common::start_serve(&args)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_tree_is_sent_once_and_a_rebuilt_library_alone_again() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("build");
    std::fs::create_dir_all(&tree).unwrap();
    let expected = build_tree(&tree);
    let (_server, base) = serve(dir.path(), &[]);
    let tree_arg = tree.to_str().unwrap();

    let dry = upload(&base, &["--dry-run", tree_arg]);
    assert_eq!(dry.code, 0);
    assert_eq!(
        counts(&dry),
        (expected, 0, expected),
        "dry run lists all, sends none"
    );
    assert!(binaries_of(&base, &build_id(&tree.join("one")))
        .await
        .is_empty());

    let first = upload(&base, &[tree_arg]);
    assert_eq!(first.code, 0);
    assert_eq!(counts(&first), (expected, 0, expected));
    // every file is stored as itself, each in its role
    for f in [
        "one",
        "one.debug",
        "two",
        "two.debug",
        "libbar.so",
        "libbar.so.debug",
        "libfoo.so",
    ] {
        let p = tree.join(f);
        let stored = binaries_of(&base, &build_id(&p)).await;
        let sha = sha256_file(&p);
        let it = stored.iter().find(|b| b["sha256"] == sha.as_str());
        let it = it.unwrap_or_else(|| panic!("{f} not stored: {stored:?}"));
        assert_eq!(it["kind"] == "debug", f.ends_with(".debug"), "{f}: {it}");
    }

    let second = upload(&base, &[tree_arg]);
    assert_eq!(second.code, 0);
    assert_eq!(counts(&second), (expected, expected, 0));
    assert!(uploaded_paths(&second).is_empty());

    let old_id = build_id(&tree.join("libfoo.so"));
    build_libfoo(&tree, "return x + 42;");
    let new_id = build_id(&tree.join("libfoo.so"));
    assert_ne!(old_id, new_id, "the rebuild changed the build-id");
    let third = upload(&base, &[tree_arg]);
    assert_eq!(third.code, 0);
    assert_eq!(counts(&third), (expected, expected - 1, 1));
    assert_eq!(uploaded_paths(&third), vec!["libfoo.so".to_string()]);
    assert_eq!(binaries_of(&base, &new_id).await.len(), 1);
}

/// A TCP proxy that forwards everything, except that once `cut_after` bytes went from
/// clients to the server it closes that connection (both ways), once — or, if `stall`,
/// stops forwarding on it and holds it open.
struct Proxy {
    url: String,
    forwarded: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
}

fn proxy(target: &str, cut_after: u64, stall: bool) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let target = target.trim_start_matches("http://").to_string();
    let forwarded = Arc::new(AtomicU64::new(0));
    let cut = Arc::new(AtomicBool::new(false));
    let (fw, ct) = (forwarded.clone(), cut.clone());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let server = TcpStream::connect(&target).unwrap();
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            // server → client: plain copy
            std::thread::spawn(move || {
                let (mut from, mut to) = (s2, c2);
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Write);
            });
            let (fw, ct) = (fw.clone(), ct.clone());
            std::thread::spawn(move || {
                let (mut from, mut to) = (client, server);
                let mut buf = vec![0u8; 16 << 10];
                loop {
                    let n = match from.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let before = fw.fetch_add(n as u64, Ordering::SeqCst);
                    if !ct.load(Ordering::SeqCst) && before + n as u64 > cut_after {
                        let keep = cut_after.saturating_sub(before) as usize;
                        let _ = to.write_all(&buf[..keep]);
                        ct.store(true, Ordering::SeqCst);
                        if stall {
                            std::thread::sleep(std::time::Duration::from_secs(600));
                        }
                        // a clean close towards the server: it reads what came, then EOF
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to.shutdown(Shutdown::Write);
            });
        }
    });
    Proxy {
        url,
        forwarded,
        cut,
    }
}

/// An ELF file of about `mb` MB that does not compress: a gcc-built program with a
/// section of random bytes.
fn big_binary(dir: &Path, mb: usize) -> PathBuf {
    std::fs::write(dir.join("big.c"), "int main(void) { return 0; }\n").unwrap();
    gcc(dir, &["-g", "-Wl,--build-id", "-o", "big0", "big.c"]);
    let mut noise = vec![0u8; mb << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(dir.join("noise.bin"), &noise).unwrap();
    run(
        dir,
        "objcopy",
        &["--add-section", ".noise=noise.bin", "big0", "big"],
    );
    std::fs::remove_file(dir.join("big0")).unwrap();
    std::fs::remove_file(dir.join("noise.bin")).unwrap();
    dir.join("big")
}

async fn received_bytes(base: &str) -> u64 {
    let v: Value = common::client()
        .get(format!("{base}/api/v1/upload-sessions"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["received_bytes"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_over_the_body_limit_goes_up_in_chunks_and_a_cut_upload_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let big = big_binary(&files, 3);
    let size = std::fs::metadata(&big).unwrap().len();
    // a 1 MiB body limit: the file cannot go in one request
    let (_server, base) = serve(dir.path(), &["--max-body-mb", "1"]);
    let whole = common::client()
        .post(format!("{base}/api/v1/binaries"))
        .bearer_auth(TOKEN)
        .header("X-File-Name", "big")
        .body(std::fs::read(&big).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(whole.status(), 413, "the file is over the body limit");

    // the proxy cuts the connection half-way through the second chunk
    let cut_at = (1u64 << 20) + (512 << 10);
    let p = proxy(&base, cut_at, false);
    let out = upload(&p.url, &[big.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(p.cut.load(Ordering::SeqCst), "the proxy cut the upload");
    assert_eq!(counts(&out), (1, 0, 1));
    assert!(out.stdout.contains("resumed"), "{}", out.stdout);
    let stored = binaries_of(&base, &build_id(&big)).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["sha256"], sha256_file(&big).as_str());
    assert_eq!(stored[0]["size"], size);
    // the server received each compressed byte once: as many as gzip makes of the file
    // (flate2 at the level the client uses), not one more
    let compressed = gzip_len(&big);
    let received = received_bytes(&base).await;
    assert_eq!(
        received, compressed,
        "bytes the server read from chunk bodies"
    );
    let forwarded = p.forwarded.load(Ordering::SeqCst);
    assert!(
        forwarded > received,
        "the proxy carried the requests too: {forwarded}"
    );
    assert!(cut_at < received);
}

fn gzip_len(p: &Path) -> u64 {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&std::fs::read(p).unwrap()).unwrap();
    gz.finish().unwrap().len() as u64
}

/// The client is killed while its connection hangs half-way through the file; run again,
/// it finds its session on the server and sends only the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_upload_resumes_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let big = big_binary(&files, 3);
    let (_server, base) = serve(
        dir.path(),
        &["--max-body-mb", "1", "--body-idle-timeout-secs", "2"],
    );
    let p = proxy(&base, (1 << 20) + (300 << 10), true);
    let mut child = Command::new(common::bin())
        .args([
            "upload",
            "--url",
            &p.url,
            "--token",
            TOKEN,
            big.to_str().unwrap(),
        ])
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !p.cut.load(Ordering::SeqCst) {
        assert!(
            started.elapsed().as_secs() < 120,
            "the upload never reached the cut"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // the hanging chunk is kept once the server ends it (its body idle timeout, 2 s)
    let started = std::time::Instant::now();
    loop {
        let sessions: Value = common::client()
            .get(format!("{base}/api/v1/upload-sessions"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let held = sessions["sessions"][0]["offset"].as_u64().unwrap();
        if held > 1 << 20 {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 20,
            "the server kept what arrived: {sessions}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let out = upload(&base, &[big.to_str().unwrap()]);
    assert_eq!(out.code, 0);
    assert_eq!(counts(&out), (1, 0, 1));
    assert!(out.stdout.contains("resumed"), "{}", out.stdout);
    assert_eq!(
        received_bytes(&base).await,
        gzip_len(&big),
        "no byte was received twice"
    );
    assert_eq!(
        binaries_of(&base, &build_id(&big)).await[0]["sha256"],
        sha256_file(&big).as_str()
    );
}

fn gzip(p: &Path) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&std::fs::read(p).unwrap()).unwrap();
    gz.finish().unwrap()
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

async fn session(base: &str, id: &str) -> reqwest::Response {
    common::client()
        .get(format!("{base}/api/v1/upload-sessions/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
}

/// Half a file sent in chunks, the server SIGKILLed and started again on its data dir
/// (on another port): the session is there with the bytes it held; `postmortem upload`
/// finds it and sends only the rest (the restarted server reads exactly the rest from
/// chunk bodies); the stored file has the file's sha256.
#[tokio::test(flavor = "multi_thread")]
async fn an_upload_session_survives_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let big = big_binary(&files, 3);
    let packed = gzip(&big);
    let (server, base) = serve(dir.path(), &["--max-body-mb", "1"]);
    let c = common::client();
    let s: Value = c
        .post(format!("{base}/api/v1/upload-sessions"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "file_name": "big", "size": std::fs::metadata(&big).unwrap().len(),
            "sha256": sha256_file(&big), "encoding": "gzip",
            "compressed_size": packed.len(), "compressed_sha256": hex_sha256(&packed),
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = s["id"].as_str().unwrap().to_string();
    let chunk = usize::try_from(s["chunk_size"].as_u64().unwrap()).unwrap();
    let half = packed.len() / 2;
    let mut offset = 0;
    while offset < half {
        let end = (offset + chunk).min(half);
        let r = c
            .put(format!(
                "{base}/api/v1/upload-sessions/{id}?offset={offset}"
            ))
            .bearer_auth(TOKEN)
            .body(packed[offset..end].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        offset = end;
    }
    assert!(
        half > chunk,
        "half the file is more than one chunk: {half}, {chunk}"
    );
    let before: Value = session(&base, &id).await.json().await.unwrap();
    assert_eq!(before["offset"], half, "{before}");
    assert_eq!(before["received_bytes"], half, "{before}");

    drop(server); // SIGKILL
    let (_server, base) = serve(dir.path(), &["--max-body-mb", "1"]);
    let after = session(&base, &id).await;
    assert_eq!(after.status(), 200, "the session outlived its server");
    let after: Value = after.json().await.unwrap();
    assert_eq!(after["offset"], half, "{after}");
    assert_eq!(after["received_bytes"], half, "{after}");

    let out = upload(&base, &[big.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert_eq!(counts(&out), (1, 0, 1));
    assert!(out.stdout.contains("resumed"), "{}", out.stdout);
    // the restarted server read the rest from chunk bodies, not a byte more
    assert_eq!(
        received_bytes(&base).await,
        (packed.len() - half) as u64,
        "bytes the restarted server read"
    );
    let stored = binaries_of(&base, &build_id(&big)).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["sha256"], sha256_file(&big).as_str());
    // finished: the session and its chunks are gone
    assert_eq!(session(&base, &id).await.status(), 404);
    let chunk_blob = hex_sha256(&packed[..chunk.min(half)]);
    let left: Vec<_> = common::files_under(&dir.path().join("data"))
        .into_iter()
        .filter(|p| p.ends_with(&chunk_blob))
        .collect();
    assert!(left.is_empty(), "chunk blobs left: {left:?}");
}

/// An abandoned session expires: past its lifetime it is not found, and once the server
/// next looks (a session created, or the sweep) its chunk's blob is gone.
#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_session_expires_with_its_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(dir.path(), &["--upload-session-ttl-secs", "1"]);
    let c = common::client();
    let body = b"not even gzip, but a chunk all the same".to_vec();
    let s: Value = create_session(&base, TOKEN, 1000)
        .await
        .json()
        .await
        .unwrap();
    let id = s["id"].as_str().unwrap().to_string();
    let r = c
        .put(format!("{base}/api/v1/upload-sessions/{id}?offset=0"))
        .bearer_auth(TOKEN)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let blob = hex_sha256(&body);
    let named = |d: &Path| {
        common::files_under(d)
            .into_iter()
            .filter(|p| p.ends_with(&blob))
            .count()
    };
    assert_eq!(named(&dir.path().join("data")), 1, "the chunk is a blob");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(session(&base, &id).await.status(), 404);
    assert_eq!(create_session(&base, TOKEN, 999).await.status(), 201);
    assert_eq!(named(&dir.path().join("data")), 0, "the chunk went with it");
}

async fn create_session(base: &str, token: &str, size: u64) -> reqwest::Response {
    common::client()
        .post(format!("{base}/api/v1/upload-sessions"))
        .bearer_auth(token)
        .json(&json!({
            "file_name": "x", "size": size, "sha256": "ab".repeat(32), "encoding": "gzip",
            "compressed_size": size, "compressed_sha256": format!("{:064x}", size),
        }))
        .send()
        .await
        .unwrap()
}

async fn code_of(res: reqwest::Response) -> (u16, String, Option<String>) {
    let status = res.status().as_u16();
    let offset = res
        .headers()
        .get("upload-offset")
        .map(|v| v.to_str().unwrap().to_string());
    let v: Value = res.json().await.unwrap();
    (
        status,
        v["code"].as_str().unwrap_or_default().to_string(),
        offset,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_session_requests_are_refused_with_typed_problems() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = serve(
        dir.path(),
        &["--max-body-mb", "1", "--upload-sessions-per-token", "2"],
    );
    let c = common::client();
    let bad = c
        .post(format!("{base}/api/v1/upload-sessions"))
        .bearer_auth(TOKEN)
        .json(&json!({"size": 1, "sha256": "00", "encoding": "lzma", "compressed_size": 1, "compressed_sha256": "00"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        code_of(bad).await,
        (400, "bad-session-request".into(), None)
    );
    assert_eq!(
        code_of(create_session(&base, "ingest-token", 10).await)
            .await
            .0,
        403,
        "an ingest token cannot upload symbols"
    );
    let s: Value = create_session(&base, TOKEN, 2 << 20)
        .await
        .json()
        .await
        .unwrap();
    let id = s["id"].as_str().unwrap().to_string();
    let chunk = s["chunk_size"].as_u64().unwrap();
    assert!(chunk < 1 << 20, "chunks fit under the body limit: {chunk}");
    let put = |token: &'static str, offset: u64, body: Vec<u8>| {
        let c = c.clone();
        let url = format!("{base}/api/v1/upload-sessions/{id}?offset={offset}");
        async move {
            c.put(url)
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    // wrong offset: refused, and told where to send from
    assert_eq!(
        code_of(put(TOKEN, 5, vec![1; 10]).await).await,
        (409, "offset-mismatch".into(), Some("0".into()))
    );
    // over the chunk size (under the body limit)
    assert_eq!(
        code_of(put(TOKEN, 0, vec![1; chunk as usize + 1]).await)
            .await
            .1,
        "chunk-too-large"
    );
    // another token's session does not exist for it
    assert_eq!(
        code_of(put("other-token", 0, vec![1; 10]).await).await.1,
        "no-such-session"
    );
    // a good chunk, then one past the declared size
    let ok = put(TOKEN, 0, vec![1; 1000]).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.json::<Value>().await.unwrap()["offset"], 1000);
    let small: Value = create_session(&base, TOKEN, 100)
        .await
        .json()
        .await
        .unwrap();
    let small_id = small["id"].as_str().unwrap();
    let past = c
        .put(format!("{base}/api/v1/upload-sessions/{small_id}?offset=0"))
        .bearer_auth(TOKEN)
        .body(vec![0u8; 101])
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(past).await.1, "past-end");
    // finishing early is refused with the byte count
    let early = c
        .post(format!("{base}/api/v1/upload-sessions/{id}/finish"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        code_of(early).await,
        (409, "session-incomplete".into(), Some("1000".into()))
    );
    // a third session for this token is one too many; another token has its own
    assert_eq!(
        code_of(create_session(&base, TOKEN, 300).await).await,
        (429, "too-many-sessions".into(), None)
    );
    assert_eq!(
        create_session(&base, "other-token", 300).await.status(),
        201
    );
    // bytes that are not what was declared are not stored
    let c2 = small["id"].as_str().unwrap();
    let fill = c
        .put(format!("{base}/api/v1/upload-sessions/{c2}?offset=0"))
        .bearer_auth(TOKEN)
        .body(vec![0u8; 100])
        .send()
        .await
        .unwrap();
    assert_eq!(fill.status(), 200);
    let fin = c
        .post(format!("{base}/api/v1/upload-sessions/{c2}/finish"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(fin).await.1, "content-mismatch");
    // the missing query is bounded
    let many: Vec<Value> = (0..5001)
        .map(|_| json!({"sha256": "ab".repeat(32), "format": "elf", "kind": "executable"}))
        .collect();
    let res = c
        .post(format!("{base}/api/v1/binaries/missing"))
        .bearer_auth(TOKEN)
        .json(&json!({ "files": many }))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(res).await.0, 400);
}
