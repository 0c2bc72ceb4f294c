//! A debuginfod server's `buildid/ID/source/PATH` route asked for a frame's source file
//! ([`sources::Remote::source`], issue 42), against a hostile server of a few lines of
//! `std::net` here: a file is fetched once and then kept; a body announced at 100 GB
//! and an endless one are refused within the size the caller asks (not the server's cap
//! for debug files, 4 GiB: the endless body stops being read past it); a path that is
//! not absolute or has a `.` or `..` component is never asked.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ID: &str = "0123456789abcdef0123456789abcdef01234567";
const FILE: &[u8] = b"int main(void)\n{\n    return 0;\n}\n";

/// What the server was asked, and how many body bytes it wrote.
#[derive(Default)]
struct Seen {
    asked: Mutex<Vec<String>>,
    written: AtomicU64,
}

fn answer(mut stream: TcpStream, path: &str, seen: &Seen) {
    let head = |s: &mut TcpStream, status: &str, extra: &str| {
        let _ = write!(s, "HTTP/1.1 {status}\r\nConnection: close\r\n{extra}\r\n");
    };
    let file = path
        .strip_prefix(&format!("/buildid/{ID}/source"))
        .unwrap_or_default();
    match file {
        "/src/ok.c" => {
            head(
                &mut stream,
                "200 OK",
                &format!("Content-Length: {}\r\n", FILE.len()),
            );
            let _ = stream.write_all(FILE);
        }
        "/src/huge.c" => head(&mut stream, "200 OK", "Content-Length: 100000000000\r\n"),
        "/src/endless.c" => {
            head(&mut stream, "200 OK", "");
            let chunk = vec![b'a'; 1 << 16];
            // until the client hangs up (64 MiB at most)
            for _ in 0..1024 {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
                seen.written.fetch_add(1 << 16, Ordering::SeqCst);
            }
        }
        _ => head(&mut stream, "404 Not Found", "Content-Length: 0\r\n"),
    }
}

fn serve() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut h = String::new();
                while reader.read_line(&mut h).is_ok_and(|k| k > 2) {
                    h.clear();
                }
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                s.asked.lock().unwrap().push(path.clone());
                answer(stream, &path, &s);
            });
        }
    });
    (format!("http://127.0.0.1:{port}"), seen)
}

fn remote(url: &str, cache: &std::path::Path) -> sources::Remote {
    let mut config = sources::config::Config::none();
    config.debuginfod = vec![url.to_string()];
    config.cache_dir = cache.to_path_buf();
    config.timeout = Duration::from_secs(2);
    config.max_fetch = Duration::from_secs(5);
    sources::Remote::new(&config).unwrap()
}

#[test]
fn a_source_is_fetched_once_within_the_asked_size() {
    let (url, seen) = serve();
    let cache = tempfile::tempdir().unwrap();
    let r = remote(&url, cache.path());
    assert_eq!(
        r.source(ID, "/src/ok.c", 1 << 20, None).as_deref(),
        Some(FILE)
    );
    assert_eq!(
        r.source(ID, "/src/ok.c", 1 << 20, None).as_deref(),
        Some(FILE)
    );
    // a miss is remembered too
    assert_eq!(r.source(ID, "/src/gone.c", 1 << 20, None), None);
    assert_eq!(r.source(ID, "/src/gone.c", 1 << 20, None), None);
    assert_eq!(
        *seen.asked.lock().unwrap(),
        [
            format!("/buildid/{ID}/source/src/ok.c"),
            format!("/buildid/{ID}/source/src/gone.c")
        ]
    );
}

#[test]
fn hostile_sources_are_refused_within_bounds() {
    let (url, seen) = serve();
    let cache = tempfile::tempdir().unwrap();
    let r = remote(&url, cache.path());
    for file in ["/src/huge.c", "/src/endless.c"] {
        let started = Instant::now();
        assert_eq!(r.source(ID, file, 1 << 20, None), None, "{file}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{file}: {:?}",
            started.elapsed()
        );
    }
    // the endless body was read up to the 1 MiB asked (and what the sockets buffer), not
    // to the server's 4 GiB cap for debug files: it stopped writing long before 64 MiB
    let written = seen.written.load(Ordering::SeqCst);
    assert!(written < 16 << 20, "the server wrote {written} bytes");
    // nothing outside what the debug information names is asked
    let before = seen.asked.lock().unwrap().len();
    for path in [
        "/src/../../etc/passwd",
        "/src/./ok.c",
        "src/ok.c",
        "",
        "/src/..",
    ] {
        assert_eq!(r.source(ID, path, 1 << 20, None), None, "{path}");
    }
    assert_eq!(seen.asked.lock().unwrap().len(), before);
    // nor for a build-id that is not one
    assert_eq!(r.source("../../x", "/src/ok.c", 1 << 20, None), None);
    assert_eq!(seen.asked.lock().unwrap().len(), before);
}
