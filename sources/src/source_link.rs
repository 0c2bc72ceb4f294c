//! Source-link mappings (issue 42): a source path prefix mapped to a URL template with
//! the build's commit, as SourceLink (`/src/*` → `https://raw…/{commit}/*`) and Sentry's
//! code mappings do. A frame whose file is `PREFIX` + `REST` gets its lines from the raw
//! template's URL, and a link to the repository (the web template's URL, else the raw
//! one) on the crash page.
//!
//! A mapping is written `PREFIX=RAW_TEMPLATE` or `PREFIX=RAW_TEMPLATE WEB_TEMPLATE` (a URL
//! holds no space), e.g. `/build/src/=https://git.example.com/repo/raw/{commit}/{path}`.
//! Templates are `http://` or `https://` URLs and may use `{commit}` (the crash's or the
//! walk's commit: a template that uses it is skipped when none is known), `{build_id}`
//! (the frame's module's) and `{path}` (`REST`, each component percent-encoded). A path
//! with a `.` or `..` component, or a prefix-only path, maps to nothing; so does a
//! commit or build-id that is not made of letters, digits, `.`, `_`, `-` and `/`.
//!
//! Fetches go through [`crate::http::Server`]: bounded in size (the engine's cap, at most
//! [`SourceLinkLimits::max_bytes`]) and time, redirects followed only as
//! [`crate::redirect`] allows (another host over https at public addresses only). Each
//! URL's answer is kept in memory ([`SourceLinks`], bounded in bytes): a file, or a miss
//! (404, refused, too large, too slow), the latter for [`SourceLinkLimits::miss_ttl`].

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Limits;
use crate::http::{Server, Until};

/// Why a `--source-link` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("a source-link mapping is PREFIX=URL_TEMPLATE [WEB_TEMPLATE], not {0:?}")]
    Form(String),
    #[error("a source-link prefix must be an absolute path, not {0:?}")]
    Prefix(String),
    #[error("a source-link template must be an http:// or https:// URL with {{path}}, not {0:?}")]
    Template(String),
}

/// One mapping: files under `prefix` are at `raw` (and shown at `web`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub prefix: String,
    pub raw: String,
    pub web: Option<String>,
}

impl std::str::FromStr for Mapping {
    type Err = MappingError;

    fn from_str(s: &str) -> Result<Mapping, MappingError> {
        // the first `=` followed by a URL: a prefix may hold `=` itself
        let at = s
            .match_indices('=')
            .map(|(i, _)| i)
            .find(|&i| {
                let rest = s.get(i + 1..).unwrap_or_default();
                rest.starts_with("http://") || rest.starts_with("https://")
            })
            .ok_or_else(|| MappingError::Form(s.to_string()))?;
        let (prefix, templates) = (s.get(..at).unwrap_or_default(), s.get(at + 1..));
        if !prefix.starts_with('/') || prefix.contains('\0') {
            return Err(MappingError::Prefix(prefix.to_string()));
        }
        let mut parts = templates.unwrap_or_default().split_whitespace();
        let raw = template(parts.next())?;
        let web = parts.next().map(|w| template(Some(w))).transpose()?;
        if let Some(extra) = parts.next() {
            return Err(MappingError::Form(extra.to_string()));
        }
        Ok(Mapping {
            prefix: prefix.to_string(),
            raw,
            web,
        })
    }
}

/// A template checked: an http(s) URL naming `{path}`.
fn template(t: Option<&str>) -> Result<String, MappingError> {
    let t = t.unwrap_or_default();
    let http = t.starts_with("http://") || t.starts_with("https://");
    if !http || !t.contains("{path}") || url::Url::parse(t).is_err() {
        return Err(MappingError::Template(t.to_string()));
    }
    Ok(t.to_string())
}

/// What a frame's file is mapped with: the commit (of the crash or the walk) and the
/// build-id of the frame's module, where known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Build<'a> {
    pub commit: Option<&'a str>,
    pub build_id: Option<&'a str>,
}

impl Mapping {
    /// The raw URL of `path`, when this mapping covers it.
    pub fn raw_url(&self, path: &str, build: Build<'_>) -> Option<String> {
        expand(&self.raw, self.rest(path)?, build)
    }

    /// The URL a person follows for `path`: the web template's, else the raw one.
    pub fn web_url(&self, path: &str, build: Build<'_>) -> Option<String> {
        expand(
            self.web.as_ref().unwrap_or(&self.raw),
            self.rest(path)?,
            build,
        )
    }

