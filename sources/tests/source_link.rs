//! Source-link fetches against a hostile HTTP server (a few lines of `std::net` here, so
//! that it can misbehave on purpose): a file is fetched once and then kept, a 404 is a
//! miss kept too; a body larger than the cap (announced or not), one that trickles in
//! slower than the fetch's time cap, and a redirect to another host (plain http, or
//! https to a loopback name) are refused with an error saying why, each within its
//! bounds; a redirect on the same origin is followed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sources::source_link::{Build, Mapping, SourceLinkLimits, SourceLinks};

const FILE: &[u8] = b"int main(void)\n{\n    return 0;\n}\n";

/// Answers one request for `path` on `stream`, as the case the path names.
fn answer(mut stream: TcpStream, path: &str, port: u16) {
    let head = |s: &mut TcpStream, status: &str, extra: &str| {
        let _ = write!(s, "HTTP/1.1 {status}\r\nConnection: close\r\n{extra}\r\n");
    };
    match path {
        "/raw/c1/ok.c" => {
            head(
                &mut stream,
                "200 OK",
                &format!("Content-Length: {}\r\n", FILE.len()),
            );
            let _ = stream.write_all(FILE);
        }
        "/raw/c1/moved.c" => head(&mut stream, "302 Found", "Location: /raw/c1/ok.c\r\n"),
        "/raw/c1/huge.c" => head(&mut stream, "200 OK", "Content-Length: 100000000000\r\n"),
        "/raw/c1/endless.c" => {
            head(&mut stream, "200 OK", "");
            let chunk = vec![b'a'; 1 << 16];
            // until the client hangs up (64 MiB at most)
            for _ in 0..1024 {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
        "/raw/c1/slow.c" => {
            head(&mut stream, "200 OK", "Content-Length: 1000\r\n");
            for _ in 0..1000 {
                if stream.write_all(b"a").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        "/raw/c1/elsewhere.c" => head(
            &mut stream,
            "302 Found",
            &format!("Location: http://127.0.0.2:{port}/raw/c1/ok.c\r\n"),
        ),
        "/raw/c1/loopback.c" => head(
            &mut stream,
            "301 Moved Permanently",
            &format!("Location: https://localhost:{port}/raw/c1/ok.c\r\n"),
        ),
        _ => head(&mut stream, "404 Not Found", "Content-Length: 0\r\n"),
    }
}

/// The server: its port and the count of requests per path it was asked.
fn serve() -> (u16, Arc<std::sync::Mutex<Vec<String>>>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let (a, n) = (asked.clone(), count.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (a, n) = (a.clone(), n.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                // the headers, up to the blank line
                let mut h = String::new();
                while reader.read_line(&mut h).is_ok_and(|k| k > 2) {
                    h.clear();
                }
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                a.lock().unwrap().push(path.clone());
                n.fetch_add(1, Ordering::SeqCst);
                answer(stream, &path, port);
            });
        }
    });
    (port, asked, count)
}

fn links(port: u16) -> SourceLinks {
    let mapping: Mapping = format!("/build/src/=http://127.0.0.1:{port}/raw/{{commit}}/{{path}}")
        .parse()
        .unwrap();
    let limits = SourceLinkLimits {
        timeout: Duration::from_secs(2),
        max_fetch: Duration::from_secs(2),
        max_bytes: 1 << 20,
        miss_ttl: Duration::from_secs(60),
        cache_bytes: 1 << 20,
    };
    SourceLinks::new(vec![mapping], limits, std::env::temp_dir())
}

const C1: Build<'static> = Build {
    commit: Some("c1"),
    build_id: None,
};

#[test]
fn a_file_is_fetched_once_and_a_miss_is_kept() {
    let (port, asked, count) = serve();
    let l = links(port);
    let got = l.source("/build/src/ok.c", C1, 16 << 20, None).unwrap();
    assert_eq!(got.as_deref(), Some(FILE));
    assert_eq!(
        l.source("/build/src/ok.c", C1, 16 << 20, None)
            .unwrap()
            .as_deref(),
        Some(FILE)
    );
    // the engine's cap below the file's size: no bytes, and nothing asked again
    assert_eq!(l.source("/build/src/ok.c", C1, 4, None).unwrap(), None);
    assert_eq!(
        l.source("/build/src/gone.c", C1, 16 << 20, None).unwrap(),
        None
    );
    assert_eq!(
        l.source("/build/src/gone.c", C1, 16 << 20, None).unwrap(),
        None
    );
    // outside the prefix, or without the commit the template names: nothing asked
    assert_eq!(
        l.source("/elsewhere/ok.c", C1, 16 << 20, None).unwrap(),
        None
    );
    assert_eq!(
        l.source("/build/src/ok.c", Build::default(), 16 << 20, None)
            .unwrap(),
        None
    );
    // a redirect on the same origin is followed
    let moved = l.source("/build/src/moved.c", C1, 16 << 20, None).unwrap();
    assert_eq!(moved.as_deref(), Some(FILE));
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "/raw/c1/ok.c",
            "/raw/c1/gone.c",
            "/raw/c1/moved.c",
            "/raw/c1/ok.c"
        ]
    );
    assert_eq!(count.load(Ordering::SeqCst), 4);
}

#[test]
fn hostile_answers_are_refused_within_bounds() {
    let (port, _, count) = serve();
    let l = links(port);
    let cases = [
        ("huge.c", "larger than"),
        ("endless.c", "larger than"),
        ("slow.c", "took longer than"),
        ("elsewhere.c", "plain http"),
        ("loopback.c", "localhost"),
    ];
    for (file, why) in cases {
        let started = Instant::now();
        let err = l
            .source(&format!("/build/src/{file}"), C1, 16 << 20, None)
            .expect_err(file);
        assert!(err.contains(why), "{file}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{file}: {:?}",
            started.elapsed()
        );
        // kept as a miss: not asked again
        let before = count.load(Ordering::SeqCst);
        assert_eq!(
            l.source(&format!("/build/src/{file}"), C1, 16 << 20, None),
            Ok(None)
        );
        assert_eq!(count.load(Ordering::SeqCst), before, "{file} asked again");
    }
}
