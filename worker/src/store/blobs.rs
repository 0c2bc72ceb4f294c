//! Content-addressed blob storage (dumps and binaries) through `object_store`: a local
//! directory by default, `file:///dir` or an S3-compatible bucket (`s3://bucket[/prefix]`)
//! by configuration.
//!
//! A blob's key is `sha256/ab/cd/<hex>` of its bytes, so storing the same bytes twice is
//! one object and a key never names different content. Uploads arrive as staged files
//! ([`super::staged`]) and are copied in bounded pieces (a multipart upload for large
//! files), never held whole in memory. A worker reads a blob where it lies
//! ([`Blobs::open`]): a local blob's file is mapped, so a walk faults in the pages it
//! reads (a core's stacks and notes, a binary's unwind and debug sections), and a remote
//! blob is first copied piece by piece into an unnamed temporary file, which is mapped.

use std::sync::Arc;

use bytes::Bytes;
use engine::binary::FileBytes;
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, PutPayload};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{StagedBlob, StoreError};

/// Size of one piece of a copy into the store: the part size of a multipart upload (S3
/// wants at least 5 MiB) and the largest file stored with a single `put`.
const PART_BYTES: usize = 8 << 20;
/// Parts in flight at once; with the piece being filled, memory stays near
/// `(PART_CONCURRENCY + 1) * PART_BYTES` per upload.
const PART_CONCURRENCY: usize = 2;
/// Read buffer over a staged file.
const READ_BUFFER: usize = 1 << 20;

/// A blob being read piece by piece ([`Blobs::get_stream`]).
pub struct BlobStream {
    /// The blob's size, bytes.
    pub size: u64,
    pub pieces: futures::stream::BoxStream<'static, Result<Bytes, object_store::Error>>,
}

/// The blob store handle: cheap to clone.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    /// The same store when it is a local directory, whose blobs are files a blocking
    /// thread can open itself ([`Blobs::files`]).
    local: Option<Arc<LocalFileSystem>>,
}

/// A local store's blobs as files, opened on the calling thread ([`Blobs::files`]).
#[derive(Debug, Clone)]
pub struct BlobFiles {
    fs: Arc<LocalFileSystem>,
}

impl BlobFiles {
    /// The blob stored under `sha256`, its file mapped (as [`Blobs::open`] maps it), on
    /// the calling thread: it opens and maps a file, so call it where blocking is
    /// allowed, such as the blocking thread that goes on to read the bytes.
    pub fn open(&self, sha256: &str) -> Result<FileBytes, StoreError> {
        let path = self.fs.path_to_filesystem(&key(sha256)?)?;
        let mapped = mapped::Mapped::open(&path).map_err(StoreError::BlobRead)?;
        Ok(FileBytes::new(mapped))
    }
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn key(sha256: &str) -> Result<ObjectPath, StoreError> {
    let valid = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid {
        return Err(StoreError::Corrupt(format!("not a sha256: {sha256:?}")));
    }
    Ok(ObjectPath::from(format!(
        "sha256/{}/{}/{}",
        &sha256[..2],
        &sha256[2..4],
        sha256
    )))
}

/// The objects of an S3-compatible bucket under a prefix, `s3://BUCKET[/PREFIX]`,
/// configured from the standard `AWS_*` environment (see [`Blobs::from_url`]).
pub fn s3_store(url: &str) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let refuse = |reason: String| StoreError::BlobUrl {
        url: url.to_string(),
        reason,
    };
    let parsed = url::Url::parse(url).map_err(|e| refuse(e.to_string()))?;
    if !matches!(parsed.scheme(), "s3" | "s3a") {
        return Err(refuse("not an s3:// URL".into()));
    }
    let bucket = parsed
        .host_str()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| refuse("no bucket: use s3://BUCKET[/PREFIX]".into()))?;
    let s3 = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .map_err(|e| refuse(e.to_string()))?;
    let prefix = parsed.path().trim_matches('/');
    Ok(if prefix.is_empty() {
        Arc::new(s3)
    } else {
        Arc::new(PrefixStore::new(s3, prefix))
    })
}

