//! Errors of the unwind layer: building tables from sections, opening table bytes.

/// Why an unwind table could not be built or opened. A single bad FDE is not an error:
/// it is skipped and counted (see `BuildStats`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnwindError {
    #[error("the binary could not be parsed: {0}")]
    Object(String),
    #[error("unsupported architecture for unwinding: {0}")]
    UnsupportedArch(String),
    #[error("the {section} section is corrupt: {detail}")]
    SectionCorrupt {
        section: &'static str,
        detail: String,
    },
    #[error("unwind table bytes are truncated")]
    TableTruncated,
    #[error("not an unwind table (bad magic)")]
    TableMagic,
    #[error("unwind table format version {0} is not the current one; rebuild it")]
    TableVersion(u32),
    #[error("unwind table bytes are corrupt: {0}")]
    TableCorrupt(&'static str),
}

impl UnwindError {
    /// A stable kebab-case name.
    pub fn code(&self) -> &'static str {
        match self {
            UnwindError::Object(_) => "object-unreadable",
            UnwindError::UnsupportedArch(_) => "unsupported-arch",
            UnwindError::SectionCorrupt { .. } => "unwind-table-corrupt",
            UnwindError::TableTruncated
            | UnwindError::TableMagic
            | UnwindError::TableCorrupt(_) => "unwind-table-corrupt",
            UnwindError::TableVersion(_) => "unwind-table-version",
        }
    }
}
