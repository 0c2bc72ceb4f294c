//! Errors of the store: the database or the blob store failed, or a blob is missing.

/// Why a store operation failed. None of these are the client's fault; the API maps
/// them to 500/503 and logs the detail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("blob store error: {0}")]
    Blob(#[from] object_store::Error),
    #[error("unsupported blob URL {url:?}: {reason}")]
    BlobUrl { url: String, reason: String },
    #[error("staging an upload in {path} failed: {source}")]
    Staging {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("copying a staged upload into the blob store failed: {0}")]
    BlobCopy(#[source] std::io::Error),
    #[error("reading a blob in place failed: {0}")]
    BlobRead(#[source] std::io::Error),
    #[error("writing a blob failed: {0}")]
    BlobWrite(#[source] object_store::Error),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether PostgreSQL ended the transaction as a deadlock (SQLSTATE 40P01): two
    /// transactions took the same rows (a batch's crash groups) in opposite orders, and one
    /// was rolled back whole, so running it again is safe.
    pub fn is_deadlock(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(d)) => d.code().as_deref() == Some("40P01"),
            _ => false,
        }
    }

    /// Whether storing data failed (staging an upload or writing a blob: a full disk, a
    /// read-only directory, an unreachable bucket) rather than reading or the database.
    pub fn is_storage_write(&self) -> bool {
        matches!(
            self,
            StoreError::Staging { .. } | StoreError::BlobCopy(_) | StoreError::BlobWrite(_)
        )
    }

    /// A stable kebab-case name for logs.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Database(_) => "database-error",
            StoreError::Migrate(_) => "migration-error",
            StoreError::UnsupportedUrl(_) => "unsupported-database-url",
            StoreError::Blob(_) => "blob-error",
            StoreError::BlobUrl { .. } => "unsupported-blob-url",
            StoreError::Staging { .. } => "staging-error",
            StoreError::BlobCopy(_) | StoreError::BlobRead(_) | StoreError::BlobWrite(_) => {
                "blob-error"
            }
            StoreError::Corrupt(_) => "store-corrupt",
        }
    }
}