impl Blobs {
    /// Blobs under a local directory (created if missing).
    pub fn local(dir: &std::path::Path) -> Result<Blobs, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::BlobUrl {
            url: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let fs = Arc::new(LocalFileSystem::new_with_prefix(dir)?);
        Ok(Blobs {
            store: fs.clone(),
            local: Some(fs),
        })
    }

    /// The blobs as files a blocking thread opens itself, when the store is a local
    /// directory (`None` for a bucket). A worker opens, maps and reads a dump on the one
    /// blocking thread that reads it, instead of a blocking thread to open the file and
    /// another to map it, each a hand-off between threads (issue 40).
    pub fn files(&self) -> Option<BlobFiles> {
        self.local.clone().map(|fs| BlobFiles { fs })
    }

    /// Blobs at a URL: `file:///dir`, or `s3://bucket[/prefix]` for Amazon S3 or any
    /// S3-compatible server. S3 is configured from the standard environment variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL` or `AWS_ENDPOINT` for another server, `AWS_ALLOW_HTTP=true` for
    /// a plain-HTTP endpoint); the bucket and key prefix come from the URL.
    pub fn from_url(url: &str) -> Result<Blobs, StoreError> {
        let refuse = |reason: String| StoreError::BlobUrl {
            url: url.to_string(),
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| refuse(e.to_string()))?;
        match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| refuse("not a local path".into()))?;
                Blobs::local(&dir)
            }
            "s3" | "s3a" => Ok(Blobs {
                store: s3_store(url)?,
                local: None,
            }),
            other => Err(refuse(format!(
                "unsupported scheme {other:?}: use file:///DIR or s3://BUCKET[/PREFIX]"
            ))),
        }
    }

    /// Stores `bytes` under their sha256 and returns it. Idempotent.
    pub async fn put(&self, bytes: Bytes) -> Result<String, StoreError> {
        let sha = sha256_hex(&bytes);
        let path = key(&sha)?;
        // Content-addressed: an existing object already holds exactly these bytes.
        if self.store.head(&path).await.is_ok() {
            return Ok(sha);
        }
        self.store
            .put(&path, PutPayload::from(bytes))
            .await
            .map_err(StoreError::BlobWrite)?;
        Ok(sha)
    }

    /// Stores a staged upload under its sha256 and returns it. Idempotent. The file is
    /// copied in [`PART_BYTES`] pieces: one `put` for a small file, a multipart upload
    /// (aborted on failure, so no partial object is left) for a large one.
    pub async fn put_staged(&self, staged: &StagedBlob) -> Result<String, StoreError> {
        self.put_file(staged.path(), staged.sha256()).await
    }

    /// Stores the file at `file`, whose content's sha256 is `sha`, under it and returns
    /// it. Idempotent; copied as [`Blobs::put_staged`] copies.
    pub async fn put_file(&self, file: &std::path::Path, sha: &str) -> Result<String, StoreError> {
        let sha = sha.to_string();
        let path = key(&sha)?;
        if self.store.head(&path).await.is_ok() {
            return Ok(sha);
        }
        let file = tokio::fs::File::open(file)
            .await
            .map_err(StoreError::BlobCopy)?;
        let mut reader = tokio::io::BufReader::with_capacity(READ_BUFFER, file);
        let mut writer = BufWriter::with_capacity(self.store.clone(), path, PART_BYTES)
            .with_max_concurrency(PART_CONCURRENCY);
        if let Err(e) = tokio::io::copy_buf(&mut reader, &mut writer).await {
            if let Err(abort) = writer.abort().await {
                tracing::warn!(error = %abort, "aborting a failed blob upload");
            }
            return Err(StoreError::BlobCopy(e));
        }
        // Not aborted after a failed shutdown: the writer is then shut down, and aborting
        // it panics ("Already shut down"). A failed single `put` leaves nothing, and a
        // failed multipart completion is aborted by the writer itself.
        writer.shutdown().await.map_err(StoreError::BlobCopy)?;
        Ok(sha)
    }

    /// The blob stored under `sha256` as a stream of pieces, with its size: a download
    /// holds one piece at a time, not the whole blob.
    pub async fn get_stream(&self, sha256: &str) -> Result<BlobStream, StoreError> {
        let path = key(sha256)?;
        let got = self.store.get(&path).await?;
        Ok(BlobStream {
            size: got.meta.size,
            pieces: got.into_stream(),
        })
    }

    /// The sha256 of every blob last written before `before_ms` (Unix milliseconds).
    pub async fn written_before(&self, before_ms: i64) -> Result<Vec<String>, StoreError> {
        use futures::TryStreamExt;
        let prefix = ObjectPath::from("sha256");
        let mut list = self.store.list(Some(&prefix));
        let mut out = Vec::new();
        while let Some(meta) = list.try_next().await? {
            let Some(sha) = meta.location.filename() else {
                continue;
            };
            if meta.last_modified.timestamp_millis() < before_ms && key(sha).is_ok() {
                out.push(sha.to_string());
            }
        }
        Ok(out)
    }

    /// Removes the blob stored under `sha256` (gone already is fine).
    pub async fn delete(&self, sha256: &str) -> Result<(), StoreError> {
        match self.store.delete(&key(sha256)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The bytes stored under `sha256`, for a small blob that is wanted whole.
    pub async fn get(&self, sha256: &str) -> Result<Bytes, StoreError> {
        let path = key(sha256)?;
        Ok(self.store.get(&path).await?.bytes().await?)
    }

    /// The blob stored under `sha256` as bytes in place, never copied into memory: a
    /// local blob's file mapped, or a remote blob copied piece by piece into an unnamed
    /// temporary file (under `TMPDIR`; gone when the bytes are dropped, or if the process
    /// is killed) that is mapped in turn.
    pub async fn open(&self, sha256: &str) -> Result<FileBytes, StoreError> {
        use futures::TryStreamExt;
        use object_store::GetResultPayload;
        if let Some(files) = self.files() {
            // opened and mapped on one blocking thread (`object_store`'s `get` takes one
            // to open the file, and the mapping another)
            let sha256 = sha256.to_string();
            return tokio::task::spawn_blocking(move || files.open(&sha256))
                .await
                .map_err(|e| StoreError::BlobRead(std::io::Error::other(e)))?;
        }
        let path = key(sha256)?;
        let got = self.store.get(&path).await?;
        let file = match got.payload {
            GetResultPayload::File(file, _) => file,
            GetResultPayload::Stream(mut pieces) => {
                let spool = tokio::task::spawn_blocking(tempfile::tempfile)
                    .await
                    .map_err(|e| StoreError::BlobRead(std::io::Error::other(e)))?
                    .map_err(StoreError::BlobRead)?;
                let mut spool = tokio::fs::File::from_std(spool);
                while let Some(piece) = pieces.try_next().await? {
                    spool
                        .write_all(&piece)
                        .await
                        .map_err(StoreError::BlobRead)?;
                }
                spool.flush().await.map_err(StoreError::BlobRead)?;
                spool.into_std().await
            }
        };
        let mapped = tokio::task::spawn_blocking(move || mapped::Mapped::of_file(file))
            .await
            .map_err(|e| StoreError::BlobRead(std::io::Error::other(e)))?
            .map_err(StoreError::BlobRead)?;
        Ok(FileBytes::new(mapped))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed unwrap is a failed test
    use super::*;

    /// A local store's blob opened on the calling thread is the bytes stored, as the
    /// async open gives them; a blob never stored, or a key that is no sha256, is an
    /// error, not a panic.
    #[tokio::test]
    async fn a_local_blob_opens_on_the_calling_thread() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::local(dir.path()).unwrap();
        let stored = b"a dump's bytes".repeat(1000);
        let sha = blobs.put(Bytes::from(stored.clone())).await.unwrap();
        assert_eq!(sha, sha256_hex(&stored));
        let files = blobs.files().expect("a local store's blobs are files");
        assert_eq!(&files.open(&sha).unwrap()[..], &stored[..]);
        assert_eq!(&blobs.open(&sha).await.unwrap()[..], &stored[..]);
        assert!(files.open(&"0".repeat(64)).is_err());
        assert!(files.open("../../etc/passwd").is_err());
        let url = url::Url::from_directory_path(dir.path()).unwrap();
        let by_url = Blobs::from_url(url.as_str()).unwrap();
        assert_eq!(
            &by_url.files().unwrap().open(&sha).unwrap()[..],
            &stored[..]
        );
    }
}
