//! Fetched files and misses kept on disk, so a second walk of a dump asks no server. A
//! file has a place ([`Entry`]): `ROOT/buildid/ID/FILE` (FILE is `executable` or
//! `debuginfo`) for a build's files, `ROOT/breakpad/NAME/DEBUG_ID/NAME.sym` for a `.sym`
//! file (the symbol store layout), `ROOT/symsrv/NAME/ID/NAME` for a symbol server's.
//! Beside it, `FILE.source` names the server it came from, `FILE.via` how, when that needs
//! saying (extracted from a symbol server's compressed `NAME.pd_`), and `FILE.miss-HASH` (one per server that did not have it; its modification time says
//! when it was asked). Files appear whole or not at all: written beside their final name
//! and renamed into place, after they were checked.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tempfile::NamedTempFile;

/// Longest build-id accepted as a directory name (hex digits): a SHA-512 would be 128.
const MAX_ID_CHARS: usize = 128;

/// Where one file is kept, relative to the cache's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    dir: PathBuf,
    file: String,
    /// What is asked: `executable`, `debuginfo`, `source`, `sym` or `symsrv`.
    kind: String,
    /// Which one, in its layout: a build-id, a store path, `NAME/ID`.
    id: String,
}

impl Entry {
    /// File `file` (`executable`, `debuginfo`) of build `id`, if `id` is a build-id
    /// (lower-case hex, so it cannot name anything outside the cache).
    pub fn build(id: &str, file: &str) -> Option<Entry> {
        let ok = (2..=MAX_ID_CHARS).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Entry {
            dir: Path::new("buildid").join(id),
            file: file.to_string(),
            kind: file.to_string(),
            id: id.to_string(),
        })
    }

    /// Source file `path` (as the debug information records it) of build `id`, kept in
    /// the build's directory under a stable 64-bit digest of the path (a path may be
    /// longer than a file name may be, and may hold anything): `buildid/ID/source-HEX`.
    pub fn source(id: &str, path: &str) -> Option<Entry> {
        let build = Entry::build(id, "source")?;
        // FNV-1a: stable across releases, unlike the standard library's hasher
        let digest = path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Some(Entry {
            file: format!("source-{digest:016x}"),
            kind: "source".to_string(),
            id: format!("{id}:{path}"),
            ..build
        })
    }

    /// The `.sym` file at `rel`, a symbol store path `NAME/DEBUG_ID/NAME.sym`
    /// (`engine::dump::Module::breakpad_sym_path`): three plain components.
    pub fn sym(rel: &str) -> Option<Entry> {
        let parts: Vec<&str> = rel.split('/').collect();
        let plain = |p: &str| {
            !p.is_empty() && p != "." && p != ".." && !p.contains(['\\', '\0']) && p.len() <= 255
        };
        match parts.as_slice() {
            [name, id, file] if [name, id, file].iter().all(|p| plain(p)) => Some(Entry {
                dir: Path::new("breakpad").join(name).join(id),
                file: (*file).to_string(),
                kind: "sym".to_string(),
                id: rel.to_string(),
            }),
            _ => None,
        }
    }

    /// File `name` of id `id` in a symbol server's layout (`NAME/ID/NAME`: a Windows
    /// image by its code id, a PDB by its debug id): kept at `symsrv/NAME/ID/NAME`. The
    /// name must be one plain path component and the id hex digits.
    pub fn symsrv(name: &str, id: &str) -> Option<Entry> {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0'])
            && name.len() <= 255;
        let hex =
            (2..=MAX_ID_CHARS).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
        (plain && hex).then(|| Entry {
            dir: Path::new("symsrv").join(name).join(id),
            file: name.to_string(),
            kind: "symsrv".to_string(),
            id: format!("{name}/{id}"),
        })
    }

    /// What is asked: `executable`, `debuginfo`, `source`, `sym` or `symsrv`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Which file of its kind: a build-id, a store path (`NAME/DEBUG_ID/NAME.sym`),
    /// `NAME/ID`.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn with(&self, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}{suffix}", self.file))
    }
}

/// The cache under one root directory.
pub struct DiskCache {
    root: PathBuf,
}

impl DiskCache {
    pub fn new(root: PathBuf) -> DiskCache {
        DiskCache { root }
    }

    /// How the kept file of `entry` came (`FILE.via`), when that was said.
    pub fn via(&self, entry: &Entry) -> Option<String> {
        fs::read_to_string(self.root.join(entry.with(".via")))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// The kept file of `entry` and the server it came from.
    pub fn get(&self, entry: &Entry) -> Option<(PathBuf, String)> {
        let path = self.root.join(entry.with(""));
        if !path.is_file() {
            return None;
        }
        let source = fs::read_to_string(self.root.join(entry.with(".source")))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "cache".to_string());
        Some((path, source))
    }

