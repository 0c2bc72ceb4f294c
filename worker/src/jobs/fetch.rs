//! Files no upload gives, fetched from the service's remote symbol sources (debuginfod
//! servers, Breakpad symbol stores, symbol servers for Windows images and PDBs, then S3
//! buckets in any of those layouts, all in [`sources::Remote`])
//! while a crash is processed, and stored as an upload is: in the blob store by content, indexed in `binaries` by build-id (with the source they came from), and
//! announced as a new file ([`super::new_file`]), so the next crash of the build needs no
//! network and the crashes that missed the module are queued again. A fetched file is
//! shared (`binaries::SHARED`): every project's crashes may use it, as they may ask the
//! sources; whether a file is stored is asked of the files the crash's project sees.
//!
//! Misses are remembered in the database, for the miss TTL, by every worker of it
//! ([`crate::store::fetch_state`]): a source that said it lacks a file is not asked again
//! by any worker on any machine until the miss expires. Unreachable servers are
//! remembered by [`sources::Remote`] per process. Workers asking for one file at once
//! make one download: in one process they take turns (a lock per id), across processes
//! they claim the id in the database first, and a worker that loses the claim waits —
//! bounded — until the winner is done (its file is then stored, as an upload, or its miss
//! recorded) or its claim lapses, then looks again. How long a claim lasts, how often a
//! loser tries again and how long it waits at most are the service's settings
//! ([`ClaimTimings`]).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use engine::report::{Lookup, RemoteFile};
use sha2::{Digest, Sha256};
use sources::cache::Entry;
use sources::http::Until;
use tokio::sync::Mutex;

use super::new_file::{file_arrived, NewFile};
use super::{JobError, Runner};
use crate::store::binaries::{self, BinaryRow};
use crate::store::{fetch_state, Db, StoreError};

/// The timings of the claims workers put on files they fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimTimings {
    /// How long a claim on a file being fetched lasts unless renewed (its holder renews
    /// it every third of that while it fetches): how long a crashed worker's claim holds
    /// others.
    pub lease: Duration,
    /// How often a worker that lost a claim tries it again.
    pub poll: Duration,
    /// The longest a worker waits for another's fetch (a live holder's fetch is bounded
    /// by the sources' time limits, far below); then it fetches the file itself.
    pub wait: Duration,
}

impl Default for ClaimTimings {
    /// A 30 s lease, tried again every 200 ms, for at most 15 min.
    fn default() -> ClaimTimings {
        ClaimTimings {
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(200),
            wait: Duration::from_secs(900),
        }
    }
}

/// The remote sources of a service, one lock per id being fetched in this process, and
/// this process's name in the database's fetch claims.
pub struct Fetcher {
    remote: Arc<sources::Remote>,
    locks: moka::future::Cache<String, Arc<Mutex<()>>>,
    holder: String,
    claims: ClaimTimings,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

impl Fetcher {
    /// The sources (HTTP servers, then buckets) and the disk cache in `remote`.
    pub fn new(remote: sources::Remote) -> Fetcher {
        Fetcher {
            remote: Arc::new(remote),
            locks: moka::future::Cache::builder()
                .time_to_idle(std::time::Duration::from_secs(600))
                .build(),
            holder: format!("{}-{}", std::process::id(), uuid::Uuid::now_v7()),
            claims: ClaimTimings::default(),
        }
    }

    /// The same, its claims timed by `claims`.
    pub fn with_claim_timings(mut self, claims: ClaimTimings) -> Fetcher {
        self.claims = claims;
        self
    }

    /// The sources, their misses kept in `db`: for the source files of a crash's frames
    /// (`super::source_servers`), asked from the engine's blocking thread.
    pub fn sources_for(&self, db: &Db) -> Arc<sources::Remote> {
        self.share_misses(db);
        self.remote.clone()
    }

    /// Keeps the HTTP sources' misses in `db` (once: a service has one database).
    fn share_misses(&self, db: &Db) {
        if !self.remote.misses_shared() {
            self.remote.share_misses(Arc::new(DbMisses {
                db: db.clone(),
                runtime: tokio::runtime::Handle::current(),
            }));
        }
    }
}

/// The misses of [`sources::Remote`]'s HTTP sources, kept in the database; asked from
/// the blocking thread the sources run on.
struct DbMisses {
    db: Db,
    runtime: tokio::runtime::Handle,
}

impl sources::remote::SharedMisses for DbMisses {
    fn remembered(&self, entry: &Entry, source: &str) -> Option<SystemTime> {
        let asked = fetch_state::miss_remembered(&self.db, source, entry.kind(), entry.id());
        let expires = self.runtime.block_on(asked).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the remembered misses failed");
            None
        });
        expires.map(fetch_state::system_time)
    }

    fn remember(&self, entry: &Entry, source: &str, ttl: Duration) -> Option<SystemTime> {
        let kept = fetch_state::remember_miss(&self.db, source, entry.kind(), entry.id(), ttl);
        self.runtime
            .block_on(kept)
            .map_err(|e| tracing::warn!(error = %e, "remembering a miss failed"))
            .ok()
            .map(fetch_state::system_time)
    }
}

