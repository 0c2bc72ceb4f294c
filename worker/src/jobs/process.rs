//! One crash → one report: fetch the dump, find its modules' tables (cache → database →
//! build from the uploaded binaries or Breakpad `.sym` files) and source bundles, run the
//! engine, record what was missing. The warnings a table build met, and which file gave
//! which table, are stored and cached with the tables, so a report made from cached
//! tables says what the first build said.
//!
//! A crash sees the files of its project and the shared ones (`binaries::visible`; issue
//! 41), and tables are kept under their module's [`TableKey`] and the files they were
//! built from ([`FilesKey`]): two projects with different files of one build-id never
//! share tables, two that use the same files do.
//!
//! Engine calls happen on a blocking thread with a time limit and `catch_unwind`
//! ([`run_guarded`]), so neither a panic nor an endless loop in a parser takes the worker
//! down. (A timed-out thread cannot be killed; it runs on detached and its result is
//! dropped, while the job is already marked failed.)

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info_span, instrument, Instrument};

use super::batch_lookups::{self, BatchLookups};
use super::steps::Step;
use super::{fetch, JobError, Runner};
use crate::cache::{CacheKey, TableKind};
use crate::store::module_records::{self, Index, ModuleRecord};
use crate::store::{binaries, crashes, tables};
use engine::binary::FileBytes;
use engine::dump::{Dump, Module};
use engine::process::{CodeImage, ModuleTables, StoredTables, TableProvider, NOTES_VERSION};
use engine::report::{Lookup, Report};
use engine::resolve::{
    build_from_files, locate, lookup_key, FileSource, Found, Located, SourceFile, TableKey,
};

/// Format version of the symbol tables.
/// The symbol table format version the cached tables are keyed by.
pub const SYMBOL_TABLE_VERSION: u32 = engine::symbols::SYMBOL_TABLE_VERSION;

/// Processes one leased crash. Returns the report as stored: its JSON text, signature and
/// index terms, all taken from the typed report (serialized once, never re-parsed).
#[instrument(skip_all, fields(crash_id = %lease.id, attempt = lease.attempts))]
pub async fn process_job(
    runner: &Runner,
    lease: &crashes::Lease,
    batch: &BatchLookups,
) -> Result<crashes::StoredReport, JobError> {
    let limit = runner.config.time_limit;
    // the remote sources' fetches end four fifths into the time limit, whatever their own
    // limits: a slow source cannot keep a crash past its limit, and the walk and the store
    // keep the last fifth to report what was found (the limit is the whole job's deadline:
    // at the limit itself the crash would fail without a report)
    let until = std::time::Instant::now().checked_add(limit.saturating_sub(limit / 5));
    let steps = &runner.metrics.steps;
    // 1. Which modules does the dump name? In place (mapped): the walk reads the pages it
    // needs of a dump of any size.
    let (dump, arch, modules) = steps
        .timed(Step::Read, read_modules(runner, &lease.dump_sha256))
        .await?;

    // 2. Their tables, recording the ones nobody uploaded; beside them, the source of the
    // report's lines: the bundles uploaded for its modules, then the debuginfod servers,
    // then the source-link mappings (the two lookups' round trips overlap: issue 40).
    let sources = super::source_links::provider(
        runner,
        &lease.project,
        &modules,
        &lease.annotations,
        until,
        batch,
    );
    let ((found, lookups), provider) = steps
        .timed(Step::Tables, async {
            tokio::try_join!(
                gather_tables(runner, lease, &modules, arch, until, batch),
                sources
            )
        })
        .await?;

    // 3. The report.
    let bytes = dump.clone();
    // The blob key is the sha256 of exactly these bytes: no need to hash them again.
    let mut options = runner
        .config
        .process
        .clone()
        .with_dump_sha256(lease.dump_sha256.clone());
    options.source_context.provider = provider;
    let report = steps
        .timed(
            Step::Engine,
            run_guarded(limit, move || run_engine(&bytes, found, lookups, &options)),
        )
        .await?;

    // The upload's form fields are not added here: they are stored once, in the crash's
    // row, and added when the report is served (`store::served_report`; issue 34, finding 9).
    let started = std::time::Instant::now();
    let stored = tracing::info_span!("step", step = Step::Serialize.as_str())
        .in_scope(|| crashes::StoredReport::of(&report))
        .map_err(|e| JobError::Serialize(format!("report not serializable: {e}")));
    steps.observe(Step::Serialize, started.elapsed());
    stored
}

