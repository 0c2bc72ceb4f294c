//! Source context from the service's debuginfod servers (`--debuginfod`, a sources file;
//! issue 42): a frame of a module with a build-id whose file has an absolute path asks
//! `buildid/ID/source/PATH`, after the crash's uploaded source bundles and before the
//! source-link mappings — what elfutils' `debuginfod` answers from the sources its indexed
//! builds name, and another postmortem server from its uploaded bundles.
//!
//! The fetch is [`sources::Remote::source`]'s: the same servers, disk cache and shared
//! misses as the crash's debug files (a file fetched once per build and path, a miss
//! remembered for the server's miss TTL, in the database), each server within its own
//! timeouts and never past the job's deadline; the body at most what the engine asks
//! (16 MiB, `engine::report::source_context`), refused while it streams past that; and
//! only a plain absolute path is asked (no `.` or `..` component: a hostile debug file
//! cannot make the service ask for a path outside what it names).

use std::sync::Arc;

use engine::report::source_context::{SourceProvider, SourceRequest};
use sources::http::Until;

use super::Runner;

/// The provider asking the service's debuginfod servers, ending by `until`; `None` when
/// the service has none.
pub fn provider(runner: &Runner, until: Until) -> Option<Arc<dyn SourceProvider>> {
    let fetcher = runner.config.remote.as_ref()?;
    let remote = fetcher.sources_for(&runner.db);
    if !remote.has_debuginfod_servers() {
        return None;
    }
    Some(Arc::new(ServerSources { remote, until }))
}

/// One crash's questions to the debuginfod servers.
struct ServerSources {
    remote: Arc<sources::Remote>,
    until: Until,
}

impl SourceProvider for ServerSources {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let build_id = request.build_id?;
        self.remote
            .source(build_id, request.path, request.max_bytes, self.until)
    }
}
