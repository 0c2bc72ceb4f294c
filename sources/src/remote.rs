//! The configured servers in order, behind the disk cache: a build's file is taken from
//! the cache, else from the first server that has it; every server asked (or whose miss
//! the cache remembers) is one of the report's `modules[].lookups`. A server that could
//! not be reached, or did not answer in time, is not asked again for [`DOWN_FOR`]: a walk
//! with a server down costs one timeout, not one per module, and a service asks again
//! soon after it is back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use engine::report::{Lookup, LookupResult, RemoteFile};

use crate::cache::DiskCache;
use crate::config::Config;
use crate::debuginfod::{FetchError, Server};

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

/// The remote sources of one program run or service.
pub struct Remote {
    servers: Vec<Server>,
    cache: DiskCache,
    miss_ttl: Duration,
    /// Servers (by index) that failed to answer, since when and why.
    down: Mutex<HashMap<usize, (Instant, String)>>,
    /// A cache directory of our own, for as long as this run, when the configured one
    /// cannot be written.
    _fallback: Option<tempfile::TempDir>,
}

impl Remote {
    /// The sources of `config`; `None` when it names none.
    pub fn new(config: &Config) -> Option<Remote> {
        if config.is_empty() {
            return None;
        }
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
        Some(Remote {
            servers: config
                .debuginfod
                .iter()
                .map(|u| Server::new(u, config))
                .collect(),
            cache: DiskCache::new(root),
            miss_ttl: config.miss_ttl,
            down: Mutex::new(HashMap::new()),
            _fallback: fallback,
        })
    }

    /// File `file` of build `build_id` (lower-case hex).
    pub fn file(&self, build_id: &str, file: RemoteFile) -> Fetched {
        let lookup = |source: &str, result, message: Option<String>| Lookup {
            source: source.to_string(),
            file,
            result,
            message,
        };
        if let Some((path, source)) = self.cache.get(build_id, file) {
            return Fetched {
                lookups: vec![lookup(&source, LookupResult::Fetched, None)],
                file: Some((path, source)),
            };
        }
        let mut out = Fetched::default();
        for (i, server) in self.servers.iter().enumerate() {
            let base = server.base();
            if let Some(why) = self.down_now(i) {
                out.lookups
                    .push(lookup(base, LookupResult::Error, Some(why)));
                continue;
            }
            if let Some(age) = self
                .cache
                .miss_age(build_id, file, base)
                .filter(|age| *age < self.miss_ttl)
            {
                let again = self.miss_ttl.saturating_sub(age).as_secs().max(1);
                let message = format!(
                    "not found {} s ago; asked again in {again} s",
                    age.as_secs()
                );
                out.lookups
                    .push(lookup(base, LookupResult::NotFound, Some(message)));
                continue;
            }
            let answer = self
                .cache
                .download_dir(build_id)
                .map_err(FetchError::Disk)
                .and_then(|dir| server.fetch(build_id, file, &dir));
            match answer {
                Ok(Some(downloaded)) => match self.cache.put(build_id, file, downloaded, base) {
                    Ok(path) => {
                        out.lookups.push(lookup(base, LookupResult::Fetched, None));
                        out.file = Some((path, base.to_string()));
                        return out;
                    }
                    Err(e) => out.lookups.push(lookup(
                        base,
                        LookupResult::Error,
                        Some(FetchError::Disk(e).to_string()),
                    )),
                },
                Ok(None) => {
                    // a miss that cannot be remembered is asked again next time: no harm
                    let _ = self.cache.put_miss(build_id, file, base);
                    out.lookups.push(lookup(base, LookupResult::NotFound, None));
                }
                Err(e) => {
                    let message = e.to_string();
                    if matches!(e, FetchError::Connect(_) | FetchError::Timeout(_)) {
                        if let Ok(mut d) = self.down.lock() {
                            d.insert(i, (Instant::now(), message.clone()));
                        }
                    }
                    out.lookups
                        .push(lookup(base, LookupResult::Error, Some(message)));
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
