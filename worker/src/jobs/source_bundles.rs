//! Source context for the service's reports: the source bundles uploaded for the
//! build-ids of a crash's modules (`postmortem upload --include-sources`), handed to the
//! engine as its [`SourceProvider`]. A crash reads its project's bundles and the shared
//! ones, never another project's (`store::source_bundles::by_build_ids`).
//!
//! The bundles are looked up in one query and their blobs opened in place (a local blob
//! mapped, a remote one copied to a temporary file and mapped: never read into memory
//! whole); each is opened as a zip — its directory and manifest checked again, it is
//! untrusted bytes — only when a frame of its build-id asks for a file, on the engine's
//! blocking thread. A crash uses at most [`MAX_BUNDLES_PER_CRASH`] bundles (the first
//! modules' in the dump's order, the main executable first); the engine bounds the rest
//! (files asked, bytes of lines, one file inflated at a time, each at most 16 MiB:
//! `engine::report::source_context`, docs/limits.md).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use engine::binary::FileBytes;
use engine::dump::Module;
use engine::report::source_context::{SourceProvider, SourceRequest};
use engine::source_bundle::{BundleLimits, SourceBundle};

use super::batch_lookups::BatchLookups;
use super::{JobError, Runner};
use crate::store::source_bundles::{self, Sees};

/// Most source bundles one crash's report reads (modules in the dump's order).
pub const MAX_BUNDLES_PER_CRASH: usize = 64;

/// The provider of a crash whose modules have bundles; `None` when none has one.
pub async fn provider(
    runner: &Runner,
    project: &str,
    modules: &[Module],
    batch: &BatchLookups,
) -> Result<Option<Arc<dyn SourceProvider>>, JobError> {
    // each build-id once, in the dump's order (a set beside the list: a dump of 100,000
    // modules is one pass, not 100,000 passes over the list)
    let mut seen = HashSet::new();
    let ids: Vec<String> = modules
        .iter()
        .filter_map(Module::build_id_hex)
        .filter(|id| seen.insert(id.clone()))
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    // the batch's earlier lookup of the same modules, if any (`batch_lookups`)
    let key = super::batch_lookups::key(project, &refs);
    let rows = match batch.bundles(&key) {
        Some(rows) => rows,
        None => {
            let rows =
                source_bundles::by_build_ids(&runner.db, Sees::Project(project), &refs).await?;
            batch.keep_bundles(key, rows.clone());
            rows
        }
    };
    let mut bundles = HashMap::new();
    for id in ids.iter().filter(|id| rows.contains_key(*id)) {
        if bundles.len() >= MAX_BUNDLES_PER_CRASH {
            break;
        }
        let Some(row) = rows.get(id) else { continue };
        match runner.blobs.open(&row.sha256).await {
            Ok(bytes) => {
                bundles.insert(id.clone(), Lazy::new(bytes));
            }
            // a bundle whose blob is gone costs its frames their lines, not the report
            Err(e) => tracing::warn!(build_id = %id, error = %e, "source bundle unreadable"),
        }
    }
    if bundles.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(BundleSources { bundles })))
}

/// A bundle's bytes, opened at the first question.
struct Lazy {
    bytes: FileBytes,
    opened: OnceLock<Option<SourceBundle>>,
}

impl Lazy {
    fn new(bytes: FileBytes) -> Lazy {
        Lazy {
            bytes,
            opened: OnceLock::new(),
        }
    }

    fn bundle(&self) -> Option<&SourceBundle> {
        self.opened
            .get_or_init(|| {
                SourceBundle::open(self.bytes.clone(), BundleLimits::default())
                    .map_err(|e| tracing::warn!(error = %e, "stored source bundle refused"))
                    .ok()
            })
            .as_ref()
    }
}

/// The bundles of one crash, by build-id.
struct BundleSources {
    bundles: HashMap<String, Lazy>,
}

impl SourceProvider for BundleSources {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let bundle = self.bundles.get(request.build_id?)?.bundle()?;
        bundle.source(request)
    }
}