/// The dump stored under `sha256`, in place, and the modules the engine will use (a dump
/// listing 100,000 costs no more lookups): from a local blob store, the dump's file is
/// opened, mapped and read on one blocking thread, one hand-off between threads where
/// opening it as [`crate::store::Blobs::open`] does and reading it took three (issue 40);
/// a remote blob is first copied in.
async fn read_modules(
    runner: &Runner,
    sha256: &str,
) -> Result<(FileBytes, engine::dump::Arch, Vec<Module>), JobError> {
    let limit = runner.config.time_limit;
    let max_modules = runner.config.process.budget.max_modules;
    let modules_of = move |bytes: &FileBytes| {
        let mut d = engine::dump::read_dump(bytes)?;
        d.cut_modules(max_modules);
        Ok::<_, JobError>((d.arch, d.modules))
    };
    if let Some(files) = runner.blobs.files() {
        let sha256 = sha256.to_string();
        return run_guarded(limit, move || {
            let dump = files.open(&sha256)?;
            let (arch, modules) = modules_of(&dump)?;
            Ok((dump, arch, modules))
        })
        .await;
    }
    let dump = runner.blobs.open(sha256).await?;
    let bytes = dump.clone();
    let (arch, modules) = run_guarded(limit, move || modules_of(&bytes)).await?;
    Ok((dump, arch, modules))
}

/// The tables of the dump's modules, by [`lookup_key`], with what remote sources were
/// asked for each; the modules nobody uploaded are recorded as missing, those walked from
/// partial files as partial, in one transaction once every module was looked up and
/// before any table is built (also when looking up failed: what was found until then is
/// recorded). An upload of a module's file processes again the crashes recorded as
/// missing it: the time from the claim, which forgot the crash's last records, to this
/// transaction is a window in which such an upload does not see this crash, so the
/// tables, which may take a build, come after it.
async fn gather_tables(
    runner: &Runner,
    lease: &crashes::Lease,
    modules: &[Module],
    arch: engine::dump::Arch,
    until: Option<std::time::Instant>,
    batch: &BatchLookups,
) -> Result<(HashMap<String, ModuleTables>, HashMap<String, Vec<Lookup>>), JobError> {
    let mut records = Vec::new();
    let mut located = locate_all(runner, lease, modules, arch, until, &mut records, batch).await;
    // a job given the batch's kept files that still records a module (its modules differ
    // from the keeping job's in more than their build-ids) looks in the database itself:
    // what an upload requeues crashes by is never written from what was kept
    if matches!(located, Ok((_, _, true))) && !records.is_empty() {
        records.clear();
        let none = BatchLookups::default();
        located = locate_all(runner, lease, modules, arch, until, &mut records, &none).await;
    }
    module_records::record_all(&runner.db, &lease.id, &records).await?;
    let (mut located, lookups, _) = located?;
    look_again(runner, lease, modules, arch, &records, &mut located).await?;
    let mut found = HashMap::with_capacity(located.len());
    for (key, located) in located {
        tokio::task::consume_budget().await;
        found.insert(key, located_tables(runner, located).await?);
    }
    Ok((found, lookups))
}

/// The files of each module, by [`lookup_key`].
type LocatedModules = Vec<(String, Located<binaries::BinaryRow>)>;

