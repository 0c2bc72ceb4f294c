//! The sources file (`--sources FILE`, `POSTMORTEM_SOURCES`): the remote sources of a
//! walk or a service listed in order, each with its kind, its URL and, when it needs
//! other limits than the command line's, its own timeout, size cap, whole-fetch limit and
//! miss TTL. One place for a service's sources, kept with its deployment, rather than a
//! line of flags; a public server that is slow and a local store that is fast each get
//! the limits they need.
//!
//! ```toml
//! [[source]]
//! kind = "debuginfod"                 # debuginfod | breakpad | symbol-server | s3
//! url = "https://debuginfod.debian.net"
//! timeout_secs = 20                   # optional, each of these four
//! max_bytes = 2_000_000_000
//! max_fetch_secs = 300
//! miss_ttl_secs = 3600
//!
//! [[source]]
//! kind = "s3"
//! url = "s3://symbols/prefix"
//! layout = "breakpad"                 # s3 only: how the bucket's keys are laid out
//! ```
//!
//! Anything not understood — an unknown key or kind, a URL of the wrong scheme, a limit
//! of 0, a URL listed twice — is a [`SourcesFileError`] naming the file and the line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{Config, LimitOverrides};
/// How an S3 bucket's keys are laid out (the bucket's own type, named here too).
pub use crate::s3::Layout;

/// Largest sources file read: a list of servers, not data.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// What kind of server a source is, that is which paths it is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// `buildid/ID/executable`, `buildid/ID/debuginfo`.
    Debuginfod,
    /// A Breakpad symbol store: `NAME/DEBUG_ID/NAME.sym`.
    Breakpad,
    /// Microsoft's symbol server layout: `NAME/ID/NAME`.
    SymbolServer,
    /// An S3-compatible bucket laid out as one of the others.
    S3,
}

/// One source of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub kind: Kind,
    /// Its URL, without a trailing `/`.
    pub url: String,
    /// How an S3 bucket is laid out (`None`: every layout is looked for).
    pub layout: Option<Layout>,
    /// The limits it sets for itself.
    pub limits: LimitOverrides,
    /// The line of the file it starts on, for messages.
    pub line: usize,
}

/// Why a sources file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SourcesFileError {
    #[error("cannot read the sources file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Bad {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    source: Vec<Spanned<RawSource>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    kind: Kind,
    url: Spanned<String>,
    layout: Option<Spanned<Layout>>,
    timeout_secs: Option<Spanned<u64>>,
    max_bytes: Option<Spanned<u64>>,
    max_fetch_secs: Option<Spanned<u64>>,
    miss_ttl_secs: Option<u64>,
}

/// The sources listed in the file at `path`, in order.
pub fn read(path: &Path) -> Result<Vec<Source>, SourcesFileError> {
    let read_error = |error| SourcesFileError::Read {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
        &mut text,
    )
    .map_err(read_error)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(read_error(std::io::Error::other(format!(
            "larger than {MAX_FILE_BYTES} bytes"
        ))));
    }
    parse(&text, path)
}

/// The sources listed in `text`, the contents of the file at `path` (named in errors).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Source>, SourcesFileError> {
    let bad = |at: usize, message: String| SourcesFileError::Bad {
        path: path.to_path_buf(),
        line: line_of(text, at),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        bad(at, e.message().trim().to_string())
    })?;
    let mut out: Vec<Source> = Vec::new();
    for entry in raw.source {
        let start = entry.span().start;
        let r = entry.into_inner();
        let url_at = r.url.span().start;
        let url = r.url.into_inner().trim_end_matches('/').to_string();
        let schemes: &[&str] = match r.kind {
            Kind::S3 => &["s3://"],
            _ => &["http://", "https://"],
        };
        if !schemes
            .iter()
            .any(|s| url.starts_with(s) && url.len() > s.len())
        {
            return Err(bad(
                url_at,
                format!(
                    "url {url:?}: a {} source's URL starts with {}",
                    name(r.kind),
                    schemes.join(" or ")
                ),
            ));
        }
        if let Some(first) = out.iter().find(|s| s.url == url) {
            return Err(bad(
                url_at,
                format!("url {url:?} is listed already, at line {}", first.line),
            ));
        }
        let layout = match r.layout {
            Some(l) if r.kind != Kind::S3 => {
                return Err(bad(l.span().start, "layout is for s3 sources only".into()))
            }
            l => l.map(Spanned::into_inner),
        };
        let positive = |v: Option<Spanned<u64>>, key: &str| match v {
            Some(n) if *n.get_ref() == 0 => {
                Err(bad(n.span().start, format!("{key} must be above 0")))
            }
            v => Ok(v.map(Spanned::into_inner)),
        };
        let limits = LimitOverrides {
            timeout: positive(r.timeout_secs, "timeout_secs")?.map(Duration::from_secs),
            max_fetch: positive(r.max_fetch_secs, "max_fetch_secs")?.map(Duration::from_secs),
            max_bytes: positive(r.max_bytes, "max_bytes")?,
            miss_ttl: r.miss_ttl_secs.map(Duration::from_secs),
        };
        out.push(Source {
            kind: r.kind,
            url,
            layout,
            limits,
            line: line_of(text, start),
        });
    }
    Ok(out)
}

