//! What a newly stored file changes, in one place: the tables of the module it describes
//! are rebuilt from all of that module's files (their stored rows and cached entries are
//! dropped; for a PDB, those of the Windows images that name it), and the crashes that
//! missed the module, or had only a `.sym` file for it (a binary's tables win; a `.sym`
//! file is stored only for a debug-id no other `.sym` holds), or a Windows image without
//! its PDB, are queued again — the crashes of the project the file arrived in, or of every
//! project for a shared file. Uploads call it; so will any other way files arrive.

use crate::cache::TablesCache;
use crate::store::{binaries, breakpad_used, missing, tables, Db, StoreError};

use engine::resolve::TableKey;

/// The identifiers of a file just stored.
#[derive(Debug, Clone, Copy)]
pub struct NewFile<'a> {
    /// GNU build-id (or Mach-O UUID), lower-case hex.
    pub build_id: Option<&'a str>,
    /// Breakpad debug-id, upper-case.
    pub debug_id: Option<&'a str>,
    /// Whether it is a Breakpad `.sym` file (its tables are keyed by debug-id).
    pub breakpad: bool,
    /// A Windows image, or the image a Windows `.sym` file describes: its file name and
    /// code id.
    pub pe: Option<(&'a str, &'a str)>,
    /// The project the file arrived in: only its crashes are queued again. `None`: a
    /// shared file, which every project's crashes may use.
    pub project: Option<&'a str>,
}

/// Invalidates the tables `file` feeds and requeues the crashes it may change. Returns
/// how many crashes were requeued (the caller wakes the workers when there are any).
pub async fn file_arrived(
    db: &Db,
    cache: &TablesCache,
    file: NewFile<'_>,
) -> Result<u64, StoreError> {
    Ok(file_arrived_within(db, cache, file, u64::MAX)
        .await?
        .requeued)
}

/// [`file_arrived`], requeueing at most `limit` crashes (an upload's share of its token's
/// allowance): the others stay listed as missing the file (`left`), for the next arrival
/// of a file of that id or a reprocess run.
pub async fn file_arrived_within(
    db: &Db,
    cache: &TablesCache,
    file: NewFile<'_>,
    limit: u64,
) -> Result<missing::Requeued, StoreError> {
    let pe_key = file.pe.map(|(name, id)| TableKey::for_pe(name, id));
    let table_key = match (file.debug_id, file.breakpad, &pe_key) {
        (Some(d), true, _) => Some(TableKey::Breakpad(d.to_string())),
        (_, _, Some(k)) => Some(k.clone()),
        _ => file.build_id.map(|b| TableKey::BuildId(b.to_string())),
    };
    let mut keys: Vec<TableKey> = table_key.into_iter().collect();
    if let (true, Some(k)) = (file.breakpad, &pe_key) {
        // a Windows .sym file: the tables of a module the dump names by image name and
        // code id are kept under the image's key
        keys.push(k.clone());
    }
    if let (Some(d), false) = (file.debug_id, file.breakpad) {
        // a PDB: the tables of the Windows images whose CodeView record names it, and of
        // the PDB alone, are built again with it
        keys.push(TableKey::Pdb(d.to_string()));
        for row in binaries::by_debug_id(db, d).await? {
            if let (true, Some(code_id)) = (row.format == "pe", &row.code_id) {
                let mut names = binaries::names_of(db, &row.sha256).await?;
                names.extend(row.file_name.clone());
                for name in names {
                    keys.push(TableKey::for_pe(&name, code_id));
                }
            }
        }
    }
    for key in keys {
        tables::invalidate(db, &key.to_string()).await?;
        cache.invalidate(&key);
    }
    requeue_within(db, file, limit).await
}

/// Requeues at most `limit` of the crashes that missed `file` (or had only a `.sym` file
/// where it is a binary), without touching tables: what [`file_arrived_within`] does
/// last.
async fn requeue_within(
    db: &Db,
    file: NewFile<'_>,
    limit: u64,
) -> Result<missing::Requeued, StoreError> {
    let pe_key = file.pe.map(|(name, id)| TableKey::for_pe(name, id));
    // a Windows module the dump gives no debug id is missed under its image's key
    let pe_key = pe_key.map(|k| k.to_string());
    let b = file.build_id.or(pe_key.as_deref());
    let d = file.debug_id;
    let p = file.project;
    let missed = missing::requeue_for_ids_within(db, b, d, p, limit).await?;
    let rest = limit.saturating_sub(missed.requeued);
    let used = breakpad_used::requeue_for_ids_within(db, b, d, p, rest).await?;
    let done = missing::Requeued {
        requeued: missed.requeued + used.requeued,
        left: missed.left + used.left,
    };
    if done.requeued > 0 || done.left > 0 {
        tracing::info!(build_id = ?b, debug_id = ?d, requeued = done.requeued, left = done.left,
            "crashes requeued");
    }
    Ok(done)
}
