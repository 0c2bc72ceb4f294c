//! One file per subcommand, plus the options they share.

pub mod access;
pub mod bench;
pub mod bench_fill;
pub mod bench_store;
pub mod conn;
pub mod migrate;
pub mod preview;
pub mod reprocess;
pub mod serve;
pub mod signature;
pub mod upload;
pub mod worker;

use std::path::PathBuf;
use std::time::Duration;

use ::worker::jobs::JobConfig;
use ::worker::store::{Blobs, Db, Staging};
use anyhow::Context;
pub use postmortem_cli::signature_rules;
use sources::redact::redact_url;

/// A multi-threaded tokio runtime.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// Where the data lives: shared by `serve`, `worker` and `migrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct StorageArgs {
    /// Directory for the default SQLite database, the default blob store and the staging
    /// files of uploads in progress (`tmp/`).
    #[arg(long, env = "POSTMORTEM_DATA_DIR", default_value = "postmortem-data")]
    pub data_dir: PathBuf,
    /// Database URL (`sqlite://PATH` or `postgres://…`). Default: SQLite in the data dir.
    #[arg(long, env = "POSTMORTEM_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Blob store URL: `file:///DIR`, or `s3://BUCKET[/PREFIX]` for S3 or an S3-compatible
    /// server, configured by the AWS_* environment variables (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP). Default:
    /// `blobs/` in the data dir.
    #[arg(long, env = "POSTMORTEM_BLOB_URL")]
    pub blob_url: Option<String>,
}

impl StorageArgs {
    /// Connects to the database (creating the data dir for the SQLite default).
    pub async fn db(&self) -> anyhow::Result<Db> {
        let url = match &self.database_url {
            Some(u) => u.clone(),
            None => {
                std::fs::create_dir_all(&self.data_dir).with_context(|| {
                    format!("creating the data directory {}", self.data_dir.display())
                })?;
                format!("sqlite://{}", self.data_dir.join("postmortem.db").display())
            }
        };
        Db::connect(&url)
            .await
            .with_context(|| format!("connecting to the database {}", redact(&url)))
    }

    /// Opens the blob store.
    pub fn blobs(&self) -> anyhow::Result<Blobs> {
        match &self.blob_url {
            Some(u) => Blobs::from_url(u).context("opening the blob store"),
            None => Blobs::local(&self.data_dir.join("blobs")).context("opening the blob store"),
        }
    }

    /// The staging directory of uploads (`tmp/` in the data dir), on local disk whatever
    /// the blob store is.
    pub fn staging(&self) -> anyhow::Result<Staging> {
        Staging::new(&self.data_dir.join("tmp")).context("creating the upload staging directory")
    }
}

/// Options of the job runners.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// Worker tasks in this process.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Memory for cached unwind and symbol tables, MiB.
    #[arg(long, default_value_t = 256)]
    pub cache_mb: u64,
    /// Time limit of one job, seconds: a deadline for the whole job (module lookups,
    /// table builds and the walk together), after which it ends `failed`.
    #[arg(long, default_value_t = 30)]
    pub job_timeout_secs: u64,
    /// Lease length, seconds: a job held by a dead worker returns to the queue after it.
    #[arg(long, default_value_t = 60)]
    pub lease_secs: u64,
    /// Leases per job before it is marked failed.
    #[arg(long, default_value_t = 3)]
    pub max_attempts: i32,
    /// Jobs a worker leases at once and stores in one transaction (1 to 256); while its
    /// claims come back full (a backlog), up to four times as many.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub claim_batch: u16,
    /// Crash signature rules file (docs/grouping.md), replacing the built-in rules, or
    /// extending them when its first rule is `extends builtin`.
    #[arg(long)]
    pub signature_rules: Option<PathBuf>,
    #[command(flatten)]
    pub budget: postmortem_cli::budget::BudgetArgs,
    /// Remote symbol sources (debuginfod servers, symbol stores, symbol servers, S3
    /// buckets) asked for the files of modules no upload gives; fetched files are stored as uploads, misses kept under
    /// `DATA_DIR/remote-cache` unless `--cache-dir` says where.
    #[command(flatten)]
    pub remote: postmortem_cli::remote::RemoteArgs,
    /// Sign symbol buckets that have no keys in the environment with the credentials the
    /// blob store's S3 client finds: the EC2 instance profile (which no variable names),
    /// or a container or web-identity role (used without this flag when
    /// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI or
    /// AWS_WEB_IDENTITY_TOKEN_FILE is set).
    #[arg(long, env = "POSTMORTEM_SYMBOLS_BUCKET_ROLE")]
    pub symbols_bucket_role: bool,
    /// Seconds a worker's claim on a file it fetches lasts unless renewed (it renews it
    /// every third of that while it fetches): how long a crashed worker's claim makes the
    /// others wait.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub fetch_claim_lease_secs: u64,
    /// Milliseconds between an idle worker's looks at the queue. A crash queued by this
    /// process, or on PostgreSQL by any process, wakes the workers at once; the poll
    /// catches what a lost notification missed.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Milliseconds between a waiting worker's tries of another's claim.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub fetch_claim_poll_ms: u64,
    /// Longest a worker waits for another worker's fetch of a file before it fetches the
    /// file itself, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub fetch_claim_wait_secs: u64,
    /// A source-link mapping, `PREFIX=URL_TEMPLATE [WEB_TEMPLATE]`: a frame whose file
    /// lies under PREFIX and that no uploaded source bundle gives gets its lines from the
    /// URL (`{path}` the rest of the file's path, `{commit}` the crash's `commit` or
    /// `revision` upload field, `{build_id}` its module's), and the crash page links it
    /// to the web template's URL (docs/source-context.md). Repeatable: the first mapping
    /// whose prefix a file has is used.
    #[arg(long, value_name = "MAPPING")]
    pub source_link: Vec<sources::source_link::Mapping>,
}

