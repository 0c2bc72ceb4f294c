//! `postmortem bench inflate FILE`, the command behind docs/performance.md's floor of a one-shot
//! walk: it must list exactly the compressed sections of a file, with their sizes as the
//! section headers give them (compared with `readelf`'s), and say so when there are none.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::process::Command;

use crate::common;
use common::bin;

fn run(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// (name, uncompressed size) of each compressed section of `file`: the sections `readelf
/// -S -W` flags `C`, each with its size in a copy inflated by `objcopy
/// --decompress-debug-sections`.
fn compressed_sections(dir: &std::path::Path, file: &std::path::Path) -> Vec<(String, u64)> {
    let flags = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(file)
        .output()
        .unwrap();
    let listing = String::from_utf8(flags.stdout).unwrap();
    let names: Vec<String> = listing
        .lines()
        .filter_map(|l| {
            let l = l.split_once(']')?.1;
            let cols: Vec<&str> = l.split_whitespace().collect();
            // Name Type Address Off Size ES Flg Lk Inf Al
            (cols.len() >= 10 && cols[6].contains('C')).then(|| cols[0].to_string())
        })
        .collect();
    let plain = dir.join("plain");
    let ok = Command::new("objcopy")
        .arg("--decompress-debug-sections")
        .arg(file)
        .arg(&plain)
        .status()
        .unwrap();
    assert!(ok.success());
    let sizes = String::from_utf8(
        Command::new("readelf")
            .args(["-S", "-W"])
            .arg(&plain)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    names
        .into_iter()
        .map(|n| {
            let size = sizes
                .lines()
                .find_map(|l| {
                    let cols: Vec<&str> = l.split_once(']')?.1.split_whitespace().collect();
                    (cols.first() == Some(&n.as_str()))
                        .then(|| u64::from_str_radix(cols[4], 16).unwrap())
                })
                .unwrap();
            (n, size)
        })
        .collect()
}

#[test]
fn bench_inflate_lists_each_compressed_section_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(
        &src,
        "int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n",
    )
    .unwrap();
    let exe = dir.path().join("p");
    let ok = Command::new("gcc")
        .args(["-g", "-O2", "-gz=zlib", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let want = compressed_sections(dir.path(), &exe);
    assert!(want.iter().any(|(n, _)| n == ".debug_info"), "{want:?}");
    let out = run(&["bench", "inflate", exe.to_str().unwrap(), "--runs", "2"]);
    let got: Vec<(String, u64)> = out
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(": ")?;
            let size = rest.split(" -> ").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((name.to_string(), size))
        })
        .collect();
    assert_eq!(got, want, "{out}");
    assert!(out.lines().last().unwrap().starts_with("all: "), "{out}");

    // the same program without compression: nothing to inflate
    let plain = dir.path().join("plain");
    let out = run(&["bench", "inflate", plain.to_str().unwrap(), "--runs", "1"]);
    assert_eq!(out.trim(), "no compressed sections");
}
