//! Errors of the symbol layer: building a symbol table from a binary, opening table bytes.
//!
//! One bad compilation unit or symbol is not an error: it is skipped and reported as a
//! warning in `BuiltSymbols::warnings`. Errors are for inputs that yield nothing at all.

/// Why a symbol table could not be built or opened.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SymbolsError {
    #[error("the binary or debug file could not be parsed: {0}")]
    Object(String),
    #[error("no binary and no debug file was given")]
    NoInput,
    #[error("the symbol table would exceed the format's limits: {0}")]
    TooLarge(&'static str),
    #[error("symbol table bytes are truncated")]
    TableTruncated,
    #[error("not a symbol table (bad magic)")]
    TableMagic,
    #[error("symbol table format version {0} is not the current one; rebuild it")]
    TableVersion(u32),
    #[error("symbol table bytes are corrupt: {0}")]
    TableCorrupt(&'static str),
}

impl SymbolsError {
    /// A stable kebab-case name.
    pub fn code(&self) -> &'static str {
        match self {
            SymbolsError::Object(_) => "object-unreadable",
            SymbolsError::NoInput => "no-input",
            SymbolsError::TooLarge(_) => "symbol-table-too-large",
            SymbolsError::TableTruncated
            | SymbolsError::TableMagic
            | SymbolsError::TableCorrupt(_) => "symbol-table-corrupt",
            SymbolsError::TableVersion(_) => "symbol-table-version",
        }
    }
}