    /// `path` below the prefix, when it is a plain path there.
    fn rest<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(&self.prefix)?.trim_start_matches('/');
        let plain = !rest.is_empty()
            && rest
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && !rest.contains('\0');
        plain.then_some(rest)
    }
}

/// The first mapping's raw and web URLs of `path`.
pub fn urls(mappings: &[Mapping], path: &str, build: Build<'_>) -> Option<(String, String)> {
    mappings
        .iter()
        .find_map(|m| Some((m.raw_url(path, build)?, m.web_url(path, build)?)))
}

/// A value that may go into a URL as it is.
fn plain_value(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 256
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        && !v.split('/').any(|c| c == "." || c == "..")
}

/// `template` with its placeholders filled; `None` when one it uses is unknown.
fn expand(template: &str, rest: &str, build: Build<'_>) -> Option<String> {
    let mut out = template.to_string();
    for (name, value) in [("{commit}", build.commit), ("{build_id}", build.build_id)] {
        if out.contains(name) {
            let v = value.filter(|v| plain_value(v))?;
            out = out.replace(name, v);
        }
    }
    let escaped: Vec<String> = rest.split('/').map(escape_component).collect();
    Some(out.replace("{path}", &escaped.join("/")))
}

/// One path component, percent-encoded but for RFC 3986's unreserved characters.
fn escape_component(c: &str) -> String {
    let mut out = String::with_capacity(c.len());
    for b in c.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Bounds of the source-link fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLinkLimits {
    /// Longest wait for a connection, a response, or the next bytes.
    pub timeout: Duration,
    /// Longest one fetch may take.
    pub max_fetch: Duration,
    /// Largest file fetched (the engine's own cap may be lower).
    pub max_bytes: u64,
    /// How long a miss (or a refused fetch) is believed.
    pub miss_ttl: Duration,
    /// Most bytes of files kept in memory (oldest dropped first).
    pub cache_bytes: usize,
}

impl Default for SourceLinkLimits {
    fn default() -> Self {
        SourceLinkLimits {
            timeout: Duration::from_secs(10),
            max_fetch: Duration::from_secs(20),
            max_bytes: 16 << 20,
            miss_ttl: Duration::from_secs(300),
            cache_bytes: 64 << 20,
        }
    }
}

/// A URL's answer as kept: the file, or a miss and when it was seen.
#[derive(Clone)]
enum Kept {
    File(Arc<Vec<u8>>),
    Miss(Instant),
}

/// The answers kept, by URL, oldest first in `order`.
#[derive(Default)]
struct Cache {
    by_url: HashMap<String, Kept>,
    order: VecDeque<String>,
    bytes: usize,
}

/// The mappings of one walk or one service, their fetches and the answers kept.
pub struct SourceLinks {
    mappings: Vec<Mapping>,
    server: Server,
    limits: SourceLinkLimits,
    dir: PathBuf,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for SourceLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceLinks")
            .field("mappings", &self.mappings)
            .field("limits", &self.limits)
            .finish()
    }
}

impl SourceLinks {
    /// `mappings`, their files downloaded into `dir` (a temporary file each, read and
    /// removed at once) within `limits`.
    pub fn new(mappings: Vec<Mapping>, limits: SourceLinkLimits, dir: PathBuf) -> SourceLinks {
        let http = Limits {
            timeout: limits.timeout,
            max_fetch: limits.max_fetch,
            max_bytes: limits.max_bytes,
            miss_ttl: limits.miss_ttl,
        };
        SourceLinks {
            server: Server::new("source-link", &http),
            mappings,
            limits,
            dir,
            cache: Mutex::new(Cache::default()),
        }
    }

    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The bytes of `path` from the first mapping that covers it, at most `max_bytes`:
    /// `Ok(None)` when no mapping covers it or its URL has no file (or a miss is kept);
    /// an error (the URL's display form and why) when the fetch failed — too large, too
    /// slow, a refused redirect — which is kept as a miss too, for the caller to log.
    pub fn source(
        &self,
        path: &str,
        build: Build<'_>,
        max_bytes: u64,
        until: Until,
    ) -> Result<Option<Vec<u8>>, String> {
        let Some((url, _)) = urls(&self.mappings, path, build) else {
            return Ok(None);
        };
        if let Some(kept) = self.kept(&url) {
            return Ok(match kept {
                Kept::File(f) => (f.len() as u64 <= max_bytes).then(|| f.to_vec()),
                Kept::Miss(_) => None,
            });
        }
        let fetched = self.fetch(&url, until);
        let kept = match &fetched {
            Ok(Some(bytes)) => Kept::File(Arc::new(bytes.clone())),
            _ => Kept::Miss(Instant::now()),
        };
        self.keep(url, kept);
        Ok(fetched?.filter(|b| b.len() as u64 <= max_bytes))
    }

