//! Scrubbing a project's crash uploads before they are stored (issue 41): the project's
//! rules (`--scrub PROJECT:builtin:NAME`, `--scrub PROJECT:regex:PATTERN`) overwrite
//! their matches in the dump's memory and strings (`engine::scrub`: zero bytes, in place,
//! so the dump walks the same) and in the upload's text fields (each match replaced by
//! [`REDACTED`]); `--scrub-core-heap PROJECT` keeps no heap memory of that project's
//! cores. The staged dump is scrubbed into a new staged file, which is what is stored:
//! the secret never reaches the blob store, and the stored sha256 and dedup are the
//! scrubbed bytes'. The matches are counted per project for `/metrics`.
//!
//! A scrub holds the dump in memory (bounded by `--max-decompressed-mb`); at most
//! [`SCRUB_SLOTS`] run at once, further uploads of scrubbed projects wait their turn.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use engine::scrub::{Options, Rules};
use worker::store::{StagedBlob, Staging, StoreError};

use super::problem::ApiError;

/// What an upload's text field's match is replaced with.
pub const REDACTED: &[u8] = b"[scrubbed]";
/// Dumps scrubbed at once.
pub const SCRUB_SLOTS: usize = 2;

/// One project's scrubbing.
#[derive(Debug, Clone, Default)]
struct Project {
    rules: Rules,
    drop_core_heap: bool,
}

/// What was scrubbed for one project so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Rule matches overwritten in dumps.
    pub dump_matches: u64,
    /// Rule matches replaced in upload fields.
    pub field_matches: u64,
    /// Core segments dropped as heap.
    pub heap_segments: u64,
}

/// Every project's scrubbing, and the counts.
#[derive(Debug)]
pub struct Scrubbing {
    projects: HashMap<String, Project>,
    counts: Mutex<BTreeMap<String, Counts>>,
    slots: tokio::sync::Semaphore,
}

impl Default for Scrubbing {
    fn default() -> Self {
        Scrubbing {
            projects: HashMap::new(),
            counts: Mutex::new(BTreeMap::new()),
            slots: tokio::sync::Semaphore::new(SCRUB_SLOTS),
        }
    }
}

impl Scrubbing {
    /// From `--scrub PROJECT:RULE` and `--scrub-core-heap PROJECT`; a rule that does not
    /// parse or compile, or a bad project name, is refused with a message.
    pub fn from_options(rules: &[String], core_heap: &[String]) -> Result<Scrubbing, String> {
        let mut out = Scrubbing::default();
        for spec in rules {
            let (project, rule) = spec.split_once(':').ok_or_else(|| {
                format!("--scrub is PROJECT:builtin:NAME or PROJECT:regex:PATTERN, not {spec:?}")
            })?;
            valid(project, "--scrub")?;
            out.projects
                .entry(project.to_string())
                .or_default()
                .rules
                .add(rule)
                .map_err(|e| format!("--scrub {spec:?}: {e}"))?;
        }
        for project in core_heap {
            valid(project, "--scrub-core-heap")?;
            out.projects
                .entry(project.clone())
                .or_default()
                .drop_core_heap = true;
        }
        Ok(out)
    }

    /// The projects with scrubbing.
    pub fn projects(&self) -> impl Iterator<Item = &String> {
        self.projects.keys()
    }

    /// The counts per project so far.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, project: &str, f: impl FnOnce(&mut Counts)) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        f(counts.entry(project.to_string()).or_default());
    }

    /// `project`'s upload fields with every rule match replaced by [`REDACTED`].
    pub fn fields(&self, project: &str, fields: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
        let Some(p) = self.projects.get(project).filter(|p| !p.rules.is_empty()) else {
            return fields;
        };
        let mut n = 0;
        let out = fields
            .into_iter()
            .map(|(name, value)| {
                let (value, found) = p.rules.replace(&value, REDACTED);
                n += found;
                (name, value)
            })
            .collect();
        if n > 0 {
            self.count(project, |c| c.field_matches += n);
        }
        out
    }

    /// `project`'s staged dump scrubbed into a new staged file (the same one when the
    /// project has no scrubbing).
    pub async fn dump(
        &self,
        staging: &Staging,
        project: &str,
        dump: StagedBlob,
    ) -> Result<StagedBlob, ApiError> {
        let Some(p) = self.projects.get(project).cloned() else {
            return Ok(dump);
        };
        let path = dump.path().to_path_buf();
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|e| staging_error(&path, std::io::Error::other(e)))?;
        let staging = staging.clone();
        let at = path.clone();
        let (scrubbed, done) = tokio::task::spawn_blocking(move || {
            let mut bytes = std::fs::read(&at).map_err(|e| staging_error(&at, e))?;
            let options = Options {
                drop_core_heap: p.drop_core_heap,
            };
            let done = engine::scrub::scrub(&mut bytes, &p.rules, options);
            let staged = staging
                .from_reader(&mut bytes.as_slice())?
                .map_err(|e| staging_error(&at, e))?;
            drop(dump);
            Ok::<_, ApiError>((staged, done))
        })
        .await
        .map_err(|e| staging_error(&path, std::io::Error::other(e)))??;
        self.count(project, |c| {
            c.dump_matches += done.matches;
            c.heap_segments += done.heap_segments;
        });
        Ok(scrubbed)
    }
}

fn valid(project: &str, option: &str) -> Result<(), String> {
    if worker::store::projects::valid_name(project) {
        Ok(())
    } else {
        Err(format!("bad project name {project:?} in {option}"))
    }
}

fn staging_error(path: &std::path::Path, source: std::io::Error) -> ApiError {
    ApiError::Store(StoreError::Staging {
        path: path.display().to_string(),
        source,
    })
}
