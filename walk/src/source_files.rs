//! Source context from this machine's files: each frame's source file read at the path
//! its debug information records, for `postmortem walk` on the machine that built the
//! code (`--no-source-context` turns it off).
//!
//! Only absolute paths are read: a relative one (debug info without a compilation
//! directory) would be resolved against wherever the walk runs and could name an
//! unrelated file of the same name. Only regular files no larger than the engine asks are
//! read, and no more than that many bytes even if the file grows meanwhile; the engine
//! checks what it gets (UTF-8, not binary, the line within the file).

use std::io::Read;
use std::path::Path;

use engine::report::source_context::{SourceProvider, SourceRequest};

/// Reads a frame's source file at its recorded path.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalSources;

impl SourceProvider for LocalSources {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        let path = Path::new(request.path);
        if !path.is_absolute() {
            return None;
        }
        let file = std::fs::File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > request.max_bytes {
            return None;
        }
        let mut bytes = Vec::new();
        // one byte more than allowed tells a file that grew past the limit
        file.take(request.max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .ok()?;
        Some(bytes)
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
