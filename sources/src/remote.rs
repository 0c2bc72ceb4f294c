//! The configured servers in order, behind the disk cache: a file is taken from the
//! cache, else from the first server of its layout that has it — a build's executable and
//! debug file from debuginfod servers (`buildid/ID/executable`), a `.sym` file from
//! Breakpad symbol stores (`NAME/DEBUG_ID/NAME.sym`, as minidump-stackwalk's
//! `--symbols-url` and Mozilla's Tecken serve them), a Windows image and its PDB from
//! symbol servers (Microsoft's layout: `NAME/CODE_ID/NAME`, `NAME.pdb/DEBUG_ID/NAME.pdb`;
//! when a server has not the file, its compressed form beside it, `NAME.pd_`, a CAB
//! archive: [`crate::cabinet`]), each server within its own limits
//! ([`crate::config::Config::limits`]). Every server asked (or whose miss
//! the cache remembers) is one of the report's `modules[].lookups`; a remembered miss says
//! when it expires (`until`), reckoned from when it was recorded, so repeated walks
//! print the same report. A server that could
//! not be reached, or did not answer in time, is not asked again for [`DOWN_FOR`]: a walk
//! with a server down costs one timeout, not one per module, and a service asks again
//! soon after it is back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use engine::report::{Lookup, LookupResult, RemoteFile};

use crate::cabinet;
use crate::cache::{DiskCache, Entry};
use crate::check::{self, Refused};
use crate::config::Config;
use crate::http::{FetchError, Server, Until};
use crate::s3;

/// Where a symbol server may keep a file compressed: the path below its base URL
/// (escaped), and the name the archive must hold.
struct Compressed<'a> {
    path: String,
    name: &'a str,
}

/// One file asked of the servers of a layout.
struct Asked<'a> {
    layout: Layout,
    file: RemoteFile,
    /// Below each base URL, escaped.
    path: &'a str,
    /// Where a symbol server may keep it compressed.
    compressed: Option<&'a Compressed<'a>>,
    /// When every fetch must have ended.
    until: Until,
    /// A size cap below the server's own (a source file's); `None`: the server's.
    max_bytes: Option<u64>,
}

/// How a server lays out its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Debuginfod,
    Breakpad,
    SymbolServer,
    /// An S3 bucket: the layout a sources file gave it, else every layout; asked after
    /// the HTTP sources of each.
    Bucket(Option<s3::Layout>),
}

impl Layout {
    /// Whether a server of this layout is asked for files of `layout`.
    fn serves(self, layout: Layout) -> bool {
        match self {
            Layout::Bucket(None) => true,
            Layout::Bucket(Some(own)) => {
                layout
                    == match own {
                        s3::Layout::Debuginfod => Layout::Debuginfod,
                        s3::Layout::Breakpad => Layout::Breakpad,
                        s3::Layout::SymbolServer => Layout::SymbolServer,
                    }
            }
            own => own == layout,
        }
    }
}

/// How long a server that could not be reached or did not answer in time is not asked.
pub const DOWN_FOR: Duration = Duration::from_secs(30);

/// What the sources gave for one file of one build.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    /// The file, kept in the cache, and the server it came from.
    pub file: Option<(PathBuf, String)>,
    /// Every server asked, with its answer.
    pub lookups: Vec<Lookup>,
}

/// Misses kept where every process of a service sees them (its database) rather than on
/// this machine's disk: a worker does not ask a source what another worker was told it
/// lacks. Called on a blocking thread.
pub trait SharedMisses: Send + Sync {
    /// When the miss of `entry` at `source` expires, if `source` said it lacks `entry` and
    /// that has not expired (a failure to tell counts as not remembered: the source is
    /// asked).
    fn remembered(&self, entry: &Entry, source: &str) -> Option<SystemTime>;
    /// Remembers that `source` lacks `entry`, for `ttl`; when that expires, if it could.
    fn remember(&self, entry: &Entry, source: &str, ttl: Duration) -> Option<SystemTime>;
}

