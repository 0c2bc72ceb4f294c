//! Remote symbol sources for `postmortem walk` (issue 19, part 1): a core whose program,
//! libc and loader are on no local path, walked with their files fetched from elfutils'
//! own `debuginfod` server (started here on a free port over files made at test time),
//! must equal gdb's walk with the local files, every thread. Then the faults a source has
//! in production, each from a small HTTP server of the test's own that counts what it is
//! asked (the service does the same: a crash whose libraries nobody uploaded is
//! symbolized from the server, and the next one from the stored files): misses remembered (one request within the miss TTL), a source down, slow, a 500,
//! a body cut short, too large, a file of another build — each a report with the module's
//! `lookups` saying so, never a hang. S3 buckets (moto's `moto_server`) in the debuginfod
//! and Breakpad layouts serve `postmortem walk` and the service alike: the same frames as
//! local files, misses, refused keys (`POSTMORTEM_SKIP_S3=1` skips them without moto).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::{bin, client, get_json, get_text, poll_done, upload_crash, Proc, TempServer};
use postmortem_testsupport::moto::Moto;
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::{compare, gdb, report::assert_valid};

/// `postmortem walk CORE --format json` with only remote sources (nothing under
/// `--symbols`, no dump paths, no `/usr/lib/debug`), the environment's `DEBUGINFOD_URLS`
/// ignored, the given `args` and `cache`.
fn walk_remote(core: &Path, cache: &Path, args: &[&str]) -> (Output, Value) {
    walk_remote_env(core, cache, args, &[])
}

/// [`walk_remote`] with the environment variables `env` set (a bucket's `AWS_*`).
fn walk_remote_env(
    core: &Path,
    cache: &Path,
    args: &[&str],
    env: &[(&str, String)],
) -> (Output, Value) {
    let out = Command::new(bin())
        .arg("walk")
        .arg(core)
        .args(["--no-dump-paths", "--no-system-debug", "--format", "json"])
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .env_remove("POSTMORTEM_SYMBOLS_BUCKETS")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&report);
    (out, report)
}

/// The report's module named `name`.
fn module<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no module {name}: {}", report["modules"]))
}

/// (file, result) of each lookup of a module.
fn lookups(m: &Value) -> Vec<(String, String)> {
    m["lookups"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .map(|l| {
                    (
                        l["file"].as_str().unwrap().to_string(),
                        l["result"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn tool(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (test.sh installs binutils, debuginfod)"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// elfutils' `debuginfod` serving the ELF files in `dir`, ready (all `files` scanned).
pub(crate) fn start_debuginfod(dir: &Path, db: &Path, files: usize) -> (Proc, String) {
    let port = free_port();
    let child = Command::new("debuginfod")
        .args(["-F", "-t0", "-g0", "-p", &port.to_string(), "-d"])
        .arg(db)
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("debuginfod (Debian package debuginfod; test.sh installs it)");
    let proc = Proc(child);
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let wanted = format!("scanned_files_total{{source=\"file\"}} {files}");
    loop {
        let metrics = http_get(&format!("127.0.0.1:{port}"), "/metrics");
        if metrics.as_deref().is_some_and(|m| m.contains(&wanted)) {
            return (proc, url);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "debuginfod did not scan {files} files in 60 s: {metrics:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A plain HTTP GET's body, `None` if nothing answers.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The threads program crashed, gdb's frames of it with every file local, and a
/// directory holding what a distribution's debuginfod holds for it: the program stripped
/// and its debug file apart, and each library the core names with its debug file from
/// `/usr/lib/debug` (libc6-dbg).
struct Served {
    work: Workdir,
    exe: PathBuf,
    core: PathBuf,
    gdb: gdb::GdbCore,
    dir: PathBuf,
    files: usize,
    libs: Vec<String>,
}

fn served() -> Served {
    let s = served_program("threads.c", "threads");
    assert!(
        s.gdb.threads.len() >= 5 && s.gdb.crashed().frames.len() >= 3,
        "gdb sees the program's threads: {:?}",
        s.gdb
    );
    s
}

/// [`served`] for the crash program `source`, built as `name`.
fn served_program(source: &str, name: &str) -> Served {
    let work = Workdir::new("sources");
    let exe = work.compile("gcc", &["-O1", "-pthread"], &[source], name);
    let core = work.crash(&exe);
    let gdb = gdb::frames(work.path(), &exe, &core);

    let dir = work.path().join("served");
    std::fs::create_dir(&dir).unwrap();
    tool(
        Command::new("objcopy")
            .arg("--strip-debug")
            .arg(&exe)
            .arg(dir.join(name)),
    );
    tool(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&exe)
            .arg(dir.join(format!("{name}.debug"))),
    );
    let mut files = 2;
    // the libraries the core names, found by a walk with local files
    let local = Command::new(bin())
        .arg("walk")
        .arg(&core)
        .args(["--offline", "--format", "json"])
        .output()
        .unwrap();
    let local: Value = serde_json::from_slice(&local.stdout).unwrap();
    let mut libs = Vec::new();
    for m in local["modules"].as_array().unwrap() {
        let (Some(path), Some(id)) = (m["path"].as_str(), m["build_id"].as_str()) else {
            continue;
        };
        if m["main"] == true || !Path::new(path).is_file() {
            continue;
        }
        let name = m["name"].as_str().unwrap().to_string();
        std::fs::copy(path, dir.join(&name)).unwrap();
        files += 1;
        let debug = PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        ));
        if debug.is_file() {
            std::fs::copy(&debug, dir.join(format!("{name}.dbg"))).unwrap();
            files += 1;
        }
        libs.push(name);
    }
    assert!(
        libs.iter().any(|l| l.starts_with("libc.so")),
        "the core names libc: {libs:?}"
    );
    Served {
        work,
        exe,
        core,
        gdb,
        dir,
        files,
        libs,
    }
}

/// `report`, of `s`'s core with no local file, equals gdb's walk with the local files,
/// and every module's executable and debug file were fetched from `source`.
fn assert_fetched_as_gdb_walks(s: &Served, report: &Value, source: &str) {
    compare::assert_same_stacks(&s.gdb, report);
    for name in s.libs.iter().map(String::as_str).chain(["threads"]) {
        let m = module(report, name);
        assert_eq!(m["status"], "ok", "{m}");
        assert_eq!(
            lookups(m),
            [
                ("executable".to_string(), "fetched".to_string()),
                ("debuginfo".to_string(), "fetched".to_string())
            ],
            "{m}"
        );
        let files = m["files"].as_array().unwrap();
        assert!(!files.is_empty(), "{m}");
        for f in files {
            assert_eq!(f["source"], source, "{m}");
        }
    }
    let frame0 = &report["threads"][0]["frames"][0];
    assert!(frame0["function"].is_string(), "{frame0}");
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["code"] != "module-missing"),
        "{}",
        report["warnings"]
    );
}

/// Every module's files fetched from a local debuginfod: the walk equals gdb's with the
/// local files; a second walk, with the server gone, gives the same report from the
/// cache (it asked nothing: an asked server that is down would be an `error`).
#[test]
fn a_core_walks_with_every_file_from_debuginfod_as_gdb_does() {
    let s = served();
    let (server, url) = start_debuginfod(&s.dir, &s.work.path().join("db.sqlite"), s.files);
    let cache = s.work.path().join("cache");

    let (_, report) = walk_remote(&s.core, &cache, &["--debuginfod", &url]);
    assert_fetched_as_gdb_walks(&s, &report, &url);

    drop(server);
    let (_, again) = walk_remote(&s.core, &cache, &["--debuginfod", &url]);
    assert_eq!(
        again, report,
        "the second walk is the first, from the cache"
    );

    // without the source, the same walk misses the modules: the files came from it
    let (_, offline) = walk_remote(&s.core, &s.work.path().join("empty"), &["--offline"]);
    assert_eq!(module(&offline, "threads")["status"], "missing");
}

/// What the test's own source does with a request.
#[derive(Clone)]
enum Fault {
    /// Serves the files under a directory (a symbol store), 404 for the rest.
    Files(PathBuf),
    /// 404 for everything.
    NotFound,
    /// 500 for everything.
    ServerError,
    /// Reads the request, answers nothing.
    Silent,
    /// Promises 100000 bytes, sends 10, closes.
    CutShort,
    /// Promises 10 GB.
    Huge,
    /// Streams 3 MB with no length given.
    Endless,
    /// Serves a real ELF file of another build (`/bin/true`).
    OtherBuild,
    /// As `Files`, each answer after the delay.
    Slow(PathBuf, Duration),
    /// 403, as S3 answers a request signed with keys it does not take.
    S3Denied,
    /// A 1 MB body promised, then one byte of it every 2 s.
    Trickle,
    /// 302 to this `Location`, whatever was asked.
    Redirect(String),
    /// 302 from `PATH` to `/moved/PATH` on this server, where the files of the directory
    /// are (without one, every `/moved/` path answers 401, as a CDN refusing).
    Moved(Option<PathBuf>),
    /// 401.
    Unauthorized,
}

/// A source on a free port answering every request with `fault`; returns its URL and
/// the request paths it was asked for.
fn faulty(fault: Fault) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (log, fault) = (log.clone(), fault.clone());
            std::thread::spawn(move || answer(conn, fault, &log));
        }
    });
    (url, asked)
}

fn answer(mut conn: TcpStream, fault: Fault, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    log.lock().unwrap().push(path.clone());
    let (fault, path) = match fault {
        Fault::Slow(root, delay) => {
            std::thread::sleep(delay);
            (Fault::Files(root), path)
        }
        Fault::Moved(root) => match (path.strip_prefix("/moved"), root) {
            (Some(rest), Some(root)) => (Fault::Files(root), rest.to_string()),
            (Some(_), None) => (Fault::Unauthorized, path),
            (None, _) => (Fault::Redirect(format!("/moved{path}")), path),
        },
        other => (other, path),
    };
    let _ = match fault {
        Fault::Files(root) => {
            // a directory's listing is its `index` file (the EC2 metadata service's
            // `…/security-credentials/`)
            let rel = path.trim_start_matches('/');
            let rel = match rel.strip_suffix('/') {
                Some(dir) => format!("{dir}/index"),
                None => rel.to_string(),
            };
            match std::fs::read(root.join(&rel))
                .ok()
                .filter(|_| !rel.contains(".."))
            {
                Some(body) => {
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    conn.write_all(&body)
                }
                None => conn.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            }
        }
        Fault::NotFound => conn
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        Fault::ServerError => conn.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
        Fault::Silent => {
            std::thread::sleep(Duration::from_secs(30));
            Ok(())
        }
        Fault::CutShort => conn.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n\x7fELF012345",
        ),
        Fault::Huge => conn.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\nConnection: close\r\n\r\n",
        ),
        Fault::Endless => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let chunk = vec![0u8; 1 << 16];
            for _ in 0..48 {
                if conn.write_all(&chunk).is_err() {
                    break;
                }
            }
            Ok(())
        }
        Fault::Slow(..) | Fault::Moved(_) => Ok(()),
        Fault::Trickle => {
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n",
            );
            for _ in 0..500_000 {
                if conn.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            Ok(())
        }
        Fault::Redirect(to) => write!(
            conn,
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        Fault::Unauthorized => conn.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
        Fault::S3Denied => {
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message></Error>";
            let _ = write!(
                conn,
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            conn.write_all(body.as_bytes())
        }
        Fault::OtherBuild => {
            let body = std::fs::read("/bin/true").unwrap();
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            conn.write_all(&body)
        }
    };
}

