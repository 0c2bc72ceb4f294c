//! Errors of the dump readers: why no `Dump` could be made from some bytes.

/// Why a dump could not be read at all. Problems that still allow a report are
/// [`super::Warning`]s instead.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpError {
    #[error("not a crash dump: the file starts with neither an ELF nor a minidump magic, nor is it an Apple crash report (.ips or .crash) or an Android tombstone (text or .pb)")]
    NotADump,
    #[error("not a core file: this ELF file is of type {0} (an executable or library?), not a core (ET_CORE)")]
    NotACore(String),
    #[error("unsupported architecture: {0}")]
    UnsupportedArch(String),
    #[error("unsupported dump: {0}")]
    Unsupported(String),
    #[error("the dump is truncated: {0}")]
    Truncated(String),
    #[error("the dump is malformed: {0}")]
    Malformed(String),
}

impl DumpError {
    /// A stable kebab-case name for logs and problem documents.
    pub fn code(&self) -> &'static str {
        match self {
            DumpError::NotADump => "not-a-dump",
            DumpError::NotACore(_) => "not-a-core",
            DumpError::UnsupportedArch(_) => "unsupported-arch",
            DumpError::Unsupported(_) => "unsupported-dump",
            DumpError::Truncated(_) => "truncated-dump",
            DumpError::Malformed(_) => "malformed-dump",
        }
    }
}
