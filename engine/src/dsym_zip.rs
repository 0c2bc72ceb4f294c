//! The DWARF files of a zipped dSYM bundle, as users upload them (`zip -r App.dSYM.zip
//! App.dSYM`, or Xcode's `dSYMs.zip` holding many bundles): each
//! `*.dSYM/Contents/Resources/DWARF/<name>` entry handed to the caller as a stream, so
//! that it is stored and identified like any uploaded file (by its `LC_UUID`, each slice
//! of a universal one apart: [`crate::macho_fat`]).
//!
//! An archive is untrusted: it is refused whole, with a typed [`DsymZipError`], when it
//! lists more entries than [`ZipLimits::max_entries`], names an entry outside the
//! archive (`..`, an absolute path: the zip crate's `enclosed_name`), holds a symbolic
//! link or an encrypted entry where a DWARF file belongs, holds more DWARF files than
//! [`ZipLimits::max_files`], or inflates past [`ZipLimits::max_total_bytes`] or by more
//! than [`ZipLimits::max_ratio`] times an entry's compressed size (a zip bomb). Sizes are
//! counted as the bytes come out, never taken from the archive's own headers. Nothing is
//! written under an entry's name: the caller stores content by its hash.

use std::io::{self, Read, Seek};
use std::path::{Component, Path};

/// Bounds on one archive.
/// `ZipLimits::default()`, then set what differs (`#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZipLimits {
    /// Entries in the archive's directory (files and folders, DWARF or not).
    pub max_entries: usize,
    /// DWARF files taken out.
    pub max_files: usize,
    /// Bytes taken out, all files together.
    pub max_total_bytes: u64,
    /// Most bytes out per compressed byte of one entry (past [`RATIO_FLOOR`] bytes).
    pub max_ratio: u64,
}

impl Default for ZipLimits {
    fn default() -> Self {
        ZipLimits {
            max_entries: 10_000,
            max_files: 256,
            max_total_bytes: 1 << 30,
            max_ratio: 100,
        }
    }
}

/// An entry is judged by its ratio only once this many bytes came out of it: a small
/// file of zeros compresses far better than a large DWARF file ever does.
pub const RATIO_FLOOR: u64 = 1 << 20;

/// Why an archive is refused; `E` is the caller's own error, from storing a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DsymZipError<E> {
    #[error("not a zip archive: {0}")]
    NotZip(String),
    #[error("the archive lists {entries} entries (at most {max})")]
    TooManyEntries { entries: usize, max: usize },
    #[error("the archive's entry {0:?} names a path outside the archive")]
    UnsafePath(String),
    #[error("the archive's entry {0:?} is a symbolic link where a DWARF file belongs")]
    Symlink(String),
    #[error("the archive holds more than {0} DWARF files")]
    TooManyFiles(usize),
    #[error("the archive inflates past {0} bytes")]
    TooLarge(u64),
    #[error("the archive's entry {name:?} inflates more than {max} times its compressed size (a zip bomb)")]
    Ratio { name: String, max: u64 },
    #[error("the archive's entry {name:?} cannot be read: {why}")]
    Entry { name: String, why: String },
    #[error("the archive holds no dSYM bundle's DWARF file (*.dSYM/Contents/Resources/DWARF/*)")]
    NoDwarf,
    #[error(transparent)]
    Store(E),
}

impl<E> DsymZipError<E> {
    /// A stable kebab-case name (`None` for the caller's own error).
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            DsymZipError::NotZip(_) | DsymZipError::Entry { .. } => "malformed-zip",
            DsymZipError::TooManyEntries { .. } => "zip-too-many-entries",
            DsymZipError::UnsafePath(_) | DsymZipError::Symlink(_) => "zip-unsafe-path",
            DsymZipError::TooManyFiles(_) => "zip-too-many-files",
            DsymZipError::TooLarge(_) | DsymZipError::Ratio { .. } => "zip-bomb",
            DsymZipError::NoDwarf => "no-dsym-in-zip",
            DsymZipError::Store(_) => return None,
        })
    }
}