/// The remote sources of one program run or service.
pub struct Remote {
    servers: Vec<(Layout, Server)>,
    cache: DiskCache,
    /// Servers (by index) that failed to answer, since when and why.
    down: Mutex<HashMap<usize, (Instant, String)>>,
    /// A cache directory of our own, for as long as this run, when the configured one
    /// cannot be written.
    _fallback: Option<tempfile::TempDir>,
    /// Where misses are kept instead of the disk cache, once a service said.
    shared: OnceLock<Arc<dyn SharedMisses>>,
}

impl Remote {
    /// The sources of `config`; `None` when it names none.
    pub fn new(config: &Config) -> Option<Remote> {
        (!config.is_empty()).then(|| Remote::open(config))
    }

    /// The sources of `config`, even none.
    pub fn open(config: &Config) -> Remote {
        let (root, fallback) = match std::fs::create_dir_all(&config.cache_dir) {
            Ok(()) => (config.cache_dir.clone(), None),
            Err(_) => match tempfile::Builder::new()
                .prefix("postmortem-cache")
                .tempdir()
            {
                Ok(t) => (t.path().to_path_buf(), Some(t)),
                Err(_) => (config.cache_dir.clone(), None),
            },
        };
        Remote {
            servers: config
                .debuginfod
                .iter()
                .map(|u| (Layout::Debuginfod, Server::new(u, &config.limits(u))))
                .chain(
                    config
                        .breakpad
                        .iter()
                        .map(|u| (Layout::Breakpad, Server::new(u, &config.limits(u)))),
                )
                .chain(
                    config
                        .symbol_server
                        .iter()
                        .map(|u| (Layout::SymbolServer, Server::new(u, &config.limits(u)))),
                )
                .chain(config.buckets.iter().map(|b| {
                    let limits = config.limits(b.url());
                    (
                        Layout::Bucket(b.layout()),
                        Server::bucket(b.clone(), &limits),
                    )
                }))
                .collect(),
            cache: DiskCache::new(root),
            down: Mutex::new(HashMap::new()),
            _fallback: fallback,
            shared: OnceLock::new(),
        }
    }

    /// Keeps misses in `shared` from now on instead of the disk cache (the first call
    /// wins; a service has one database).
    pub fn share_misses(&self, shared: Arc<dyn SharedMisses>) {
        let _ = self.shared.set(shared);
    }

    /// Whether misses are kept in a [`SharedMisses`].
    pub fn misses_shared(&self) -> bool {
        self.shared.get().is_some()
    }

    /// When the miss expires, if `server` said it lacks `entry` less than its miss TTL
    /// ago. Blocks on the shared misses when there are: call it on a blocking thread.
    /// Misses are kept under the server's display form ([`Server::name`]).
    fn miss_remembered(&self, entry: &Entry, server: &Server) -> Option<SystemTime> {
        let source = server.name();
        if let Some(shared) = self.shared.get() {
            return shared.remembered(entry, source);
        }
        let expires = self
            .cache
            .miss_recorded(entry, source)?
            .checked_add(server.miss_ttl())?;
        (expires > SystemTime::now()).then_some(expires)
    }

    /// Remembers that `server` lacks `entry`; when that expires, if it could. Blocks as
    /// [`Remote::miss_remembered`] does.
    fn remember_miss(&self, entry: &Entry, server: &Server) -> Option<SystemTime> {
        let (source, ttl) = (server.name(), server.miss_ttl());
        if let Some(shared) = self.shared.get() {
            return shared.remember(entry, source, ttl);
        }
        self.cache.put_miss(entry, source).ok()?.checked_add(ttl)
    }

    /// A directory on the cache's disk to download `entry` into (created).
    pub fn download_dir(&self, entry: &Entry) -> std::io::Result<PathBuf> {
        self.cache.download_dir(entry)
    }

    /// What a `not-found` lookup of `server` says: how long the miss is remembered (the
    /// same words when it is new and when it is remembered, so a report does not change
    /// with the clock).
    fn miss_message(server: &Server) -> String {
        format!("remembered for {} s", server.miss_ttl().as_secs())
    }