/// Runs `work` (which looks for stored rows first, then fetches) as the one worker
/// fetching `key`: after this process's other tasks on `key`, and under a claim in the
/// database that other processes wait on, renewed while `work` runs and released after.
async fn claimed<T>(
    runner: &Runner,
    fetcher: &Fetcher,
    key: String,
    until: Until,
    work: impl std::future::Future<Output = Result<T, JobError>>,
) -> Result<T, JobError> {
    fetcher.share_misses(&runner.db);
    let lock = fetcher
        .locks
        .get_with(key.clone(), async { Arc::new(Mutex::new(())) })
        .await;
    let _one_at_a_time = lock.lock().await;
    let timings = fetcher.claims;
    let held = claim(&runner.db, &key, &fetcher.holder, timings, until).await?;
    // renewed beside `work`, not in its place: a renewal awaited in a `select!` arm left
    // `work` unpolled meanwhile, with whatever it held (a write transaction open on
    // SQLite would have made the renewal wait out the busy timeout; the jobs' lease
    // renewal, so placed, waited for ever: `Runner::renew_all`)
    let renewals = async {
        let mut renew = tokio::time::interval((timings.lease / 3).max(Duration::from_millis(1)));
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await;
        loop {
            renew.tick().await;
            let renewed =
                fetch_state::renew_claim(&runner.db, &key, &fetcher.holder, timings.lease);
            if let Err(e) = renewed.await {
                tracing::warn!(key = %key, error = %e, "could not renew a fetch claim");
            }
        }
    };
    tokio::pin!(work, renewals);
    let out = tokio::select! {
        r = &mut work => r,
        () = &mut renewals, if held => work.await,
    };
    if held {
        if let Err(e) = fetch_state::release_claim(&runner.db, &key, &fetcher.holder).await {
            tracing::warn!(key = %key, error = %e, "could not release a fetch claim; it lapses");
        }
    }
    out
}

/// Claims `key` for `holder`, waiting while another holder's claim lasts (it fetches the
/// file; when it is done this worker finds its rows, or its miss). Whether the claim was
/// won: not when the wait ran out ([`ClaimTimings::wait`], or the job's deadline `until`:
/// the fetch that follows then ends at once, saying so).
async fn claim(
    db: &Db,
    key: &str,
    holder: &str,
    timings: ClaimTimings,
    until: Until,
) -> Result<bool, JobError> {
    let started = std::time::Instant::now();
    loop {
        if fetch_state::try_claim(db, key, holder, timings.lease).await? {
            return Ok(true);
        }
        let late = until.is_some_and(|u| std::time::Instant::now() >= u);
        if late || started.elapsed() >= timings.wait {
            tracing::warn!(key = %key, "another worker's fetch took too long; fetching too");
            return Ok(false);
        }
        tokio::time::sleep(timings.poll).await;
    }
}

/// Which of a build's files the stored rows lack: its executable when no row is a binary,
/// its debug file when none carries DWARF.
pub fn wanted(rows: &[BinaryRow]) -> Vec<RemoteFile> {
    let files: Vec<&BinaryRow> = rows.iter().filter(|r| !r.is_breakpad()).collect();
    // the kind `engine::identify` gives a separate debug file
    let binary = files.iter().any(|r| r.kind != "debug");
    // `engine::identify`'s short section names; a compressed `.zdebug_info` is listed
    // as `debug_info` too
    let dwarf = files
        .iter()
        .any(|r| r.section_list().contains(&"debug_info"));
    let mut out = Vec::new();
    if !binary {
        out.push(RemoteFile::Executable);
    }
    if !dwarf {
        out.push(RemoteFile::Debuginfo);
    }
    out
}

