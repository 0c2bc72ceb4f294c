//! Which remote sources to ask and the limits of their fetches, from the command line and
//! the environment variables elfutils' clients read, so a machine set up for gdb
//! (`DEBUGINFOD_URLS`) is set up for postmortem too. The limits given there are the
//! defaults; a source listed in a sources file ([`crate::sources_file`]) may set its own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Seconds a fetch may wait for a connection or between received bytes, as elfutils'
/// `DEBUGINFOD_TIMEOUT` (its default, 90).
pub const DEFAULT_TIMEOUT_SECS: u64 = 90;
/// Largest file fetched, as elfutils' `DEBUGINFOD_MAXSIZE` (bytes): 4 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;
/// How long a source's "not found" is believed before it is asked again, as elfutils'
/// `cache_miss_s` (600 s).
pub const DEFAULT_MISS_TTL_SECS: u64 = 600;
/// Longest a whole fetch may take, however steadily bytes arrive (`--fetch-max-secs`).
pub const DEFAULT_MAX_FETCH_SECS: u64 = 600;

/// The sources and limits of one program run (a walk) or one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// debuginfod servers' base URLs, asked in this order.
    pub debuginfod: Vec<String>,
    /// Breakpad symbol stores' base URLs (`BASE/NAME/DEBUG_ID/NAME.sym`), in this order.
    pub breakpad: Vec<String>,
    /// Symbol servers' base URLs (Microsoft's layout: `BASE/NAME/CODE_ID/NAME` for a
    /// Windows image, `BASE/NAME.pdb/DEBUG_ID/NAME.pdb` for its PDB), in this order.
    pub symbol_server: Vec<String>,
    /// S3-compatible buckets, asked after the HTTP sources for a file of any layout
    /// ([`crate::s3`]), in this order.
    pub buckets: Vec<crate::s3::Bucket>,
    /// Where fetched files and misses are kept.
    pub cache_dir: PathBuf,
    /// Longest wait for a connection, a response, or the next bytes of a body.
    pub timeout: Duration,
    /// Longest a whole fetch may take.
    pub max_fetch: Duration,
    /// Largest file fetched; a larger one is an error, never half kept.
    pub max_bytes: u64,
    /// How long a miss is remembered.
    pub miss_ttl: Duration,
    /// Limits of single sources (by URL) replacing the ones above.
    pub per_source: BTreeMap<String, LimitOverrides>,
}

/// The limits one source's fetches obey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest wait for a connection, a response, or the next bytes of a body.
    pub timeout: Duration,
    /// Longest a whole fetch may take.
    pub max_fetch: Duration,
    /// Largest file fetched; a larger one is an error, never half kept.
    pub max_bytes: u64,
    /// How long a miss is remembered.
    pub miss_ttl: Duration,
}

/// The limits a source sets for itself; each one not set is the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitOverrides {
    pub timeout: Option<Duration>,
    pub max_fetch: Option<Duration>,
    pub max_bytes: Option<u64>,
    pub miss_ttl: Option<Duration>,
}

impl Config {
    /// No sources (nothing is fetched), the default limits, the default cache.
    pub fn none() -> Config {
        Config {
            debuginfod: Vec::new(),
            breakpad: Vec::new(),
            symbol_server: Vec::new(),
            buckets: Vec::new(),
            cache_dir: default_cache_dir(),
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            max_fetch: Duration::from_secs(DEFAULT_MAX_FETCH_SECS),
            max_bytes: DEFAULT_MAX_BYTES,
            miss_ttl: Duration::from_secs(DEFAULT_MISS_TTL_SECS),
            per_source: BTreeMap::new(),
        }
    }

    /// The limits of the source at `url`: its own where it set them, else the defaults.
    pub fn limits(&self, url: &str) -> Limits {
        let own = self.per_source.get(url).copied().unwrap_or_default();
        Limits {
            timeout: own.timeout.unwrap_or(self.timeout),
            max_fetch: own.max_fetch.unwrap_or(self.max_fetch),
            max_bytes: own.max_bytes.unwrap_or(self.max_bytes),
            miss_ttl: own.miss_ttl.unwrap_or(self.miss_ttl),
        }
    }

    /// Whether any source is configured.
    pub fn is_empty(&self) -> bool {
        self.debuginfod.is_empty()
            && self.breakpad.is_empty()
            && self.symbol_server.is_empty()
            && self.buckets.is_empty()
    }
}

/// The servers of a `DEBUGINFOD_URLS` value: URLs separated by spaces, as elfutils
/// reads it; a trailing `/` dropped, anything but `http://` and `https://` skipped (with
/// the reason, for the caller to tell).
pub fn parse_urls(value: &str) -> (Vec<String>, Vec<String>) {
    let mut urls = Vec::new();
    let mut skipped = Vec::new();
    for u in value.split_ascii_whitespace() {
        if u.starts_with("http://") || u.starts_with("https://") {
            let u = u.trim_end_matches('/').to_string();
            if !urls.contains(&u) {
                urls.push(u);
            }
        } else {
            let shown = crate::redact::redact_url(u);
            skipped.push(format!("{shown}: not an http:// or https:// URL"));
        }
    }
    (urls, skipped)
}

/// A number of seconds (or bytes) from an environment variable, if it holds one.
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// `$XDG_CACHE_HOME/postmortem`, else `~/.cache/postmortem`, else a directory under the
/// system's temporary directory.
pub fn default_cache_dir() -> PathBuf {
    let home_cache = || std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache"));
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(home_cache)
        .unwrap_or_else(std::env::temp_dir)
        .join("postmortem")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debuginfod_urls_are_read_as_elfutils_reads_them() {
        let (urls, skipped) = parse_urls(
            "  https://debuginfod.debian.net/ http://127.0.0.1:8002\tftp://x https://debuginfod.debian.net ",
        );
        assert_eq!(
            urls,
            ["https://debuginfod.debian.net", "http://127.0.0.1:8002"]
        );
        assert_eq!(skipped, ["ftp://x: not an http:// or https:// URL"]);
        assert_eq!(parse_urls(""), (vec![], vec![]));
    }

    #[test]
    fn a_source_s_own_limits_replace_the_defaults_for_it_only() {
        let mut c = Config::none();
        c.timeout = Duration::from_secs(7);
        c.per_source.insert(
            "http://a".into(),
            LimitOverrides {
                max_bytes: Some(10),
                miss_ttl: Some(Duration::ZERO),
                ..LimitOverrides::default()
            },
        );
        let a = c.limits("http://a");
        assert_eq!(
            (a.timeout, a.max_bytes, a.miss_ttl),
            (Duration::from_secs(7), 10, Duration::ZERO)
        );
        let b = c.limits("http://b");
        assert_eq!((b.max_bytes, b.miss_ttl), (c.max_bytes, c.miss_ttl));
    }
}
