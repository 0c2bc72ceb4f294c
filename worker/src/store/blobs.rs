//! Content-addressed blob storage (dumps and binaries) through `object_store`: a local
//! directory by default, any `object_store` URL by configuration.
//!
//! A blob's key is `sha256/ab/cd/<hex>` of its bytes, so storing the same bytes twice is
//! one object and a key never names different content.

use std::sync::Arc;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use sha2::{Digest, Sha256};

use super::StoreError;

/// The blob store handle: cheap to clone.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
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

impl Blobs {
    /// Blobs under a local directory (created if missing).
    pub fn local(dir: &std::path::Path) -> Result<Blobs, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::BlobUrl {
            url: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let fs = LocalFileSystem::new_with_prefix(dir)?;
        Ok(Blobs {
            store: Arc::new(fs),
        })
    }

    /// Blobs at an `object_store` URL: `file:///dir`. (`s3://…` needs the crate's `aws`
    /// feature, which this build does not enable yet; it is refused with that reason.)
    pub fn from_url(url: &str) -> Result<Blobs, StoreError> {
        let parsed = url::Url::parse(url).map_err(|e| StoreError::BlobUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if parsed.scheme() == "file" {
            let dir = parsed.to_file_path().map_err(|()| StoreError::BlobUrl {
                url: url.to_string(),
                reason: "not a local path".into(),
            })?;
            return Blobs::local(&dir);
        }
        let (store, _prefix) =
            object_store::parse_url(&parsed).map_err(|e| StoreError::BlobUrl {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Blobs {
            store: Arc::from(store),
        })
    }

    /// Stores `bytes` under their sha256 and returns it. Idempotent.
    pub async fn put(&self, bytes: Bytes) -> Result<String, StoreError> {
        let sha = sha256_hex(&bytes);
        let path = key(&sha)?;
        // Content-addressed: an existing object already holds exactly these bytes.
        if self.store.head(&path).await.is_ok() {
            return Ok(sha);
        }
        self.store.put(&path, PutPayload::from(bytes)).await?;
        Ok(sha)
    }

    /// The bytes stored under `sha256`.
    pub async fn get(&self, sha256: &str) -> Result<Bytes, StoreError> {
        let path = key(sha256)?;
        Ok(self.store.get(&path).await?.bytes().await?)
    }
}