    /// File `file` (executable or debuginfo) of build `build_id` (lower-case hex), from
    /// the debuginfod servers; every fetch ended by `until`.
    pub fn file(&self, build_id: &str, file: RemoteFile, until: Until) -> Fetched {
        let Some(entry) = Entry::build(build_id, file.as_str()) else {
            return Fetched::default();
        };
        let path = format!("buildid/{build_id}/{}", file.as_str());
        let check = |f: &std::fs::File| check::same_build(f, build_id);
        let asked = Asked {
            layout: Layout::Debuginfod,
            file,
            path: &path,
            compressed: None,
            until,
            max_bytes: None,
        };
        self.ask(&asked, &entry, &check)
    }

    /// The `.sym` file at `rel` (`NAME/DEBUG_ID/NAME.sym`) whose `MODULE` line says
    /// `debug_id` (upper-case), from the Breakpad symbol stores; every fetch ended by
    /// `until`.
    pub fn sym(&self, rel: &str, debug_id: &str, until: Until) -> Fetched {
        let Some(entry) = Entry::sym(rel) else {
            return Fetched::default();
        };
        let path = escape_path(rel);
        let check = |f: &std::fs::File| check::same_sym(f, debug_id);
        let asked = Asked {
            layout: Layout::Breakpad,
            file: RemoteFile::Sym,
            path: &path,
            compressed: None,
            until,
            max_bytes: None,
        };
        self.ask(&asked, &entry, &check)
    }

    /// The Windows image `name` (asked for in the case given: the dump's) of code id
    /// `code_id` (upper-case), from the symbol servers at `NAME/CODE_ID/NAME`, else
    /// compressed at `NAME/CODE_ID/NAME.dl_` (`.ex_`); every fetch ended by `until`.
    pub fn pe_image(&self, name: &str, code_id: &str, until: Until) -> Fetched {
        let check = |f: &std::fs::File| check::same_pe(f, code_id);
        self.symsrv(name, code_id, RemoteFile::Executable, &check, until)
    }

    /// The PDB `name` of debug id `debug_id` (upper-case), from the symbol servers at
    /// `NAME/DEBUG_ID/NAME`, else compressed at `NAME/DEBUG_ID/NAME.pd_`; every fetch
    /// ended by `until`.
    pub fn pdb(&self, name: &str, debug_id: &str, until: Until) -> Fetched {
        let check = |f: &std::fs::File| check::same_pdb(f, debug_id);
        self.symsrv(name, debug_id, RemoteFile::Debuginfo, &check, until)
    }

    /// File `name` of id `id` from the symbol servers, plain or compressed, accepted by
    /// `check` either way and kept as it is (the next walk needs no server and no
    /// decompression).
    fn symsrv(
        &self,
        name: &str,
        id: &str,
        file: RemoteFile,
        check: &dyn Fn(&std::fs::File) -> Result<(), Refused>,
        until: Until,
    ) -> Fetched {
        let Some(entry) = Entry::symsrv(name, id) else {
            return Fetched::default();
        };
        let path = escape_path(&format!("{name}/{id}/{name}"));
        let compressed = cabinet::compressed_name(name).map(|c| Compressed {
            path: escape_path(&format!("{name}/{id}/{c}")),
            name,
        });
        let asked = Asked {
            layout: Layout::SymbolServer,
            file,
            path: &path,
            compressed: compressed.as_ref(),
            until,
            max_bytes: None,
        };
        self.ask(&asked, &entry, check)
    }

