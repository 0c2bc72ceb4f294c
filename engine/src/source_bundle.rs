//! Source bundles: the source files one build's line tables name, in one zip archive
//! beside its debug file (`postmortem upload --include-sources`), read back as a
//! [`SourceProvider`] for the report's source context (docs/source-context.md).
//!
//! Layout: `manifest.json` — `{ "schema": "postmortem.source-bundle/1", "build_id":
//! "<hex>", "files": ["<path as the debug info records it>", …] }` — and each listed file
//! at `files/<its path without the leading slash>`. Only the manifest's paths are ever
//! read, under the entry name derived from them; nothing is written under any name.
//!
//! A bundle is untrusted: it is refused whole, with a typed [`SourceBundleError`], when it
//! is larger than [`BundleLimits::max_bundle_bytes`], lists more than
//! [`BundleLimits::max_entries`] entries, has an entry naming a path outside the archive
//! (`..`, an absolute path) or a symbolic link, lacks or garbles its manifest, or lists a
//! path with a `..` component or one it does not hold. A file that inflates past
//! [`BundleLimits::max_file_bytes`] or by more than [`BundleLimits::max_ratio`] times
//! its compressed size (a zip bomb) is refused when it is read; sizes are counted as the
//! bytes come out, never taken from the archive's headers.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use serde::{Deserialize, Serialize};

use crate::binary::FileBytes;
use crate::dsym_zip::{Bounded, Refused, ZipLimits};
use crate::report::source_context::{SourceProvider, SourceRequest};

/// The manifest's `schema`.
pub const BUNDLE_SCHEMA: &str = "postmortem.source-bundle/1";
/// The manifest's entry name.
pub const MANIFEST: &str = "manifest.json";

/// Bounds on one bundle.
/// `BundleLimits::default()`, then set what differs (`#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BundleLimits {
    pub max_bundle_bytes: u64,
    /// Entries in the archive's directory, the manifest and folders included.
    pub max_entries: usize,
    /// Bytes one file (or the manifest) may inflate to.
    pub max_file_bytes: u64,
    /// Most bytes out per compressed byte of one entry (past 1 MiB out).
    pub max_ratio: u64,
}

impl Default for BundleLimits {
    fn default() -> Self {
        BundleLimits {
            max_bundle_bytes: 1 << 30,
            max_entries: 100_000,
            max_file_bytes: 16 << 20,
            max_ratio: 100,
        }
    }
}

/// The manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub build_id: String,
    pub files: Vec<String>,
}

/// Why a bundle, or a file of it, is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceBundleError {
    #[error("the source bundle is {size} bytes (at most {max})")]
    TooLarge { size: u64, max: u64 },
    #[error("the source bundle is not a zip archive: {0}")]
    NotZip(String),
    #[error("the source bundle lists {entries} entries (at most {max})")]
    TooManyEntries { entries: usize, max: usize },
    #[error("the source bundle's entry {0:?} names a path outside the bundle")]
    UnsafePath(String),
    #[error("the source bundle's entry {0:?} is a symbolic link")]
    Symlink(String),
    #[error("the source bundle has no {MANIFEST}")]
    NoManifest,
    #[error("the source bundle's {MANIFEST} is not a {BUNDLE_SCHEMA} manifest: {0}")]
    BadManifest(String),
    #[error("the source bundle's manifest lists {0:?}, which it does not hold")]
    MissingFile(String),
    #[error("the source bundle's entry {name:?} inflates past {max} bytes")]
    FileTooLarge { name: String, max: u64 },
    #[error("the source bundle's entry {name:?} inflates more than {max} times its compressed size (a zip bomb)")]
    Ratio { name: String, max: u64 },
    #[error("the source bundle's entry {name:?} cannot be read: {why}")]
    Entry { name: String, why: String },
}

impl SourceBundleError {
    /// A stable kebab-case name, for an API's problem type.
    pub fn code(&self) -> &'static str {
        match self {
            SourceBundleError::TooLarge { .. } => "bundle-too-large",
            SourceBundleError::NotZip(_) | SourceBundleError::Entry { .. } => "malformed-zip",
            SourceBundleError::TooManyEntries { .. } => "zip-too-many-entries",
            SourceBundleError::UnsafePath(_) | SourceBundleError::Symlink(_) => "zip-unsafe-path",
            SourceBundleError::NoManifest
            | SourceBundleError::BadManifest(_)
            | SourceBundleError::MissingFile(_) => "bad-bundle-manifest",
            SourceBundleError::FileTooLarge { .. } | SourceBundleError::Ratio { .. } => "zip-bomb",
        }
    }
}

