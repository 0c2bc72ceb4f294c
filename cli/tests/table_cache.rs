//! `--table-cache DIR`: whole tables kept between walks. A walk that stores them and every
//! walk that reads them give the report a walk without the cache gives; what is read is
//! really the stored entry (a note planted in it shows up in the report); an entry cut
//! short is rebuilt, not used; a file changed since gets an entry of its own.
//!
//! The dump is the report corpus's x86_64 minidump, walked with its program under
//! `--symbols` and this machine's libc and debug files (the dump's recorded paths and
//! `/usr/lib/debug`): the case of a minidump whose modules are on the machine.

#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    let package = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    Path::new(&package).join("../fixtures/reports")
}

/// The report of `postmortem-walk DUMP --symbols BIN ARGS…` (JSON text), which must succeed;
/// and what it said on stderr.
fn walk(bin: &Path, args: &[&OsStr]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_postmortem-walk"))
        .arg(fixtures().join("dumps/x86_64.dmp"))
        .arg("--symbols")
        .arg(bin)
        .args(args)
        .env_remove("POSTMORTEM_TABLE_CACHE")
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// Every entry directory of the cache (`tables-v1/XX/REST`).
fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(dirs) = fs::read_dir(cache.join("tables-v1")) else {
        return out;
    };
    for d in dirs {
        for e in fs::read_dir(d.unwrap().path()).unwrap() {
            let p = e.unwrap().path();
            if !p.file_name().unwrap().to_string_lossy().starts_with('.') {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn cached_tables_give_the_same_report_and_are_what_is_read() {
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("crash");
    fs::copy(fixtures().join("bin/crash"), &program).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let with_cache = [OsStr::new("--table-cache"), cache.path().as_os_str()];

    let (plain, _) = walk(bin.path(), &[]);
    let report: serde_json::Value = serde_json::from_str(&plain).unwrap();
    let with_files = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["files"].as_array().unwrap().is_empty())
        .count();
    assert!(with_files >= 2, "the program and libc have files: {plain}");

    // the first walk builds and stores one entry per module with files
    let (first, _) = walk(bin.path(), &with_cache);
    assert_eq!(first, plain);
    let stored = entries(cache.path());
    assert_eq!(stored.len(), with_files, "{stored:?}");
    let (second, _) = walk(bin.path(), &with_cache);
    assert_eq!(second, plain);
    assert_eq!(entries(cache.path()), stored, "nothing new stored");

    // what the second walk read is the entries: a note planted in each shows
    for e in &stored {
        let mut notes: serde_json::Value =
            serde_json::from_slice(&fs::read(e.join("notes")).unwrap()).unwrap();
        notes["warnings"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!(["planted", "read from the table cache"]));
        fs::write(e.join("notes"), serde_json::to_vec(&notes).unwrap()).unwrap();
    }
    let (planted, _) = walk(bin.path(), &with_cache);
    let planted: serde_json::Value = serde_json::from_str(&planted).unwrap();
    let read = planted["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "planted")
        .count();
    assert_eq!(read, with_files, "{}", planted["warnings"]);

    // an entry cut short is not used: rebuilt and stored again
    let sizes: Vec<u64> = stored
        .iter()
        .map(|e| fs::metadata(e.join("unwind")).unwrap().len())
        .collect();
    for e in &stored {
        let bytes = fs::read(e.join("unwind")).unwrap();
        fs::write(e.join("unwind"), &bytes[..bytes.len().min(40)]).unwrap();
        fs::write(e.join("symbols"), b"PMSYMTAB").unwrap();
    }
    let (repaired, _) = walk(bin.path(), &with_cache);
    assert_eq!(
        repaired, plain,
        "neither the planted notes nor the cut tables"
    );
    let after: Vec<u64> = stored
        .iter()
        .map(|e| fs::metadata(e.join("unwind")).unwrap().len())
        .collect();
    assert_eq!(after, sizes, "entries rebuilt whole");

    // a file changed since (here: only its modification time) is another entry
    let file = fs::File::options().append(true).open(&program).unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(file);
    let (changed, _) = walk(bin.path(), &with_cache);
    assert_eq!(changed, plain);
    assert_eq!(entries(cache.path()).len(), with_files + 1);
}

/// A cache directory that cannot be written costs the walk nothing but a warning line:
/// the report is the one without the cache.
#[test]
fn a_cache_that_cannot_be_written_is_said_and_the_walk_goes_on() {
    let bin = tempfile::tempdir().unwrap();
    fs::copy(fixtures().join("bin/crash"), bin.path().join("crash")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    fs::write(&not_a_dir, b"a file where the cache would be").unwrap();
    let (plain, _) = walk(bin.path(), &[]);
    let (cached, stderr) = walk(
        bin.path(),
        &[OsStr::new("--table-cache"), not_a_dir.as_os_str()],
    );
    assert_eq!(cached, plain);
    assert!(stderr.contains("table cache"), "{stderr}");
}