    /// The source file recorded as `path` (absolute) in build `build_id`'s debug
    /// information, from the debuginfod servers' `buildid/ID/source/PATH` route (on a
    /// postmortem server: its uploaded source bundles), at most `max_bytes`; `None` when
    /// no server has it. Cached, and misses remembered, as files are: a second walk asks
    /// nothing. (What was asked is not reported: the report's lookups are its modules'.)
    pub fn source(
        &self,
        build_id: &str,
        path: &str,
        max_bytes: u64,
        until: Until,
    ) -> Option<Vec<u8>> {
        let plain = path.starts_with('/') && !path.split('/').any(|c| c == ".." || c == ".");
        if !plain {
            return None;
        }
        let entry = Entry::source(build_id, path)?;
        let rel = format!("buildid/{build_id}/source{}", escape_path(path));
        let asked = Asked {
            layout: Layout::Debuginfod,
            // only named in the lookups, which are not reported for sources
            file: RemoteFile::Debuginfo,
            path: &rel,
            compressed: None,
            until,
            max_bytes: Some(max_bytes),
        };
        let (at, _) = self.ask(&asked, &entry, &|_: &std::fs::File| Ok(())).file?;
        read_at_most(&std::fs::File::open(at).ok()?, max_bytes)
    }

    /// Marks server `i` down after `e`, if `e` says it cannot be reached in time.
    fn mark_down_if_unreachable(&self, i: usize, e: &FetchError) {
        let down = matches!(
            e,
            FetchError::Connect(_) | FetchError::Timeout(_) | FetchError::TooSlow(_)
        );
        if down {
            if let Ok(mut d) = self.down.lock() {
                d.insert(i, (Instant::now(), e.to_string()));
            }
        }
    }

    /// Whether any symbol server (or bucket) is configured.
    pub fn has_symbol_servers(&self) -> bool {
        self.servers
            .iter()
            .any(|(l, _)| l.serves(Layout::SymbolServer))
    }

    /// Whether any debuginfod server (or bucket) is configured.
    pub fn has_debuginfod_servers(&self) -> bool {
        self.servers
            .iter()
            .any(|(l, _)| l.serves(Layout::Debuginfod))
    }

    /// Whether any Breakpad symbol store (or bucket) is configured.
    pub fn has_symbol_stores(&self) -> bool {
        self.servers.iter().any(|(l, _)| l.serves(Layout::Breakpad))
    }

    /// `entry` from the cache, else from the servers of `asked.layout` in order (at
    /// `asked.path` below each base URL, else where `asked.compressed` says, the
    /// download — or the file extracted from it — accepted by `check`).
    fn ask(
        &self,
        asked: &Asked<'_>,
        entry: &Entry,
        check: &dyn Fn(&std::fs::File) -> Result<(), Refused>,
    ) -> Fetched {
        let lookup = |source: &str, result, message: Option<String>| Lookup {
            source: source.to_string(),
            file: asked.file,
            result,
            message,
            until: None,
        };
        if let Some((path, source)) = self.cache.get(entry) {
            // written by an older version, it may hold the URL as configured
            let source = crate::redact::redact_url(&source);
            let via = self.cache.via(entry).map(|v| crate::redact::redact_url(&v));
            return Fetched {
                lookups: vec![lookup(&source, LookupResult::Fetched, via)],
                file: Some((path, source)),
            };
        }
        let mut out = Fetched::default();
        for (i, (_, server)) in self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, (l, _))| l.serves(asked.layout))
        {
            let name = server.name();
            if let Some(why) = self.down_now(i) {
                out.lookups
                    .push(lookup(name, LookupResult::Error, Some(why)));
                continue;
            }
            let remembered = Remote::miss_message(server);
            if let Some(expires) = self.miss_remembered(entry, server) {
                out.lookups.push(Lookup {
                    until: Some(rfc3339(expires)),
                    ..lookup(name, LookupResult::NotFound, Some(remembered))
                });
                continue;
            }
            let answer = self
                .cache
                .download_dir(entry)
                .map_err(FetchError::Disk)
                .and_then(|dir| fetch_one(server, asked, &dir, check));
            match answer {
                Ok(Some((downloaded, via))) => {
                    match self.cache.put(entry, downloaded, name, via.as_deref()) {
                        Ok(path) => {
                            out.lookups.push(lookup(name, LookupResult::Fetched, via));
                            out.file = Some((path, name.to_string()));
                            return out;
                        }
                        Err(e) => out.lookups.push(lookup(
                            name,
                            LookupResult::Error,
                            Some(FetchError::Disk(e).to_string()),
                        )),
                    }
                }
                Ok(None) => {
                    // a miss that cannot be remembered is asked again next time: no harm
                    let expires = self.remember_miss(entry, server);
                    let message = expires.is_some().then_some(remembered);
                    out.lookups.push(Lookup {
                        until: expires.map(rfc3339),
                        ..lookup(name, LookupResult::NotFound, message)
                    });
                }
                Err(e) => {
                    self.mark_down_if_unreachable(i, &e);
                    out.lookups
                        .push(lookup(name, LookupResult::Error, Some(e.to_string())));
                }
            }
        }
        out
    }

    /// Why server `i` is not asked now, if it failed less than [`DOWN_FOR`] ago.
    fn down_now(&self, i: usize) -> Option<String> {
        let d = self.down.lock().ok()?;
        let (since, why) = d.get(&i)?;
        (since.elapsed() < DOWN_FOR).then(|| why.clone())
    }
}

