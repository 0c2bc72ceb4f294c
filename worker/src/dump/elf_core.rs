//! ELF core reader (in progress).
use super::{Dump, DumpError};

/// Reads an ELF core file.
pub fn read(_bytes: &[u8]) -> Result<Dump<'_>, DumpError> {
    Err(DumpError::Unsupported("todo".into()))
}