/// A small crash program and its core: one module of its own, libc, the loader.
fn small_core() -> (Workdir, PathBuf) {
    let work = Workdir::new("sources-faults");
    let exe = work.compile("gcc", &["-O0"], &["basic.c"], "basic");
    let core = work.crash(&exe);
    (work, core)
}

/// The lookups of module `basic` (the program) of a walk with only `url` as a source.
fn program_lookups(core: &Path, cache: &Path, url: &str, extra: &[&str]) -> (Value, Vec<Value>) {
    let mut args = vec!["--debuginfod", url];
    args.extend_from_slice(extra);
    let (_, report) = walk_remote(core, cache, &args);
    let m = module(&report, "basic");
    assert_eq!(m["status"], "missing", "{m}");
    (
        report.clone(),
        m["lookups"].as_array().cloned().unwrap_or_default(),
    )
}

/// A source without the files: "not found", remembered for the miss TTL (the next walk
/// asks nothing), asked again once it has passed.
#[test]
fn a_miss_is_asked_once_within_its_time_to_live() {
    let (work, core) = small_core();
    let cache = work.path().join("cache");
    let (url, asked) = faulty(Fault::NotFound);
    let (report, first) = program_lookups(&core, &cache, &url, &[]);
    assert_eq!(first.len(), 2, "executable and debuginfo: {first:?}");
    // the program's own markers: the libraries' debuginfo misses are remembered too
    let id = module(&report, "basic")["build_id"]
        .as_str()
        .unwrap()
        .to_string();
    let program_dir = cache.join("buildid").join(&id);
    assert!(first
        .iter()
        .all(|l| l["result"] == "not-found" && l["source"] == url.as_str()));
    let n = asked.lock().unwrap().len();
    assert!(
        asked
            .lock()
            .unwrap()
            .iter()
            .all(|p| p.starts_with("/buildid/")
                && (p.ends_with("/executable") || p.ends_with("/debuginfo"))),
        "{asked:?}"
    );

    // a later second: an `until` reckoned from now would differ
    std::thread::sleep(Duration::from_millis(1100));
    let (_, second) = program_lookups(&core, &cache, &url, &[]);
    assert_eq!(asked.lock().unwrap().len(), n, "nothing asked again");
    assert!(second.iter().all(|l| l["result"] == "not-found"
        && l["message"]
            .as_str()
            .unwrap()
            .contains("remembered for 600 s")));
    // when each miss expires: its marker's time plus the TTL, the same in both walks
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a, b, "the same lookup, the same until");
        let file = a["file"].as_str().unwrap();
        let marker = common::files_under(&program_dir)
            .into_iter()
            .find(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(&format!("{file}.miss-"))
            })
            .unwrap_or_else(|| panic!("no miss marker of {file} under {}", program_dir.display()));
        let recorded = std::fs::metadata(&marker).unwrap().modified().unwrap();
        let expires = recorded + Duration::from_secs(600);
        let whole = Duration::from_secs(
            expires
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        );
        let until = a["until"]
            .as_str()
            .unwrap_or_else(|| panic!("no until: {a}"));
        assert_eq!(
            humantime::parse_rfc3339(until).unwrap(),
            std::time::UNIX_EPOCH + whole,
            "{a} against {}",
            marker.display()
        );
    }
    // the text report says it too
    let text = Command::new(bin())
        .arg("walk")
        .arg(&core)
        .args(["--no-dump-paths", "--no-system-debug", "--format", "text"])
        .args(["--debuginfod", &url])
        .arg("--cache-dir")
        .arg(&cache)
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let until = first[0]["until"].as_str().unwrap();
    assert!(
        text.contains(&format!("asked again after {until}")),
        "{text}"
    );
    assert_eq!(asked.lock().unwrap().len(), n, "nothing asked again");

    program_lookups(&core, &cache, &url, &["--miss-ttl", "0"]);
    assert_eq!(
        asked.lock().unwrap().len(),
        2 * n,
        "asked again after the TTL"
    );
}

/// A sources file (`--sources FILE`) listing `sources`, each `(kind, url, extra TOML
/// lines)`, written under `dir`.
fn sources_file(dir: &Path, sources: &[(&str, &str, &str)]) -> PathBuf {
    let mut text = String::from("# written by the test\n");
    for (kind, url, extra) in sources {
        text.push_str(&format!(
            "[[source]]\nkind = \"{kind}\"\nurl = \"{url}\"\n{extra}\n"
        ));
    }
    let path = tempfile::Builder::new()
        .prefix("sources")
        .suffix(".toml")
        .tempfile_in(dir)
        .unwrap()
        .into_temp_path()
        .keep()
        .unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// (source, file, result, message) of each lookup of a module.
fn answers(m: &Value) -> Vec<(String, String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    m["lookups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                s(&l["source"]),
                s(&l["file"]),
                s(&l["result"]),
                s(&l["message"]),
            )
        })
        .collect()
}

/// Grows the ELF file at `path` past `bytes` with a section of zeros: its build-id stays.
fn pad(path: &Path, bytes: usize) {
    let zeros = path.with_extension("zeros");
    std::fs::write(&zeros, vec![0u8; bytes]).unwrap();
    tool(
        Command::new("objcopy")
            .arg(format!("--add-section=.pad={}", zeros.display()))
            .arg(path),
    );
    std::fs::remove_file(zeros).unwrap();
    assert!(std::fs::metadata(path).unwrap().len() > bytes as u64);
}

/// Limits per source, from a sources file: of two sources answering after 2 s, the one
/// whose own timeout is 1 s gives an error (no answer in time), the other, whose timeout
/// is 10 s, serves the files; of two sources of a 2 MB executable, the one under the
/// command line's 1 MB cap refuses it, the other, whose own cap is 100 MB, serves it.
#[test]
fn each_source_fetches_within_its_own_limits() {
    let (work, core) = small_core();
    let (id, store) = program_store(&work, &core);
    let slow = Duration::from_secs(2);
    let (hasty, _) = faulty(Fault::Slow(store.clone(), slow));
    let (patient, _) = faulty(Fault::Slow(store.clone(), slow));
    let file = sources_file(
        work.path(),
        &[
            ("debuginfod", &hasty, "timeout_secs = 1"),
            ("debuginfod", &patient, "timeout_secs = 10"),
        ],
    );
    let started = Instant::now();
    let (_, report) = walk_remote(
        &core,
        &work.path().join("cache-timeouts"),
        &["--sources", file.to_str().unwrap()],
    );
    let m = module(&report, "basic");
    assert_eq!(m["status"], "ok", "{m}");
    let got = answers(m);
    assert_eq!(got.len(), 4, "{got:?}");
    for (i, file) in ["executable", "debuginfo"].into_iter().enumerate() {
        let (first, second) = (&got[2 * i], &got[2 * i + 1]);
        assert_eq!(
            (first.0.as_str(), first.1.as_str(), first.2.as_str()),
            (hasty.as_str(), file, "error")
        );
        assert!(first.3.contains("no answer within 1s"), "{got:?}");
        assert_eq!(
            (second.0.as_str(), second.1.as_str(), second.2.as_str()),
            (patient.as_str(), file, "fetched")
        );
    }
    // answers of 2 s from the patient source, one timeout of the hasty one
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );

    let executable = store.join("buildid").join(&id).join("executable");
    pad(&executable, 2 << 20);
    let (capped, _) = faulty(Fault::Files(store.clone()));
    let (roomy, _) = faulty(Fault::Files(store.clone()));
    let file = sources_file(
        work.path(),
        &[
            ("debuginfod", &capped, ""),
            ("debuginfod", &roomy, "max_bytes = 100_000_000"),
        ],
    );
    let cache = work.path().join("cache-caps");
    let (_, report) = walk_remote(
        &core,
        &cache,
        &[
            "--sources",
            file.to_str().unwrap(),
            "--fetch-max-bytes",
            "1000000",
        ],
    );
    let m = module(&report, "basic");
    assert_eq!(m["status"], "ok", "{m}");
    let got = answers(m);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(
        (got[0].0.as_str(), got[0].1.as_str(), got[0].2.as_str()),
        (capped.as_str(), "executable", "error")
    );
    assert!(
        got[0].3.contains("larger than the 1000000-byte cap"),
        "{got:?}"
    );
    assert_eq!(
        (got[1].0.as_str(), got[1].1.as_str(), got[1].2.as_str()),
        (roomy.as_str(), "executable", "fetched")
    );
    // the small debug file is under the cap: the first source serves it
    assert_eq!(
        (got[2].0.as_str(), got[2].1.as_str(), got[2].2.as_str()),
        (capped.as_str(), "debuginfo", "fetched")
    );
    let kept = cache.join("buildid").join(&id).join("executable");
    assert_eq!(
        std::fs::metadata(&kept).unwrap().len(),
        std::fs::metadata(&executable).unwrap().len(),
        "the 2 MB file is the one kept"
    );
}

