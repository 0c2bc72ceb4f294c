//! Source context from source-link mappings (`--source-link`, issue 42): after a crash's
//! uploaded source bundles and its debuginfod servers' `source` route, a frame whose file
//! lies under a mapped prefix gets its lines from the mapping's URL, with the crash's
//! commit — its upload's `commit` field, else its `revision` field — where the template
//! names `{commit}`. The fetch itself, its bounds and the cache of answers by URL are
//! `sources::source_link`'s; this module chains the providers and reads the commit.

use std::sync::Arc;

use engine::dump::Module;
use engine::report::source_context::{SourceProvider, SourceRequest};
use sources::source_link::{Build, SourceLinks};

use super::{JobError, Runner};

/// The upload fields a crash's commit is read from, in order.
pub const COMMIT_FIELDS: [&str; 2] = ["commit", "revision"];

/// The commit an upload's fields (`annotations`, a JSON object) name, if any.
pub fn commit_of(annotations: &str) -> Option<String> {
    let fields: serde_json::Value = serde_json::from_str(annotations).ok()?;
    COMMIT_FIELDS
        .iter()
        .find_map(|k| fields.get(*k)?.as_str().map(str::to_string))
        .filter(|c| !c.is_empty())
}

/// The source provider of a crash: its modules' uploaded bundles, then the service's
/// debuginfod servers' `source` route, then the service's mappings with the commit its
/// upload's fields name (`annotations`); `None` when it has none of them. The bundles
/// are those of the crash's `project` and the shared ones.
pub async fn provider(
    runner: &Runner,
    project: &str,
    modules: &[Module],
    annotations: &str,
    until: Option<std::time::Instant>,
    batch: &super::batch_lookups::BatchLookups,
) -> Result<Option<Arc<dyn SourceProvider>>, JobError> {
    let mut providers = Vec::new();
    providers.extend(super::source_bundles::provider(runner, project, modules, batch).await?);
    providers.extend(super::source_servers::provider(runner, until));
    if let Some(links) = &runner.config.source_links {
        providers.push(Arc::new(CrashLinks {
            links: links.clone(),
            commit: commit_of(annotations),
            until,
        }) as Arc<dyn SourceProvider>);
    }
    Ok(match providers.len() {
        0 => None,
        1 => providers.pop(),
        _ => Some(Arc::new(FirstOf(providers))),
    })
}

/// One crash's source-link provider: the service's mappings and the crash's commit,
/// its fetches ending by the job's deadline.
pub struct CrashLinks {
    pub links: Arc<SourceLinks>,
    pub commit: Option<String>,
    pub until: Option<std::time::Instant>,
}

impl CrashLinks {
    fn build<'a>(&'a self, request: &SourceRequest<'a>) -> Build<'a> {
        Build {
            commit: self.commit.as_deref(),
            build_id: request.build_id,
        }
    }
}

impl SourceProvider for CrashLinks {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        self.links
            .source(
                request.path,
                self.build(request),
                request.max_bytes,
                self.until,
            )
            .map_err(|why| tracing::warn!("{why}"))
            .ok()
            .flatten()
    }

    /// The first covering mapping's web URL (its raw one without a web template), as the
    /// crash page links the file.
    fn web_url(&self, request: &SourceRequest<'_>) -> Option<String> {
        let mappings = self.links.mappings();
        sources::source_link::urls(mappings, request.path, self.build(request)).map(|(_, web)| web)
    }
}

/// Providers asked in order: the first that has the file gives it.
pub struct FirstOf(pub Vec<Arc<dyn SourceProvider>>);

impl SourceProvider for FirstOf {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        self.0.iter().find_map(|p| p.source(request))
    }

    fn web_url(&self, request: &SourceRequest<'_>) -> Option<String> {
        self.0.iter().find_map(|p| p.web_url(request))
    }
}

#[cfg(test)]
mod tests {
    use super::commit_of;

    #[test]
    fn the_commit_is_the_commit_field_else_the_revision() {
        assert_eq!(
            commit_of(r#"{"revision":"r1","commit":"c1"}"#).as_deref(),
            Some("c1")
        );
        assert_eq!(commit_of(r#"{"revision":"r1"}"#).as_deref(), Some("r1"));
        assert_eq!(commit_of(r#"{"commit":""}"#), None);
        assert_eq!(commit_of(r#"{"commit":7}"#), None);
        assert_eq!(commit_of("not json"), None);
    }
}
