//! A blob being received: an upload is streamed into a temporary file under the data
//! directory while its sha256 is computed, so a large upload never sits in memory, and a
//! rejected one leaves nothing behind (the file is removed when the value is dropped,
//! whatever the reason the upload stopped).
//!
//! The staged file is then checked from disk (magic bytes, headers) and copied into the
//! blob store under its content address by [`super::Blobs::put_staged`].

use std::io::SeekFrom;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tempfile::TempPath;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use engine::dump::compressed::{self, Compression, DecompressError, Limit};

use super::StoreError;

/// Write buffer of a staging file: few, large writes on the blocking pool.
const WRITE_BUFFER: usize = 256 << 10;

/// A staging file untouched for this long belongs to no upload in progress (a live one is
/// written continuously): it was left by a process that was killed mid-upload.
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Where uploads are staged: one directory, created at start.
#[derive(Debug, Clone)]
pub struct Staging {
    dir: PathBuf,
}

impl Staging {
    /// Stages uploads in `dir` (created if missing), removing the staging files that
    /// killed processes left behind (see [`Staging::sweep`]).
    pub fn new(dir: &Path) -> Result<Staging, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Staging {
            path: dir.display().to_string(),
            source: e,
        })?;
        let staging = Staging {
            dir: dir.to_path_buf(),
        };
        let removed = staging.sweep(ABANDONED_AFTER);
        if removed > 0 {
            tracing::info!(removed, dir = %dir.display(), "removed abandoned staging files");
        }
        Ok(staging)
    }

    /// Removes `upload-*` files not modified for `age`; several servers may share the
    /// directory, and their uploads in progress are younger. Returns how many went.
    pub fn sweep(&self, age: std::time::Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let is_upload = entry.file_name().to_string_lossy().starts_with("upload-");
            let old = entry
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .and_then(|m| m.modified().ok())
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|d| d >= age);
            if is_upload && old && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// The staging directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, empty staging file.
    pub fn create(&self) -> Result<StagingWriter, StoreError> {
        let (file, path) = self.temp_file()?;
        Ok(StagingWriter {
            file: tokio::io::BufWriter::with_capacity(
                WRITE_BUFFER,
                tokio::fs::File::from_std(file),
            ),
            path,
            hasher: Sha256::new(),
            size: 0,
        })
    }
}

impl Staging {
    /// `blob` decompressed (it is in `format`) into a new staging file, at most `limit`
    /// bytes of it: a dump uploaded compressed as systems store it (systemd-coredump's
    /// `.zst`), so that what is checked, stored and walked is the dump itself. The inner
    /// `Err` is the upload's fault (corrupt, or larger than `limit`), the outer one the
    /// disk's. Blocking I/O: call it off the async threads.
    pub fn decompressed(
        &self,
        blob: &StagedBlob,
        format: Compression,
        limit: u64,
    ) -> Result<Result<StagedBlob, DecompressError>, StoreError> {
        let (file, path) = self.temp_file()?;
        let mut out = Hashing::new(file);
        let size = match compressed::decompress(format, blob.open()?, &mut out, Limit(limit)) {
            Ok(size) => size,
            Err(DecompressError::Write(e)) => return Err(staging_error(&path, e)),
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(out.finish(path, size)?))
    }
}

impl Staging {
    /// What `reader` gives, in a new staging file (its bounds are the reader's: a file
    /// taken out of an uploaded archive, or a slice of an uploaded file). Blocking I/O:
    /// call it off the async threads. A read error is returned as the reader gave it
    /// (inner), a write error as the disk's (outer).
    pub fn from_reader(
        &self,
        reader: &mut dyn std::io::Read,
    ) -> Result<Result<StagedBlob, std::io::Error>, StoreError> {
        let (file, path) = self.temp_file()?;
        let mut out = Hashing::new(file);
        let mut buf = vec![0u8; 64 << 10];
        let mut size = 0u64;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Ok(Err(e)),
            };
            let chunk = buf.get(..n).unwrap_or_default();
            std::io::Write::write_all(&mut out, chunk).map_err(|e| staging_error(&path, e))?;
            size += n as u64;
        }
        Ok(Ok(out.finish(path, size)?))
    }
}

impl Staging {
    /// A new, empty `upload-*` file in the staging directory (removed when its path is
    /// dropped).
    fn temp_file(&self) -> Result<(std::fs::File, TempPath), StoreError> {
        let (file, path) = tempfile::Builder::new()
            .prefix("upload-")
            .tempfile_in(&self.dir)
            .map_err(|e| StoreError::Staging {
                path: self.dir.display().to_string(),
                source: e,
            })?
            .into_parts();
        Ok((file, path))
    }
}

/// A writer that hashes what it writes.
struct Hashing<W> {
    out: W,
    hasher: Sha256,
}