/// A sources file that is not understood stops the walk with the file and line named;
/// an S3 bucket in it is refused by a walk, saying so.
#[test]
fn a_bad_sources_file_is_an_error_naming_its_line() {
    let work = tempfile::tempdir().unwrap();
    let core = work.path().join("no-core");
    std::fs::write(&core, b"not read").unwrap();
    for (text, says) in [
        (
            "[[source]]\nkind = \"debuginfod\"\nurl = \"http://a\"\ntimeout = 3\n",
            ":4: unknown field `timeout`",
        ),
        (
            "[[source]]\nkind = \"debuginfod\"\n\nurl = \"file:///x\"\n",
            ":4: url \"file:///x\"",
        ),
    ] {
        let file = work.path().join("sources.toml");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(bin())
            .arg("walk")
            .arg(&core)
            .arg("--sources")
            .arg(&file)
            .env_remove("DEBUGINFOD_URLS")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(
            stderr.contains(&format!("{}{says}", file.display())),
            "{text}: {stderr}"
        );
    }
    // the environment names the file as the flag does
    let file = work.path().join("from-env.toml");
    std::fs::write(&file, "[[source]]\nkind = \"gopher\"\nurl = \"http://a\"\n").unwrap();
    let out = Command::new(bin())
        .arg("walk")
        .arg(&core)
        .env("POSTMORTEM_SOURCES", &file)
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let says = format!("{}:2: unknown variant `gopher`", file.display());
    assert!(stderr.contains(&says), "{stderr}");
}

/// Each way a source fails: an `error` lookup saying why, a `symbol-source-error`
/// warning, a report all the same — and nothing of the failed fetch kept.
#[test]
fn a_failing_source_gives_an_error_and_a_report() {
    let (work, core) = small_core();
    let down = format!("http://127.0.0.1:{}", free_port());
    let cases: Vec<(&str, String, Vec<&str>, &str)> = vec![
        ("down", down, vec![], "cannot connect"),
        (
            "500",
            faulty(Fault::ServerError).0,
            vec![],
            "HTTP status 500",
        ),
        (
            "silent",
            faulty(Fault::Silent).0,
            vec!["--fetch-timeout", "1"],
            "no answer within 1s",
        ),
        ("cut short", faulty(Fault::CutShort).0, vec![], "cut short"),
        (
            "huge",
            faulty(Fault::Huge).0,
            vec!["--fetch-max-bytes", "1000000"],
            "larger than the 1000000-byte cap",
        ),
        (
            "endless",
            faulty(Fault::Endless).0,
            vec!["--fetch-max-bytes", "1000000"],
            "larger than the 1000000-byte cap",
        ),
        (
            "other build",
            faulty(Fault::OtherBuild).0,
            vec![],
            "refused: the file has build-id",
        ),
    ];
    for (case, url, extra, says) in cases {
        let cache = work
            .path()
            .join(format!("cache-{}", case.replace(' ', "-")));
        let started = Instant::now();
        let (report, ls) = program_lookups(&core, &cache, &url, &extra);
        assert!(!ls.is_empty(), "{case}");
        for l in &ls {
            assert_eq!(l["result"], "error", "{case}: {l}");
            let message = l["message"].as_str().unwrap();
            assert!(message.contains(says), "{case}: {message:?} lacks {says:?}");
        }
        assert!(
            report["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["code"] == "symbol-source-error"
                    && w["message"].as_str().unwrap().contains(says)),
            "{case}: {}",
            report["warnings"]
        );
        // the crash is still there, walked with what the dump holds
        assert!(
            report["threads"][0]["frames"].as_array().unwrap().len() > 1,
            "{case}"
        );
        // a server that timed out is asked once per run, not once per module and file
        if case == "silent" {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{case}: the walk waited {:?}",
                started.elapsed()
            );
        }
        let kept: Vec<_> = common::files_under(&cache)
            .into_iter()
            .filter(|p| !p.to_string_lossy().contains(".miss-"))
            .collect();
        assert!(kept.is_empty(), "{case}: nothing kept: {kept:?}");
    }
}

/// The new user's case, in the service: only the program uploaded, libc and the loader
/// from a debuginfod server. The report equals gdb's walk with local files, every thread;
/// no module is missing and the signature names functions; the fetched files are stored
/// (the same crash uploaded again, with the server gone, gives the same threads and the
/// same files, now found as stored); /metrics counts the lookups.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_fetches_what_nobody_uploaded() {
    let s = served();
    let (debuginfod, url) = start_debuginfod(&s.dir, &s.work.path().join("db.sqlite"), s.files);
    let server = TempServer::start(&["--debuginfod", &url]);
    let c = client();
    common::upload_binary(&c, &server.base, &s.exe, "threads").await;
    let core = std::fs::read(&s.core).unwrap();
    let upload = || async {
        let id = upload_crash(&c, &server.base, &core).await;
        let done = poll_done(&c, &server.base, &id).await;
        assert_eq!(done["status"], "done", "{done}");
        (id, done["report"].clone())
    };

    let (id, report) = upload().await;
    assert_valid(&report);
    compare::assert_same_stacks(&s.gdb, &report);
    for m in report["modules"].as_array().unwrap() {
        assert_eq!(m["status"], "ok", "{m}");
    }
    let sig = report["signature"]["text"].as_str().unwrap();
    assert!(!sig.contains("+0x"), "{sig}");
    for name in &s.libs {
        let m = module(&report, name);
        assert_eq!(
            lookups(m),
            [
                ("executable".to_string(), "fetched".to_string()),
                ("debuginfo".to_string(), "fetched".to_string())
            ],
            "{m}"
        );
        for f in m["files"].as_array().unwrap() {
            assert_eq!(f["source"], url.as_str(), "{m}");
        }
    }
    // the program was uploaded: not asked for, not from the source
    let program = module(&report, "threads");
    assert_eq!(program["lookups"], serde_json::json!([]), "{program}");
    assert!(program["files"][0]["source"].is_null(), "{program}");

    let metrics = get_text(&c, &server.url("/metrics")).await;
    let line = format!(
        "postmortem_symbol_lookups_total{{source=\"{url}\",result=\"fetched\"}} {}",
        2 * s.libs.len()
    );
    assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    let count = format!(
        "postmortem_symbol_fetch_seconds_count{{source=\"{url}\"}} {}",
        2 * s.libs.len()
    );
    assert!(metrics.contains(&count), "{count} in:\n{metrics}");
    let bytes: u64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "postmortem_symbol_fetched_bytes_total{{source=\"{url}\"}} "
            ))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let served: u64 = s
        .libs
        .iter()
        .flat_map(|l| [s.dir.join(l), s.dir.join(format!("{l}.dbg"))])
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    assert_eq!(bytes, served, "the bytes of every fetched file");

    // the crash page says where the files came from
    let page = get_text(&c, &server.url(&format!("/crashes/{id}"))).await;
    assert!(page.contains(&format!("fetched from {url}")), "{page}");

    drop(debuginfod);
    let (_, again) = upload().await;
    assert_eq!(again["threads"], report["threads"]);
    for name in &s.libs {
        let (m, first) = (module(&again, name), module(&report, name));
        assert_eq!(m["status"], "ok", "{m}");
        assert_eq!(m["files"], first["files"], "stored, with their source");
        assert_eq!(m["lookups"], serde_json::json!([]), "nothing asked: {m}");
    }
}