/// Looks again for the modules `records` (just written) list as missing, adding the
/// files found to `located` and forgetting those records.
///
/// The claim forgot what the crash missed last time (`crashes::claim_batch`), and a file
/// uploaded between that and the records found none to requeue this crash by: its report
/// would have kept the module missing for good. Looked for after the records are
/// written, a file stored before now is found here, and one stored after finds the
/// records, and its upload requeues the crash (a crash being processed too: the lease
/// guard drops this job's result).
async fn look_again(
    runner: &Runner,
    lease: &crashes::Lease,
    modules: &[Module],
    arch: engine::dump::Arch,
    records: &[ModuleRecord],
    located: &mut LocatedModules,
) -> Result<(), JobError> {
    // sets, not scans of the lists: a dump of 100,000 missing modules is one pass
    let have: HashSet<&str> = located.iter().map(|(k, _)| k.as_str()).collect();
    let missing: HashSet<&str> = records
        .iter()
        .filter(|r| r.index == Index::Missing && !have.contains(r.key.as_str()))
        .map(|r| r.key.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let again: Vec<Module> = modules
        .iter()
        .filter(|m| !m.is_vdso() && lookup_key(m).is_some_and(|k| missing.contains(k.as_str())))
        .cloned()
        .collect();
    if again.is_empty() {
        return Ok(());
    }
    let source = Uploaded::of_modules(runner, lease.project.as_str(), &again).await?;
    let mut found_now = Vec::new();
    let mut asked = HashSet::new();
    for m in &again {
        let Some(key) = lookup_key(m) else { continue };
        if !asked.insert(key.clone()) {
            continue;
        }
        if let Some(found) = locate(&source, m, arch).await? {
            found_now.push(key.clone());
            located.push((key, found));
        }
    }
    if !found_now.is_empty() {
        module_records::forget_missing(&runner.db, &lease.id, &found_now).await?;
    }
    Ok(())
}

/// [`gather_tables`]' modules looked up in turn: the files of each, and whether they
/// were the ones an earlier job of the batch kept; what is to be recorded of them goes
/// to `records`.
async fn locate_all(
    runner: &Runner,
    lease: &crashes::Lease,
    modules: &[Module],
    arch: engine::dump::Arch,
    until: Option<std::time::Instant>,
    records: &mut Vec<ModuleRecord>,
    batch: &BatchLookups,
) -> Result<(LocatedModules, HashMap<String, Vec<Lookup>>, bool), JobError> {
    // 2. Their files, recording the ones nobody uploaded (what the crash missed last
    // time was forgotten when it was leased: `crashes::claim_batch`). A lookup of the
    // same modules kept earlier in the batch found every one complete: so will this job.
    let project = lease.project.as_str();
    let (source, to_keep) = Uploaded::of_modules_in(runner, project, modules, batch).await?;
    let mut fetched = false;
    let fresh = Uploaded::fresh(runner, project);
    let mut found: LocatedModules = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut lookups: HashMap<String, Vec<Lookup>> = HashMap::new();
    let mut used: Vec<String> = Vec::new();
    for m in modules {
        // a turn of the loop that finds its answers in memory does not wait: let the
        // job's time limit, which can end it only where it waits, end it here too
        tokio::task::consume_budget().await;
        let Some(key) = lookup_key(m) else { continue };
        if m.is_vdso() || !seen.insert(key.clone()) {
            // The vdso's tables come from the dump's own memory: nobody uploads it, and
            // it is not missing.
            continue;
        }
        let debug_id = m.breakpad_debug_id();
        let mut located = locate(&source, m, arch).await?;
        if let Some(fetcher) = &runner.config.remote {
            let mut asked = Vec::new();
            if let Some(id) = m.build_id_hex().filter(|_| lacks_files(located.as_ref())) {
                fetched = true;
                asked.extend(
                    fetch::fetch_missing(runner, fetcher, project, &id, &m.name, until).await?,
                );
                // looked at again even when this worker fetched nothing: another may have
                // stored the files while this one waited for its claim
                located = locate(&fresh, m, arch).await?;
            }
            // a Windows module without its image or its PDB: the symbol servers'
            if m.pe_code_id().is_some()
                && located.as_ref().is_none_or(|l| windows_part(l).is_some())
            {
                fetched = true;
                let got = fetch::fetch_windows(runner, fetcher, project, m, until).await?;
                located = locate(&fresh, m, arch).await?;
                asked.extend(got);
            }
            if let (None, Some(rel), Some(debug_id)) =
                (&located, m.breakpad_sym_path(), debug_id.as_deref())
            {
                fetched = true;
                let got = fetch::fetch_sym(runner, fetcher, project, &rel, debug_id, until).await?;
                located = locate(&fresh, m, arch).await?;
                asked.extend(got);
            }
            if !asked.is_empty() {
                lookups.insert(key.clone(), asked);
            }
        }
        match located {
            Some(located) => {
                let record = |index, debug_id: Option<&str>| ModuleRecord {
                    index,
                    key: key.clone(),
                    debug_id: debug_id.map(str::to_string),
                    name: m.name.clone(),
                };
                if matches!(located.key, TableKey::Breakpad(_)) {
                    records.push(record(Index::Partial, debug_id.as_deref()));
                }
                // a Windows image without its PDB (or the reverse): the other's upload
                // processes this crash again, as a binary's does after a .sym file
                if let Some(pdb_id) = windows_part(&located) {
                    records.push(record(Index::Partial, Some(&pdb_id)));
                }
                // a Mach-O binary without its dSYM: the dSYM is missing (listed with
                // the modules nobody uploaded), and its upload processes this crash
                // again, for the lines and inlined frames only DWARF gives
                // an ELF file without DWARF (a stripped binary): its debug file's upload
                // processes this crash again, for lines and inlined frames
                if elf_without_dwarf(&located) {
                    records.push(record(Index::Partial, debug_id.as_deref()));
                }
                if macho_without_dsym(&located) {
                    records.push(record(Index::Missing, debug_id.as_deref()));
                }
                used.extend(located_files(&located));
                found.push((key, located));
            }
            None => records.push(ModuleRecord {
                index: Index::Missing,
                key,
                debug_id,
                name: m.name.clone(),
            }),
        }
    }

    // every module found complete in what the database said, nothing fetched: the
    // batch's later jobs of these modules are given the same files (`batch_lookups`)
    let given = to_keep.is_none();
    if let Some((key, files)) = to_keep.filter(|_| records.is_empty() && !fetched) {
        batch.keep_uploads(key, files);
    }
    // the files' last use, for the retention of symbol files (issue 41), written twice an
    // hour per file, not once per crash (issue 40: `recent_use`)
    let used: Vec<&str> = used.iter().map(String::as_str).collect();
    let now = crate::store::now_ms();
    let due = runner.recent_use.due(project, &used, now);
    if !due.is_empty() {
        binaries::record_use(&runner.db, project, &due, now).await?;
        runner.recent_use.noted(project, &due, now);
    }
    Ok((found, lookups, given))
}

/// The sha256 of each file a module's tables come from.
fn located_files(located: &Located<binaries::BinaryRow>) -> Vec<String> {
    match &located.found {
        Found::Breakpad(sym) => vec![sym.handle.sha256.clone()],
        Found::Files(files) => files.iter().map(|f| f.handle.sha256.clone()).collect(),
    }
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

/// The three rows a build stores, with their format versions.
const KINDS: [(TableKind, u32); 3] = [
    (TableKind::Unwind, engine::unwind::UNWIND_TABLE_VERSION),
    (TableKind::Symbols, SYMBOL_TABLE_VERSION),
    (TableKind::Warnings, NOTES_VERSION),
];

/// The service's uploaded files, as [`engine::resolve::locate`] asks for them (the rule
/// `postmortem walk` uses too): a build-id's binaries and debug files, the Mach-O binary
/// a debug-id names, the first `.sym` file uploaded of a debug-id (first upload wins: see
/// [`binaries::holder_of`]).
///
/// `known` holds the files of the dump's build-ids, looked up for all of them at once when
/// the job began (one query, not one per module); a build-id it does not hold, and every
/// lookup after a remote source was asked ([`Uploaded::fresh`]), is asked of the database.
struct Uploaded<'a> {
    runner: &'a Runner,
    /// The crash's project: the files it sees (`binaries::visible`).
    sees: binaries::Sees<'a>,
    known: HashMap<String, Vec<binaries::BinaryRow>>,
}

impl<'a> Uploaded<'a> {
    /// The uploads `project` sees of the build-ids of `modules`, looked up at once.
    async fn of_modules(
        runner: &'a Runner,
        project: &'a str,
        modules: &[Module],
    ) -> Result<Self, JobError> {
        let ids = build_ids(modules);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let sees = binaries::Sees::Project(project);
        let known = binaries::visible_by_build_ids(&runner.db, sees, &ids).await?;
        Ok(Uploaded {
            runner,
            sees,
            known,
        })
    }

    /// [`Uploaded::of_modules`], or the files an earlier job of `batch` kept for the
    /// same project and build-ids. When the database was asked, the key and files to
    /// keep should the job find every module complete.
    async fn of_modules_in(
        runner: &'a Runner,
        project: &'a str,
        modules: &[Module],
        batch: &BatchLookups,
    ) -> Result<(Self, ToKeep), JobError> {
        let ids = build_ids(modules);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let key = batch_lookups::key(project, &ids);
        let sees = binaries::Sees::Project(project);
        if let Some(known) = batch.uploads(&key) {
            let kept = Uploaded {
                runner,
                sees,
                known,
            };
            return Ok((kept, None));
        }
        let known = binaries::visible_by_build_ids(&runner.db, sees, &ids).await?;
        let to_keep = Some((key, known.clone()));
        let asked = Uploaded {
            runner,
            sees,
            known,
        };
        Ok((asked, to_keep))
    }

    /// The database as it is now, for the lookups after a fetch stored files.
    fn fresh(runner: &'a Runner, project: &'a str) -> Self {
        Uploaded {
            runner,
            sees: binaries::Sees::Project(project),
            known: HashMap::new(),
        }
    }

    /// The files of a debug-id this crash sees.
    async fn by_debug_id(&self, debug_id: &str) -> Result<Vec<binaries::BinaryRow>, JobError> {
        let rows = binaries::by_debug_id(&self.runner.db, debug_id).await?;
        Ok(binaries::visible(&self.runner.db, self.sees, rows).await?)
    }
}

/// The key and files a job's lookup may leave to the rest of its batch.
type ToKeep = Option<(String, HashMap<String, Vec<binaries::BinaryRow>>)>;

/// The build-ids of `modules` the uploads are looked up by (the vdso's never uploaded).
fn build_ids(modules: &[Module]) -> Vec<String> {
    modules
        .iter()
        .filter(|m| !m.is_vdso())
        .filter_map(Module::build_id_hex)
        .collect()
}

/// An uploaded file as a source file, named as it was uploaded.
fn uploaded(row: binaries::BinaryRow) -> SourceFile<binaries::BinaryRow> {
    SourceFile {
        name: row.file_name.clone().unwrap_or_else(|| row.sha256.clone()),
        handle: row,
    }
}

impl FileSource for Uploaded<'_> {
    type Handle = binaries::BinaryRow;
    type Error = JobError;

    async fn with_build_id(
        &self,
        _module: &Module,
        build_id: &str,
    ) -> Result<Vec<SourceFile<binaries::BinaryRow>>, JobError> {
        let files = match self.known.get(build_id) {
            Some(known) => known.clone(),
            None => {
                let rows = binaries::by_build_id(&self.runner.db, build_id).await?;
                binaries::visible(&self.runner.db, self.sees, rows).await?
            }
        };
        Ok(files
            .into_iter()
            .filter(|f| !f.is_breakpad())
            .map(uploaded)
            .collect())
    }

    /// The images of the name and code id, and the first PDB of the debug id the dump
    /// names (else the images' CodeView record).
    async fn with_code_id(
        &self,
        module: &Module,
        name: &str,
        code_id: &str,
    ) -> Result<Vec<SourceFile<binaries::BinaryRow>>, JobError> {
        let mut files = binaries::by_code_id(&self.runner.db, name, code_id, self.sees).await?;
        let pdb_id = module
            .breakpad_debug_id()
            .or_else(|| files.iter().find_map(|f| f.debug_id.clone()));
        if let (false, Some(id)) = (files.is_empty(), pdb_id) {
            files.extend(first_pdb(self.by_debug_id(&id).await?));
        }
        Ok(files.into_iter().map(uploaded).collect())
    }

    /// The first uploaded `.sym` file whose `INFO CODE_ID` names the image.
    async fn breakpad_by_code_id(
        &self,
        _module: &Module,
        name: &str,
        code_id: &str,
    ) -> Result<Option<SourceFile<binaries::BinaryRow>>, JobError> {
        Ok(
            binaries::sym_by_code_id(&self.runner.db, name, code_id, self.sees)
                .await?
                .map(uploaded),
        )
    }

    async fn pdb(
        &self,
        _module: &Module,
        debug_id: &str,
    ) -> Result<Vec<SourceFile<binaries::BinaryRow>>, JobError> {
        Ok(first_pdb(self.by_debug_id(debug_id).await?)
            .into_iter()
            .map(uploaded)
            .collect())
    }

    async fn build_id_of_debug_id(&self, debug_id: &str) -> Result<Option<String>, JobError> {
        let rows = self.by_debug_id(debug_id).await?;
        Ok(rows
            .iter()
            .filter(|f| !f.is_breakpad())
            .find_map(|f| f.build_id().map(str::to_string)))
    }

    async fn breakpad(
        &self,
        _module: &Module,
        debug_id: &str,
    ) -> Result<Option<SourceFile<binaries::BinaryRow>>, JobError> {
        let rows = self.by_debug_id(debug_id).await?;
        Ok(rows.into_iter().find(|f| f.is_breakpad()).map(uploaded))
    }
}