/// Fetches the files of build `build_id` (module `name`) that no stored row gives, stores
/// each, and returns what every source was asked and answered; every fetch ended by
/// `until` (the job's deadline).
pub async fn fetch_missing(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    build_id: &str,
    name: &str,
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    let key = format!("buildid/{build_id}");
    let work = fetch_missing_now(runner, fetcher, project, build_id, name, until);
    claimed(runner, fetcher, key, until, work).await
}

/// [`fetch_missing`], once this worker is the one fetching.
async fn fetch_missing_now(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    build_id: &str,
    name: &str,
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    // another worker may have stored them while this one waited
    let rows = seen(
        runner,
        project,
        binaries::by_build_id(&runner.db, build_id).await?,
    )
    .await?;
    let mut lookups = Vec::new();
    for file in wanted(&rows) {
        let want = Want::Build {
            id: build_id.to_string(),
            file,
        };
        let fetched = ask(runner, fetcher, want, until).await?;
        lookups.extend(fetched.lookups);
        if let Some((path, source)) = fetched.file {
            let named = sources::remote::report_name(name, file);
            keep(runner, project, &path, named, &source).await?;
        }
    }
    Ok(lookups)
}

/// A file asked of the sources.
#[derive(Clone)]
enum Want {
    /// A build's executable or debug file.
    Build { id: String, file: RemoteFile },
    /// A `.sym` file at its store path, of a debug-id.
    Sym { rel: String, debug_id: String },
    /// A Windows image by its name and code id (symbol-server layout).
    Image { name: String, code_id: String },
    /// A PDB by its name and debug id (symbol-server layout).
    Pdb { name: String, debug_id: String },
}

/// Asks the sources on a blocking thread (their I/O blocks), counting the answers, and
/// the bytes and time of a fetch, in the process's metrics.
async fn ask(
    runner: &Runner,
    fetcher: &Fetcher,
    want: Want,
    until: Until,
) -> Result<sources::remote::Fetched, JobError> {
    let remote = fetcher.remote.clone();
    let started = std::time::Instant::now();
    let fetched = tokio::task::spawn_blocking(move || match &want {
        Want::Build { id, file } => remote.file(id, *file, until),
        Want::Sym { rel, debug_id } => remote.sym(rel, debug_id, until),
        Want::Image { name, code_id } => remote.pe_image(name, code_id, until),
        Want::Pdb { name, debug_id } => remote.pdb(name, debug_id, until),
    })
    .await
    .map_err(|e| JobError::Panic(format!("asking the remote sources: {e}")))?;
    runner.metrics.count_lookups(&fetched.lookups);
    if let Some((path, source)) = &fetched.file {
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        runner.metrics.count_fetch(source, bytes, started.elapsed());
    }
    Ok(fetched)
}

/// Stores a download as an upload is stored, then removes it: a file is kept once, in
/// the blob store.
async fn keep(
    runner: &Runner,
    project: &str,
    path: &Path,
    name: String,
    source: &str,
) -> Result<(), JobError> {
    let stored = store(runner, project, path, name, source).await;
    let _ = std::fs::remove_file(path);
    stored
}

/// Fetches the `.sym` file at `rel` (`NAME/DEBUG_ID/NAME.sym`) of debug-id `debug_id`
/// from the Breakpad symbol stores unless one is stored, stores it, and returns what every
/// store was asked and answered.
pub async fn fetch_sym(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    rel: &str,
    debug_id: &str,
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    if !fetcher.remote.has_symbol_stores() {
        return Ok(Vec::new());
    }
    let key = format!("sym/{debug_id}");
    let work = fetch_sym_now(runner, fetcher, project, rel, debug_id, until);
    claimed(runner, fetcher, key, until, work).await
}

/// [`fetch_sym`], once this worker is the one fetching.
async fn fetch_sym_now(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    rel: &str,
    debug_id: &str,
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    let rows = seen(
        runner,
        project,
        binaries::by_debug_id(&runner.db, debug_id).await?,
    )
    .await?;
    if rows.iter().any(BinaryRow::is_breakpad) {
        return Ok(Vec::new());
    }
    let want = Want::Sym {
        rel: rel.to_string(),
        debug_id: debug_id.to_string(),
    };
    let fetched = ask(runner, fetcher, want, until).await?;
    if let Some((path, source)) = fetched.file {
        let name = rel.rsplit('/').next().unwrap_or(rel).to_string();
        keep(runner, project, &path, name, &source).await?;
    }
    Ok(fetched.lookups)
}