    /// The directory `entry` is downloaded into (created), on the cache's file system so
    /// that keeping a file is a rename.
    pub fn download_dir(&self, entry: &Entry) -> io::Result<PathBuf> {
        let dir = self.root.join(&entry.dir);
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Keeps a checked download as `entry`, fetched from `source` (`via`: how, when that
    /// needs saying).
    pub fn put(
        &self,
        entry: &Entry,
        downloaded: NamedTempFile,
        source: &str,
        via: Option<&str>,
    ) -> io::Result<PathBuf> {
        self.download_dir(entry)?;
        fs::write(self.root.join(entry.with(".source")), source)?;
        let via_path = self.root.join(entry.with(".via"));
        match via {
            Some(v) => fs::write(via_path, v)?,
            None => match fs::remove_file(via_path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        let path = self.root.join(entry.with(""));
        downloaded.persist(&path).map_err(|e| e.error)?;
        Ok(path)
    }

    /// When `source` said it does not have `entry` (its marker's modification time), if
    /// it did.
    pub fn miss_recorded(&self, entry: &Entry, source: &str) -> Option<SystemTime> {
        fs::metadata(self.miss_marker(entry, source))
            .ok()?
            .modified()
            .ok()
    }

    /// Remembers that `source` does not have `entry` (from now); returns when that was
    /// recorded, as [`DiskCache::miss_recorded`] will say it.
    pub fn put_miss(&self, entry: &Entry, source: &str) -> io::Result<SystemTime> {
        self.download_dir(entry)?;
        let marker = self.miss_marker(entry, source);
        fs::write(&marker, source)?;
        fs::metadata(&marker)?.modified()
    }

    fn miss_marker(&self, entry: &Entry, source: &str) -> PathBuf {
        self.root
            .join(entry.with(&format!(".miss-{:016x}", fnv1a(source))))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// A stable short name for a source's URL in a file name (FNV-1a, 64 bits).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_kept_under_its_build_by_a_digest_of_its_path() {
        let a = Entry::source("00ff", "/src/a.c").map(|e| e.with(""));
        let b = Entry::source("00ff", "/src/../../etc/passwd").map(|e| e.with(""));
        let fnv = |s: &str| {
            s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        // FNV-1a's published test vector: "a" → af63dc4c8601ec8c
        assert_eq!(fnv("a"), 0xaf63_dc4c_8601_ec8c);
        let at = |path: &str| PathBuf::from(format!("buildid/00ff/source-{:016x}", fnv(path)));
        assert_eq!(a, Some(at("/src/a.c")));
        assert_eq!(b, Some(at("/src/../../etc/passwd")));
        assert_ne!(a, b);
        assert_eq!(Entry::source("../x", "/src/a.c"), None);
    }

    #[test]
    fn entries_stay_inside_the_cache() {
        assert_eq!(
            Entry::build("00ff", "debuginfo").map(|e| e.with("")),
            Some(PathBuf::from("buildid/00ff/debuginfo"))
        );
        for bad in ["", "0", "../etc", "00FF", "0/1", &"0".repeat(130)] {
            assert_eq!(Entry::build(bad, "executable"), None, "{bad:?}");
        }
        assert_eq!(
            Entry::sym("libc.so.6/ABC0/libc.so.6.sym").map(|e| e.with("")),
            Some(PathBuf::from("breakpad/libc.so.6/ABC0/libc.so.6.sym"))
        );
        for bad in [
            "a/b",
            "a/b/c/d",
            "../ID/x.sym",
            "a//x.sym",
            "a\\..\\b/ID/x.sym",
        ] {
            assert_eq!(Entry::sym(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn misses_are_per_source_and_files_keep_their_source() {
        let root = tempfile::tempdir().expect("temporary directory");
        let c = DiskCache::new(root.path().to_path_buf());
        let (a, b) = ("http://a", "http://b");
        let debuginfo = Entry::build("abcd", "debuginfo").expect("a build-id");
        let executable = Entry::build("abcd", "executable").expect("a build-id");
        assert_eq!(c.miss_recorded(&debuginfo, a), None);
        let when = c.put_miss(&debuginfo, a).expect("miss kept");
        assert_eq!(c.miss_recorded(&debuginfo, a), Some(when));
        assert_eq!(c.miss_recorded(&debuginfo, b), None);
        assert_eq!(c.miss_recorded(&executable, a), None);

        let dir = c.download_dir(&executable).expect("directory");
        let mut t = NamedTempFile::new_in(&dir).expect("temporary file");
        io::Write::write_all(&mut t, b"bytes").expect("write");
        let kept = c.put(&executable, t, b, None).expect("kept");
        assert_eq!(c.get(&executable), Some((kept.clone(), b.to_string())));
        assert_eq!(c.via(&executable), None);
        assert_eq!(c.get(&debuginfo), None);
        let mut t = NamedTempFile::new_in(&dir).expect("temporary file");
        io::Write::write_all(&mut t, b"bytes").expect("write");
        c.put(&debuginfo, t, a, Some("extracted")).expect("kept");
        assert_eq!(c.via(&debuginfo).as_deref(), Some("extracted"));
        assert_eq!(fs::read(kept).expect("read"), b"bytes");
    }
}