/// Issue 19's new user, as the README has them start: `postmortem serve` with a debuginfod
/// source, only their program uploaded, and a crash inside libc (`strlen` of a null
/// string). The first frame is glibc's `__strlen_*` variant, every frame of every thread is
/// gdb's with local files and none was found by scanning the stack, no module is missing,
/// and the signature names functions, not offsets.
#[tokio::test(flavor = "multi_thread")]
async fn the_new_users_crash_in_strlen_is_named_from_debuginfod() {
    let s = served_program("strlen_null.c", "strlen_null");
    let (_debuginfod, url) = start_debuginfod(&s.dir, &s.work.path().join("db.sqlite"), s.files);
    let server = TempServer::start(&["--debuginfod", &url]);
    let c = client();
    common::upload_binary(&c, &server.base, &s.exe, "strlen_null").await;
    let id = upload_crash(&c, &server.base, &std::fs::read(&s.core).unwrap()).await;
    let done = poll_done(&c, &server.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let report = &done["report"];
    compare::assert_same_stacks(&s.gdb, report);
    let crashed = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["crashed"] == true)
        .unwrap();
    let first = crashed["frames"][0]["function"].as_str().unwrap_or("");
    assert!(first.starts_with("__strlen_"), "first frame: {first}");
    for t in report["threads"].as_array().unwrap() {
        for f in t["frames"].as_array().unwrap() {
            assert_ne!(f["trust"], "scan", "{f}");
        }
    }
    for m in report["modules"].as_array().unwrap() {
        assert_eq!(m["status"], "ok", "{m}");
    }
    let sig = report["signature"]["text"].as_str().unwrap();
    assert!(!sig.contains("+0x"), "{sig}");
    // libc's frames enter the signature as their module, named or not (issue 37)
    assert!(sig.starts_with("libc.so.6 | "), "{sig}");
}

/// A source that is down, in the service: the crash is processed all the same, its
/// modules say `error` with why, and a second crash within the miss TTL of a source that
/// does not have a file is not asked again (the test's server counts). That source is
/// configured in a file of arguments (`postmortem serve @FILE`).
#[tokio::test(flavor = "multi_thread")]
async fn the_service_goes_on_when_a_source_fails() {
    let (work, core) = small_core();
    let core = std::fs::read(core).unwrap();
    let down = format!("http://127.0.0.1:{}", free_port());
    let (missing, asked) = faulty(Fault::NotFound);
    // the second source comes from a configuration file of arguments (`@FILE`)
    let config = work.path().join("serve.args");
    std::fs::write(&config, format!("--debuginfod={missing}\n--miss-ttl=600\n")).unwrap();
    let config = format!("@{}", config.display());
    let server = TempServer::start(&["--debuginfod", &down, &config]);
    let c = client();
    let process = || async {
        let id = upload_crash(&c, &server.base, &core).await;
        let done = poll_done(&c, &server.base, &id).await;
        assert_eq!(done["status"], "done", "{done}");
        done["report"].clone()
    };
    let report = process().await;
    let m = module(&report, "basic");
    assert_eq!(m["status"], "missing");
    let results: Vec<(&str, &str)> = m["lookups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["source"].as_str().unwrap(), l["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        results,
        [
            (down.as_str(), "error"),
            (missing.as_str(), "not-found"),
            (down.as_str(), "error"),
            (missing.as_str(), "not-found")
        ],
        "{m}"
    );
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "symbol-source-error"),
        "{}",
        report["warnings"]
    );
    let n = asked.lock().unwrap().len();
    assert!(n >= 2, "{asked:?}");
    process().await;
    assert_eq!(asked.lock().unwrap().len(), n, "misses are remembered");
}

/// Issue 34, finding 3: a fetched file is held to first upload wins, as an upload is. The
/// program's binary is uploaded stripped (`strip -s`); the source serves, as its debug
/// file, a doctored build of the same build-id stripped the same way (it passes the
/// build-id check: it is the build asked for). It is not stored beside the upload: after
/// each of two crashes the build-id lists the uploaded file alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_fetched_file_never_contests_an_upload() {
    let (work, core) = small_core();
    let exe = work.path().join("basic");
    let id = build_id(&exe);
    let stripped = work.path().join("basic.stripped");
    tool(
        Command::new("strip")
            .arg("-s")
            .arg("-o")
            .arg(&stripped)
            .arg(&exe),
    );
    let flag = format!("-Wl,--build-id=0x{id}");
    let doctored = work.compile("gcc", &["-O2", &flag], &["basic.c"], "doctored");
    let served = work.path().join("served");
    let debuginfo = served.join(format!("buildid/{id}/debuginfo"));
    std::fs::create_dir_all(debuginfo.parent().unwrap()).unwrap();
    tool(
        Command::new("strip")
            .arg("-s")
            .arg("-o")
            .arg(&debuginfo)
            .arg(&doctored),
    );
    assert_eq!(build_id(&debuginfo), id);
    assert_ne!(
        std::fs::read(&debuginfo).unwrap(),
        std::fs::read(&stripped).unwrap()
    );
    let (url, asked) = faulty(Fault::Files(served));
    let server = TempServer::start(&["--debuginfod", &url]);
    let c = client();
    common::upload_binary(&c, &server.base, &stripped, "basic").await;
    let core = std::fs::read(core).unwrap();
    let debuginfo_path = format!("/buildid/{id}/debuginfo");
    for _ in 0..2 {
        let crash = upload_crash(&c, &server.base, &core).await;
        let done = poll_done(&c, &server.base, &crash).await;
        assert_eq!(done["status"], "done", "{done}");
        let fetches = asked
            .lock()
            .unwrap()
            .iter()
            .filter(|p| **p == debuginfo_path)
            .count();
        assert!(fetches >= 1, "the doctored file was served: {asked:?}");
        let listed = get_json(&c, server.url(&format!("/api/v1/binaries?build_id={id}"))).await;
        let files = listed["binaries"].as_array().unwrap();
        assert_eq!(files.len(), 1, "{listed}");
        assert!(files[0]["source"].is_null(), "the upload: {listed}");
    }
}

