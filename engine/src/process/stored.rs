//! A module's whole tables as the three byte strings a cache keeps per build: the unwind
//! table, the symbol table and the build's notes (the warnings the build met and which file
//! gave which table). The service keeps them as rows of its database; `postmortem walk
//! --table-cache` as files on disk. One encoding, so that both read back exactly the tables
//! that were built, and a later change of the notes' form bumps one version for both.

use serde::{Deserialize, Serialize};

use crate::binary::FileBytes;
use crate::report::ModuleFile;
use crate::symbols::SymbolTable;
use crate::tables::{ModuleTables, SymbolTables, Tables, UnwindTables};
use crate::unwind::UnwindTable;
use crate::warning::Warning;

/// Format version of the stored build notes ([`BuildNotes`] as JSON); version 1 was the
/// warnings alone.
pub const NOTES_VERSION: u32 = 2;

/// What a build says besides its tables.
#[derive(Debug, Serialize, Deserialize)]
struct BuildNotes {
    /// (code, message) of each problem the build met: the [`Warning`]s of the tables,
    /// stored in the form version 2 has always had.
    warnings: Vec<(String, String)>,
    /// Which file gave which table.
    files: Vec<ModuleFile>,
}

/// The three byte strings of whole tables, as a cache stores them. An empty unwind or
/// symbol table means "built; the files hold no such table", so that it is not rebuilt.
/// Shared bytes of any owner: the service's cached rows, or files a walk maps, so that
/// tables read back are not copied (a libc's symbol table is megabytes, and copying it
/// cost a cached one-shot walk more than the walk itself).
#[derive(Debug, Clone)]
pub struct StoredTables {
    pub unwind: FileBytes,
    pub symbols: FileBytes,
    pub notes: FileBytes,
}

impl StoredTables {
    /// The stored form of freshly built whole tables. On-demand parts (an indexed `.sym`
    /// file, rules or symbols built where a walk looks) are not stored: `None` for tables
    /// that have any, since reading them back would lose what they hold.
    pub fn of(built: &ModuleTables) -> Option<StoredTables> {
        if built.is_on_demand() {
            return None;
        }
        let notes = serde_json::to_vec(&BuildNotes {
            warnings: built
                .warnings
                .iter()
                .map(|w| (w.code.clone(), w.message.clone()))
                .collect(),
            files: built.files.clone(),
        })
        .ok()?;
        let empty = || FileBytes::new(Vec::new());
        Some(StoredTables {
            unwind: built.whole_unwind().cloned().unwrap_or_else(empty),
            symbols: built.whole_symbols().cloned().unwrap_or_else(empty),
            notes: FileBytes::new(notes),
        })
    }

    /// The tables these bytes hold, with `verified` as the caller matched the files (the
    /// code image is the caller's to add). `None` when the notes cannot be read, which a
    /// cache treats as a miss and rebuilds rather than lose them.
    pub fn tables(self, verified: bool) -> Option<ModuleTables> {
        let notes: BuildNotes = serde_json::from_slice(&self.notes).ok()?;
        Some(ModuleTables {
            tables: Tables::Built {
                unwind: Some(self.unwind)
                    .filter(|b| !b.is_empty())
                    .map(UnwindTables::Whole),
                symbols: Some(self.symbols)
                    .filter(|b| !b.is_empty())
                    .map(SymbolTables::Whole),
            },
            code: None,
            verified,
            warnings: notes
                .warnings
                .into_iter()
                .map(|(code, message)| Warning::new(code, message))
                .collect(),
            files: notes.files,
        })
    }

    /// [`StoredTables::tables`] for bytes read from somewhere a crash, a full disk or
    /// another program may have cut or changed: `None` also when a table does not open,
    /// so that the caller rebuilds instead of walking with a table it cannot read.
    pub fn checked_tables(self, verified: bool) -> Option<ModuleTables> {
        let unwind_ok = self.unwind.is_empty() || UnwindTable::open(&self.unwind).is_ok();
        let symbols_ok = self.symbols.is_empty() || SymbolTable::open(&self.symbols).is_ok();
        if unwind_ok && symbols_ok {
            self.tables(verified)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FileGave, FileKind};

    fn built() -> ModuleTables {
        ModuleTables {
            verified: true,
            warnings: vec![Warning::new("symbols-corrupt", "a unit was cut short")],
            files: vec![ModuleFile {
                name: "libc.so.6".into(),
                build_id: Some("ab".into()),
                kind: FileKind::Binary,
                gave: vec![FileGave::Unwind],
                source: None,
            }],
            ..ModuleTables::default()
        }
    }

    #[test]
    fn tables_read_back_as_built() {
        let stored = StoredTables::of(&built()).expect("whole tables are stored");
        let back = stored.checked_tables(false).expect("readable");
        assert_eq!(back.warnings, built().warnings);
        assert_eq!(back.files, built().files);
        assert!(back.whole_unwind().is_none() && back.whole_symbols().is_none());
        assert!(!back.verified);
    }

    #[test]
    fn unreadable_bytes_are_a_miss() {
        let mut stored = StoredTables::of(&built()).expect("stored");
        stored.notes = FileBytes::new(&b"{\"warnings\": ["[..]);
        assert!(stored.clone().tables(true).is_none());
        let mut stored = StoredTables::of(&built()).expect("stored");
        stored.unwind = FileBytes::new(&b"PMUNWTAB cut"[..]);
        assert!(stored.clone().checked_tables(true).is_none());
        stored.unwind = FileBytes::new(Vec::new());
        stored.symbols = FileBytes::new(&b"PMSYMTAB\0\0\0"[..]);
        assert!(stored.checked_tables(true).is_none());
    }
}
