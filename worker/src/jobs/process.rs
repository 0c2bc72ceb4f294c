//! One crash → one report: fetch the dump, find its modules' tables (cache → database →
//! build from the uploaded binaries or Breakpad `.sym` files), run the engine, record what
//! was missing. The warnings a table build met, and which file gave which table, are
//! stored and cached with the tables, so a report made from cached tables says what the
//! first build said.
//!
//! Engine calls happen on a blocking thread with a time limit and `catch_unwind`
//! ([`run_guarded`]), so neither a panic nor an endless loop in a parser takes the worker
//! down. (A timed-out thread cannot be killed; it runs on detached and its result is
//! dropped, while the job is already marked failed.)

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tracing::{info_span, instrument, Instrument};

use super::{JobError, Runner};
use crate::cache::{TableKey, TableKind};
use crate::store::{binaries, breakpad_used, crashes, missing, tables};
use engine::dump::{Dump, Module};
use engine::process::{CodeImage, ModuleTables, TableInput, TableProvider};
use engine::report::{ModuleFile, Report};

/// Format version of the symbol tables.
/// The symbol table format version the cached tables are keyed by.
pub const SYMBOL_TABLE_VERSION: u32 = engine::symbols::SYMBOL_TABLE_VERSION;

/// Processes one leased crash. Returns the report as stored: its JSON text, signature and
/// index terms, all taken from the typed report (serialized once, never re-parsed).
#[instrument(skip_all, fields(crash_id = %lease.id, attempt = lease.attempts))]
pub async fn process_job(
    runner: &Runner,
    lease: &crashes::Lease,
) -> Result<crashes::StoredReport, JobError> {
    let limit = runner.config.time_limit;
    let dump = runner.blobs.get(&lease.dump_sha256).await?;

    // 1. Which modules does the dump need, by build-id and debug-id?
    let bytes = dump.clone();
    let needed: Vec<Needed> = run_guarded(limit, move || {
        let d = engine::dump::read_dump(&bytes)?;
        Ok(d.modules
            .iter()
            .filter_map(|m| {
                Some(Needed {
                    key: module_key(m)?,
                    build_id: m.build_id_hex(),
                    debug_id: m.breakpad_debug_id(),
                    name: m.name.clone(),
                })
            })
            .collect())
    })
    .await?;

    // 2. Their tables, recording the ones nobody uploaded.
    missing::clear_crash(&runner.db, &lease.id).await?;
    breakpad_used::clear_crash(&runner.db, &lease.id).await?;
    let mut found: HashMap<String, ModuleTables> = HashMap::new();
    for n in needed {
        if found.contains_key(&n.key) || is_vdso(&n.name) {
            // The vdso's tables come from the dump's own memory: nobody uploads it.
            continue;
        }
        match module_tables(runner, n.build_id.as_deref(), n.debug_id.as_deref()).await? {
            Some((t, from_sym)) => {
                if from_sym {
                    breakpad_used::record(&runner.db, &n.key, n.debug_id.as_deref(), &lease.id)
                        .await?;
                }
                found.insert(n.key, t);
            }
            None => {
                missing::record_module(
                    &runner.db,
                    &n.key,
                    n.debug_id.as_deref(),
                    &lease.id,
                    &n.name,
                )
                .await?
            }
        }
    }

    // 3. The report.
    let bytes = dump.clone();
    // The blob key is the sha256 of exactly these bytes: no need to hash them again.
    let options = runner
        .config
        .process
        .clone()
        .with_dump_sha256(lease.dump_sha256.clone());
    let mut report = run_guarded(limit, move || run_engine(&bytes, found, &options))
        .instrument(info_span!("engine"))
        .await?;

    // Upload form fields (Crashpad `prod`, `ver`, `guid`, …) are annotations too; the
    // dump's own annotations win on a clash, and the report's budget holds.
    let uploaded: BTreeMap<String, String> =
        serde_json::from_str(&lease.annotations).unwrap_or_default();
    let max_bytes = runner.config.process.budget.max_report_bytes;
    engine::report::budget::add_annotations(&mut report, uploaded, max_bytes);
    crashes::StoredReport::of(&report)
        .map_err(|e| JobError::Serialize(format!("report not serializable: {e}")))
}