/// A Windows module's image (by the dump's name and code id) and its PDB (by the dump's
/// CodeView debug id, else the image's record) from the symbol servers, then the buckets,
/// when no stored row gives them; each stored as an upload. Returns what every source was
/// asked and answered.
pub async fn fetch_windows(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    m: &engine::dump::Module,
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    if !fetcher.remote.has_symbol_servers() {
        return Ok(Vec::new());
    }
    let Some(code_id) = m.pe_code_id() else {
        return Ok(Vec::new());
    };
    let name = m
        .name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(&m.name)
        .to_string();
    let key = format!("pe/{}", engine::resolve::TableKey::for_pe(&name, &code_id));
    let work = fetch_windows_now(runner, fetcher, project, m, (name, code_id), until);
    claimed(runner, fetcher, key, until, work).await
}

/// [`fetch_windows`], once this worker is the one fetching image `name` of `code_id`.
async fn fetch_windows_now(
    runner: &Runner,
    fetcher: &Fetcher,
    project: &str,
    m: &engine::dump::Module,
    (name, code_id): (String, String),
    until: Until,
) -> Result<Vec<Lookup>, JobError> {
    let lower = name.to_ascii_lowercase();
    let mut lookups = Vec::new();
    let sees = binaries::Sees::Project(project);
    let mut images = binaries::by_code_id(&runner.db, &lower, &code_id, sees).await?;
    let mut pdb_name = m.debug_file.clone();
    if images.is_empty() {
        let want = Want::Image {
            name: name.clone(),
            code_id: code_id.clone(),
        };
        let fetched = ask(runner, fetcher, want, until).await?;
        lookups.extend(fetched.lookups);
        if let Some((path, source)) = fetched.file {
            if pdb_name.is_none() {
                pdb_name = pdb_name_of(&path);
            }
            keep(runner, project, &path, name.clone(), &source).await?;
            images = binaries::by_code_id(&runner.db, &lower, &code_id, sees).await?;
        }
    }
    let pdb_id = m
        .breakpad_debug_id()
        .or_else(|| images.iter().find_map(|r| r.debug_id.clone()));
    let Some(debug_id) = pdb_id else {
        return Ok(lookups);
    };
    let rows = seen(
        runner,
        project,
        binaries::by_debug_id(&runner.db, &debug_id).await?,
    )
    .await?;
    if rows.iter().any(|r| r.format == "pdb") {
        return Ok(lookups);
    }
    // the name the CodeView record gives, else the image's with `.pdb` (the linker's)
    let pdb_name = pdb_name.unwrap_or_else(|| match name.rsplit_once('.') {
        Some((stem, _)) => format!("{stem}.pdb"),
        None => format!("{name}.pdb"),
    });
    let want = Want::Pdb {
        name: pdb_name.clone(),
        debug_id,
    };
    let fetched = ask(runner, fetcher, want, until).await?;
    lookups.extend(fetched.lookups);
    if let Some((path, source)) = fetched.file {
        keep(runner, project, &path, pdb_name, &source).await?;
    }
    Ok(lookups)
}

/// The file name of the PDB a PE image's CodeView record names.
fn pdb_name_of(path: &Path) -> Option<String> {
    use object::Object;
    let file = std::fs::File::open(path).ok()?;
    let cache = object::read::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let cv = obj.pdb_info().ok()??;
    let full = String::from_utf8_lossy(cv.path());
    let name = full.rsplit(['/', '\\']).next().unwrap_or(&full);
    (!name.is_empty()).then(|| name.to_string())
}

/// Of `rows`, the files the crash's `project` sees (`binaries::visible`).
async fn seen(
    runner: &Runner,
    project: &str,
    rows: Vec<BinaryRow>,
) -> Result<Vec<BinaryRow>, JobError> {
    Ok(binaries::visible(&runner.db, binaries::Sees::Project(project), rows).await?)
}