/// The service's sources from a sources file (`serve --sources FILE`): each source with
/// its own limits — a miss TTL of 300 s for the one without the files, a cap of 1000
/// bytes for the one that has them — and the miss's `until` the database row's expiry,
/// the same in the next crash's report.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_reads_its_sources_file() {
    let (work, core) = small_core();
    let (id, store) = program_store(&work, &core);
    let (missing, asked) = faulty(Fault::NotFound);
    let (capped, _) = faulty(Fault::Files(store));
    let file = sources_file(
        work.path(),
        &[
            ("debuginfod", &missing, "miss_ttl_secs = 300"),
            ("debuginfod", &capped, "max_bytes = 1000"),
        ],
    );
    let server = TempServer::start(&["--sources", file.to_str().unwrap()]);
    let c = client();
    let core = std::fs::read(core).unwrap();
    let mut reports = Vec::new();
    let mut asked_after = Vec::new();
    let mut crashes = Vec::new();
    for _ in 0..2 {
        let crash = upload_crash(&c, &server.base, &core).await;
        let done = poll_done(&c, &server.base, &crash).await;
        assert_eq!(done["status"], "done", "{done}");
        reports.push(done["report"].clone());
        asked_after.push(asked.lock().unwrap().len());
        crashes.push(crash);
        // a later second: an `until` reckoned from now would differ
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let m = module(&reports[0], "basic");
    assert_eq!(m["status"], "missing", "{m}");
    let got = answers(m);
    assert_eq!(got.len(), 4, "{got:?}");
    for (i, file) in ["executable", "debuginfo"].into_iter().enumerate() {
        let (miss, cap) = (&got[2 * i], &got[2 * i + 1]);
        assert_eq!(
            (miss.0.as_str(), miss.1.as_str(), miss.2.as_str()),
            (missing.as_str(), file, "not-found")
        );
        assert_eq!(miss.3, "remembered for 300 s");
        assert_eq!(
            (cap.0.as_str(), cap.1.as_str(), cap.2.as_str()),
            (capped.as_str(), file, "error")
        );
        assert!(cap.3.contains("larger than the 1000-byte cap"), "{got:?}");
    }
    assert_eq!(
        module(&reports[1], "basic")["lookups"],
        m["lookups"],
        "the second crash: the same lookups, the same until"
    );
    assert_eq!(
        asked_after[0], asked_after[1],
        "misses remembered: {asked:?}"
    );
    // `until` is the database's expiry of the miss
    let db_path = server.dir.path().join("data").join("postmortem.db");
    let db = worker::store::Db::connect(&format!("sqlite://{}", db_path.display()))
        .await
        .unwrap();
    let misses = m["lookups"].as_array().unwrap();
    for l in misses.iter().filter(|l| l["result"] == "not-found") {
        let kind = l["file"].as_str().unwrap();
        let expires = worker::store::fetch_state::miss_remembered(&db, &missing, kind, &id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no row for {l}"));
        let until = humantime::parse_rfc3339(l["until"].as_str().unwrap()).unwrap();
        let until_ms = until
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        assert_eq!(
            i64::try_from(until_ms).unwrap(),
            expires / 1000 * 1000,
            "{l}: expires_at {expires}"
        );
    }
    // the crash page says when the source is asked again
    let page = get_text(&c, &server.url(&format!("/crashes/{}", crashes[0]))).await;
    let until = misses[0]["until"].as_str().unwrap();
    assert!(
        page.contains(&format!(
            "not found at {missing} (remembered for 300 s; asked again after {until})"
        )),
        "{page}"
    );
    db.close().await;
}

/// The repository's minidump fixture and the Breakpad symbol store beside it.
fn minidump_and_store() -> (PathBuf, PathBuf) {
    let root = postmortem_testsupport::workspace_root().join("fixtures/reports");
    (root.join("dumps/x86_64.dmp"), root.join("sym"))
}

/// A Breakpad symbol store over HTTP (`--symbols-url`, as minidump-stackwalk's): the
/// program's `.sym` file is fetched from `URL/NAME/DEBUG_ID/NAME.sym`, and the walk is the
/// walk with the same store on disk (`--symbols-path`); a second walk asks nothing.
#[test]
fn a_minidump_walks_with_its_sym_file_from_a_symbol_store() {
    let (dump, store) = minidump_and_store();
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let (url, asked) = faulty(Fault::Files(store.clone()));
    let (_, local) = walk_remote(
        &dump,
        &work.path().join("unused"),
        &["--offline", "--symbols-path", store.to_str().unwrap()],
    );
    let (_, fetched) = walk_remote(&dump, &cache, &["--symbols-url", &url]);
    assert_eq!(fetched["threads"], local["threads"]);
    let m = module(&fetched, "crash");
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(lookups(m), [("sym".to_string(), "fetched".to_string())]);
    assert_eq!(m["files"][0]["source"], url.as_str(), "{m}");
    assert_eq!(m["files"][0]["kind"], "breakpad", "{m}");
    let paths = asked.lock().unwrap().clone();
    assert!(
        paths.contains(&"/crash/D8A5E4FFF58D3BAF5A6C97C3463B89E20/crash.sym".to_string()),
        "{paths:?}"
    );
    let (_, again) = walk_remote(&dump, &cache, &["--symbols-url", &url]);
    assert_eq!(again, fetched);
    assert_eq!(
        asked.lock().unwrap().len(),
        paths.len(),
        "nothing asked again"
    );

    // a store that serves another module's file under this id: refused
    let wrong = work
        .path()
        .join("wrong/crash/D8A5E4FFF58D3BAF5A6C97C3463B89E20");
    std::fs::create_dir_all(&wrong).unwrap();
    std::fs::write(
        wrong.join("crash.sym"),
        "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 crash\nPUBLIC 10 0 f\n",
    )
    .unwrap();
    let (bad, _) = faulty(Fault::Files(work.path().join("wrong")));
    let (_, refused) = walk_remote(&dump, &work.path().join("cache2"), &["--symbols-url", &bad]);
    let m = module(&refused, "crash");
    let l = &m["lookups"][0];
    assert_eq!(l["result"], "error", "{m}");
    assert!(
        l["message"]
            .as_str()
            .unwrap()
            .contains("not the D8A5E4FFF58D3BAF5A6C97C3463B89E20"),
        "{l}"
    );
}

/// The service asks a symbol store for a minidump's `.sym` files too, and stores them.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_fetches_sym_files_from_a_symbol_store() {
    let (dump, store) = minidump_and_store();
    let (url, _) = faulty(Fault::Files(store.clone()));
    let work = tempfile::tempdir().unwrap();
    let (_, local) = walk_remote(
        &dump,
        work.path(),
        &["--offline", "--symbols-path", store.to_str().unwrap()],
    );
    let server = TempServer::start(&["--symbols-url", &url]);
    let c = client();
    let id = upload_crash(&c, &server.base, &std::fs::read(&dump).unwrap()).await;
    let done = poll_done(&c, &server.base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let report = &done["report"];
    assert_eq!(report["threads"], local["threads"]);
    let m = module(report, "crash");
    assert_eq!(lookups(m), [("sym".to_string(), "fetched".to_string())]);
    assert_eq!(m["files"][0]["source"], url.as_str(), "{m}");
    let binaries = get_json(&c, server.url("/api/v1/binaries")).await;
    assert!(
        binaries["binaries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["kind"] == "breakpad-sym" && b["source"] == url.as_str()),
        "{binaries}"
    );
}

/// The build-id of the ELF file at `path`, as readelf reads its note.
fn build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .unwrap_or_else(|| panic!("no build-id in {}", path.display()))
}

/// A moto bucket `symbols` holding under `prefix`, laid out as a debuginfod server, each
/// library's executable and debug file that `s` serves (with `program`, the program's
/// too: stripped, and its debug file apart); the bucket and its `s3://` URL. `None`:
/// skipped (`POSTMORTEM_SKIP_S3=1` without moto).
fn debuginfod_bucket(s: &Served, prefix: &str, program: bool) -> Option<(Moto, String)> {
    let s3 = Moto::start("symbols")?;
    let mut files: Vec<(PathBuf, PathBuf)> = s
        .libs
        .iter()
        .map(|name| (s.dir.join(name), s.dir.join(format!("{name}.dbg"))))
        .collect();
    if program {
        files.push((s.dir.join("threads"), s.dir.join("threads.debug")));
    }
    for (exe, debug) in files {
        let id = build_id(&exe);
        let put = |file: &str, path: &Path| {
            s3.put(
                &format!("{prefix}/buildid/{id}/{file}"),
                &std::fs::read(path).unwrap(),
            )
        };
        put("executable", &exe);
        if debug.is_file() {
            put("debuginfo", &debug);
        }
    }
    Some((s3, format!("s3://symbols/{prefix}")))
}

/// An S3 bucket of symbol files (moto, as the S3 blob test): libc and the loader laid out
/// as a debuginfod server under a prefix, the program uploaded. The service fetches them
/// from the bucket (the report names it as the source) and the walk equals gdb's.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_fetches_from_an_s3_bucket() {
    let s = served();
    let Some((s3, bucket)) = debuginfod_bucket(&s, "team/linux", false) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env: Vec<(&str, String)> = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (_server, base) = common::start_serve_env(
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--symbols-bucket",
            &bucket,
        ],
        &env,
    );
    let c = client();
    common::upload_binary(&c, &base, &s.exe, "threads").await;
    let id = upload_crash(&c, &base, &std::fs::read(&s.core).unwrap()).await;
    let done = poll_done(&c, &base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let report = &done["report"];
    compare::assert_same_stacks(&s.gdb, report);
    for name in &s.libs {
        let m = module(report, name);
        assert_eq!(m["status"], "ok", "{m}");
        assert_eq!(
            lookups(m)[0],
            ("executable".to_string(), "fetched".to_string())
        );
        for f in m["files"].as_array().unwrap() {
            assert_eq!(f["source"], bucket.as_str(), "{m}");
        }
    }
}

/// A service that runs under a role (here a Kubernetes pod's: EKS Pod Identity's container
/// endpoint, played by a local server answering as AWS's does) with no keys in its
/// environment signs its symbol buckets' requests with the role's keys, fetched by
/// object_store's credential provider as its blob store's are. The bucket (the test's own
/// server, refusing every request as S3 refuses keys it does not take) is asked with the
/// role's key id and session token, and the crash is processed all the same, its lookups
/// saying why they failed.
#[tokio::test(flavor = "multi_thread")]
async fn the_service_signs_bucket_requests_with_a_role_s_keys() {
    let (_work, core) = small_core();
    let role = tempfile::tempdir().unwrap();
    std::fs::write(
        role.path().join("creds"),
        r#"{"AccessKeyId":"ROLEKEY","SecretAccessKey":"rolesecret","Token":"ROLETOKEN","Expiration":"2099-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let token_file = role.path().join("token");
    std::fs::write(&token_file, "pod-token").unwrap();
    let (role_url, role_asked) = faulty(Fault::Files(role.path().to_path_buf()));
    let (endpoint, asked) = faulty(Fault::S3Denied);
    let data = tempfile::tempdir().unwrap();
    let full_uri = format!("{role_url}/creds");
    let bucket = "s3://symbols";
    let (_server, base) = common::start_serve_env(
        &[
            "--data-dir",
            data.path().to_str().unwrap(),
            "--symbols-bucket",
            bucket,
        ],
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", full_uri.as_str()),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.to_str().unwrap(),
            ),
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ],
    );
    let c = client();
    let id = upload_crash(&c, &base, &std::fs::read(&core).unwrap()).await;
    let done = poll_done(&c, &base, &id).await;
    assert_eq!(done["status"], "done", "{done}");
    let m = module(&done["report"], "basic");
    let ls = m["lookups"].as_array().unwrap();
    assert!(!ls.is_empty(), "{m}");
    for l in ls {
        assert_eq!(l["source"], bucket, "{l}");
        assert_eq!(l["result"], "error", "{l}");
        assert!(l["message"].as_str().unwrap().contains("403"), "{l}");
    }
    let asked = asked.lock().unwrap().clone();
    assert!(!asked.is_empty());
    for p in &asked {
        assert!(
            p.contains("X-Amz-Credential=ROLEKEY%2F")
                && p.contains("X-Amz-Security-Token=ROLETOKEN"),
            "signed with the role's keys: {p}"
        );
    }
    assert!(
        role_asked.lock().unwrap().iter().any(|p| p == "/creds"),
        "the role's keys were fetched"
    );
}

