//! The in-memory tables cache: moka, weighted by bytes, in front of the `tables` rows.
//!
//! Keyed by ([`TableKey`], the files' digest, table kind, format version) like the
//! database, so a table of an older format is never served after a version bump, nor a
//! table of files another project uploaded. Hits, misses and tables built are
//! counted for `/metrics`. Beside the tables it keeps each build-id's main binary (its
//! code bytes let the stack scan check call sites, as `postmortem walk` does), under the
//! same byte budget (weighed by its length, though it is held mapped: the pages a stack
//! scan touched are all it costs in memory).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use engine::binary::FileBytes;
use engine::resolve::TableKey;

/// Which table of a build-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableKind {
    Unwind,
    Symbols,
    /// The warnings the build met (JSON), replayed with the tables.
    Warnings,
}

impl TableKind {
    /// The name stored in the database (`unwind`, `symbols`, `warnings`).
    pub fn as_str(self) -> &'static str {
        match self {
            TableKind::Unwind => "unwind",
            TableKind::Symbols => "symbols",
            TableKind::Warnings => "warnings",
        }
    }
}

/// A cache key: one kind of table, in one format version, of the files a
/// [`TableKey`] names (`files`: which files those are, a digest of their sha256s, since
/// two projects may see different files of one key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub table: TableKey,
    pub files: String,
    pub kind: TableKind,
    pub version: u32,
}

/// A key's weight in the cache: about its stored form's length.
fn key_len(k: &TableKey) -> usize {
    match k {
        TableKey::BuildId(s)
        | TableKey::Breakpad(s)
        | TableKey::CodeId(s)
        | TableKey::Pdb(s)
        | TableKey::Path(s) => s.len() + 10,
    }
}

/// Counters, read by `/metrics`.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Tables built from binaries (not found in cache or database).
    pub built: AtomicU64,
}

/// The shared tables cache. Cheap to clone.
#[derive(Clone)]
pub struct TablesCache {
    inner: moka::future::Cache<CacheKey, Arc<[u8]>>,
    /// A build's main (non-debug) file: its sha256 → its bytes (which never change).
    code: moka::future::Cache<String, FileBytes>,
    stats: Arc<CacheStats>,
}

impl std::fmt::Debug for TablesCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TablesCache")
            .field("entries", &self.inner.entry_count())
            .field("bytes", &self.inner.weighted_size())
            .finish()
    }
}

impl TablesCache {
    /// A cache holding at most `max_bytes` of table bytes.
    pub fn new(max_bytes: u64) -> TablesCache {
        let inner = moka::future::Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|k: &CacheKey, v: &Arc<[u8]>| {
                u32::try_from(v.len() + key_len(&k.table) + k.files.len()).unwrap_or(u32::MAX)
            })
            .support_invalidation_closures()
            .build();
        // Binaries are few and large; they get a quarter of the budget.
        let code = moka::future::Cache::builder()
            .max_capacity(max_bytes / 4)
            .weigher(|k: &String, v: &FileBytes| {
                u32::try_from(v.len() + k.len()).unwrap_or(u32::MAX)
            })
            .build();
        TablesCache {
            inner,
            code,
            stats: Arc::new(CacheStats::default()),
        }
    }

    /// The cached bytes, counting a hit or a miss.
    pub async fn get(&self, key: &CacheKey) -> Option<Arc<[u8]>> {
        let got = self.inner.get(key).await;
        let counter = if got.is_some() {
            &self.stats.hits
        } else {
            &self.stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        got
    }

    /// Caches `bytes` under `key`.
    pub async fn insert(&self, key: CacheKey, bytes: Arc<[u8]>) {
        self.inner.insert(key, bytes).await;
    }

    /// The cached main binary of a build, by its sha256.
    pub async fn code(&self, sha256: &str) -> Option<FileBytes> {
        self.code.get(sha256).await
    }

    /// Caches the main binary of a build, by its sha256.
    pub async fn insert_code(&self, sha256: &str, bytes: FileBytes) {
        self.code.insert(sha256.to_string(), bytes).await;
    }

    /// Forgets every table under `key`, of any files (a new file for it arrived).
    pub fn invalidate(&self, key: &TableKey) {
        // Only fails when closures were not enabled on the builder, which `new` does.
        let key = key.clone();
        let _ = self.inner.invalidate_entries_if(move |k, _| k.table == key);
    }

    /// The counters.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Bytes currently held (after pending maintenance).
    pub async fn weighted_bytes(&self) -> u64 {
        self.inner.run_pending_tasks().await;
        self.inner.weighted_size()
    }
}