    /// `url`'s answer, if kept (a miss only while believed).
    fn kept(&self, url: &str) -> Option<Kept> {
        let cache = self.cache.lock().ok()?;
        match cache.by_url.get(url)? {
            Kept::Miss(at) if at.elapsed() > self.limits.miss_ttl => None,
            kept => Some(kept.clone()),
        }
    }

    fn keep(&self, url: String, kept: Kept) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        let size = match &kept {
            Kept::File(f) => f.len(),
            Kept::Miss(_) => 0,
        };
        if let Some(Kept::File(old)) = cache.by_url.insert(url.clone(), kept) {
            cache.bytes = cache.bytes.saturating_sub(old.len());
        } else {
            cache.order.push_back(url);
        }
        cache.bytes = cache.bytes.saturating_add(size);
        // the oldest answers go first; misses cost an entry each, bounded too
        while cache.bytes > self.limits.cache_bytes || cache.order.len() > 100_000 {
            let Some(oldest) = cache.order.pop_front() else {
                break;
            };
            if let Some(Kept::File(f)) = cache.by_url.remove(&oldest) {
                cache.bytes = cache.bytes.saturating_sub(f.len());
            }
        }
    }

    /// The file at `url` within the limits, `None` for a 404; an error naming the URL
    /// (its display form) and why for anything else.
    fn fetch(&self, url: &str, until: Until) -> Result<Option<Vec<u8>>, String> {
        let why = |e: &dyn std::fmt::Display| {
            format!("source link {}: {e}", crate::redact::redact_url(url))
        };
        let Some(file) = self
            .server
            .download_url(url, &self.dir, until)
            .map_err(|e| why(&e))?
        else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        // a new handle: the download's is at the end of what it wrote
        file.reopen()
            .map_err(|e| why(&e))?
            .take(self.limits.max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| why(&e))?;
        if bytes.len() as u64 > self.limits.max_bytes {
            return Err(why(&format!("larger than {} bytes", self.limits.max_bytes)));
        }
        Ok(Some(bytes))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::*;

    fn m(s: &str) -> Mapping {
        s.parse().unwrap()
    }

    const B: Build<'static> = Build {
        commit: Some("0123abc"),
        build_id: Some("beef"),
    };

    #[test]
    fn mappings_parse_and_expand() {
        let map = m("/build/src/=https://git.example.com/r/raw/{commit}/{path} https://git.example.com/r/blob/{commit}/{path}");
        assert_eq!(
            map.raw_url("/build/src/lib/a b.c", B).as_deref(),
            Some("https://git.example.com/r/raw/0123abc/lib/a%20b.c")
        );
        assert_eq!(
            map.web_url("/build/src/a.c", B).as_deref(),
            Some("https://git.example.com/r/blob/0123abc/a.c")
        );
        assert_eq!(map.raw_url("/other/a.c", B), None);
        let fixed = m("/x=y=http://h:1/v1.2/{build_id}/{path}");
        assert_eq!(fixed.prefix, "/x=y");
        assert_eq!(
            fixed.web_url("/x=y/a.c", Build::default()),
            None,
            "no build-id known"
        );
        assert_eq!(
            fixed.raw_url("/x=y/a.c", B).as_deref(),
            Some("http://h:1/v1.2/beef/a.c")
        );
    }

    #[test]
    fn bad_mappings_and_paths_are_refused() {
        for bad in [
            "",
            "/src=",
            "src/=https://h/{path}",
            "/src=ftp://h/{path}",
            "/src=https://h/no-path",
            "/src=https://h/{path} https://h/{path} extra",
        ] {
            assert!(bad.parse::<Mapping>().is_err(), "{bad:?}");
        }
        let map = m("/src/=https://h/{commit}/{path}");
        for path in ["/src/", "/src/../etc/passwd", "/src/a/./b", "/src/a//b"] {
            assert_eq!(map.raw_url(path, B), None, "{path:?}");
        }
        for commit in ["a b", "../x", "", "a?b", "a#b"] {
            let b = Build {
                commit: Some(commit),
                build_id: None,
            };
            assert_eq!(map.raw_url("/src/a.c", b), None, "{commit:?}");
        }
        assert_eq!(map.raw_url("/src/a.c", Build::default()), None);
    }
}