/// On an EC2 instance, whose profile no variable names, `--symbols-bucket-role` has the
/// service sign its symbol buckets with the instance's role keys from the metadata
/// service (here a local server laid out as EC2's, at `AWS_METADATA_ENDPOINT`), as the
/// blob store's client does; without the flag they are asked unsigned.
#[tokio::test(flavor = "multi_thread")]
async fn symbol_buckets_sign_with_the_instance_role_when_told() {
    let (_work, core) = small_core();
    let imds = tempfile::tempdir().unwrap();
    let creds = imds
        .path()
        .join("latest/meta-data/iam/security-credentials");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::create_dir_all(imds.path().join("latest/api")).unwrap();
    std::fs::write(imds.path().join("latest/api/token"), "IMDSTOKEN").unwrap();
    std::fs::write(creds.join("index"), "symbols-role").unwrap();
    std::fs::write(
        creds.join("symbols-role"),
        r#"{"AccessKeyId":"INSTANCEKEY","SecretAccessKey":"s","Token":"INSTANCETOKEN","Expiration":"2099-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let (metadata, _) = faulty(Fault::Files(imds.path().to_path_buf()));
    for told in [true, false] {
        let (endpoint, asked) = faulty(Fault::S3Denied);
        let data = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--data-dir",
            data.path().to_str().unwrap(),
            "--symbols-bucket",
            "s3://symbols",
        ];
        if told {
            args.push("--symbols-bucket-role");
        }
        let (_server, base) = common::start_serve_env(
            &args,
            &[
                ("AWS_METADATA_ENDPOINT", metadata.as_str()),
                ("AWS_ENDPOINT_URL", endpoint.as_str()),
                ("AWS_ALLOW_HTTP", "true"),
            ],
        );
        let c = client();
        let id = upload_crash(&c, &base, &std::fs::read(&core).unwrap()).await;
        let done = poll_done(&c, &base, &id).await;
        assert_eq!(done["status"], "done", "{done}");
        let asked = asked.lock().unwrap().clone();
        assert!(!asked.is_empty());
        for p in &asked {
            let signed = p.contains("X-Amz-Credential=INSTANCEKEY%2F")
                && p.contains("X-Amz-Security-Token=INSTANCETOKEN");
            assert_eq!(signed, told, "told: {told}: {p}");
        }
    }
}

/// `postmortem walk` with an S3 bucket (moto) as its only source, laid out as a debuginfod
/// server: every module's executable and debug file come from the bucket, presigned GETs
/// over the walk's blocking HTTP client, and the walk equals gdb's with the local files,
/// every thread. A second walk (the bucket named by `POSTMORTEM_SYMBOLS_BUCKETS` this time)
/// gives the same report from the cache and asks the bucket nothing.
#[test]
fn a_core_walks_with_every_file_from_an_s3_bucket_as_gdb_does() {
    let s = served();
    let Some((s3, bucket)) = debuginfod_bucket(&s, "team/linux", true) else {
        return;
    };
    let cache = s.work.path().join("cache");
    let env = s3.env();
    let (_, report) = walk_remote_env(&s.core, &cache, &["--symbols-bucket", &bucket], &env);
    assert_fetched_as_gdb_walks(&s, &report, &bucket);
    let asked = s3.gets();
    let libc = module(
        &report,
        s.libs.iter().find(|l| l.starts_with("libc.so")).unwrap(),
    );
    let libc_id = libc["build_id"].as_str().unwrap();
    assert!(
        asked.contains(&format!("team/linux/buildid/{libc_id}/executable")),
        "{asked:?}"
    );

    let mut env = env;
    env.push(("POSTMORTEM_SYMBOLS_BUCKETS", bucket.clone()));
    let (_, again) = walk_remote_env(&s.core, &cache, &[], &env);
    assert_eq!(
        again, report,
        "the second walk is the first, from the cache"
    );
    assert_eq!(s3.gets(), asked, "nothing asked again");
}

/// A bucket without a module's files: a `not-found` lookup per file, naming the bucket,
/// remembered as a server's miss is (the next walk asks nothing); the report is made.
#[test]
fn a_key_missing_from_a_bucket_is_a_miss() {
    let (work, core) = small_core();
    let Some(s3) = Moto::start("symbols") else {
        return;
    };
    let bucket = "s3://symbols/none/here";
    let cache = work.path().join("cache");
    let walk = || walk_remote_env(&core, &cache, &["--symbols-bucket", bucket], &s3.env()).1;
    let report = walk();
    let m = module(&report, "basic");
    assert_eq!(m["status"], "missing", "{m}");
    // a bucket may hold any layout: the build's files, then its `.sym` file, are asked
    assert_eq!(
        lookups(m),
        [
            ("executable".to_string(), "not-found".to_string()),
            ("debuginfo".to_string(), "not-found".to_string()),
            ("sym".to_string(), "not-found".to_string())
        ],
        "{m}"
    );
    for l in m["lookups"].as_array().unwrap() {
        assert_eq!(l["source"], bucket, "{l}");
    }
    let id = m["build_id"].as_str().unwrap();
    let asked = s3.gets();
    assert!(
        asked.contains(&format!("none/here/buildid/{id}/debuginfo")),
        "{asked:?}"
    );
    let again = walk();
    assert_eq!(again["modules"], report["modules"]);
    assert_eq!(s3.gets(), asked, "misses are remembered");
}

/// A bucket that refuses the request's keys (S3's 403 with its XML reason, from the test's
/// own server standing in for the endpoint: moto takes any key): an `error` lookup with
/// S3's code and message, a `symbol-source-error` warning, a report all the same. The
/// request was presigned with the keys of the environment.
#[test]
fn a_bucket_refusing_the_keys_is_an_error_and_a_report() {
    let (work, core) = small_core();
    let (endpoint, asked) = faulty(Fault::S3Denied);
    let env = vec![
        ("AWS_ACCESS_KEY_ID", "wrong".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "wrong".to_string()),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true".to_string()),
    ];
    let bucket = "s3://symbols";
    let cache = work.path().join("cache");
    let (_, report) = walk_remote_env(&core, &cache, &["--symbols-bucket", bucket], &env);
    let m = module(&report, "basic");
    let ls = m["lookups"].as_array().unwrap();
    assert!(!ls.is_empty(), "{m}");
    for l in ls {
        assert_eq!(l["result"], "error", "{l}");
        assert_eq!(l["source"], bucket, "{l}");
        let message = l["message"].as_str().unwrap();
        assert!(
            message.contains("HTTP status 403: SignatureDoesNotMatch: The request signature"),
            "{message}"
        );
    }
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "symbol-source-error"),
        "{}",
        report["warnings"]
    );
    assert!(report["threads"][0]["frames"].as_array().unwrap().len() > 1);
    let asked = asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .all(|p| p.starts_with("/symbols/") && p.contains("X-Amz-Credential=wrong%2F")),
        "{asked:?}"
    );
}

/// A Breakpad symbol store kept in a bucket (moto): the minidump's `.sym` file comes from
/// `PREFIX/NAME/DEBUG_ID/NAME.sym`, and the walk is the walk with the store on disk.
#[test]
fn a_minidump_walks_with_its_sym_file_from_an_s3_bucket() {
    let (dump, store) = minidump_and_store();
    let Some(s3) = Moto::start("symbols") else {
        return;
    };
    for file in common::files_under(&store) {
        let rel = file.strip_prefix(&store).unwrap().to_str().unwrap();
        s3.put(&format!("breakpad/{rel}"), &std::fs::read(&file).unwrap());
    }
    let work = tempfile::tempdir().unwrap();
    let (_, local) = walk_remote(
        &dump,
        &work.path().join("unused"),
        &["--offline", "--symbols-path", store.to_str().unwrap()],
    );
    let bucket = "s3://symbols/breakpad";
    let cache = work.path().join("cache");
    let (_, fetched) = walk_remote_env(&dump, &cache, &["--symbols-bucket", bucket], &s3.env());
    assert_eq!(fetched["threads"], local["threads"]);
    let m = module(&fetched, "crash");
    assert_eq!(m["status"], "ok", "{m}");
    // asked by build-id first (the bucket may hold any layout), then the `.sym` file
    assert_eq!(
        lookups(m),
        [
            ("executable".to_string(), "not-found".to_string()),
            ("debuginfo".to_string(), "not-found".to_string()),
            ("sym".to_string(), "fetched".to_string())
        ]
    );
    assert_eq!(m["files"][0]["source"], bucket, "{m}");
    assert!(
        s3.gets()
            .contains(&"breakpad/crash/D8A5E4FFF58D3BAF5A6C97C3463B89E20/crash.sym".to_string()),
        "{:?}",
        s3.gets()
    );

    // the same bucket from a sources file that says its layout: only `.sym` files asked
    let file = sources_file(work.path(), &[("s3", bucket, "layout = \"breakpad\"")]);
    let (_, listed) = walk_remote_env(
        &dump,
        &work.path().join("cache-listed"),
        &["--sources", file.to_str().unwrap()],
        &s3.env(),
    );
    assert_eq!(listed["threads"], local["threads"]);
    let m = module(&listed, "crash");
    assert_eq!(lookups(m), [("sym".to_string(), "fetched".to_string())]);
    assert_eq!(m["files"][0]["source"], bucket, "{m}");
}

/// Starts `postmortem worker` (two workers) on `db_url`, with a data directory of its own
/// (its own disk cache of the sources), the blob store shared, asking `url` only.
fn spawn_fetching_worker(
    db_url: &str,
    data: &Path,
    blobs: &str,
    url: &str,
    extra: &[&str],
) -> Proc {
    let mut args = vec![
        "--workers",
        "2",
        "--max-attempts",
        "20",
        "--database-url",
        db_url,
        "--blob-url",
        blobs,
        "--debuginfod",
        url,
        "--miss-ttl",
        "600",
    ];
    args.extend_from_slice(extra);
    common::spawn_worker(data, &args)
}