/// The entry a recorded source path is stored at, or None for a path no bundle may
/// hold: empty, with a NUL, or with a `..` component.
pub fn entry_name(path: &str) -> Option<String> {
    let rest = path.trim_start_matches('/');
    let bad = |c: &str| c == ".." || c.contains('\0');
    if rest.is_empty() || rest.split(['/', '\\']).any(bad) {
        return None;
    }
    Some(format!("files/{rest}"))
}

/// An opened, checked bundle.
pub struct SourceBundle {
    zip: zip::ZipArchive<Cursor<FileBytes>>,
    manifest: Manifest,
    /// Recorded path → entry index.
    files: HashMap<String, usize>,
    limits: BundleLimits,
}

impl std::fmt::Debug for SourceBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceBundle")
            .field("manifest", &self.manifest)
            .finish()
    }
}

impl SourceBundle {
    /// Opens `bytes` as a bundle, checking its directory and manifest (no file is
    /// inflated but the manifest). The bytes may be a mapped file (the service's blobs):
    /// they are read in place, never copied whole.
    pub fn open(
        bytes: impl AsRef<[u8]> + Send + Sync + 'static,
        limits: BundleLimits,
    ) -> Result<Self, SourceBundleError> {
        let bytes = FileBytes::new(bytes);
        let size = bytes.len() as u64;
        if size > limits.max_bundle_bytes {
            return Err(SourceBundleError::TooLarge {
                size,
                max: limits.max_bundle_bytes,
            });
        }
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| SourceBundleError::NotZip(e.to_string()))?;
        if zip.len() > limits.max_entries {
            return Err(SourceBundleError::TooManyEntries {
                entries: zip.len(),
                max: limits.max_entries,
            });
        }
        let mut by_name = HashMap::with_capacity(zip.len());
        for i in 0..zip.len() {
            let raw = zip.by_index_raw(i).map_err(|e| SourceBundleError::Entry {
                name: String::new(),
                why: e.to_string(),
            })?;
            let name = raw.name().to_string();
            if raw.enclosed_name().is_none() || name.starts_with('/') || name.contains('\\') {
                return Err(SourceBundleError::UnsafePath(name));
            }
            if raw.is_symlink() {
                return Err(SourceBundleError::Symlink(name));
            }
            by_name.insert(name, i);
        }
        let manifest_at = *by_name.get(MANIFEST).ok_or(SourceBundleError::NoManifest)?;
        let manifest_bytes = read_entry(&mut zip, manifest_at, MANIFEST, &limits)?;
        let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
            .map_err(|e| SourceBundleError::BadManifest(e.to_string()))?;
        if manifest.schema != BUNDLE_SCHEMA {
            return Err(SourceBundleError::BadManifest(format!(
                "schema {:?}",
                manifest.schema
            )));
        }
        let mut files = HashMap::with_capacity(manifest.files.len());
        for path in &manifest.files {
            let entry =
                entry_name(path).ok_or_else(|| SourceBundleError::UnsafePath(path.clone()))?;
            let at = by_name
                .get(&entry)
                .ok_or_else(|| SourceBundleError::MissingFile(path.clone()))?;
            files.insert(path.clone(), *at);
        }
        Ok(SourceBundle {
            zip,
            manifest,
            files,
            limits,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The bytes of the file recorded as `path`: None when the bundle does not list it,
    /// an error when it is refused (see the module doc).
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>, SourceBundleError> {
        let Some(&at) = self.files.get(path) else {
            return Ok(None);
        };
        // a clone shares the parsed directory: one reader per call, no lock
        let mut zip = self.zip.clone();
        read_entry(&mut zip, at, path, &self.limits).map(Some)
    }
}

impl SourceProvider for SourceBundle {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
        if request.build_id != Some(self.manifest.build_id.as_str()) {
            return None;
        }
        self.read(request.path).ok().flatten()
    }
}

/// Entry `at` inflated, bounded by `limits` (`name` for the error).
fn read_entry(
    zip: &mut zip::ZipArchive<Cursor<FileBytes>>,
    at: usize,
    name: &str,
    limits: &BundleLimits,
) -> Result<Vec<u8>, SourceBundleError> {
    let entry_error = |why: String| SourceBundleError::Entry {
        name: name.to_string(),
        why,
    };
    let file = zip.by_index(at).map_err(|e| entry_error(e.to_string()))?;
    let compressed = file.compressed_size();
    let zip_limits = ZipLimits {
        max_total_bytes: limits.max_file_bytes,
        max_ratio: limits.max_ratio,
        ..ZipLimits::default()
    };
    let mut bounded = Bounded::new(file, compressed, 0, zip_limits);
    let mut out = Vec::new();
    let result = bounded.read_to_end(&mut out);
    match bounded.refused.take() {
        Some(Refused::TooLarge) => Err(SourceBundleError::FileTooLarge {
            name: name.to_string(),
            max: limits.max_file_bytes,
        }),
        Some(Refused::Ratio) => Err(SourceBundleError::Ratio {
            name: name.to_string(),
            max: limits.max_ratio,
        }),
        Some(Refused::Corrupt(why)) => Err(entry_error(why)),
        None => result.map(|_| out).map_err(|e| entry_error(e.to_string())),
    }
}

/// Writes a bundle of `files` (recorded path, bytes) for `build_id` to `out`. Paths no
/// bundle may hold are skipped.
pub fn write<W: std::io::Write + std::io::Seek>(
    out: W,
    build_id: &str,
    files: &[(String, Vec<u8>)],
) -> zip::result::ZipResult<W> {
    write_each(
        out,
        build_id,
        files.iter().map(|(p, b)| (p.clone(), b.clone())),
    )
}

/// [`write`] with the files given one at a time, so that one file is in memory at a
/// time: what `postmortem upload --include-sources` sends. Paths no bundle may hold, and
/// a path given twice, are skipped.
pub fn write_each<W, I>(out: W, build_id: &str, files: I) -> zip::result::ZipResult<W>
where
    W: std::io::Write + std::io::Seek,
    I: IntoIterator<Item = (String, Vec<u8>)>,
{
    use zip::write::SimpleFileOptions;
    let mut zip = zip::ZipWriter::new(out);
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let mut listed = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (path, bytes) in files {
        let Some(entry) = entry_name(&path) else {
            continue;
        };
        if !seen.insert(entry.clone()) {
            continue;
        }
        zip.start_file(entry, options)?;
        std::io::Write::write_all(&mut zip, &bytes)?;
        listed.push(path);
    }
    let manifest = Manifest {
        schema: BUNDLE_SCHEMA.into(),
        build_id: build_id.into(),
        files: listed,
    };
    zip.start_file(MANIFEST, options)?;
    let json = serde_json::to_vec(&manifest).map_err(std::io::Error::other)?;
    std::io::Write::write_all(&mut zip, &json)?;
    zip.finish()
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use std::io::Write;
    use std::sync::Arc;

    use super::*;
    use zip::write::SimpleFileOptions;

    fn bundle(files: &[(&str, &[u8])]) -> Arc<[u8]> {
        let files: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(p, b)| (p.to_string(), b.to_vec()))
            .collect();
        let out = write(Cursor::new(Vec::new()), "abcd", &files).unwrap();
        out.into_inner().into()
    }