impl Hashing<std::io::BufWriter<std::fs::File>> {
    /// Hashes what is written into `file`, through a large write buffer.
    fn new(file: std::fs::File) -> Self {
        Hashing {
            out: std::io::BufWriter::with_capacity(WRITE_BUFFER, file),
            hasher: Sha256::new(),
        }
    }

    /// Flushes the file at `path` and names it by its hash: the staged blob of `size`
    /// bytes.
    fn finish(self, path: TempPath, size: u64) -> Result<StagedBlob, StoreError> {
        self.out
            .into_inner()
            .map_err(|e| staging_error(&path, e.into_error()))?;
        Ok(StagedBlob {
            sha256: hex::encode(self.hasher.finalize()),
            size,
            path,
        })
    }
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A staging file being written: bytes go to disk and into the hash.
#[derive(Debug)]
pub struct StagingWriter {
    file: tokio::io::BufWriter<tokio::fs::File>,
    path: TempPath,
    hasher: Sha256,
    size: u64,
}

impl StagingWriter {
    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends `chunk`.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        self.hasher.update(chunk);
        self.size += chunk.len() as u64;
        self.file
            .write_all(chunk)
            .await
            .map_err(|e| staging_error(&self.path, e))
    }

    /// Flushes and closes the file: the staged blob, with its sha256 and size.
    pub async fn finish(mut self) -> Result<StagedBlob, StoreError> {
        self.file
            .flush()
            .await
            .map_err(|e| staging_error(&self.path, e))?;
        Ok(StagedBlob {
            sha256: hex::encode(self.hasher.finalize()),
            size: self.size,
            path: self.path,
        })
    }
}

fn staging_error(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Staging {
        path: path.display().to_string(),
        source,
    }
}

/// A complete staged upload. Dropping it removes the file.
#[derive(Debug)]
pub struct StagedBlob {
    path: TempPath,
    sha256: String,
    size: u64,
}

impl StagedBlob {
    /// Lower-case hex sha256 of the content: its address in the blob store.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the upload is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The file on disk.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file for reading (blocking I/O: call it off the async threads for
    /// anything more than a few headers).
    pub fn open(&self) -> Result<std::fs::File, StoreError> {
        std::fs::File::open(&self.path).map_err(|e| staging_error(&self.path, e))
    }

    /// Up to `n` bytes from `offset` (fewer at the end of the file).
    pub async fn read_at(&self, offset: u64, n: usize) -> Result<Vec<u8>, StoreError> {
        let io = |e| staging_error(&self.path, e);
        let mut file = tokio::fs::File::open(&self.path).await.map_err(io)?;
        file.seek(SeekFrom::Start(offset)).await.map_err(io)?;
        let mut out = Vec::with_capacity(n.min(1 << 20));
        file.take(n as u64)
            .read_to_end(&mut out)
            .await
            .map_err(io)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn staged_file_is_hashed_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::new(&dir.path().join("tmp")).unwrap();
        let mut w = staging.create().unwrap();
        w.write(b"hello ").await.unwrap();
        w.write(b"world").await.unwrap();
        let blob = w.finish().await.unwrap();
        assert_eq!(blob.size(), 11);
        // sha256("hello world") as `printf 'hello world' | sha256sum` prints it.
        assert_eq!(
            blob.sha256(),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(blob.read_at(6, 100).await.unwrap(), b"world");
        assert_eq!(std::fs::read(blob.path()).unwrap(), b"hello world");
        let path = blob.path().to_path_buf();
        assert!(path.exists());
        drop(blob);
        assert!(!path.exists());
        // A writer dropped half-way leaves nothing either.
        let mut w = staging.create().unwrap();
        w.write(b"partial").await.unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(staging.dir()).unwrap().count(), 0);
    }

    /// Files a killed upload left behind go at the next start; a file still being
    /// written (young) and files that are not staging files stay.
    #[tokio::test]
    async fn abandoned_staging_files_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        let staging = Staging::new(&tmp).unwrap();
        let mut live = staging.create().unwrap();
        live.write(b"in progress").await.unwrap();
        let abandoned = tmp.join("upload-left-by-a-killed-server");
        std::fs::write(&abandoned, b"old").unwrap();
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(&abandoned)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        let other = tmp.join("not-a-staging-file");
        std::fs::write(&other, b"x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        let again = Staging::new(&tmp).unwrap();
        assert!(!abandoned.exists(), "the abandoned upload is removed");
        assert!(other.exists(), "only upload-* files are swept");
        assert_eq!(again.sweep(ABANDONED_AFTER), 0);
        let blob = live.finish().await.unwrap();
        assert!(blob.path().exists(), "an upload in progress survives");
    }
}