/// `serve --workers 0` on the database `db_url`, its data and a `file://` blob store under
/// `dir` (the store the workers share): the server, its base URL and the blob URL.
fn ingest_only(db_url: &str, dir: &Path) -> (Proc, String, String) {
    let blobs = format!("file://{}", dir.join("blobs").display());
    let ingest = dir.join("ingest");
    let (server, base) = common::start_serve(&[
        "--workers",
        "0",
        "--data-dir",
        ingest.to_str().unwrap(),
        "--database-url",
        db_url,
        "--blob-url",
        &blobs,
    ]);
    (server, base, blobs)
}

/// PostgreSQL, one `serve --workers 0` taking `crashes` uploads of `core`, then two worker
/// processes on separate machines (data directories) asking the source at `url`: the
/// reports of every crash, once all are processed.
async fn scaled_out(core: &Path, url: &str, crashes: usize) -> Option<Vec<Value>> {
    let (db_name, db_url) = common::pg_database("pm_src").await?;
    let work = tempfile::tempdir().unwrap();
    let (_server, base, blobs) = ingest_only(&db_url, work.path());
    let c = client();
    let core = std::fs::read(core).unwrap();
    let mut ids = Vec::new();
    for _ in 0..crashes {
        ids.push(upload_crash(&c, &base, &core).await);
    }
    // both start on a full queue: each takes crashes needing the same files at once
    let workers: Vec<Proc> = (0..2)
        .map(|i| {
            let data = work.path().join(format!("worker{i}"));
            spawn_fetching_worker(&db_url, &data, &blobs, url, &[])
        })
        .collect();
    let mut reports = Vec::new();
    for id in &ids {
        let done = poll_done(&c, &base, id).await;
        assert_eq!(done["status"], "done", "{done}");
        reports.push(done["report"].clone());
    }
    drop(workers);
    common::drop_db(&db_name).await;
    Some(reports)
}

/// The request paths `asked` holds more than once.
fn asked_twice(asked: &Mutex<Vec<String>>) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for p in asked.lock().unwrap().iter() {
        *counts.entry(p.clone()).or_insert(0) += 1;
    }
    counts.into_iter().filter(|(_, n)| *n > 1).collect()
}

/// Scale-out (issue 19, caching): two worker processes with their own data directories on
/// one PostgreSQL database, many crashes missing the same modules, a source that has none
/// of them. Misses are kept in the database, so within the miss TTL the source is asked
/// once per file, whichever worker asks: not once per machine.
#[tokio::test(flavor = "multi_thread")]
async fn workers_of_one_database_ask_a_source_once_per_miss() {
    let (_work, core) = small_core();
    let (url, asked) = faulty(Fault::NotFound);
    let Some(reports) = scaled_out(&core, &url, 12).await else {
        return;
    };
    for report in &reports {
        let m = module(report, "basic");
        assert_eq!(m["status"], "missing", "{m}");
        let ls = m["lookups"].as_array().unwrap();
        assert!(
            ls.iter().all(|l| l["result"] == "not-found"),
            "a miss, asked or remembered: {m}"
        );
    }
    let id = module(&reports[0], "basic")["build_id"]
        .as_str()
        .unwrap()
        .to_string();
    let paths = asked.lock().unwrap().clone();
    assert!(
        paths.contains(&format!("/buildid/{id}/debuginfo")),
        "{paths:?}"
    );
    assert_eq!(
        asked_twice(&asked),
        [],
        "every file asked once, by one worker: {paths:?}"
    );
}

/// The build-id of the small core's program, and a directory laid out as a debuginfod
/// server holding its executable and debug file.
fn program_store(work: &Workdir, core: &Path) -> (String, PathBuf) {
    let local = Command::new(bin())
        .arg("walk")
        .arg(core)
        .args(["--offline", "--format", "json"])
        .output()
        .unwrap();
    let local: Value = serde_json::from_slice(&local.stdout).unwrap();
    let program = module(&local, "basic");
    let id = program["build_id"].as_str().unwrap();
    let exe = program["path"].as_str().unwrap();
    let store = work.path().join("store");
    let dir = store.join("buildid").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(exe, dir.join("executable")).unwrap();
    tool(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(exe)
            .arg(dir.join("debuginfo")),
    );
    (id.to_string(), store)
}

/// Scale-out, a source that has the program's files and answers slowly: two worker
/// processes, many crashes needing them at once. One worker claims each file in the
/// database and downloads it; the other waits for it (stored, as an upload is) instead of
/// downloading too. Every crash's report has the program's files.
#[tokio::test(flavor = "multi_thread")]
async fn workers_of_one_database_download_a_file_once() {
    let (work, core) = small_core();
    let (id, store) = program_store(&work, &core);
    let (url, asked) = faulty(Fault::Slow(store, Duration::from_secs(1)));
    let Some(reports) = scaled_out(&core, &url, 12).await else {
        return;
    };
    for report in &reports {
        let m = module(report, "basic");
        assert_eq!(m["status"], "ok", "{m}");
        assert!(
            m["files"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["source"] == url.as_str()),
            "{m}"
        );
    }
    let paths = asked.lock().unwrap().clone();
    let executable = format!("/buildid/{id}/executable");
    assert_eq!(
        paths.iter().filter(|p| **p == executable).count(),
        1,
        "{paths:?}"
    );
    // Debug files are claimed in the database: one download per file. A source file for
    // the reports' context (`/buildid/ID/source/…`, issue 42) is not claimed: each worker
    // process asks once and keeps it, so at most once per worker (two here).
    let (sources, files): (Vec<_>, Vec<_>) = asked_twice(&asked)
        .into_iter()
        .partition(|(p, _)| p.contains("/source/"));
    assert_eq!(files, [], "one download per file: {paths:?}");
    assert!(sources.iter().all(|(_, n)| *n <= 2), "{paths:?}");
}

/// A crash whose program file a dead worker's claim of `lease` holds: the claim planted in
/// PostgreSQL, the crash uploaded to `serve --workers 0`, then one worker (`extra` flags)
/// with a source that has the file. Asserts the crash gets the file, downloaded once, and
/// returns how long after the claim was planted the crash was done (`None` without
/// PostgreSQL).
async fn crash_behind_a_dead_claim(lease: Duration, extra: &[&str]) -> Option<Duration> {
    let (work, core) = small_core();
    let (id, store) = program_store(&work, &core);
    let (url, asked) = faulty(Fault::Files(store));
    let (db_name, db_url) = common::pg_database("pm_src").await?;
    let data = tempfile::tempdir().unwrap();
    let (_server, base, blobs) = ingest_only(&db_url, data.path());
    // the server migrated the database before it printed its address
    let db = worker::store::Db::connect(&db_url).await.unwrap();
    let key = format!("buildid/{id}");
    let claimed = worker::store::fetch_state::try_claim(&db, &key, "dead-worker", lease);
    assert!(claimed.await.unwrap());
    let planted = Instant::now();
    let c = client();
    let crash = upload_crash(&c, &base, &std::fs::read(&core).unwrap()).await;
    let worker = spawn_fetching_worker(&db_url, &data.path().join("worker"), &blobs, &url, extra);
    let done = poll_done(&c, &base, &crash).await;
    let waited = planted.elapsed();
    assert_eq!(done["status"], "done", "{done}");
    let m = module(&done["report"], "basic");
    assert_eq!(m["status"], "ok", "{m}");
    assert_eq!(m["files"][0]["source"], url.as_str(), "{m}");
    let paths = asked.lock().unwrap().clone();
    let executable = format!("/buildid/{id}/executable");
    assert_eq!(
        paths.iter().filter(|p| **p == executable).count(),
        1,
        "{paths:?}"
    );
    drop(worker);
    db.close().await;
    common::drop_db(&db_name).await;
    Some(waited)
}

/// A worker killed while it held a claim on a file (its row left in the database, 4 s
/// from lapsing): another worker needing the file waits for the claim to lapse rather than
/// downloading beside it, then fetches the file itself — once — and the crash gets it.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_workers_claim_lapses() {
    let lease = Duration::from_secs(4);
    if let Some(waited) = crash_behind_a_dead_claim(lease, &[]).await {
        assert!(waited >= lease, "the worker waited for the claim to lapse");
    }
}