/// The kind as the file spells it.
pub fn name(kind: Kind) -> &'static str {
    match kind {
        Kind::Debuginfod => "debuginfod",
        Kind::Breakpad => "breakpad",
        Kind::SymbolServer => "symbol-server",
        Kind::S3 => "s3",
    }
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    let upto = text.get(..at.min(text.len())).unwrap_or(text);
    upto.bytes().filter(|&b| b == b'\n').count() + 1
}

impl Config {
    /// Adds the HTTP sources of a sources file after the ones already configured (a URL
    /// already there keeps its place), and every source's own limits; returns the file's
    /// other sources (S3 buckets), for the caller to open.
    pub fn add_sources(&mut self, sources: Vec<Source>) -> Vec<Source> {
        let mut rest = Vec::new();
        for s in sources {
            self.per_source.insert(s.url.clone(), s.limits);
            let list = match s.kind {
                Kind::Debuginfod => &mut self.debuginfod,
                Kind::Breakpad => &mut self.breakpad,
                Kind::SymbolServer => &mut self.symbol_server,
                Kind::S3 => {
                    rest.push(s);
                    continue;
                }
            };
            if !list.contains(&s.url) {
                list.push(s.url);
            }
        }
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Vec<Source>, String> {
        parse(text, Path::new("s.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn sources_are_read_in_order_with_their_limits() {
        let got = parsed(
            "# sources\n[[source]]\nkind = \"debuginfod\"\nurl = \"https://a/\"\ntimeout_secs = 5\n\
             \n[[source]]\nkind = \"s3\"\nurl = \"s3://b/p\"\nlayout = \"symbol-server\"\nmiss_ttl_secs = 0\n",
        )
        .expect("a good file");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].kind, got[0].url.as_str(), got[0].line),
            (Kind::Debuginfod, "https://a", 2)
        );
        assert_eq!(got[0].limits.timeout, Some(Duration::from_secs(5)));
        assert_eq!(got[0].limits.max_bytes, None);
        assert_eq!(
            (got[1].kind, got[1].layout, got[1].line),
            (Kind::S3, Some(Layout::SymbolServer), 7)
        );
        assert_eq!(got[1].limits.miss_ttl, Some(Duration::ZERO));
        assert_eq!(parsed(""), Ok(vec![]));

        let mut c = Config::none();
        c.debuginfod.push("https://a".into());
        let rest = c.add_sources(got);
        assert_eq!(c.debuginfod, ["https://a"]);
        assert_eq!(c.limits("https://a").timeout, Duration::from_secs(5));
        assert_eq!(rest.len(), 1);
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        let head = "[[source]]\nkind = \"breakpad\"\n";
        for (text, says) in [
            (
                format!("{head}url = \"http://a\"\ncolour = 1\n"),
                "s.toml:4: unknown field `colour`",
            ),
            (
                format!("{head}\nurl = \"ftp://a\"\n"),
                "s.toml:4: url \"ftp://a\"",
            ),
            (
                format!("{head}url = \"http://a\"\ntimeout_secs = 0\n"),
                "s.toml:4: timeout_secs must be above 0",
            ),
            (
                format!("{head}url = \"http://a\"\nmax_bytes = -1\n"),
                "s.toml:4:",
            ),
            (
                format!("{head}url = \"http://a\"\nmax_bytes = \"big\"\n"),
                "s.toml:4:",
            ),
            (
                format!("{head}url = \"http://a\"\nlayout = \"breakpad\"\n"),
                "s.toml:4: layout is for s3 sources only",
            ),
            (
                "[[source]]\nkind = \"gopher\"\nurl = \"http://a\"\n".into(),
                "s.toml:2: unknown variant `gopher`",
            ),
            (
                "[[source]]\nkind = \"s3\"\nurl = \"http://a\"\n".into(),
                "s.toml:3: url \"http://a\": a s3 source's URL starts with s3://",
            ),
            (
                "[[source]]\nkind = \"s3\"\nurl = \"s3://a\"\nlayout = \"flat\"\n".into(),
                "s.toml:4: unknown variant `flat`",
            ),
            (
                format!("{head}url = \"http://a\"\n{head}url = \"http://a/\"\n"),
                "s.toml:6: url \"http://a\" is listed already, at line 1",
            ),
            (
                "[[source]]\nurl = \"http://a\"\n".into(),
                "s.toml:1: missing field `kind`",
            ),
            ("source = 3\n".into(), "s.toml:1:"),
            ("[[source]\n".into(), "s.toml:1:"),
        ] {
            let got = parsed(&text).expect_err(&text);
            assert!(
                got.starts_with(says),
                "{text:?}: {got:?} does not start with {says:?}"
            );
        }
    }
}