/// Whether `head` (a file's first bytes) starts a zip archive.
pub fn is_zip(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// The name a DWARF file of a dSYM bundle is stored as, when `path` (an entry's path in
/// the archive) is one: `X.dSYM/Contents/Resources/DWARF/<name>`, anywhere in the tree.
pub fn dwarf_file_name(path: &Path) -> Option<&str> {
    let parts: Vec<&str> = path
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<&str>>>()?;
    let [.., bundle, contents, resources, dwarf, name] = parts.as_slice() else {
        return None;
    };
    let is_bundle = bundle.len() > 5
        && bundle
            .get(bundle.len() - 5..)
            .is_some_and(|e| e.eq_ignore_ascii_case(".dSYM"));
    (is_bundle && *contents == "Contents" && *resources == "Resources" && *dwarf == "DWARF")
        .then_some(*name)
}

/// Hands each DWARF file of the zipped dSYM bundle(s) `archive` to `store`, with the
/// name it is stored as and a bounded stream of its bytes; returns how many there were.
/// `store`'s own failures come back as [`DsymZipError::Store`].
pub fn each_dwarf_file<R, E>(
    archive: R,
    limits: ZipLimits,
    mut store: impl FnMut(&str, &mut dyn Read) -> Result<(), E>,
) -> Result<usize, DsymZipError<E>>
where
    R: Read + Seek,
{
    let mut zip = zip::ZipArchive::new(archive).map_err(|e| DsymZipError::NotZip(e.to_string()))?;
    if zip.len() > limits.max_entries {
        return Err(DsymZipError::TooManyEntries {
            entries: zip.len(),
            max: limits.max_entries,
        });
    }
    let mut taken = 0usize;
    let mut total = 0u64;
    for i in 0..zip.len() {
        let entry_error = |name: &str, e: zip::result::ZipError| DsymZipError::Entry {
            name: name.to_string(),
            why: e.to_string(),
        };
        let raw = zip.by_index_raw(i).map_err(|e| entry_error("", e))?;
        let name = raw.name().to_string();
        let Some(path) = raw.enclosed_name() else {
            return Err(DsymZipError::UnsafePath(name));
        };
        if raw.is_dir() {
            continue;
        }
        let Some(stored_as) = dwarf_file_name(&path).map(str::to_string) else {
            continue;
        };
        if raw.is_symlink() {
            return Err(DsymZipError::Symlink(name));
        }
        drop(raw);
        taken += 1;
        if taken > limits.max_files {
            return Err(DsymZipError::TooManyFiles(limits.max_files));
        }
        let file = zip.by_index(i).map_err(|e| entry_error(&name, e))?;
        let compressed = file.compressed_size();
        let mut bounded = Bounded::new(file, compressed, total, limits);
        let stored = store(&stored_as, &mut bounded);
        total = total.saturating_add(bounded.out);
        if let Some(why) = bounded.refused.take() {
            return Err(why.into_error(&name, limits));
        }
        stored.map_err(DsymZipError::Store)?;
    }
    if taken == 0 {
        return Err(DsymZipError::NoDwarf);
    }
    Ok(taken)
}

/// Why [`Bounded`] stopped a read.
pub(crate) enum Refused {
    TooLarge,
    Ratio,
    Corrupt(String),
}

impl Refused {
    fn into_error<E>(self, name: &str, limits: ZipLimits) -> DsymZipError<E> {
        match self {
            Refused::TooLarge => DsymZipError::TooLarge(limits.max_total_bytes),
            Refused::Ratio => DsymZipError::Ratio {
                name: name.to_string(),
                max: limits.max_ratio,
            },
            Refused::Corrupt(why) => DsymZipError::Entry {
                name: name.to_string(),
                why,
            },
        }
    }
}

/// An entry's stream, counting what comes out and stopping at the first bound passed;
/// what stopped it is kept, so the caller's error is told apart from the archive's.
pub(crate) struct Bounded<R> {
    inner: R,
    out: u64,
    total_before: u64,
    compressed: u64,
    limits: ZipLimits,
    pub(crate) refused: Option<Refused>,
}

impl<R> Bounded<R> {
    /// `inner`, an entry of `compressed` bytes, counted from `total_before` bytes taken
    /// out of the archive before it.
    pub(crate) fn new(inner: R, compressed: u64, total_before: u64, limits: ZipLimits) -> Self {
        Bounded {
            inner,
            out: 0,
            total_before,
            compressed: compressed.max(1),
            limits,
            refused: None,
        }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.refused.is_some() {
            return Err(io::Error::other("the archive was refused"));
        }
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) => {
                self.refused = Some(Refused::Corrupt(e.to_string()));
                return Err(e);
            }
        };
        self.out += n as u64;
        let refused = if self.total_before.saturating_add(self.out) > self.limits.max_total_bytes {
            Some(Refused::TooLarge)
        } else if self.out > RATIO_FLOOR && self.out / self.compressed > self.limits.max_ratio {
            Some(Refused::Ratio)
        } else {
            None
        };
        if let Some(r) = refused {
            self.refused = Some(r);
            return Err(io::Error::other("the archive was refused"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dwarf_entries_are_named_by_their_file() {
        let p = |s: &str| dwarf_file_name(Path::new(s)).map(str::to_string);
        assert_eq!(
            p("App.dSYM/Contents/Resources/DWARF/App"),
            Some("App".into())
        );
        assert_eq!(
            p("dSYMs/Kit.framework.dSYM/Contents/Resources/DWARF/Kit"),
            Some("Kit".into())
        );
        assert_eq!(p("App.dSYM/Contents/Info.plist"), None);
        assert_eq!(p("App/Contents/Resources/DWARF/App"), None);
        assert_eq!(p(".dSYM/Contents/Resources/DWARF/App"), None);
    }
}