/// A setup of `postmortem worker` processes only (no `serve`): the workers sweep the
/// expired misses and fetch claims from the database, and keep the live ones.
#[tokio::test(flavor = "multi_thread")]
async fn workers_alone_sweep_expired_misses_and_claims() {
    use worker::store::fetch_state::{remember_miss, try_claim};
    let Some((db_name, db)) = common::pg_migrated("pm_sweep").await else {
        return;
    };
    let db_url = format!("postgres://postgres@127.0.0.1:5432/{db_name}");
    let hour = Duration::from_secs(3600);
    let s = "http://s";
    remember_miss(&db, s, "debuginfo", "ab", Duration::ZERO)
        .await
        .unwrap();
    remember_miss(&db, s, "debuginfo", "cd", hour)
        .await
        .unwrap();
    assert!(try_claim(&db, "buildid/ab", "dead", Duration::ZERO)
        .await
        .unwrap());
    assert!(try_claim(&db, "buildid/cd", "alive", hour).await.unwrap());
    let pool = sqlx::PgPool::connect(&db_url).await.unwrap();
    let rows = || async {
        let mut n = Vec::new();
        for table in ["source_misses", "fetch_claims"] {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .unwrap();
            n.push(count);
        }
        n
    };
    assert_eq!(rows().await, [2, 2]);
    let data = tempfile::tempdir().unwrap();
    let worker = common::spawn_worker(data.path(), &["--database-url", &db_url]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while rows().await != [1, 1] {
        assert!(Instant::now() < deadline, "not swept: {:?}", rows().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(worker);
    pool.close().await;
    db.close().await;
    common::drop_db(&db_name).await;
}

/// The claim timings are the service's settings: a worker told to wait at most 2 s for
/// another's fetch (`--fetch-claim-wait-secs 2`) fetches the file itself once a dead
/// worker's claim of 10 minutes has held it that long, not after 15 minutes.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_waits_for_another_s_fetch_as_long_as_it_is_told() {
    let told = [
        "--fetch-claim-wait-secs",
        "2",
        "--fetch-claim-poll-ms",
        "100",
    ];
    let lease = Duration::from_secs(600);
    if let Some(waited) = crash_behind_a_dead_claim(lease, &told).await {
        assert!(waited >= Duration::from_secs(2), "it waited");
    }
}

/// Issue 34, finding 8: a source sending one byte every 2 s. A walk's fetch ends at the
/// whole-fetch cap `--fetch-max-secs` (an error lookup saying so, the server then left
/// alone for the rest of the walk); in the service, a crash with a 5 s time limit is
/// done within its limit, its lookups saying the limit ran out, though the source's own
/// limits (90 s between bytes, 600 s a fetch) would have held it for ten minutes.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_source_cannot_outlast_the_fetch_cap_or_the_crash_s_limit() {
    let (work, core) = small_core();
    let (url, _) = faulty(Fault::Trickle);
    let started = Instant::now();
    let cache = work.path().join("cache-trickle");
    let (_, ls) = program_lookups(&core, &cache, &url, &["--fetch-max-secs", "3"]);
    let took = started.elapsed();
    eprintln!("walk with --fetch-max-secs 3 against a byte every 2 s: {took:?}");
    assert!(took < Duration::from_secs(15), "the walk took {took:?}");
    assert!(!ls.is_empty());
    for l in &ls {
        assert_eq!(l["result"], "error", "{l}");
        assert!(
            l["message"]
                .as_str()
                .unwrap()
                .contains("took longer than its 3-second cap"),
            "{l}"
        );
    }

    let limit = 5;
    let server = TempServer::start(&[
        "--debuginfod",
        &url,
        "--job-timeout-secs",
        &limit.to_string(),
    ]);
    let c = client();
    let started = Instant::now();
    let id = upload_crash(&c, &server.base, &std::fs::read(&core).unwrap()).await;
    let done = poll_done(&c, &server.base, &id).await;
    let took = started.elapsed();
    eprintln!("crash with a {limit} s limit against a byte every 2 s: done in {took:?}");
    assert_eq!(done["status"], "done", "{done}");
    // the limit, plus one 2 s read in flight, plus processing on a loaded machine
    assert!(
        took < Duration::from_secs(limit + 10),
        "the crash took {took:?} with a {limit} s limit"
    );
    let ls = module(&done["report"], "basic")["lookups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!ls.is_empty(), "{}", done["report"]);
    for l in &ls {
        assert_eq!(l["result"], "error", "{l}");
        assert!(
            l["message"]
                .as_str()
                .unwrap()
                .contains("time limit ran out"),
            "{l}"
        );
    }
}

/// Issue 34, the Low findings on redirects: a source's redirect within its own origin is
/// followed (the file is fetched); one to another host over plain http, to the cloud
/// metadata address or to a `file://` URL is refused, an error saying which and why, and
/// the target is never asked; a 401 after a redirect is an error, never a miss.
#[test]
fn a_source_s_redirects_are_followed_only_where_safe() {
    let (work, core) = small_core();
    let (id, store) = program_store(&work, &core);

    let (moved, asked) = faulty(Fault::Moved(Some(store)));
    let (_, report) = walk_remote(
        &core,
        &work.path().join("cache-moved"),
        &["--debuginfod", &moved],
    );
    let m = module(&report, "basic");
    assert_eq!(m["status"], "ok", "{m}");
    assert!(lookups(m).iter().all(|(_, r)| r == "fetched"), "{m}");
    assert!(
        asked
            .lock()
            .unwrap()
            .contains(&format!("/moved/buildid/{id}/executable")),
        "{asked:?}"
    );

    let (target, target_asked) = faulty(Fault::NotFound);
    let cases = [
        (format!("{target}/x"), "over plain http"),
        (
            "https://169.254.169.254/latest/meta-data/".to_string(),
            "169.254.169.254 is a link-local address",
        ),
        (
            "https://127.0.0.1:1/x".to_string(),
            "127.0.0.1 is a loopback address",
        ),
        (
            "file:///etc/passwd".to_string(),
            "a file: URL (file:///etc/passwd) is refused: only http and https",
        ),
    ];
    for (i, (to, says)) in cases.iter().enumerate() {
        let (url, _) = faulty(Fault::Redirect(to.clone()));
        let cache = work.path().join(format!("cache-redirect-{i}"));
        let (_, ls) = program_lookups(&core, &cache, &url, &[]);
        assert!(!ls.is_empty(), "{to}");
        for l in &ls {
            assert_eq!(l["result"], "error", "{to}: {l}");
            let message = l["message"].as_str().unwrap();
            assert!(message.contains(says), "{to}: {message:?} lacks {says:?}");
        }
    }
    assert!(target_asked.lock().unwrap().is_empty(), "{target_asked:?}");

    let (denied, _) = faulty(Fault::Moved(None));
    let cache = work.path().join("cache-denied");
    let (_, ls) = program_lookups(&core, &cache, &denied, &[]);
    assert!(!ls.is_empty());
    for l in &ls {
        assert_eq!(l["result"], "error", "{l}");
        let message = l["message"].as_str().unwrap();
        assert!(
            message.contains("HTTP status 401 from") && message.contains("(redirected)"),
            "{message}"
        );
    }
    let misses: Vec<_> = common::files_under(&cache)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".miss-"))
        .collect();
    assert!(
        misses.is_empty(),
        "a 401 is not remembered as a miss: {misses:?}"
    );
}

/// Issue 34, finding 7: a source configured with credentials (`user:password@` and
/// `?token=`) is asked with them, but neither appears in a walk's report, a service's
/// report, its `/metrics` (which takes an admin token when tokens are configured) or its
/// log: everywhere the source is named `http://***@HOST:PORT?token=***`.
#[tokio::test(flavor = "multi_thread")]
async fn source_credentials_are_never_shown() {
    let (work, core) = small_core();
    let (plain, asked) = faulty(Fault::NotFound);
    let host = plain.trim_start_matches("http://").to_string();
    let secret = format!("http://alice:pa55word@{host}?token=hunter2");
    let shown = format!("http://***@{host}?token=***");
    let leaks = |text: &str| text.contains("pa55word") || text.contains("hunter2");

    let (out, report) = walk_remote(
        &core,
        &work.path().join("cache-secret"),
        &["--debuginfod", &secret],
    );
    let text = serde_json::to_string(&report).unwrap();
    assert!(!leaks(&text), "{text}");
    assert!(!leaks(&String::from_utf8_lossy(&out.stderr)));
    let m = module(&report, "basic");
    for l in m["lookups"].as_array().unwrap() {
        assert_eq!(l["source"], shown.as_str(), "{l}");
        assert_eq!(l["result"], "not-found", "{l}");
    }
    // the credentials were sent: the token in the query of each request
    assert!(
        asked
            .lock()
            .unwrap()
            .iter()
            .all(|p| p.starts_with("/buildid/") && p.ends_with("?token=hunter2")),
        "{asked:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let child = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--debuginfod",
            &secret,
            "--token",
            "adm1n:admin",
            "--token",
            "up:ingest",
        ])
        .env("RUST_LOG", "info")
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let (_serve, base) = common::listening(child);
    let c = client();
    let r = c
        .post(format!("{base}/api/v1/crashes"))
        .bearer_auth("up")
        .body(std::fs::read(&core).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = loop {
        let v: Value = c
            .get(format!("{base}/api/v1/crashes/{id}"))
            .bearer_auth("adm1n")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["status"] == "done" || v["status"] == "failed" {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["status"], "done", "{done}");
    assert!(!leaks(&done.to_string()), "{done}");
    let m = module(&done["report"], "basic");
    for l in m["lookups"].as_array().unwrap() {
        assert_eq!(l["source"], shown.as_str(), "{l}");
    }

    let metrics = format!("{base}/metrics");
    assert_eq!(c.get(&metrics).send().await.unwrap().status(), 401);
    let r = c.get(&metrics).bearer_auth("up").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = c.get(&metrics).bearer_auth("adm1n").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(!leaks(&text), "{text}");
    let line =
        format!("postmortem_symbol_lookups_total{{source=\"{shown}\",result=\"not-found\"}}");
    assert!(text.contains(&line), "{line} in:\n{text}");
    let page = c
        .get(format!("{base}/crashes/{id}"))
        .bearer_auth("adm1n")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!leaks(&page), "{page}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&shown),
        "the log names the source:\n{logged}"
    );
    assert!(!leaks(&logged), "{logged}");
}
