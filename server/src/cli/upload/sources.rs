//! `postmortem upload --include-sources`: a source bundle per build-id whose debug
//! information has line tables, made of the source files those tables name that exist
//! on this machine (the build machine, in a CI job), for the server to give reports their
//! source lines (docs/source-context.md).
//!
//! The file names come from the engine's own symbol table of the debug file
//! (`engine::symbols::build_symbol_table`, `SymbolTable::source_files`), so they are
//! spelled exactly as the reports' frames spell them, which is what a bundle is asked by.
//! Only absolute paths are read (a relative one would be resolved against wherever the
//! upload runs), only regular files of at most 16 MiB (the most a report reads of one
//! file), at most [`MAX_BUNDLE_INPUT`] bytes of them in all; the bundle is written one
//! file at a time into a temporary file, then sent like any other file.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use engine::source_bundle::write_each;
use engine::symbols::{build_symbol_table, SymbolTable};

use super::scan::Found;

/// A source file larger than this is left out (a report reads no larger file).
const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// Most source bytes put into one bundle (the server refuses bundles over 1 GiB).
const MAX_BUNDLE_INPUT: u64 = 768 << 20;

/// A bundle written and ready to send.
#[derive(Debug)]
pub struct Bundle {
    /// The debug file whose line tables named the sources.
    pub from: PathBuf,
    /// The zip, in a temporary file (removed when dropped).
    pub file: tempfile::NamedTempFile,
    pub size: u64,
    pub sha256: String,
    /// Source files in the bundle, and files named but not read (absent, relative, too
    /// large, past the bundle's bound).
    pub files: usize,
    pub left_out: usize,
}

/// One file per build-id whose line tables can name sources: of the files found with a
/// build-id and `.debug_line`, a separate debug file first, else the first.
pub fn candidates(found: &[Found]) -> Vec<(String, &Found)> {
    let mut out: Vec<(String, &Found)> = Vec::new();
    for f in found {
        let Some(id) = f.info.build_id.as_deref() else {
            continue;
        };
        if !f.info.sections.contains(&"debug_line") {
            continue;
        }
        let id = id.to_ascii_lowercase();
        match out.iter_mut().find(|(have, _)| *have == id) {
            Some(slot) if f.info.kind == "debug" && slot.1.info.kind != "debug" => slot.1 = f,
            Some(_) => {}
            None => out.push((id, f)),
        }
    }
    out
}

/// The bundle of the sources `debug`'s line tables name, or `None` when none of them
/// exists here.
pub fn make(build_id: &str, debug: &Path) -> anyhow::Result<Option<Bundle>> {
    let mapped = mapped::Mapped::open(debug).with_context(|| format!("{}", debug.display()))?;
    let built = build_symbol_table(None, &[mapped.as_ref()])
        .with_context(|| format!("reading the line tables of {}", debug.display()))?;
    let table = SymbolTable::open(&built.bytes).context("opening the symbol table")?;
    let named = table.source_files();
    let mut left_out = 0usize;
    let mut total = 0u64;
    let mut readable = Vec::new();
    for path in &named {
        match size_if_readable(path) {
            Some(n) if total.saturating_add(n) <= MAX_BUNDLE_INPUT => {
                total += n;
                readable.push(path.to_string());
            }
            _ => left_out += 1,
        }
    }
    if readable.is_empty() {
        return Ok(None);
    }
    let mut files = 0usize;
    let each = readable.into_iter().filter_map(|path| {
        // read when the writer wants it: one source in memory at a time
        let bytes = read_at_most(Path::new(&path), MAX_SOURCE_BYTES)?;
        files += 1;
        Some((path, bytes))
    });
    let out = tempfile::NamedTempFile::new().context("creating the bundle's temporary file")?;
    let mut out = write_each(out, build_id, each).context("writing the source bundle")?;
    out.flush()?;
    let (size, sha256) = super::scan::hash(out.path())?;
    Ok(Some(Bundle {
        from: debug.to_path_buf(),
        file: out,
        size,
        sha256,
        files,
        left_out,
    }))
}

/// The size of the regular file at the absolute `path`, if it can go into a bundle.
fn size_if_readable(path: &str) -> Option<u64> {
    let path = Path::new(path);
    if !path.is_absolute() {
        return None;
    }
    let meta = std::fs::metadata(path).ok()?;
    (meta.is_file() && meta.len() <= MAX_SOURCE_BYTES).then_some(meta.len())
}

/// The file's bytes, or `None` if it cannot be read or grew past `max` meanwhile.
fn read_at_most(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}
