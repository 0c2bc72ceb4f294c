//! The real Apple crash reports of the corpus (`apple-reports/`: macOS 12.4 x86_64 and
//! iOS 15.5 arm64, each `.ips` as the OS wrote it, the `.crash` text MacSymbolicator made
//! of it, and `*_symbolicated.*`, MacSymbolicator's output symbolicated with Apple's
//! `atos`), read by postmortem and compared with the `_symbolicated` text, which is read
//! here by a few lines of its own (not by the engine's reader).
//!
//! The apps' dSYMs are not in the corpus, so what is asserted is what is certain without
//! them: every image's load address and UUID; the threads, each one's frame count, and
//! for every frame its image and its address (image base + offset); the exception and the
//! crashed thread; and the names of system frames, which the report itself carries
//! (`_assertionFailure(_:_:file:line:flags:) + 421`) and the symbolicated text repeats.
//! The app frames' names (`main (in App) (main.m:29)`) came from atos with the dSYMs,
//! and are only counted. The reports are then processed by the engine as `postmortem walk`
//! would (no files): the crash is named as Apple names it and the system frames keep the
//! report's names.
//!
//! Read through `POSTMORTEM_CORPUS` only; without it the test says it was skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use engine::dump::apple::{self, AppleReport};

/// One frame line of the symbolicated text: thread, image column, address, the rest.
#[derive(Debug)]
struct RefFrame {
    image: String,
    address: u64,
    rest: String,
}