/// The first uploaded PDB among a debug-id's files (first upload wins).
fn first_pdb(rows: Vec<binaries::BinaryRow>) -> Option<binaries::BinaryRow> {
    rows.into_iter().find(|r| r.format == "pdb")
}

/// Whether a module's located files are a Windows image without its PDB, or a PDB without
/// its image (which the arrival of the other would improve), and the PDB's debug id.
fn windows_part(located: &Located<binaries::BinaryRow>) -> Option<String> {
    let Found::Files(files) = &located.found else {
        return None;
    };
    let has = |format: &str| files.iter().any(|f| f.handle.format == format);
    match &located.key {
        TableKey::CodeId(_) if !has("pdb") => files.iter().find_map(|f| f.handle.debug_id.clone()),
        TableKey::Pdb(id) => Some(id.clone()),
        _ => None,
    }
}

/// Whether a module's located files are Mach-O files none of which carries DWARF: the
/// binary without its dSYM.
fn macho_without_dsym(located: &Located<binaries::BinaryRow>) -> bool {
    only_format_without_dwarf(located, "macho")
}

/// Whether a module's located files are all ELF and none carries DWARF: a stripped
/// binary, whose debug file may still arrive.
fn elf_without_dwarf(located: &Located<binaries::BinaryRow>) -> bool {
    only_format_without_dwarf(located, "elf")
}