/// Runs `f` on a blocking thread, failing with [`JobError::TimeLimit`] after `limit` and
/// with [`JobError::Panic`] if it panics.
pub async fn run_guarded<T, F>(limit: Duration, f: F) -> Result<T, JobError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, JobError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(move || std::panic::catch_unwind(AssertUnwindSafe(f)));
    match tokio::time::timeout(limit, task).await {
        Err(_) => Err(JobError::TimeLimit(limit)),
        Ok(Err(join)) if join.is_cancelled() => Err(JobError::Cancelled),
        Ok(Err(join)) => Err(JobError::Panic(join.to_string())),
        Ok(Ok(Err(panic))) => Err(JobError::Panic(panic_message(&panic))),
        Ok(Ok(Ok(r))) => r,
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// How a dump names one module it needs.
struct Needed {
    /// What its tables are handed to the engine by ([`module_key`]).
    key: String,
    build_id: Option<String>,
    /// Upper-case Breakpad debug-id (the dump's, or derived from the build-id).
    debug_id: Option<String>,
    name: String,
}

/// A module's key among the fetched tables: its build-id (lower-case hex), else its
/// debug-id (upper-case, so never equal to a build-id).
fn module_key(m: &Module) -> Option<String> {
    m.build_id_hex().or_else(|| m.breakpad_debug_id())
}

/// Format version of the stored build notes ([`BuildNotes`] as JSON); version 1 was the
/// warnings alone.
const WARNINGS_VERSION: u32 = 2;

/// What a build says besides its tables, stored in the `warnings` row.
#[derive(serde::Serialize, serde::Deserialize)]
struct BuildNotes {
    /// (code, message) of each problem the build met.
    warnings: Vec<(String, String)>,
    /// Which file gave which table.
    files: Vec<ModuleFile>,
}

/// The three rows a build stores, with their format versions.
const KINDS: [(TableKind, u32); 3] = [
    (TableKind::Unwind, engine::unwind::UNWIND_TABLE_VERSION),
    (TableKind::Symbols, SYMBOL_TABLE_VERSION),
    (TableKind::Warnings, WARNINGS_VERSION),
];

/// The tables of one module, as `postmortem walk` chooses its files: the binaries of its
/// build-id (their own tables win over any `.sym`), else a binary whose debug-id it is (a
/// Mach-O named by a minidump), else the newest Breakpad `.sym` of its debug-id. Each
/// comes from moka → `tables` rows → built from the uploaded files (and stored). `None`
/// when no file was uploaded for it; else the tables and whether they are a `.sym` file's.
async fn module_tables(
    runner: &Runner,
    build_id: Option<&str>,
    debug_id: Option<&str>,
) -> Result<Option<(ModuleTables, bool)>, JobError> {
    if let Some(id) = build_id {
        let files = binary_files(runner, id).await?;
        if !files.is_empty() {
            return Ok(Some((binary_tables(runner, id, &files).await?, false)));
        }
    }
    let Some(debug_id) = debug_id else {
        return Ok(None);
    };
    let rows = binaries::by_debug_id(&runner.db, debug_id).await?;
    let binary_id = rows
        .iter()
        .filter(|f| !f.is_breakpad())
        .find_map(|f| f.build_id().map(str::to_string));
    if let Some(id) = binary_id {
        let files = binary_files(runner, &id).await?;
        if !files.is_empty() {
            return Ok(Some((binary_tables(runner, &id, &files).await?, false)));
        }
    }
    match rows.iter().rev().find(|f| f.is_breakpad()) {
        Some(sym) => Ok(Some((sym_tables(runner, debug_id, sym).await?, true))),
        None => Ok(None),
    }
}

/// The binaries and debug files (not `.sym` files) of a build-id.
async fn binary_files(
    runner: &Runner,
    build_id: &str,
) -> Result<Vec<binaries::BinaryRow>, JobError> {
    let mut files = binaries::by_build_id(&runner.db, build_id).await?;
    files.retain(|f| !f.is_breakpad());
    Ok(files)
}

/// The key the tables of a `.sym` file are stored under: never a build-id.
pub fn breakpad_table_key(debug_id: &str) -> String {
    format!("breakpad:{debug_id}")
}

/// The tables stored under `key` (moka, then the database), with the warnings their build
/// met; `None` unless all three rows are there.
async fn cached_tables(runner: &Runner, key: &str) -> Result<Option<ModuleTables>, JobError> {
    let mut got: Vec<Arc<[u8]>> = Vec::new();
    for (kind, version) in KINDS {
        let cache_key = TableKey {
            build_id: key.to_string(),
            kind,
            version,
        };
        if let Some(b) = runner.cache.get(&cache_key).await {
            got.push(b);
            continue;
        }
        match tables::get(&runner.db, key, kind.as_str(), version).await? {
            Some(b) => {
                let b: Arc<[u8]> = b.into();
                runner.cache.insert(cache_key, b.clone()).await;
                got.push(b);
            }
            None => return Ok(None),
        }
    }
    let [unwind, symbols, warnings] = <[Arc<[u8]>; 3]>::try_from(got)
        .map_err(|_| JobError::Panic("three table kinds expected".into()))?;
    // Unreadable notes (never written so by us): rebuild rather than lose them.
    let Ok(notes) = serde_json::from_slice::<BuildNotes>(&warnings) else {
        return Ok(None);
    };
    Ok(Some(tables_from(Some(unwind), Some(symbols), notes)))
}

/// Stores freshly built tables under `key` (database and moka) and counts the build.
async fn store_tables(runner: &Runner, key: &str, built: &ModuleTables) -> Result<(), JobError> {
    let notes = BuildNotes {
        warnings: built.warnings.clone(),
        files: built.files.clone(),
    };
    let warnings = serde_json::to_vec(&notes)
        .map_err(|e| JobError::Serialize(format!("table warnings: {e}")))?;
    for (kind, version) in KINDS {
        let bytes: Arc<[u8]> = match kind {
            // An empty row means "built; the files hold no such table", so it is not rebuilt.
            TableKind::Unwind => built
                .unwind
                .clone()
                .unwrap_or_else(|| Arc::from(Vec::new())),
            TableKind::Symbols => built
                .symbols
                .clone()
                .unwrap_or_else(|| Arc::from(Vec::new())),
            TableKind::Warnings => Arc::from(warnings.as_slice()),
        };
        tables::put(&runner.db, key, kind.as_str(), version, &bytes).await?;
        runner
            .cache
            .insert(
                TableKey {
                    build_id: key.to_string(),
                    kind,
                    version,
                },
                bytes,
            )
            .await;
    }
    runner.cache.stats().built.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The tables of a build-id's binaries: cached, else built from every file of the
/// build-id (the main file first, debug files as extras).
async fn binary_tables(
    runner: &Runner,
    build_id: &str,
    files: &[binaries::BinaryRow],
) -> Result<ModuleTables, JobError> {
    let mut t = match cached_tables(runner, build_id).await? {
        Some(t) => t,
        None => {
            // (is a debug file, name, bytes): the binary first, debug files after
            let mut blobs: Vec<(bool, String, Bytes)> = Vec::new();
            for f in files {
                let name = f.file_name.clone().unwrap_or_else(|| f.sha256.clone());
                let bytes = runner.blobs.get(&f.sha256).await?;
                blobs.push((f.kind == "debug", name, bytes));
            }
            blobs.sort_by_key(|(debug, _, _)| *debug);
            let built = run_guarded(runner.config.time_limit, move || {
                let (binary, debug) = match blobs.split_first() {
                    Some((first, rest)) if !first.0 => (Some(input(first)), rest),
                    _ => (None, &blobs[..]),
                };
                let debug: Vec<TableInput<'_>> = debug.iter().map(input).collect();
                Ok(engine::process::build_tables(binary, &debug))
            })
            .instrument(info_span!("build_tables", build_id = %build_id))
            .await?;
            store_tables(runner, build_id, &built).await?;
            // As read back from the cache: an empty table is no table.
            let notes = BuildNotes {
                warnings: built.warnings,
                files: built.files,
            };
            tables_from(built.unwind, built.symbols, notes)
        }
    };
    t.code = code_image(runner, build_id, files).await?;
    Ok(t)
}

/// The tables of a module's Breakpad `.sym` file: cached, else built from it.
async fn sym_tables(
    runner: &Runner,
    debug_id: &str,
    sym: &binaries::BinaryRow,
) -> Result<ModuleTables, JobError> {
    let key = breakpad_table_key(debug_id);
    if let Some(t) = cached_tables(runner, &key).await? {
        return Ok(t);
    }
    let text = runner.blobs.get(&sym.sha256).await?;
    let name = sym.file_name.clone().unwrap_or_else(|| sym.sha256.clone());
    let built = run_guarded(runner.config.time_limit, move || {
        Ok(engine::process::build_tables_from_breakpad(&name, &text))
    })
    .instrument(info_span!("build_tables_breakpad", debug_id = %debug_id))
    .await?;
    store_tables(runner, &key, &built).await?;
    let notes = BuildNotes {
        warnings: built.warnings,
        files: built.files,
    };
    Ok(tables_from(built.unwind, built.symbols, notes))
}

/// The code bytes of a build-id's main (non-debug) file, which the stack scan uses to
/// check that a candidate return address follows a call, as `postmortem walk` does with
/// the file it found. Cached in memory; `None` when only debug files were uploaded.
async fn code_image(
    runner: &Runner,
    build_id: &str,
    files: &[binaries::BinaryRow],
) -> Result<Option<CodeImage>, JobError> {
    if let Some(b) = runner.cache.code(build_id).await {
        return Ok(CodeImage::new(b));
    }
    let Some(main) = files.iter().find(|f| f.kind != "debug") else {
        return Ok(None);
    };
    let bytes: Arc<[u8]> = Arc::from(&runner.blobs.get(&main.sha256).await?[..]);
    runner.cache.insert_code(build_id, bytes.clone()).await;
    Ok(CodeImage::new(bytes))
}

fn tables_from(
    unwind: Option<Arc<[u8]>>,
    symbols: Option<Arc<[u8]>>,
    notes: BuildNotes,
) -> ModuleTables {
    ModuleTables {
        unwind: unwind.filter(|b| !b.is_empty()),
        symbols: symbols.filter(|b| !b.is_empty()),
        code: None,
        verified: true,
        warnings: notes.warnings,
        breakpad: None,
        files: notes.files,
    }
}

/// One fetched file as a build input.
fn input((_, name, bytes): &(bool, String, Bytes)) -> TableInput<'_> {
    TableInput { name, bytes }
}

/// Hands the fetched tables to the engine, by [`module_key`].
struct FetchedTables(HashMap<String, ModuleTables>);

impl TableProvider for FetchedTables {
    fn tables(&self, _dump: &Dump<'_>, module: &Module) -> Option<ModuleTables> {
        self.0.get(&module_key(module)?).cloned()
    }
}

/// The kernel's vdso (by the names the dump readers give it), whose image is in the dump.
fn is_vdso(name: &str) -> bool {
    name.contains("vdso") || name.contains("linux-gate")
}

/// Runs the engine on one dump with the tables fetched for it.
fn run_engine(
    dump: &[u8],
    tables: HashMap<String, ModuleTables>,
    options: &engine::process::ProcessOptions,
) -> Result<Report, JobError> {
    let provider = FetchedTables(tables);
    Ok(engine::process::process_dump(dump, &provider, options)?)
}
