//! Symbol files in S3-compatible buckets (`--symbols-bucket s3://BUCKET/PREFIX`), laid
//! out as a debuginfod server (`PREFIX/buildid/ID/executable`, `…/debuginfo`) or a
//! Breakpad symbol store (`PREFIX/NAME/DEBUG_ID/NAME.sym`) or a symbol server
//! (`PREFIX/NAME/ID/NAME`) — any of them, or the one a sources file's `layout` names:
//! where teams keep what their
//! build pipelines produce. A file is streamed to disk under the size cap and checked as
//! an HTTP source's is ([`sources::check`]) before it is stored.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use sources::check::Refused;
use sources::sources_file::Layout;
use tempfile::NamedTempFile;
use tokio::io::AsyncWriteExt;

use crate::store::blobs::s3_store;
use crate::store::StoreError;

/// One bucket and prefix.
pub struct Bucket {
    url: String,
    store: Arc<dyn ObjectStore>,
    max_bytes: u64,
    /// The one layout asked for, if the configuration said (else every layout is).
    layout: Option<Layout>,
}

/// What a bucket answered for one object.
pub enum Answer {
    Found(NamedTempFile),
    NotFound,
    Error(String),
}

impl Bucket {
    /// The bucket at `url` (`s3://BUCKET[/PREFIX]`); files over `max_bytes` are refused.
    pub fn new(url: &str, max_bytes: u64) -> Result<Bucket, StoreError> {
        Ok(Bucket {
            url: url.trim_end_matches('/').to_string(),
            store: s3_store(url)?,
            max_bytes,
            layout: None,
        })
    }

    /// The same bucket, asked only for files of `layout` when it is given.
    pub fn with_layout(mut self, layout: Option<Layout>) -> Bucket {
        self.layout = layout;
        self
    }

    /// Whether files laid out as `layout` are asked of this bucket.
    pub fn holds(&self, layout: Layout) -> bool {
        self.layout.is_none_or(|l| l == layout)
    }

    /// The bucket's URL, as the report names the source.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object at `path` (below the prefix), streamed to a new file in `dir` and
    /// accepted by `check`.
    pub async fn fetch(
        &self,
        path: &str,
        dir: &Path,
        check: impl Fn(&File) -> Result<(), Refused>,
    ) -> Answer {
        let Ok(key) = ObjectPath::parse(path) else {
            return Answer::Error(format!("{path:?} is not an object key"));
        };
        let got = match self.store.get(&key).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Answer::NotFound,
            Err(e) => return Answer::Error(e.to_string()),
        };
        if got.meta.size > self.max_bytes {
            return Answer::Error(format!(
                "the file is larger than the {}-byte cap",
                self.max_bytes
            ));
        }
        let out = match NamedTempFile::new_in(dir) {
            Ok(f) => f,
            Err(e) => return Answer::Error(format!("cannot keep the file: {e}")),
        };
        // written through the runtime's file I/O: a large file does not stall its thread
        let mut writer = match out.reopen() {
            Ok(f) => tokio::fs::File::from_std(f),
            Err(e) => return Answer::Error(format!("cannot keep the file: {e}")),
        };
        let mut stream = got.into_stream();
        let mut total = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return Answer::Error(format!("the body was cut short: {e}")),
            };
            total = total.saturating_add(chunk.len() as u64);
            if total > self.max_bytes {
                return Answer::Error(format!(
                    "the file is larger than the {}-byte cap",
                    self.max_bytes
                ));
            }
            if let Err(e) = writer.write_all(&chunk).await {
                return Answer::Error(format!("cannot keep the file: {e}"));
            }
        }
        if let Err(e) = writer.flush().await {
            return Answer::Error(format!("cannot keep the file: {e}"));
        }
        drop(writer);
        match check(out.as_file()) {
            Ok(()) => Answer::Found(out),
            Err(e) => Answer::Error(format!("refused: {e}")),
        }
    }
}