/// Whether a module's located files are all of `format` and none has `.debug_info`.
fn only_format_without_dwarf(located: &Located<binaries::BinaryRow>, format: &str) -> bool {
    let Found::Files(files) = &located.found else {
        return false;
    };
    let all_of_format = files.iter().all(|f| f.handle.format == format);
    let dwarf = files
        .iter()
        .any(|f| f.handle.section_list().contains(&"debug_info"));
    all_of_format && !files.is_empty() && !dwarf
}

/// The files a module's tables are built from, as part of the key they are stored and
/// cached under: the first 16 hex digits of the SHA-256 of their sorted sha256s. Two
/// projects that see different files of one build-id get different tables; two that
/// see the same files share them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FilesKey {
    table: TableKey,
    files: String,
}

impl FilesKey {
    fn of<'f>(table: TableKey, shas: impl Iterator<Item = &'f str>) -> FilesKey {
        use sha2::{Digest, Sha256};
        let mut shas: Vec<&str> = shas.collect();
        shas.sort_unstable();
        let digest = Sha256::digest(shas.join(",").as_bytes());
        let files = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        FilesKey { table, files }
    }

    /// The key of the `tables` rows: `TABLEKEY@FILES` (`tables::invalidate` drops every
    /// `FILES` of a `TABLEKEY`).
    fn stored(&self) -> String {
        format!("{}@{}", self.table, self.files)
    }

    fn cache(&self, kind: TableKind, version: u32) -> CacheKey {
        CacheKey {
            table: self.table.clone(),
            files: self.files.clone(),
            kind,
            version,
        }
    }
}

