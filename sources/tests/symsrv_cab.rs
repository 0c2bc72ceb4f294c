//! A symbol server that keeps its files compressed, as Microsoft's does: only
//! `NAME.pdb/DEBUG_ID/NAME.pd_` and `NAME.exe/CODE_ID/NAME.ex_`, CAB archives made by gcab
//! (Debian `gcab`, MSZIP as `compress.exe` writes them), of an image and its PDB built
//! here with clang and lld (Debian `clang`, `lld`, `gcc-mingw-w64-x86-64` for its libgcc),
//! served by Python's `http.server` (not ours). The plain file is asked for first, then
//! the archive; what comes out is checked and cached as a plain download would be, and a
//! second lookup asks nothing. Archives that are cut short, of another file, of another
//! build, or larger than the cap are errors that say why. The same archives kept in an S3
//! bucket (moto's `moto_server`, as the service's S3 tests start it) are fetched and
//! extracted the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use engine::report::{Lookup, LookupResult, RemoteFile};
use postmortem_testsupport::http_dir::HttpDir;
use sources::{Config, Remote};

fn run(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dir/app.exe` and `dir/app.pdb`, built with clang for mingw-w64, lld writing the PDB.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join("app.c"),
        "int add(int a, int b) { return a + b; }\nint main(void) { return add(1, 2); }\n",
    )
    .unwrap();
    let libgcc = Command::new("x86_64-w64-mingw32-gcc")
        .arg("-print-libgcc-file-name")
        .output()
        .expect("x86_64-w64-mingw32-gcc (gcc-mingw-w64-x86-64: see test.sh)");
    let libgcc = PathBuf::from(String::from_utf8_lossy(&libgcc.stdout).trim());
    run(Command::new("clang")
        .args([
            "--target=x86_64-w64-mingw32",
            "-fuse-ld=lld",
            "-g",
            "-gcodeview",
        ])
        .args(["app.c", "-Wl,--pdb=app.pdb", "-o", "app.exe", "-L"])
        .arg(libgcc.parent().unwrap())
        .current_dir(dir));
    (dir.join("app.exe"), dir.join("app.pdb"))
}

/// The program built by [`build`] in a new work directory: the directory, the image and
/// its PDB, and their code id and debug id.
struct Built {
    work: tempfile::TempDir,
    exe: PathBuf,
    pdb: PathBuf,
    code_id: String,
    debug_id: String,
}

fn built() -> Built {
    let work = tempfile::tempdir().unwrap();
    let build_dir = work.path().join("build");
    std::fs::create_dir(&build_dir).unwrap();
    let (exe, pdb) = build(&build_dir);
    let info = engine::identify::identify(&std::fs::read(&exe).unwrap()).unwrap();
    Built {
        work,
        exe,
        pdb,
        code_id: info.code_id.unwrap(),
        debug_id: info.debug_id.unwrap(),
    }
}

/// `file` compressed by gcab (MSZIP) into `to`, holding the file under its bare name.
fn gcab(file: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    run(Command::new("gcab")
        .args(["-c", "-z", "-n"])
        .arg(to)
        .arg(file.file_name().unwrap())
        .current_dir(file.parent().unwrap()));
}

fn remote(url: &str, cache: &Path, max_bytes: u64) -> Remote {
    let mut config = Config::none();
    config.symbol_server = vec![url.to_string()];
    config.cache_dir = cache.to_path_buf();
    config.max_bytes = max_bytes;
    config.timeout = Duration::from_secs(20);
    Remote::new(&config).unwrap()
}

fn lookup(source: &str, file: RemoteFile, result: LookupResult, message: &str) -> Lookup {
    Lookup {
        source: source.to_string(),
        file,
        result,
        message: Some(message.to_string()),
        until: None,
    }
}

/// Only the compressed forms on the server: the PDB and the image are fetched, extracted,
/// checked and cached; the lookups name the archives' URLs, the same words from the cache;
/// the second lookup (a new walk, the same cache) asks nothing.
/// What a lookup of the PDB and of the image gave when only their archives were at
/// `source`: each says it was extracted from its archive (`archive`, below `source`), and
/// the file kept in `cache` is the original byte for byte.
fn assert_extracted(
    source: &str,
    got: [(&sources::remote::Fetched, &PathBuf, &String); 2],
    cache: &Path,
) {
    let via = |p: &str| format!("extracted from {source}/{p}");
    for ((fetched, original, archive), file) in got
        .into_iter()
        .zip([RemoteFile::Debuginfo, RemoteFile::Executable])
    {
        assert_eq!(
            fetched.lookups,
            [lookup(source, file, LookupResult::Fetched, &via(archive))]
        );
        let (path, from) = fetched.file.clone().expect("a file");
        assert_eq!(from, source);
        assert!(path.starts_with(cache), "{path:?} is kept in the cache");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(original).unwrap()
        );
    }
}

#[test]
fn compressed_pdb_and_image_are_fetched_extracted_and_cached() {
    let Built {
        work,
        exe,
        pdb,
        code_id,
        debug_id,
    } = built();
    let server = work.path().join("server");
    let pd_ = format!("app.pdb/{debug_id}/app.pd_");
    let ex_ = format!("app.exe/{code_id}/app.ex_");
    gcab(&pdb, &server.join(&pd_));
    gcab(&exe, &server.join(&ex_));
    assert!(
        std::fs::metadata(server.join(&pd_)).unwrap().len()
            < std::fs::metadata(&pdb).unwrap().len() / 2,
        "gcab -z compresses"
    );
    let http = HttpDir::serve(&server, work.path().join("http.log"));
    let url = http.url.clone();
    let cache = work.path().join("cache");

    let walk = || {
        let r = remote(&url, &cache, 1 << 30);
        (
            r.pdb("app.pdb", &debug_id, None),
            r.pe_image("app.exe", &code_id, None),
        )
    };
    let (got_pdb, got_exe) = walk();
    assert_extracted(
        &url,
        [(&got_pdb, &pdb, &pd_), (&got_exe, &exe, &ex_)],
        &cache,
    );
    assert_eq!(
        http.asked(),
        [
            format!("/app.pdb/{debug_id}/app.pdb"),
            format!("/{pd_}"),
            format!("/app.exe/{code_id}/app.exe"),
            format!("/{ex_}"),
        ],
        "the plain file first, then the archive"
    );
    // the archives are not kept, only what they hold
    let mut kept = walkdir(&cache);
    kept.sort();
    assert_eq!(
        kept,
        [
            format!("symsrv/app.exe/{code_id}/app.exe"),
            format!("symsrv/app.exe/{code_id}/app.exe.source"),
            format!("symsrv/app.exe/{code_id}/app.exe.via"),
            format!("symsrv/app.pdb/{debug_id}/app.pdb"),
            format!("symsrv/app.pdb/{debug_id}/app.pdb.source"),
            format!("symsrv/app.pdb/{debug_id}/app.pdb.via"),
        ]
    );

    let (again_pdb, again_exe) = walk();
    assert_eq!(again_pdb, got_pdb, "the cache answers as the server did");
    assert_eq!(again_exe, got_exe);
    assert_eq!(http.asked().len(), 4, "asked again: {:?}", http.asked());
}

/// Every file below `root`, relative to it.
fn walkdir(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}

/// Archives that give no usable file: each an `error` lookup whose message names the
/// archive and says why, nothing cached, and no miss remembered (the server is asked again).
#[test]
fn bad_compressed_files_are_errors_that_say_why() {
    let Built {
        work,
        pdb,
        debug_id,
        ..
    } = built();
    let server = work.path().join("server");
    let pdb_len = std::fs::metadata(&pdb).unwrap().len();

    // cut short: half the archive
    let truncated_id = "11111111111111111111111111111111A";
    let good = work.path().join("good.pd_");
    gcab(&pdb, &good);
    let bytes = std::fs::read(&good).unwrap();
    let at = server.join(format!("app.pdb/{truncated_id}/app.pd_"));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(&at, &bytes[..bytes.len() / 2]).unwrap();
    // a good archive of the right PDB, under another debug id: refused by the check
    let other_build = "22222222222222222222222222222222B";
    gcab(&pdb, &server.join(format!("app.pdb/{other_build}/app.pd_")));
    // the right PDB under another name
    let renamed = work.path().join("build/evil.pdb");
    std::fs::copy(&pdb, &renamed).unwrap();
    gcab(
        &renamed,
        &server.join(format!("app.pdb/{debug_id}/app.pd_")),
    );
    let http = HttpDir::serve(&server, work.path().join("http.log"));
    let url = http.url.clone();

    let r = remote(&url, &work.path().join("cache"), 1 << 30);
    let error = |id: &str| {
        let got = r.pdb("app.pdb", id, None);
        assert_eq!(got.file, None);
        let [l] = got.lookups.as_slice() else {
            panic!("one lookup: {:?}", got.lookups)
        };
        assert_eq!(
            (l.source.as_str(), l.file, l.result),
            (url.as_str(), RemoteFile::Debuginfo, LookupResult::Error)
        );
        l.message.clone().unwrap()
    };
    let m = error(truncated_id);
    assert!(
        m.starts_with(&format!("{url}/app.pdb/{truncated_id}/app.pd_: ")),
        "{m}"
    );
    assert!(m.contains("CAB archive"), "{m}");
    assert_eq!(
        error(other_build),
        format!("refused: the file is not a PDB of debug id {other_build} (found {debug_id})")
    );
    assert_eq!(
        error(&debug_id),
        format!(
            "{url}/app.pdb/{debug_id}/app.pd_: the CAB archive holds \"evil.pdb\", not \"app.pdb\""
        )
    );
    // errors are not misses: asked again
    let before = http.asked().len();
    error(truncated_id);
    assert_eq!(http.asked().len(), before + 2, "{:?}", http.asked());

    // larger than the cap once extracted (the archive itself is under it)
    let capped = remote(
        &url,
        &work.path().join("cache-capped"),
        u64::try_from(bytes.len()).unwrap() * 2,
    );
    let got = capped.pdb("app.pdb", other_build, None);
    assert_eq!(got.file, None);
    assert_eq!(
        got.lookups[0].message.as_deref(),
        Some(
            format!(
                "{url}/app.pdb/{other_build}/app.pd_: the CAB archive's file would be {pdb_len} \
                 bytes, over the {}-byte cap",
                bytes.len() * 2
            )
            .as_str()
        )
    );
}

/// A symbol server's layout kept in an S3 bucket (moto), only compressed: the PDB and the
/// image are fetched at presigned URLs, extracted, checked and cached as from an HTTP
/// server; the lookups name the archives by their `s3://` URLs; the second lookup asks the
/// bucket nothing.
#[test]
fn compressed_files_in_a_bucket_are_fetched_and_extracted() {
    let Some(s3) = postmortem_testsupport::moto::Moto::start("symbols") else {
        return;
    };
    let Built {
        work,
        exe,
        pdb,
        code_id,
        debug_id,
    } = built();
    let pd_ = format!("app.pdb/{debug_id}/app.pd_");
    let ex_ = format!("app.exe/{code_id}/app.ex_");
    for (file, key) in [(&pdb, &pd_), (&exe, &ex_)] {
        let archive = work.path().join("cabs").join(key);
        gcab(file, &archive);
        s3.put(&format!("ms/{key}"), &std::fs::read(&archive).unwrap());
    }
    let env = s3.env();
    let var = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
    let bucket = "s3://symbols/ms";
    let cache = work.path().join("cache");
    let walk = || {
        let mut config = Config::none();
        config.buckets = vec![sources::s3::Bucket::from_vars(bucket, var).unwrap()];
        config.cache_dir = cache.clone();
        config.timeout = Duration::from_secs(20);
        let r = Remote::new(&config).unwrap();
        (
            r.pdb("app.pdb", &debug_id, None),
            r.pe_image("app.exe", &code_id, None),
        )
    };
    let (got_pdb, got_exe) = walk();
    assert_extracted(
        bucket,
        [(&got_pdb, &pdb, &pd_), (&got_exe, &exe, &ex_)],
        &cache,
    );
    let asked = s3.gets();
    assert_eq!(
        asked,
        [
            format!("ms/app.pdb/{debug_id}/app.pdb"),
            format!("ms/{pd_}"),
            format!("ms/app.exe/{code_id}/app.exe"),
            format!("ms/{ex_}"),
        ],
        "the plain file first, then the archive"
    );
    let (again_pdb, again_exe) = walk();
    assert_eq!(again_pdb, got_pdb, "the cache answers as the bucket did");
    assert_eq!(again_exe, got_exe);
    assert_eq!(s3.gets(), asked, "nothing asked again");
}