impl JobArgs {
    /// The runner configuration (reads the signature rules file, if any); remote sources
    /// keep their misses under `data_dir` unless told otherwise.
    pub fn config(&self, data_dir: &std::path::Path) -> anyhow::Result<JobConfig> {
        let mut config = JobConfig {
            lease: Duration::from_secs(self.lease_secs.max(1)),
            max_attempts: self.max_attempts.max(1),
            time_limit: Duration::from_secs(self.job_timeout_secs.max(1)),
            batch: usize::from(self.claim_batch),
            poll_interval: Duration::from_millis(self.poll_ms.max(1)),
            ..JobConfig::default()
        };
        config.process.signature_rules = signature_rules(self.signature_rules.as_deref())?;
        config.process.budget = self.budget.budget();
        if !self.source_link.is_empty() {
            let dir = data_dir.join("source-link-tmp");
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            config.source_links =
                Some(std::sync::Arc::new(sources::source_link::SourceLinks::new(
                    self.source_link.clone(),
                    sources::source_link::SourceLinkLimits::default(),
                    dir,
                )));
        }
        // a bucket that cannot be used stops the service (a walk only says so)
        for url in self
            .remote
            .symbols_buckets
            .iter()
            .filter(|u| !u.trim().is_empty())
        {
            sources::s3::Bucket::from_env(url.trim())
                .with_context(|| format!("--symbols-bucket {url}"))?;
        }
        let configured = self.remote.config()?;
        let mut sources = configured.config;
        for p in configured.problems {
            tracing::warn!("remote sources: {p}");
        }
        if self.remote.cache_dir.is_none() {
            sources.cache_dir = data_dir.join("remote-cache");
        }
        // a role's credentials (these variables name where object_store fetches them):
        // buckets without keys in the environment sign with them, as the blob store does
        let roles = [
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        ];
        let role = roles
            .iter()
            .find(|v| std::env::var_os(v).is_some())
            .copied()
            .or(self.symbols_bucket_role.then_some("--symbols-bucket-role"));
        if let Some(role) = role {
            for b in sources.buckets.iter_mut().filter(|b| !b.signed()) {
                let keys = ::worker::jobs::role_keys::RoleKeys::for_bucket(b.name())
                    .with_context(|| format!("symbol bucket {}", b.url()))?;
                *b = b.clone().with_key_source(keys);
                if b.signed() {
                    tracing::info!(bucket = b.url(), "signed with the role's keys ({role})");
                }
            }
        }
        if !sources.is_empty() {
            tracing::info!(
                debuginfod = ?shown(&sources.debuginfod),
                symbols_url = ?shown(&sources.breakpad),
                symbol_server = ?shown(&sources.symbol_server),
                buckets = ?sources.buckets.iter().map(|b| redact_url(b.url())).collect::<Vec<_>>(),
                "remote symbol sources"
            );
        }
        let claims = ::worker::jobs::fetch::ClaimTimings {
            lease: Duration::from_secs(self.fetch_claim_lease_secs.max(1)),
            poll: Duration::from_millis(self.fetch_claim_poll_ms.max(1)),
            wait: Duration::from_secs(self.fetch_claim_wait_secs),
        };
        config.remote = sources::Remote::new(&sources).map(|remote| {
            std::sync::Arc::new(
                ::worker::jobs::fetch::Fetcher::new(remote).with_claim_timings(claims),
            )
        });
        Ok(config)
    }
}

/// Source URLs in their display form (credentials hidden), for the log.
fn shown(urls: &[String]) -> Vec<String> {
    urls.iter().map(|u| redact_url(u)).collect()
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Resolves when the process is asked to stop (Ctrl-C or SIGTERM).
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// The job runner every worker of this process shares, over `db` and the storage's blobs.
pub fn runner(
    db: &Db,
    storage: &StorageArgs,
    jobs: &JobArgs,
) -> anyhow::Result<::worker::jobs::Runner> {
    Ok(::worker::jobs::Runner {
        db: db.clone(),
        blobs: storage.blobs()?,
        cache: ::worker::cache::TablesCache::new(jobs.cache_mb.saturating_mul(1 << 20)),
        config: jobs.config(&storage.data_dir)?,
        metrics: std::sync::Arc::new(::worker::jobs::JobMetrics::default()),
        wake: std::sync::Arc::new(tokio::sync::Notify::new()),
        recent_use: std::sync::Arc::default(),
    })
}

/// `n` workers of `runner`, each under a lease-holder name of its own, until `stopped`.
pub fn spawn_workers(
    runner: &::worker::jobs::Runner,
    n: usize,
    stopped: &tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|i| tokio::spawn(runner.clone().run(worker_name(i), stopped.clone())))
        .collect()
}

/// A lease-holder name unique across processes and machines.
pub fn worker_name(i: usize) -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_string());
    let nonce = uuid_like();
    format!("{host}-{}-{nonce}-{i}", std::process::id())
}

fn uuid_like() -> String {
    // Time-ordered and random enough to tell restarts of the same pid apart.
    ::worker::store::crashes::new_id()[20..].to_string()
}
