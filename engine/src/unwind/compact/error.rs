//! Errors of the compact unwind reader: why an `__unwind_info` section could not be read.
//!
//! Every variant carries the offsets or values that make it reproducible, is `Clone` and
//! `PartialEq` so tests can `assert_eq!` on it, and has a stable kebab-case [`code`].
//!
//! [`code`]: CompactUnwindError::code

/// Why an `__unwind_info` section (or one of its pages) was rejected.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactUnwindError {
    /// The bytes end before a structure does.
    #[error(
        "__unwind_info: {what} at offset {offset:#x} needs {needed} bytes, the section has {have}"
    )]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
        have: u64,
    },
    /// The root page's version is not 1.
    #[error("__unwind_info: version {0} is not supported (only 1)")]
    UnsupportedVersion(u32),
    /// The first-level index is empty: not even the sentinel page is there.
    #[error("__unwind_info: the first-level index has no entries")]
    NoPages,
    /// A second-level page's kind is neither 2 (regular) nor 3 (compressed).
    #[error("__unwind_info: page {page}: unknown second-level page kind {kind}")]
    UnknownPageKind { page: usize, kind: u32 },
    /// A compressed entry's opcode index is beyond the global and local palettes.
    #[error("__unwind_info: page {page}: entry {entry}: opcode index {index} is beyond the {global} global and {local} local opcodes")]
    OpcodeIndex {
        page: usize,
        entry: usize,
        index: u32,
        global: u32,
        local: u32,
    },
    /// First-level pages or second-level entries are not sorted by address, or an entry
    /// lies outside its page's address range.
    #[error("__unwind_info: page {page}: entry {entry} at {address:#x} is out of order (previous {previous:#x}, page end {page_end:#x})")]
    Unsorted {
        page: usize,
        entry: usize,
        address: u32,
        previous: u32,
        page_end: u32,
    },
}

impl CompactUnwindError {
    /// A stable kebab-case name.
    pub fn code(&self) -> &'static str {
        match self {
            CompactUnwindError::Truncated { .. } => "compact-unwind-truncated",
            CompactUnwindError::UnsupportedVersion(_) => "compact-unwind-version",
            CompactUnwindError::NoPages => "compact-unwind-no-pages",
            CompactUnwindError::UnknownPageKind { .. } => "compact-unwind-page-kind",
            CompactUnwindError::OpcodeIndex { .. } => "compact-unwind-opcode-index",
            CompactUnwindError::Unsorted { .. } => "compact-unwind-unsorted",
        }
    }
}