/// What the `_symbolicated` text says: threads (by number) with their frames, binary
/// images (start, uuid), the exception type line, the crashed thread.
#[derive(Debug, Default)]
struct Reference {
    threads: Vec<Vec<RefFrame>>,
    images: Vec<(u64, String)>,
    exception: String,
    crashed: Option<usize>,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// Reads the symbolicated text: `Thread N…:` lines open a frame list, frame lines are
/// `N  IMAGE  0xADDR REST` (the image column is 30 wide before a tab), `Binary Images:`
/// lines `0xSTART - 0xEND … <uuid> path`.
fn reference(text: &str) -> Reference {
    let mut r = Reference::default();
    let mut thread: Option<usize> = None;
    let mut images = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("Exception Type:") {
            r.exception = v.trim().to_string();
        }
        if let Some(v) = t
            .strip_prefix("Crashed Thread:")
            .or(t.strip_prefix("Triggered by Thread:"))
        {
            r.crashed = v.split_whitespace().next().and_then(|n| n.parse().ok());
        }
        if t == "Binary Images:" {
            images = true;
            continue;
        }
        if images {
            if let (Some(start), Some(open), Some(close)) = (
                t.split_whitespace().next().and_then(hex),
                t.find('<'),
                t.find('>'),
            ) {
                r.images
                    .push((start, t[open + 1..close].replace('-', "").to_lowercase()));
            } else {
                images = false;
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix("Thread ") {
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let after = rest[n.len()..].trim_start();
            if after.starts_with(':') || after.starts_with("Crashed:") {
                let n: usize = n.parse().unwrap();
                while r.threads.len() <= n {
                    r.threads.push(Vec::new());
                }
                thread = Some(n);
                continue;
            }
        }
        if t.is_empty() {
            thread = None;
            continue;
        }
        let Some(n) = thread else { continue };
        let (image_col, tail) = line.split_once('\t').unwrap();
        let image = image_col
            .split_once(char::is_whitespace)
            .unwrap()
            .1
            .trim()
            .to_string();
        let tail = tail.trim();
        let (addr, rest) = tail.split_once(' ').unwrap();
        r.threads[n].push(RefFrame {
            image,
            address: hex(addr).unwrap(),
            rest: rest.to_string(),
        });
    }
    r
}

fn corpus() -> Option<PathBuf> {
    let Some(root) = std::env::var_os("POSTMORTEM_CORPUS") else {
        eprintln!("skipped: POSTMORTEM_CORPUS is not set (the corpus of real Apple crash reports)");
        return None;
    };
    let dir = Path::new(&root).join("apple-reports");
    if !dir.is_dir() {
        eprintln!("skipped: {} is not there", dir.display());
        return None;
    }
    Some(dir)
}

/// Checks a report read by postmortem against the symbolicated text; returns the number
/// of facts checked and of app-frame names left unverifiable.
fn compare(what: &str, got: &AppleReport, r: &Reference) -> (usize, usize) {
    let mut checked = 0;
    let mut unverifiable = 0;
    for (start, uuid) in &r.images {
        if uuid.chars().all(|c| c == '0') {
            continue;
        }
        let image = got.images.iter().find(|i| i.base == *start);
        let image = image.unwrap_or_else(|| panic!("{what}: no image at {start:#x}"));
        let ours = image
            .uuid
            .map(|u| u.iter().map(|b| format!("{b:02x}")).collect::<String>());
        assert_eq!(
            ours.as_deref(),
            Some(uuid.as_str()),
            "{what}: UUID of the image at {start:#x}"
        );
        checked += 2;
    }
    assert_eq!(got.threads.len(), r.threads.len(), "{what}: threads");
    for (n, (t, rt)) in got.threads.iter().zip(&r.threads).enumerate() {
        assert_eq!(t.frames.len(), rt.len(), "{what}: frames of thread {n}");
        for (k, (f, rf)) in t.frames.iter().zip(rt).enumerate() {
            let at = format!("{what}: thread {n} frame {k}");
            assert_eq!(f.address, rf.address, "{at}: address");
            let image = f.image.and_then(|i| got.images.get(i)).expect("an image");
            assert!(
                f.address >= image.base && image.size.is_none_or(|s| f.address - image.base < s),
                "{at}: the address lies in its image"
            );
            // the frame column names the binary (a framework's list line names its bundle)
            assert_eq!(image.name, rf.image, "{at}: image");
            checked += 2;
            match &f.symbol {
                Some(s) => {
                    let expected = match f.symbol_offset {
                        Some(o) => format!("{s} + {o}"),
                        None => s.clone(),
                    };
                    assert_eq!(rf.rest, expected, "{at}: the report's own name");
                    checked += 1;
                }
                None => {
                    assert!(
                        rf.rest.contains(" (in "),
                        "{at}: atos named it: {}",
                        rf.rest
                    );
                    unverifiable += 1;
                }
            }
        }
    }
    let e = got.exception.as_ref().expect("an exception");
    let name = match &e.signal {
        Some(s) => format!("{} ({s})", e.type_name),
        None => e.type_name.clone(),
    };
    assert_eq!(name, r.exception, "{what}: exception");
    assert_eq!(got.crashed, r.crashed, "{what}: crashed thread");
    (checked + 2, unverifiable)
}

/// The report processed without files, as `postmortem walk` would: the crash is named as
/// Apple names it, system frames keep the report's names, every frame has its image.
fn process(what: &str, bytes: &[u8], parsed: &AppleReport, r: &Reference) {
    let report = engine::process::process_dump(
        bytes,
        &engine::process::NoTables,
        &engine::process::ProcessOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let crash = report.crash.as_ref().expect("a crash");
    assert!(
        crash.reason.starts_with(&r.exception),
        "{what}: {}",
        crash.reason
    );
    let crashed = &report.threads[0];
    assert!(crashed.crashed, "{what}");
    let ref_frames = &r.threads[parsed.crashed.unwrap()];
    assert_eq!(crashed.frames.len(), ref_frames.len(), "{what}");
    for (f, rf) in crashed.frames.iter().zip(ref_frames) {
        assert_eq!(f.pc.get(), rf.address, "{what}");
        assert_eq!(f.module.as_deref(), Some(rf.image.as_str()), "{what}");
        if let Some(name) = &f.function {
            assert!(
                rf.rest.starts_with(name.as_str()),
                "{what}: {name} vs {}",
                rf.rest
            );
        }
    }
    assert!(report.signature.is_some(), "{what}: a signature");
}

#[test]
fn the_corpus_apple_reports_read_as_their_symbolicated_versions_say() {
    let Some(dir) = corpus() else { return };
    let mut cases = 0;
    for case in ["single-target-crash", "multi-target-crash", "ios-crash"] {
        let symbolicated = std::fs::read(dir.join(format!("{case}_symbolicated.crash"))).unwrap();
        let r = reference(&String::from_utf8_lossy(&symbolicated));
        for ext in ["ips", "crash"] {
            let what = format!("{case}.{ext}");
            let bytes = std::fs::read(dir.join(format!("{case}.{ext}"))).unwrap();
            let parsed = apple::parse(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
            let (checked, unverifiable) = compare(&what, &parsed, &r);
            println!(
                "{what}: {checked} facts match the symbolicated text; {unverifiable} app frame \
                 names need the apps' dSYMs (not in the corpus)"
            );
            process(&what, &bytes, &parsed, &r);
            cases += 1;
        }
        // the symbolicated text itself is read too (a .crash with atos's names)
        let parsed = apple::parse(&symbolicated).unwrap();
        assert_eq!(parsed.threads.len(), r.threads.len(), "{case}_symbolicated");
        let named = parsed
            .threads
            .iter()
            .flat_map(|t| &t.frames)
            .filter(|f| f.source.is_some());
        assert!(
            named.count() > 0,
            "{case}_symbolicated: atos's file:line read"
        );
    }
    assert_eq!(cases, 6);
}