impl std::fmt::Display for FilesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.stored())
    }
}

/// The tables of located files, under their [`FilesKey`]: from moka → `tables` rows →
/// built from the uploaded files (and stored).
async fn located_tables(
    runner: &Runner,
    located: Located<binaries::BinaryRow>,
) -> Result<ModuleTables, JobError> {
    match located.found {
        Found::Breakpad(sym) => {
            let key = FilesKey::of(located.key, std::iter::once(sym.handle.sha256.as_str()));
            match cached_tables(runner, &key).await? {
                Some(t) => Ok(t),
                None => sym_tables(runner, &key, sym).await,
            }
        }
        Found::Files(files) => {
            let shas = files.iter().map(|f| f.handle.sha256.as_str());
            let key = FilesKey::of(located.key, shas);
            let mut t = match cached_tables(runner, &key).await? {
                Some(t) => t,
                None => binary_tables(runner, &key, &files, located.verified).await?,
            };
            t.code = code_image(runner, &files).await?;
            Ok(t)
        }
    }
}

/// The tables stored under `key` (moka, then the database), with the warnings their build
/// met; `None` unless all three rows are there.
async fn cached_tables(runner: &Runner, key: &FilesKey) -> Result<Option<ModuleTables>, JobError> {
    let mut got: Vec<Arc<[u8]>> = Vec::new();
    for (kind, version) in KINDS {
        let cache_key = key.cache(kind, version);
        if let Some(b) = runner.cache.get(&cache_key).await {
            got.push(b);
            continue;
        }
        match tables::get(&runner.db, &key.stored(), kind.as_str(), version).await? {
            Some(b) => {
                let b: Arc<[u8]> = b.into();
                runner.cache.insert(cache_key, b.clone()).await;
                got.push(b);
            }
            None => return Ok(None),
        }
    }
    let [unwind, symbols, notes] = <[Arc<[u8]>; 3]>::try_from(got)
        .map_err(|_| JobError::Panic("three table kinds expected".into()))?;
    // Unreadable notes (never written so by us): rebuild rather than lose them.
    Ok(StoredTables {
        unwind: FileBytes::new(unwind),
        symbols: FileBytes::new(symbols),
        notes: FileBytes::new(notes),
    }
    .tables(true))
}

