//! Fetched files and misses kept on disk, so a second walk of a dump asks no server:
//! `ROOT/buildid/ID/FILE` (FILE is `executable` or `debuginfo`) with `FILE.source` naming
//! the server it came from, and `FILE.miss-HASH` per server that did not have it (its
//! modification time says when it was asked). Files appear whole or not at all: written
//! beside their final name and renamed into place, after their build-id was checked.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use engine::report::RemoteFile;
use tempfile::NamedTempFile;

/// Longest build-id accepted as a directory name (hex digits): a SHA-512 would be 128.
const MAX_ID_CHARS: usize = 128;

/// The cache under one root directory.
pub struct DiskCache {
    root: PathBuf,
}

impl DiskCache {
    pub fn new(root: PathBuf) -> DiskCache {
        DiskCache { root }
    }

    /// The directory of build `id`, if `id` is a build-id (lower-case hex, so it cannot
    /// name anything outside the cache).
    fn dir(&self, id: &str) -> Option<PathBuf> {
        let ok = (2..=MAX_ID_CHARS).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| self.root.join("buildid").join(id))
    }

    /// The kept file `file` of build `id` and the server it came from.
    pub fn get(&self, id: &str, file: RemoteFile) -> Option<(PathBuf, String)> {
        let dir = self.dir(id)?;
        let path = dir.join(file.as_str());
        if !path.is_file() {
            return None;
        }
        let source = fs::read_to_string(dir.join(format!("{}.source", file.as_str())))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "cache".to_string());
        Some((path, source))
    }

    /// A directory to download build `id`'s files into (created), on the cache's file
    /// system so that keeping a file is a rename.
    pub fn download_dir(&self, id: &str) -> io::Result<PathBuf> {
        let dir = self
            .dir(id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a build-id"))?;
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Keeps a checked download as build `id`'s `file`, fetched from `source`.
    pub fn put(
        &self,
        id: &str,
        file: RemoteFile,
        downloaded: NamedTempFile,
        source: &str,
    ) -> io::Result<PathBuf> {
        let dir = self.download_dir(id)?;
        fs::write(dir.join(format!("{}.source", file.as_str())), source)?;
        let path = dir.join(file.as_str());
        downloaded.persist(&path).map_err(|e| e.error)?;
        Ok(path)
    }

    /// How long ago `source` said it does not have build `id`'s `file`, if it did.
    pub fn miss_age(&self, id: &str, file: RemoteFile, source: &str) -> Option<Duration> {
        let marker = self.miss_marker(id, file, source)?;
        let when = fs::metadata(marker).ok()?.modified().ok()?;
        Some(SystemTime::now().duration_since(when).unwrap_or_default())
    }

    /// Remembers that `source` does not have build `id`'s `file` (from now).
    pub fn put_miss(&self, id: &str, file: RemoteFile, source: &str) -> io::Result<()> {
        self.download_dir(id)?;
        let marker = self
            .miss_marker(id, file, source)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a build-id"))?;
        fs::write(marker, source)
    }

    fn miss_marker(&self, id: &str, file: RemoteFile, source: &str) -> Option<PathBuf> {
        Some(
            self.dir(id)?
                .join(format!("{}.miss-{:016x}", file.as_str(), fnv1a(source))),
        )
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
    fn only_build_ids_name_directories() {
        let c = DiskCache::new(PathBuf::from("/c"));
        assert_eq!(
            c.dir("00ff"),
            Some(PathBuf::from("/c/buildid/00ff")),
            "hex is a build-id"
        );
        for bad in ["", "0", "../etc", "00FF", "0/1", &"0".repeat(130)] {
            assert_eq!(c.dir(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn misses_are_per_source_and_files_keep_their_source() {
        let root = tempfile::tempdir().expect("temporary directory");
        let c = DiskCache::new(root.path().to_path_buf());
        let (a, b) = ("http://a", "http://b");
        assert_eq!(c.miss_age("abcd", RemoteFile::Debuginfo, a), None);
        c.put_miss("abcd", RemoteFile::Debuginfo, a)
            .expect("miss kept");
        assert!(c.miss_age("abcd", RemoteFile::Debuginfo, a).is_some());
        assert_eq!(c.miss_age("abcd", RemoteFile::Debuginfo, b), None);
        assert_eq!(c.miss_age("abcd", RemoteFile::Executable, a), None);

        let dir = c.download_dir("abcd").expect("directory");
        let mut t = NamedTempFile::new_in(&dir).expect("temporary file");
        io::Write::write_all(&mut t, b"bytes").expect("write");
        let kept = c.put("abcd", RemoteFile::Executable, t, b).expect("kept");
        assert_eq!(
            c.get("abcd", RemoteFile::Executable),
            Some((kept.clone(), b.to_string()))
        );
        assert_eq!(fs::read(kept).expect("read"), b"bytes");
        assert_eq!(c.get("abcd", RemoteFile::Debuginfo), None);
    }
}