    /// A zip with these raw entries (name, bytes), written as they are.
    fn raw_zip(entries: &[(&str, &[u8])]) -> Arc<[u8]> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner().into()
    }

    fn manifest(files: &[&str]) -> Vec<u8> {
        serde_json::to_vec(&Manifest {
            schema: BUNDLE_SCHEMA.into(),
            build_id: "abcd".into(),
            files: files.iter().map(|f| f.to_string()).collect(),
        })
        .unwrap()
    }

    fn open(bytes: Arc<[u8]>) -> Result<SourceBundle, SourceBundleError> {
        SourceBundle::open(bytes, BundleLimits::default())
    }

    #[test]
    fn a_written_bundle_reads_back_by_recorded_path_and_build_id() {
        let b = open(bundle(&[("/src/a.c", b"int a;\n"), ("rel/b.h", b"#x\n")])).unwrap();
        assert_eq!(
            b.read("/src/a.c").unwrap().as_deref(),
            Some(&b"int a;\n"[..])
        );
        assert_eq!(b.read("rel/b.h").unwrap().as_deref(), Some(&b"#x\n"[..]));
        assert_eq!(b.read("/src/c.c").unwrap(), None);
        let ask = |build_id| {
            b.source(&SourceRequest {
                path: "/src/a.c",
                build_id,
                max_bytes: 100,
            })
        };
        assert!(ask(Some("abcd")).is_some());
        assert_eq!(ask(Some("ffff")), None, "another build's bundle");
        assert_eq!(ask(None), None);
    }

    #[test]
    fn a_path_given_twice_or_escaping_is_written_once_or_not_at_all() {
        let files = [
            ("/src/a.c".to_string(), b"first".to_vec()),
            ("src/a.c".to_string(), b"same entry".to_vec()),
            ("/src/../etc/passwd".to_string(), b"escapes".to_vec()),
        ];
        let out = write_each(Cursor::new(Vec::new()), "abcd", files).unwrap();
        let b = open(out.into_inner().into()).unwrap();
        assert_eq!(b.manifest().files, vec!["/src/a.c".to_string()]);
        assert_eq!(b.read("/src/a.c").unwrap().as_deref(), Some(&b"first"[..]));
    }

    #[test]
    fn paths_escaping_the_bundle_are_refused() {
        let m = manifest(&[]);
        for name in ["../evil.c", "files/../../evil.c", "/etc/passwd"] {
            let err = open(raw_zip(&[(name, b"x"), (MANIFEST, &m)])).unwrap_err();
            assert_eq!(err, SourceBundleError::UnsafePath(name.into()), "{name}");
            assert_eq!(err.code(), "zip-unsafe-path");
        }
        let m = manifest(&["/src/../../etc/passwd"]);
        let err = open(raw_zip(&[("files/etc/passwd", b"x"), (MANIFEST, &m)])).unwrap_err();
        assert_eq!(
            err,
            SourceBundleError::UnsafePath("/src/../../etc/passwd".into())
        );
        assert_eq!(entry_name("/a/../b"), None);
        assert_eq!(entry_name("/a/b.c").as_deref(), Some("files/a/b.c"));
    }

    #[test]
    fn a_zip_bomb_is_refused_when_read() {
        let zeros = vec![0u8; 4 << 20];
        let b = open(bundle(&[("/bomb.c", &zeros)])).unwrap();
        let err = b.read("/bomb.c").unwrap_err();
        assert_eq!(err.code(), "zip-bomb", "{err}");
        let small = BundleLimits {
            max_file_bytes: 1000,
            ..BundleLimits::default()
        };
        let b = SourceBundle::open(bundle(&[("/big.c", &[b'x'; 2000])]), small).unwrap();
        assert!(matches!(
            b.read("/big.c"),
            Err(SourceBundleError::FileTooLarge { max: 1000, .. })
        ));
    }

    #[test]
    fn too_many_entries_oversize_and_bad_manifests_are_refused() {
        let limits = BundleLimits {
            max_entries: 2,
            ..BundleLimits::default()
        };
        let three = bundle(&[("/a", b"a"), ("/b", b"b")]);
        assert!(matches!(
            SourceBundle::open(three.clone(), limits),
            Err(SourceBundleError::TooManyEntries { entries: 3, max: 2 })
        ));
        let tiny = BundleLimits {
            max_bundle_bytes: 10,
            ..BundleLimits::default()
        };
        assert!(matches!(
            SourceBundle::open(three, tiny),
            Err(SourceBundleError::TooLarge { max: 10, .. })
        ));
        assert_eq!(
            open(raw_zip(&[("files/a", b"a")])).unwrap_err(),
            SourceBundleError::NoManifest
        );
        assert!(matches!(
            open(raw_zip(&[(MANIFEST, b"{")])),
            Err(SourceBundleError::BadManifest(_))
        ));
        let m = manifest(&["/not/there.c"]);
        assert_eq!(
            open(raw_zip(&[(MANIFEST, &m)])).unwrap_err(),
            SourceBundleError::MissingFile("/not/there.c".into())
        );
        assert!(matches!(
            open(Arc::from(&b"not a zip"[..])),
            Err(SourceBundleError::NotZip(_))
        ));
    }
}