/// Stores freshly built tables under `key` (database and moka) and counts the build.
async fn store_tables(
    runner: &Runner,
    key: &FilesKey,
    stored: &StoredTables,
) -> Result<(), JobError> {
    for (kind, version) in KINDS {
        let bytes = match kind {
            TableKind::Unwind => &stored.unwind,
            TableKind::Symbols => &stored.symbols,
            TableKind::Warnings => &stored.notes,
        };
        tables::put(&runner.db, &key.stored(), kind.as_str(), version, bytes).await?;
        runner
            .cache
            .insert(
                key.cache(kind, version),
                // the cache holds its own copy, made once per build
                Arc::from(&bytes[..]),
            )
            .await;
    }
    runner.cache.stats().built.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Builds (and stores under `key`) the tables of a build's uploaded files.
async fn binary_tables(
    runner: &Runner,
    key: &FilesKey,
    files: &[SourceFile<binaries::BinaryRow>],
    verified: bool,
) -> Result<ModuleTables, JobError> {
    let mut read: Vec<(String, FileBytes)> = Vec::new();
    for f in files {
        read.push((f.name.clone(), runner.blobs.open(&f.handle.sha256).await?));
    }
    // files fetched from a remote source say which (stored with the build's notes)
    let fetched: HashMap<String, String> = files
        .iter()
        .filter_map(|f| Some((f.name.clone(), f.handle.source.clone()?)))
        .collect();
    let built = run_guarded(runner.config.time_limit, move || {
        let mut t = build_from_files(&read, verified);
        for f in &mut t.files {
            f.source = fetched.get(&f.name).cloned();
        }
        Ok(t)
    })
    .instrument(info_span!("build_tables", key = %key))
    .await?;
    stored(runner, key, built).await
}

/// Builds (and stores under `key`) the tables of an uploaded `.sym` file.
async fn sym_tables(
    runner: &Runner,
    key: &FilesKey,
    sym: SourceFile<binaries::BinaryRow>,
) -> Result<ModuleTables, JobError> {
    let text = runner.blobs.open(&sym.handle.sha256).await?;
    let max_records = runner.config.process.budget.max_sym_records;
    let built = run_guarded(runner.config.time_limit, move || {
        let mut t = engine::process::build_tables_from_breakpad(&sym.name, &text, max_records);
        for f in &mut t.files {
            f.source.clone_from(&sym.handle.source);
        }
        Ok(t)
    })
    .instrument(info_span!("build_tables_breakpad", key = %key))
    .await?;
    stored(runner, key, built).await
}

/// Stores freshly built tables and returns them as a later read of the cache will: an
/// empty table is no table.
async fn stored(
    runner: &Runner,
    key: &FilesKey,
    built: ModuleTables,
) -> Result<ModuleTables, JobError> {
    let stored = StoredTables::of(&built)
        .ok_or_else(|| JobError::Serialize("whole tables expected".into()))?;
    store_tables(runner, key, &stored).await?;
    stored
        .tables(true)
        .ok_or_else(|| JobError::Serialize("build notes written unreadable".into()))
}

/// The code bytes of a build-id's main (non-debug) file, which the stack scan uses to
/// check that a candidate return address follows a call, as `postmortem walk` does with
/// the file it found. Cached in memory by the file's sha256; `None` when only debug files
/// were uploaded.
async fn code_image(
    runner: &Runner,
    files: &[SourceFile<binaries::BinaryRow>],
) -> Result<Option<CodeImage>, JobError> {
    let Some(main) = files.iter().find(|f| f.handle.kind != "debug") else {
        return Ok(None);
    };
    if let Some(b) = runner.cache.code(&main.handle.sha256).await {
        return Ok(CodeImage::new(b));
    }
    let bytes = runner.blobs.open(&main.handle.sha256).await?;
    runner
        .cache
        .insert_code(&main.handle.sha256, bytes.clone())
        .await;
    Ok(CodeImage::new(bytes))
}

/// Hands the gathered tables to the engine, by [`lookup_key`], with what remote sources
/// were asked for each module.
struct FetchedTables {
    tables: HashMap<String, ModuleTables>,
    lookups: HashMap<String, Vec<Lookup>>,
}

impl TableProvider for FetchedTables {
    fn tables(&self, _dump: &Dump<'_>, module: &Module) -> Option<ModuleTables> {
        self.tables.get(&lookup_key(module)?).cloned()
    }

    fn module_lookups(&self, _dump: &Dump<'_>, module: &Module) -> Vec<Lookup> {
        lookup_key(module)
            .and_then(|k| self.lookups.get(&k).cloned())
            .unwrap_or_default()
    }
}

/// Whether remote sources may give what the located files lack: nothing found, only a
/// `.sym` file (a binary's tables win), or no binary or no DWARF among the uploads.
fn lacks_files(located: Option<&Located<binaries::BinaryRow>>) -> bool {
    match located.map(|l| &l.found) {
        None | Some(Found::Breakpad(_)) => true,
        Some(Found::Files(files)) => {
            let rows: Vec<binaries::BinaryRow> = files.iter().map(|f| f.handle.clone()).collect();
            !fetch::wanted(&rows).is_empty()
        }
    }
}

/// Runs the engine on one dump with the tables gathered for it.
fn run_engine(
    dump: &[u8],
    tables: HashMap<String, ModuleTables>,
    lookups: HashMap<String, Vec<Lookup>>,
    options: &engine::process::ProcessOptions,
) -> Result<Report, JobError> {
    let provider = FetchedTables { tables, lookups };
    Ok(engine::process::process_dump(dump, &provider, options)?)
}