/// Stores a fetched (and checked) file as an upload is stored, shared by every project,
/// unless a file the crash's `project` sees holds its identity in its role
/// ([`may_store`]).
async fn store(
    runner: &Runner,
    project: &str,
    path: &Path,
    name: String,
    source: &str,
) -> Result<(), JobError> {
    let p = path.to_path_buf();
    let (info, sha, size) = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&p)?;
        let info = engine::identify::identify_file(&file).map_err(std::io::Error::other)?;
        let (sha, size) = sha256_of(&p)?;
        Ok::<_, std::io::Error>((info, sha, size))
    })
    .await
    .map_err(|e| JobError::Panic(format!("reading a fetched file: {e}")))?
    .map_err(|e| {
        JobError::Store(StoreError::Staging {
            path: path.display().to_string(),
            source: e,
        })
    })?;
    let row = BinaryRow {
        sha256: sha.clone(),
        build_id: info.build_id.clone().unwrap_or_default(),
        arch: info.arch.map(str::to_string),
        kind: info.kind.to_string(),
        file_name: Some(name),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        sections: info.sections.join(","),
        uploaded_at: crate::store::now_ms(),
        debug_id: info.debug_id.clone(),
        format: info.format.to_string(),
        source: Some(source.to_string()),
        code_id: info.code_id.clone(),
        code_file: info.code_file.clone(),
    };
    if !may_store(runner, project, &row).await? {
        return Ok(());
    }
    let put = runner.blobs.put_file(path, &sha).await;
    let inserted = match put {
        Ok(_) => insert_shared(runner, &row).await,
        Err(e) => Err(e),
    };
    let (stored, created) = match inserted {
        Ok(done) => done,
        Err(e) => {
            binaries::release(&runner.db, &row, binaries::SHARED).await?;
            return Err(e.into());
        }
    };
    if created {
        let file = NewFile {
            build_id: info.build_id.as_deref(),
            debug_id: info.debug_id.as_deref(),
            breakpad: info.kind == engine::identify::KIND_BREAKPAD,
            pe: info.image(stored.file_name.as_deref()),
            project: None,
        };
        if file_arrived(&runner.db, &runner.cache, file).await? > 0 {
            runner.wake.notify_waiters();
        }
    }
    Ok(())
}

/// Stores a fetched file's row and shares it; whether it is new to the shared files.
async fn insert_shared(runner: &Runner, row: &BinaryRow) -> Result<(BinaryRow, bool), StoreError> {
    let (stored, _) = binaries::insert(&runner.db, row).await?;
    let new = binaries::own(&runner.db, &stored.sha256, binaries::SHARED).await?;
    Ok((stored, new))
}

/// Whether a fetched file may be stored: first upload wins, and a fetched file is held to
/// it as an upload is. A file whose identity and role a file the crash's `project` sees
/// already holds (its own upload, or a shared or fetched file) is not stored: it neither
/// replaces nor stands beside the stored one, and the refusal is logged. Another
/// project's file does not hold it back (that project's crashes keep using their own).
async fn may_store(runner: &Runner, project: &str, row: &BinaryRow) -> Result<bool, JobError> {
    let own = binaries::holder_of(&runner.db, row, project).await?;
    let holder = match own.or(binaries::holder_of(&runner.db, row, binaries::SHARED).await?) {
        Some(h) => Some(h.sha256),
        None => match binaries::claim(&runner.db, row, binaries::SHARED).await? {
            binaries::Claim::Lost(sha) => Some(sha),
            binaries::Claim::Held { .. } | binaries::Claim::Nothing => None,
        },
    };
    if let Some(existing) = &holder {
        tracing::warn!(
            source = row.source.as_deref().unwrap_or_default(),
            role = row.role(),
            refused = %row.sha256,
            existing = %existing,
            "fetched file not stored: another file holds its identity in this role"
        );
    }
    Ok(holder.is_none())
}

/// The sha256 (lower-case hex) and size of the file at `path`.
fn sha256_of(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(buf.get(..n).unwrap_or_default());
        size += n as u64;
    }
    Ok((hex::encode(h.finalize()), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, sections: &str) -> BinaryRow {
        BinaryRow {
            sha256: String::new(),
            build_id: "ab".into(),
            arch: None,
            kind: kind.into(),
            file_name: None,
            size: 0,
            sections: sections.into(),
            uploaded_at: 0,
            debug_id: None,
            format: "elf".into(),
            source: None,
            code_id: None,
            code_file: None,
        }
    }

    #[test]
    fn what_is_wanted_is_what_the_rows_lack() {
        use RemoteFile::{Debuginfo, Executable};
        let full = row("executable", "eh_frame,debug_info,symtab");
        let stripped = row("shared-object", "eh_frame,dynsym");
        let debug = row("debug", "debug_info,symtab");
        let sym = row(engine::identify::KIND_BREAKPAD, "");
        assert_eq!(wanted(&[full]), []);
        assert_eq!(wanted(std::slice::from_ref(&stripped)), [Debuginfo]);
        assert_eq!(wanted(std::slice::from_ref(&debug)), [Executable]);
        assert_eq!(wanted(&[stripped, debug]), []);
        assert_eq!(wanted(&[sym]), [Executable, Debuginfo]);
        assert_eq!(wanted(&[]), [Executable, Debuginfo]);
    }
}
