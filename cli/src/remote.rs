//! The flags of remote symbol sources, shared by `postmortem walk`, `postmortem-walk` and
//! the service: debuginfod servers, Breakpad symbol stores, Windows symbol servers and S3
//! buckets in any of their layouts, asked for the files of modules nothing on this
//! machine (or uploaded) describes, with elfutils' environment variables honoured as gdb
//! and eu-stack honour them (`DEBUGINFOD_URLS`, `DEBUGINFOD_TIMEOUT`,
//! `DEBUGINFOD_MAXSIZE`), the `AWS_*` ones for buckets, and a sources file
//! (`--sources FILE`, [`sources::sources_file`]) listing sources with limits of their own.

use std::path::PathBuf;
use std::time::Duration;

use sources::config::{self, env_number, parse_urls, Config};
use sources::redact::redact_url;
use sources::s3::Bucket;
use sources::sources_file::{self, SourcesFileError};

/// The sources the flags, the environment and the sources file name.
#[derive(Debug)]
pub struct Sources {
    /// The sources (HTTP servers, then S3 buckets), in order, and their limits.
    pub config: Config,
    /// Problems met reading them, for the caller to print (a `DEBUGINFOD_URLS` entry
    /// that is not an HTTP URL, a `--symbols-bucket` that cannot be used).
    pub problems: Vec<String>,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// A debuginfod server asked for the executable and debug file of a module (by
    /// build-id) that no local file describes; repeatable, asked in order, before those
    /// of DEBUGINFOD_URLS (space-separated, as gdb and eu-stack read it).
    #[arg(long = "debuginfod", value_name = "URL")]
    pub debuginfod: Vec<String>,
    /// A Breakpad symbol store over HTTP, as minidump-stackwalk's `--symbols-url`: a
    /// module's `.sym` file is fetched from `URL/NAME/DEBUG_ID/NAME.sym` when no local
    /// file describes it; repeatable, asked in order.
    #[arg(long = "symbols-url", value_name = "URL")]
    pub symbols_url: Vec<String>,
    /// A symbol server (Microsoft's layout, e.g. https://msdl.microsoft.com/download/symbols):
    /// a Windows module's image is fetched from `URL/NAME/CODE_ID/NAME` and its PDB from
    /// `URL/NAME.pdb/DEBUG_ID/NAME.pdb` when no local file gives them; repeatable, asked in
    /// order; where a server has not the plain file, its compressed form beside it
    /// (`NAME.pd_`, `NAME.dl_`, `NAME.ex_`) is fetched and extracted.
    #[arg(long = "symbol-server", value_name = "URL")]
    pub symbol_server: Vec<String>,
    /// An S3-compatible bucket of symbol files, `s3://BUCKET[/PREFIX]`, laid out as a
    /// debuginfod server (`PREFIX/buildid/ID/executable`, `…/debuginfo`), a Breakpad store
    /// (`PREFIX/NAME/DEBUG_ID/NAME.sym`) or a symbol server (`PREFIX/NAME/ID/NAME`, or
    /// compressed `NAME.pd_`), asked after the HTTP sources; repeatable (the variable:
    /// space-separated). Keys, region and endpoint from the AWS_* environment as for
    /// --blob-url (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
    /// AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP); unsigned requests without keys.
    #[arg(
        long = "symbols-bucket",
        value_name = "URL",
        env = "POSTMORTEM_SYMBOLS_BUCKETS",
        value_delimiter = ' '
    )]
    pub symbols_buckets: Vec<String>,
    /// A sources file (TOML): sources listed in order, each `[[source]]` with its `kind`
    /// (debuginfod, breakpad, symbol-server, s3), its `url`, and optionally limits of its
    /// own (`timeout_secs`, `max_bytes`, `max_fetch_secs`, `miss_ttl_secs`; the flags below
    /// are the defaults). Asked after the sources given by flags, before DEBUGINFOD_URLS.
    #[arg(long = "sources", value_name = "FILE", env = "POSTMORTEM_SOURCES")]
    pub sources: Option<PathBuf>,
    /// Ask no remote source, whatever DEBUGINFOD_URLS and --sources say.
    #[arg(long)]
    pub offline: bool,
    /// Where fetched files and misses are kept [default: $XDG_CACHE_HOME/postmortem or
    /// ~/.cache/postmortem].
    #[arg(
        long,
        value_name = "DIR",
        env = "POSTMORTEM_CACHE_DIR",
        alias = "symbols-cache"
    )]
    pub cache_dir: Option<PathBuf>,
    /// Seconds to wait for a connection, an answer, or the next bytes of a file
    /// [default: DEBUGINFOD_TIMEOUT, else 90].
    #[arg(long, value_name = "SECS", alias = "symbols-download-timeout-secs")]
    pub fetch_timeout: Option<u64>,
    /// Largest file fetched, in bytes [default: DEBUGINFOD_MAXSIZE, else 4 GiB].
    #[arg(long, value_name = "BYTES")]
    pub fetch_max_bytes: Option<u64>,
    /// Longest a whole fetch of one file may take, seconds, however steadily its bytes
    /// arrive (redirects included); at least 1. The service's fetches also end at the
    /// crash's time limit (--job-timeout-secs).
    #[arg(
        long,
        value_name = "SECS",
        env = "POSTMORTEM_FETCH_MAX_SECS",
        default_value_t = config::DEFAULT_MAX_FETCH_SECS
    )]
    pub fetch_max_secs: u64,
    /// Seconds a source's "not found" is believed before it is asked again.
    #[arg(long, value_name = "SECS", default_value_t = config::DEFAULT_MISS_TTL_SECS)]
    pub miss_ttl: u64,
}

