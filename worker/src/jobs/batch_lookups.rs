//! What one batch's jobs looked up in the database, kept for the batch's later jobs of the
//! same project and modules: the files uploaded for their build-ids and their source
//! bundles (issue 40: "no per-job work that does not depend on the job").
//!
//! A batch's crashes are mostly the same program's: before this, every job asked the
//! database twice before its walk (`binaries::visible_by_build_ids`, then
//! `source_bundles::by_build_ids`), 0.1–0.2 ms each on SQLite and a hand-off to the
//! database's thread each way — on 2 cores, a job's most variable step.
//!
//! What a later job is given is what the database said earlier in the same batch, so a
//! file uploaded meanwhile is seen by the next batch, not this one. Two rules keep that
//! from losing anything:
//! - the files are kept only from a job that found **every** module complete (it records
//!   nothing missing or partial): a job given them finds the same, and a job whose crash
//!   misses a module looks in the database itself, after its claim, as every job did
//!   (the records an upload requeues crashes by are never written from what is kept);
//! - the memory lives as long as the batch ([`crate::jobs::Runner`]'s `process_batch`
//!   makes one per batch), never across batches: a crash requeued by an upload is leased
//!   by a later claim, and its batch looks again.
//!
//! A source bundle uploaded during a batch reaches its crashes as it did before: through
//! the module index the batch's store writes (`store::crash_index`), which the bundle's
//! upload requeues finished crashes by.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::binaries::BinaryRow;
use crate::store::source_bundles::BundleRow;

/// The lookups of one batch, by project and build-ids.
#[derive(Debug, Default)]
pub struct BatchLookups {
    uploads: Mutex<HashMap<String, HashMap<String, Vec<BinaryRow>>>>,
    bundles: Mutex<HashMap<String, HashMap<String, BundleRow>>>,
}

/// The key of `project`'s lookup of `build_ids` (in the dump's order).
pub fn key(project: &str, build_ids: &[&str]) -> String {
    let mut k = String::with_capacity(project.len() + 41 * build_ids.len());
    k.push_str(project);
    for id in build_ids {
        k.push('\n');
        k.push_str(id);
    }
    k
}

impl BatchLookups {
    /// The files a job of this batch found for `key`, every module complete.
    pub fn uploads(&self, key: &str) -> Option<HashMap<String, Vec<BinaryRow>>> {
        self.uploads.lock().ok()?.get(key).cloned()
    }

    /// Keeps the files of `key` for the batch's later jobs: only from a job that found
    /// every module of its crash complete (see the module's doc).
    pub fn keep_uploads(&self, key: String, files: HashMap<String, Vec<BinaryRow>>) {
        if let Ok(mut kept) = self.uploads.lock() {
            kept.insert(key, files);
        }
    }

    /// The source bundles a job of this batch found for `key`.
    pub fn bundles(&self, key: &str) -> Option<HashMap<String, BundleRow>> {
        self.bundles.lock().ok()?.get(key).cloned()
    }

    /// Keeps the source bundles of `key` for the batch's later jobs.
    pub fn keep_bundles(&self, key: String, rows: HashMap<String, BundleRow>) {
        if let Ok(mut kept) = self.bundles.lock() {
            kept.insert(key, rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_is_kept_per_project_and_build_ids() {
        let b = BatchLookups::default();
        assert!(b.uploads(&key("p", &["a", "b"])).is_none());
        let mut files = HashMap::new();
        files.insert("a".to_string(), Vec::new());
        b.keep_uploads(key("p", &["a", "b"]), files);
        assert!(b.uploads(&key("p", &["a", "b"])).is_some());
        // another project, or other modules, is another lookup
        assert!(b.uploads(&key("q", &["a", "b"])).is_none());
        assert!(b.uploads(&key("p", &["a"])).is_none());
        assert!(b.uploads(&key("p", &["ab"])).is_none());
        assert!(b.bundles(&key("p", &["a", "b"])).is_none());
    }
}
