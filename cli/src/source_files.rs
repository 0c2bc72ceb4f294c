//! Source context for `postmortem walk`: source bundles given with `--source-bundle`
//! first (answering for their own build-id), then the debuginfod servers' `source` route
//! (`--debuginfod`, `DEBUGINFOD_URLS`: a postmortem server answers from its uploaded
//! bundles), then the source-link mappings (`--source-link`, `--source-commit`), then
//! each frame's source file read at the path its debug information
//! records, for a walk on the machine that built the code (`--no-source-context` turns
//! off all but the bundles). The order is the issue's: what is known to be the build's
//! own source before a file that may have changed since.
//!
//! Only absolute paths are read: a relative one (debug info without a compilation
//! directory) would be resolved against wherever the walk runs and could name an
//! unrelated file of the same name. Only regular files no larger than the engine asks are
//! read, and no more than that many bytes even if the file grows meanwhile; the engine
//! checks what it gets (UTF-8, not binary, the line within the file).

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use engine::report::source_context::{SourceProvider, SourceRequest};
use engine::source_bundle::{BundleLimits, SourceBundle};
use sources::source_link::{Build, Mapping, SourceLinkLimits, SourceLinks};

/// The walk's sources: bundles in the order given, then (unless turned off) the files at
/// their recorded paths.
#[derive(Default)]
pub struct WalkSources {
    bundles: Vec<SourceBundle>,
    remote: Option<sources::Remote>,
    /// The source-link mappings, and the walk's commit (`--source-commit`).
    links: Option<(SourceLinks, Option<String>)>,
    local: bool,
}

impl std::fmt::Debug for WalkSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkSources")
            .field("bundles", &self.bundles)
            .field("remote", &self.remote.is_some())
            .field("links", &self.links)
            .field("local", &self.local)
            .finish()
    }
}

impl WalkSources {
    /// Opens the bundles at `paths` (each checked whole: a hostile one is an error naming
    /// it); `local` reads files at their recorded paths after them.
    pub fn open(paths: &[std::path::PathBuf], local: bool) -> anyhow::Result<Self> {
        let limits = BundleLimits::default();
        let mut bundles = Vec::with_capacity(paths.len());
        for path in paths {
            let bytes = read_at_most(path, limits.max_bundle_bytes)
                .with_context(|| format!("reading source bundle {}", path.display()))?
                .with_context(|| {
                    format!(
                        "source bundle {} is larger than {} bytes",
                        path.display(),
                        limits.max_bundle_bytes
                    )
                })?;
            let bundle = SourceBundle::open(bytes, limits)
                .with_context(|| format!("source bundle {}", path.display()))?;
            bundles.push(bundle);
        }
        Ok(WalkSources {
            bundles,
            remote: None,
            links: None,
            local,
        })
    }

    /// Asks `remote`'s debuginfod servers too (after the bundles, before local files).
    pub fn with_remote(mut self, remote: Option<sources::Remote>) -> Self {
        self.remote = remote;
        self
    }

    /// Asks the source-link `mappings` too (after the debuginfod servers, before local
    /// files), with `commit` for their `{commit}`.
    pub fn with_links(mut self, mappings: &[Mapping], commit: Option<String>) -> Self {
        if !mappings.is_empty() {
            let limits = SourceLinkLimits::default();
            let links = SourceLinks::new(mappings.to_vec(), limits, std::env::temp_dir());
            self.links = Some((links, commit));
        }
        self
    }

    /// Whether any source is asked at all.
    pub fn any(&self) -> bool {
        self.local || self.remote.is_some() || self.links.is_some() || !self.bundles.is_empty()
    }

    /// The file from the first source-link mapping that covers it (a failed fetch said
    /// on standard error).
    fn linked(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let (links, commit) = self.links.as_ref()?;
        let build = Build {
            commit: commit.as_deref(),
            build_id: request.build_id,
        };
        links
            .source(request.path, build, request.max_bytes, None)
            .map_err(|why| eprintln!("postmortem: {why}"))
            .ok()
            .flatten()
    }
}

impl SourceProvider for WalkSources {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let remote = || {
            let (remote, id) = (self.remote.as_ref()?, request.build_id?);
            remote.source(id, request.path, request.max_bytes, None)
        };
        self.bundles
            .iter()
            .find_map(|b| b.source(request))
            .or_else(remote)
            .or_else(|| self.linked(request))
            .or_else(|| self.local.then(|| LocalSources.source(request)).flatten())
    }

    /// The first covering source-link mapping's web URL, with `--source-commit`.
    fn web_url(&self, request: &SourceRequest<'_>) -> Option<String> {
        let (links, commit) = self.links.as_ref()?;
        let build = Build {
            commit: commit.as_deref(),
            build_id: request.build_id,
        };
        sources::source_link::urls(links.mappings(), request.path, build).map(|(_, web)| web)
    }
}

/// The bytes of the regular file at `path`, or None when it is larger than `max_bytes`
/// (not read; nor more than that many bytes of a file that grows meanwhile).
fn read_at_most(path: &Path, max_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max_bytes {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    // one byte more than allowed tells a file that grew past the limit
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max_bytes).then_some(bytes))
}

/// Reads a frame's source file at its recorded path.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalSources;

impl SourceProvider for LocalSources {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let path = Path::new(request.path);
        if !path.is_absolute() {
            return None;
        }
        read_at_most(path, request.max_bytes).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ask(path: &str, max_bytes: u64) -> Option<Vec<u8>> {
        LocalSources.source(&SourceRequest {
            path,
            build_id: None,
            max_bytes,
        })
    }

    #[test]
    fn reads_absolute_regular_files_within_the_limit_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.c");
        std::fs::write(&file, b"int main;\n").unwrap();
        let path = file.to_str().unwrap();
        assert_eq!(ask(path, 100).as_deref(), Some(&b"int main;\n"[..]));
        assert_eq!(ask(path, 3), None, "over the limit");
        assert_eq!(ask(dir.path().to_str().unwrap(), 100), None, "a directory");
        assert_eq!(ask("a.c", 100), None, "a relative path");
        assert_eq!(ask(dir.path().join("no.c").to_str().unwrap(), 100), None);
    }
}
