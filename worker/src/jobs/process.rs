//! One crash → one report: fetch the dump, find its modules' tables (cache → database →
//! build from the uploaded binaries), run the engine, record what was missing.
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
use serde_json::Value;
use tracing::{info_span, instrument, Instrument};

use super::{JobError, Runner};
use crate::cache::{TableKey, TableKind};
use crate::dump::{Dump, Module};
use crate::process::{CodeImage, ModuleTables, TableProvider};
use crate::store::{binaries, crashes, missing, tables};

/// Format version of the symbol tables.
/// The symbol table format version the cached tables are keyed by.
pub const SYMBOL_TABLE_VERSION: u32 = crate::symbols::SYMBOL_TABLE_VERSION;

/// Processes one leased crash. Returns the report JSON text and its signature text.
#[instrument(skip_all, fields(crash_id = %lease.id, attempt = lease.attempts))]
pub async fn process_job(
    runner: &Runner,
    lease: &crashes::Lease,
) -> Result<(String, Option<String>), JobError> {
    let limit = runner.config.time_limit;
    let dump = runner.blobs.get(&lease.dump_sha256).await?;

    // 1. Which build-ids does the dump need?
    let bytes = dump.clone();
    let needed: Vec<(String, String)> = run_guarded(limit, move || {
        let d = crate::dump::read_dump(&bytes)?;
        Ok(d.modules
            .iter()
            .filter_map(|m| Some((m.build_id_hex()?, m.name.clone())))
            .collect())
    })
    .await?;

    // 2. Their tables, recording the ones nobody uploaded.
    missing::clear_crash(&runner.db, &lease.id).await?;
    let mut found: HashMap<String, ModuleTables> = HashMap::new();
    for (build_id, name) in needed {
        if found.contains_key(&build_id) || is_vdso(&name) {
            // The vdso's tables come from the dump's own memory: nobody uploads it.
            continue;
        }
        match module_tables(runner, &build_id).await? {
            Some(t) => {
                found.insert(build_id, t);
            }
            None => missing::record(&runner.db, &build_id, &lease.id, &name).await?,
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
    // dump's own annotations win on a clash.
    let uploaded: BTreeMap<String, String> =
        serde_json::from_str(&lease.annotations).unwrap_or_default();
    if let Some(Value::Object(ann)) = report.get_mut("annotations") {
        for (k, v) in uploaded {
            ann.entry(k).or_insert(Value::String(v));
        }
    }
    let signature = report
        .get("signature")
        .and_then(|s| s.get("text"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let text = serde_json::to_string(&report)
        .map_err(|e| JobError::Panic(format!("report not serializable: {e}")))?;
    Ok((text, signature))
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

/// The tables of one build-id: moka → `tables` rows → built from the uploaded files (and
/// stored). `None` when no file was uploaded for it.
async fn module_tables(runner: &Runner, build_id: &str) -> Result<Option<ModuleTables>, JobError> {
    let files = binaries::by_build_id(&runner.db, build_id).await?;
    if files.is_empty() {
        return Ok(None);
    }
    let kinds = [
        (TableKind::Unwind, crate::unwind::UNWIND_TABLE_VERSION),
        (TableKind::Symbols, SYMBOL_TABLE_VERSION),
    ];
    let mut got: Vec<Option<Arc<[u8]>>> = Vec::new();
    for (kind, version) in kinds {
        let key = TableKey {
            build_id: build_id.to_string(),
            kind,
            version,
        };
        if let Some(b) = runner.cache.get(&key).await {
            got.push(Some(b));
            continue;
        }
        match tables::get(&runner.db, build_id, kind.as_str(), version).await? {
            Some(b) => {
                let b: Arc<[u8]> = b.into();
                runner.cache.insert(key, b.clone()).await;
                got.push(Some(b));
            }
            None => got.push(None),
        }
    }
    if got.iter().all(Option::is_some) {
        let mut it = got.into_iter().flatten();
        let mut t = tables_from(it.next(), it.next(), Vec::new());
        t.code = code_image(runner, build_id, &files).await?;
        return Ok(Some(t));
    }

    // Build from every file of the build-id: the main file first (executable or shared
    // object), debug files as extras.
    let mut blobs: Vec<(bool, Bytes)> = Vec::new();
    for f in &files {
        blobs.push((f.kind == "debug", runner.blobs.get(&f.sha256).await?));
    }
    blobs.sort_by_key(|(debug, _)| *debug);
    let id = build_id.to_string();
    let built = run_guarded(runner.config.time_limit, move || {
        let mut it = blobs.into_iter().map(|(_, b)| b);
        let Some(main) = it.next() else {
            return Ok(ModuleTables::default());
        };
        let extra: Vec<Bytes> = it.collect();
        let extra: Vec<&[u8]> = extra.iter().map(|b| &b[..]).collect();
        Ok(build_tables(&main, &extra))
    })
    .instrument(info_span!("build_tables", build_id = %id))
    .await?;
    for (kind, version) in kinds {
        let bytes = match kind {
            TableKind::Unwind => built.unwind.clone(),
            TableKind::Symbols => built.symbols.clone(),
        };
        // An empty row means "built; the files hold no such table", so it is not rebuilt.
        let bytes: Arc<[u8]> = bytes.unwrap_or_else(|| Arc::from(Vec::new()));
        tables::put(&runner.db, build_id, kind.as_str(), version, &bytes).await?;
        runner
            .cache
            .insert(
                TableKey {
                    build_id: build_id.to_string(),
                    kind,
                    version,
                },
                bytes,
            )
            .await;
    }
    runner.cache.stats().built.fetch_add(1, Ordering::Relaxed);
    let mut built = built;
    built.code = code_image(runner, build_id, &files).await?;
    Ok(Some(built))
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
    warnings: Vec<(&'static str, String)>,
) -> ModuleTables {
    ModuleTables {
        unwind: unwind.filter(|b| !b.is_empty()),
        symbols: symbols.filter(|b| !b.is_empty()),
        code: None,
        verified: true,
        warnings,
    }
}

/// Builds one build-id's tables from its files: the engine's own builder.
fn build_tables(binary: &[u8], debug_files: &[&[u8]]) -> ModuleTables {
    crate::process::build_tables(Some(binary), debug_files)
}

/// Hands the fetched tables to the engine, by build-id.
struct FetchedTables(HashMap<String, ModuleTables>);

impl TableProvider for FetchedTables {
    fn tables(&self, _dump: &Dump<'_>, module: &Module) -> Option<ModuleTables> {
        self.0.get(&module.build_id_hex()?).cloned()
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
    options: &crate::process::ProcessOptions,
) -> Result<Value, JobError> {
    let provider = FetchedTables(tables);
    let report = crate::process::process_dump(dump, &provider, options)?;
    serde_json::to_value(&report).map_err(|e| JobError::Serialize(e.to_string()))
}