/// What `server` has of `asked`: the file, else its compressed form.
fn fetch_one(
    server: &Server,
    asked: &Asked<'_>,
    dir: &std::path::Path,
    check: &dyn Fn(&std::fs::File) -> Result<(), Refused>,
) -> Result<Option<(tempfile::NamedTempFile, Option<String>)>, FetchError> {
    let cap = asked.max_bytes.unwrap_or(server.max_bytes());
    if let Some(plain) = server.fetch(asked.path, dir, check, asked.until, cap)? {
        return Ok(Some((plain, None)));
    }
    match asked.compressed {
        Some(c) => fetch_compressed(server, c, dir, check, asked.until),
        None => Ok(None),
    }
}

/// The file `compressed` names from `server`, extracted into `dir` and accepted by
/// `check`, and what the lookup says of it (the archive's URL); `None` when the server
/// has no such archive.
fn fetch_compressed(
    server: &Server,
    compressed: &Compressed<'_>,
    dir: &std::path::Path,
    check: &dyn Fn(&std::fs::File) -> Result<(), Refused>,
    until: Until,
) -> Result<Option<(tempfile::NamedTempFile, Option<String>)>, FetchError> {
    let Some(archive) = server.download(&compressed.path, dir, until)? else {
        return Ok(None);
    };
    let url = server.display_url(&compressed.path);
    let extracted = cabinet::extract(archive.as_file(), compressed.name, dir, server.max_bytes())
        .map_err(|e| FetchError::Cab {
        url: url.clone(),
        error: e,
    })?;
    check(extracted.as_file())?;
    Ok(Some((extracted, Some(format!("extracted from {url}")))))
}

/// A miss's expiry as a report gives it (`until`): RFC 3339, UTC, whole seconds.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The name a file fetched for module `module` (its name or path) goes by in reports, as
/// a local file would: `NAME` for the executable, `NAME.debug`, `NAME.sym`.
pub fn report_name(module: &str, file: RemoteFile) -> String {
    let name = module.rsplit(['/', '\\']).next().unwrap_or(module);
    match file {
        RemoteFile::Executable => name.to_string(),
        RemoteFile::Debuginfo => format!("{name}.debug"),
        RemoteFile::Sym => format!("{name}.sym"),
    }
}

/// A store path with the bytes a URL path cannot hold as they are percent-encoded.
/// The bytes of `file` from its start, or `None` when it holds more than `max_bytes`.
fn read_at_most(file: &std::fs::File, max_bytes: u64) -> Option<Vec<u8>> {
    use std::io::{Read, Seek};
    let mut file = file;
    file.rewind().ok()?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= max_bytes).then_some(bytes)
}

fn escape_path(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len());
    for b in rel.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~+@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn store_paths_are_escaped_for_urls() {
        assert_eq!(
            super::escape_path("My App.pdb/ABC1/My App.sym"),
            "My%20App.pdb/ABC1/My%20App.sym"
        );
        assert_eq!(super::escape_path("a#b?/1/x%.sym"), "a%23b%3F/1/x%25.sym");
    }
}
