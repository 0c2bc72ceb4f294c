//! Whole tables kept on disk between walks (`--table-cache DIR`), as the service keeps them
//! in its database: the first walk of a build's files builds its tables whole and stores
//! them; every later walk of any dump of those files reads them instead of reading the
//! files' DWARF again. For runs that walk many dumps of the same builds (triage of a batch
//! of minidumps, a crash handler on a machine), where a one-shot walk would inflate and
//! index libc's debug information every time.
//!
//! An entry is named by a hash of the files it was built from — each one's path, size,
//! modification time and inode, the table formats' versions and this program's version —
//! so a file replaced or a debug package installed gives another entry, never stale tables.
//! Entries are written into a temporary directory and renamed into place whole, and read
//! back only if every table opens: a walk cut short or a full disk leaves a miss, not a
//! wrong report. Nothing is ever deleted: remove the directory to reclaim its space.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use engine::binary::FileBytes;
use engine::process::{ModuleTables, StoredTables, NOTES_VERSION};
use engine::resolve::TableKey;
use mapped::Mapped;
use sha2::{Digest, Sha256};

/// The files of one entry.
const FILES: [&str; 3] = ["unwind", "symbols", "notes"];

/// A directory of whole tables.
pub struct TableCache {
    root: PathBuf,
    /// Problems met writing entries, each said once (the walk goes on without the cache).
    problems: Mutex<Vec<String>>,
}

impl TableCache {
    /// The cache at `dir` (created when the first entry is written).
    pub fn new(dir: &Path) -> TableCache {
        TableCache {
            root: dir.join("tables-v1"),
            problems: Mutex::new(Vec::new()),
        }
    }

    /// The entry's name for tables of `key` built from `files` (the name each is given
    /// and its path, in the builders' order), `None` when a file cannot be looked at (then
    /// nothing is cached).
    pub fn entry(
        &self,
        key: &TableKey,
        files: &[(&str, &Path)],
        verified: bool,
    ) -> Option<PathBuf> {
        let mut h = Sha256::new();
        h.update(env!("CARGO_PKG_VERSION"));
        for v in [
            engine::unwind::UNWIND_TABLE_VERSION,
            engine::symbols::SYMBOL_TABLE_VERSION,
            NOTES_VERSION,
        ] {
            h.update(v.to_le_bytes());
        }
        h.update([u8::from(verified)]);
        h.update(key.to_string());
        for (name, p) in files {
            h.update([0]);
            h.update(name);
            let canonical = fs::canonicalize(p).ok()?;
            let meta = fs::metadata(&canonical).ok()?;
            h.update([0]);
            h.update(canonical.as_os_str().as_encoded_bytes());
            h.update([0]);
            h.update(meta.len().to_le_bytes());
            let mtime = meta
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            h.update(mtime.as_nanos().to_le_bytes());
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                h.update(meta.dev().to_le_bytes());
                h.update(meta.ino().to_le_bytes());
            }
        }
        let name: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Some(self.root.join(&name[..2]).join(&name[2..]))
    }

    /// The tables stored at `entry`, if they are all there and open. The files are mapped,
    /// not read: a walk looks at a few pages of a libc's megabytes of symbols.
    pub fn get(&self, entry: &Path, verified: bool) -> Option<ModuleTables> {
        let read = |name: &str| Mapped::open(&entry.join(name)).ok().map(FileBytes::new);
        StoredTables {
            unwind: read(FILES[0])?,
            symbols: read(FILES[1])?,
            notes: read(FILES[2])?,
        }
        .checked_tables(verified)
    }

    /// Stores whole tables at `entry`; a failure is kept for [`TableCache::problems`].
    pub fn put(&self, entry: &Path, built: &ModuleTables) {
        let Some(stored) = StoredTables::of(built) else {
            return;
        };
        if let Err(e) = write_entry(entry, &stored) {
            let message = format!("table cache {}: {e}", self.root.display());
            if let Ok(mut p) = self.problems.lock() {
                if !p.contains(&message) {
                    p.push(message);
                }
            }
        }
    }

    /// What went wrong writing entries, for the caller to tell.
    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

/// Writes the entry's files into a new directory beside it and renames that into place,
/// replacing an entry that could not be read; another walk that stored the same entry
/// first wins.
fn write_entry(entry: &Path, stored: &StoredTables) -> io::Result<()> {
    let parent = entry
        .parent()
        .ok_or_else(|| io::Error::other("an entry has a parent directory"))?;
    fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new()
        .prefix(".new-")
        .tempdir_in(parent)?;
    for (name, bytes) in FILES
        .iter()
        .zip([&stored.unwind, &stored.symbols, &stored.notes])
    {
        fs::write(tmp.path().join(name), &bytes[..])?;
    }
    if entry.is_dir() {
        // an entry that did not open (cut short, changed): replaced
        fs::remove_dir_all(entry)?;
    }
    match fs::rename(tmp.path(), entry) {
        Ok(()) => {
            // renamed away: nothing left for the guard to delete
            let _ = tmp.keep();
            Ok(())
        }
        // another walk stored it meanwhile
        Err(_) if entry.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}