impl RemoteArgs {
    /// The sources these flags, the environment and the sources file name; an error when
    /// the file cannot be read or is not understood.
    pub fn config(&self) -> Result<Sources, SourcesFileError> {
        let mut c = Config::none();
        let mut problems = Vec::new();
        if self.offline {
            return Ok(Sources {
                config: c,
                problems,
            });
        }
        let (urls, skipped) = parse_urls(&self.debuginfod.join(" "));
        c.debuginfod = urls;
        problems.extend(skipped);
        let (stores, skipped) = parse_urls(&self.symbols_url.join(" "));
        c.breakpad = stores;
        problems.extend(skipped);
        let (servers, skipped) = parse_urls(&self.symbol_server.join(" "));
        c.symbol_server = servers;
        problems.extend(skipped);
        for url in self.symbols_buckets.iter().filter(|u| !u.trim().is_empty()) {
            match Bucket::from_env(url.trim()) {
                Ok(b) if !c.buckets.contains(&b) => c.buckets.push(b),
                Ok(_) => {}
                Err(e) => problems.push(format!("{}: {e}", redact_url(url))),
            }
        }
        if let Some(file) = &self.sources {
            for s in c.add_sources(sources_file::read(file)?) {
                let bucket = Bucket::from_env(&s.url).map_err(|e| SourcesFileError::Bad {
                    path: file.clone(),
                    line: s.line,
                    message: format!("{}: {e}", s.url),
                })?;
                c.buckets.push(bucket.with_layout(s.layout));
            }
        }
        if let Ok(env) = std::env::var("DEBUGINFOD_URLS") {
            let (urls, skipped) = parse_urls(&env);
            for u in urls {
                if !c.debuginfod.contains(&u) {
                    c.debuginfod.push(u);
                }
            }
            problems.extend(skipped);
        }
        if let Some(d) = &self.cache_dir {
            c.cache_dir = d.clone();
        }
        let timeout = self
            .fetch_timeout
            .or_else(|| env_number("DEBUGINFOD_TIMEOUT"))
            .unwrap_or(config::DEFAULT_TIMEOUT_SECS);
        c.timeout = Duration::from_secs(timeout.max(1));
        if let Some(max) = self
            .fetch_max_bytes
            .or_else(|| env_number("DEBUGINFOD_MAXSIZE").filter(|&n| n > 0))
        {
            c.max_bytes = max;
        }
        c.miss_ttl = Duration::from_secs(self.miss_ttl);
        c.max_fetch = Duration::from_secs(self.fetch_max_secs.max(1));
        Ok(Sources {
            config: c,
            problems,
        })
    }
}
