//! `postmortem serve`: the HTTP API plus in-process workers. With no options it runs on a
//! fresh machine: SQLite (WAL) and blobs under `./postmortem-data`, 127.0.0.1:8080.
//! Hostile clients are bounded by default (timeouts, a connection limit, body limits);
//! the flags below tune them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use worker::jobs::Runner;
use worker::store::retention::Policy;

use super::{JobArgs, StorageArgs};
use crate::api::state::{AppState, Config, Metrics};

/// Arguments of `postmortem serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub jobs: JobArgs,
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// A bearer token, its scopes and its project, `SECRET:ingest,symbols,read,admin` or
    /// `SECRET:SCOPES:PROJECT` (a project token: that project only; without one, every
    /// project). Repeatable. Without any, every request is accepted and the server
    /// listens on loopback only.
    #[arg(long = "token", env = "POSTMORTEM_TOKENS", value_delimiter = ' ')]
    pub tokens: Vec<String>,
    /// A project's upload quota, `PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY` (0: no limit
    /// of that kind); over it a crash upload is answered 429 with `Retry-After`.
    /// Repeatable.
    #[arg(long = "quota")]
    pub quotas: Vec<String>,
    /// A scrubbing rule of a project's crash uploads, `PROJECT:builtin:NAME` (bearer,
    /// keys, email, card, all) or `PROJECT:regex:PATTERN`: its matches in the dump's
    /// memory and strings are overwritten with zero bytes, and in the upload's fields
    /// replaced by `[scrubbed]`, before anything is stored. Repeatable.
    #[arg(long = "scrub")]
    pub scrub: Vec<String>,
    /// A project whose ELF cores keep no heap: every memory segment that is neither a
    /// thread's stack nor a module's mapped file is zeroed before it is stored.
    /// Repeatable.
    #[arg(long = "scrub-core-heap")]
    pub scrub_core_heap: Vec<String>,
    /// A project's retention, `PROJECT:DUMP_DAYS:REPORT_DAYS:SYMBOL_DAYS` (0: keep
    /// forever): dumps older than DUMP_DAYS are removed (crashes and reports stay),
    /// crashes older than REPORT_DAYS deleted, and the project's symbol files unused for
    /// SYMBOL_DAYS dropped, every --sweep-interval-secs. Repeatable.
    #[arg(long = "retention")]
    pub retentions: Vec<String>,
    /// A project's sampling per signature, `PROJECT:N`: every report is kept, but only
    /// the first N dumps of each signature each UTC day (decided after processing, every
    /// --sweep-interval-secs). Repeatable.
    #[arg(long = "sample")]
    pub samples: Vec<String>,
    /// Rows the retention and sampling sweep handles per statement (it pauses between
    /// batches, so uploads are not held up).
    #[arg(long, default_value_t = 500)]
    pub retention_batch: u32,
    /// Largest request body accepted on the wire, MiB.
    #[arg(long, default_value_t = 512)]
    pub max_body_mb: u64,
    /// Largest body after decompression, MiB.
    #[arg(long, default_value_t = 1024)]
    pub max_decompressed_mb: u64,
    /// Seconds a client has to send a request's headers (and longest idle time of a
    /// keep-alive connection); slower connections are closed.
    #[arg(long, default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds a request body may go without a byte before the request is answered 408
    /// and its partial upload removed.
    #[arg(long, default_value_t = 30)]
    pub body_idle_timeout_secs: u64,
    /// Seconds a whole request may take until its answer starts (uploads included),
    /// then 408.
    #[arg(long, default_value_t = 600)]
    pub request_timeout_secs: u64,
    /// Connections served at once; further clients wait until one ends. An upload holds
    /// about three file descriptors (socket, staging file, blob copy): keep this under a
    /// third of `ulimit -n`.
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
    /// Without tokens, a `Host` name (`name` or `name:port`) the server answers to besides
    /// its listen address, `localhost`, `127.0.0.1` and `[::1]`. Repeatable.
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// An upload of the same dump bytes and fields as a crash received this many seconds
    /// ago or less is a retry of it: answered 200 with that crash's id, not stored again.
    /// Off (0) by default: uploading a dump again otherwise makes a new crash. Clients
    /// that can should send an `Idempotency-Key` instead.
    #[arg(long, default_value_t = 0)]
    pub dedup_window_secs: u64,
    /// Seconds between sweeps of leftovers: staging files no upload writes and blobs no
    /// crash or binary names; and between refreshes of SQLite's planner statistics.
    #[arg(long, default_value_t = 600)]
    pub sweep_interval_secs: u64,
    /// Only staging files and orphan blobs older than this many seconds are swept (far
    /// above the request timeout, so no upload in progress loses its files).
    #[arg(long, default_value_t = 3600)]
    pub sweep_age_secs: u64,
    /// Most text fields (annotations) of a crash upload stored; further ones are left out.
    #[arg(long, default_value_t = 256)]
    pub max_upload_fields: usize,
    /// Longest stored field name, bytes (Crashpad's own bound); longer ones are truncated.
    #[arg(long, default_value_t = 256)]
    pub max_field_name_bytes: usize,
    /// Longest stored field value, bytes (Crashpad's own bound, 20 KiB); longer ones are
    /// truncated.
    #[arg(long, default_value_t = 20480)]
    pub max_field_value_bytes: usize,
    /// Most bytes of field names and values stored per crash; fields past it are left out.
    #[arg(long, default_value_t = 65536)]
    pub max_fields_total_bytes: usize,
    /// `POST /api/v1/reprocess` requests a minute per token (bursts of as many); further
    /// ones are answered 429 with `Retry-After`. 0: no limit.
    #[arg(long, default_value_t = 6)]
    pub reprocess_per_minute: u32,
    /// Most crashes one `POST /api/v1/reprocess` queues; the answer then says `more`, and
    /// the same filter posted again queues the next ones (the run resumes). 0: no bound.
    #[arg(long, default_value_t = 10_000)]
    pub reprocess_max_crashes: u64,
    /// Crashes a minute that one token's symbol uploads may queue again (bursts of as
    /// many); the crashes past it stay listed as missing the file, for a reprocess run
    /// (`missing_only`) or the next new file of that id. 0: no limit.
    #[arg(long, default_value_t = 10_000)]
    pub requeue_per_minute: u32,
    /// Seconds between passes of the requeue backlog: the crashes a late source bundle
    /// names past the uploading token's allowance, requeued later, at most
    /// `--requeue-per-minute` of them a pass.
    #[arg(long, default_value_t = 60)]
    pub requeue_backlog_interval_secs: u64,
    /// Uploaded symbol files identified at once; further uploads wait (each reads its
    /// staged file from disk, a `.sym` file to its end, in bounded memory).
    #[arg(long, default_value_t = 2)]
    pub max_identify_jobs: usize,
    #[command(flatten)]
    pub upload_sessions: crate::api::upload_sessions::SessionArgs,
    /// Most entries (files and folders) a zipped dSYM upload may list; a longer archive
    /// is refused whole (422 `zip-too-many-entries`).
    #[arg(long, default_value_t = 10_000)]
    pub max_zip_entries: usize,
    /// Most DWARF files taken out of one zipped dSYM upload (422 `zip-too-many-files`).
    #[arg(long, default_value_t = 256)]
    pub max_zip_files: usize,
    /// Most bytes a zipped dSYM's entry may inflate to per compressed byte, once past
    /// 1 MiB (a zip bomb: 422 `zip-bomb`); all of an archive's files together are bounded
    /// by --max-decompressed-mb.
    #[arg(long, default_value_t = 100)]
    pub max_zip_ratio: u64,
}

/// The service assembled from its arguments, before it listens: the API's state and the
/// runner its workers share.
pub struct Service {
    /// What every request handler sees.
    pub state: AppState,
    /// The job runner (clone it for each worker).
    pub runner: Runner,
    /// The retention and sampling its sweeper applies.
    pub retention: Policy,
}

impl Service {
    /// The whole router with its layers ([`crate::app`]).
    pub fn app(&self) -> axum::Router {
        crate::app(self.state.clone())
    }
}

/// Assembles the service for `addr` (the address it answers on, for the Host guard):
/// parses the tokens and quotas, opens and migrates the database, and builds the state.
/// Nothing is spawned and nothing listens.
pub async fn assemble(args: &ServeArgs, addr: SocketAddr) -> anyhow::Result<Service> {
    let tokens = args
        .tokens
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| super::access::parse_token(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let quotas = args
        .quotas
        .iter()
        .map(|q| super::access::parse_quota(q))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let scrubbing = crate::api::scrub::Scrubbing::from_options(&args.scrub, &args.scrub_core_heap)
        .map_err(anyhow::Error::msg)?;
    if tokens.is_empty() {
        anyhow::ensure!(
            addr.ip().is_loopback(),
            "refusing to listen on {addr} without tokens: pass --token TOKEN:SCOPES, or listen on a loopback address",
        );
        tracing::warn!("no --token configured: every request is accepted, so the server listens on loopback only");
    }
    let policy = retention_policy(args)?;
    let db = args.storage.db().await?;
    db.migrate().await.context("migrating the database")?;
    let scrubbed: Vec<String> = scrubbing.projects().cloned().collect();
    let projects = super::access::projects(&db, &tokens, &quotas, &scrubbed, &policy).await?;
    let runner = super::runner(&db, &args.storage, &args.jobs)?;
    let config = config(args, addr, tokens, projects, &runner);
    let state = AppState {
        config: Arc::new(config),
        db,
        blobs: runner.blobs.clone(),
        staging: args.storage.staging()?,
        cache: runner.cache.clone(),
        metrics: Arc::new(Metrics::default()),
        job_metrics: runner.metrics.clone(),
        wake: runner.wake.clone(),
        reprocess_rate: Arc::new(crate::api::rate::RateLimit::new(args.reprocess_per_minute)),
        reprocess_max_crashes: args.reprocess_max_crashes,
        requeue_rate: Arc::new(crate::api::rate::RateLimit::new(args.requeue_per_minute)),
        identify_slots: Arc::new(tokio::sync::Semaphore::new(args.max_identify_jobs.max(1))),
        quotas: Arc::new(crate::api::quota::Quotas::new(&quotas)),
        scrubbing: Arc::new(scrubbing),
        upload_sessions: Arc::new(crate::api::upload_sessions::Sessions::new(
            &args.upload_sessions,
        )),
    };
    Ok(Service {
        state,
        runner,
        retention: policy,
    })
}

/// The retention and sampling rules of the arguments.
fn retention_policy(args: &ServeArgs) -> anyhow::Result<Policy> {
    Ok(Policy {
        rules: args
            .retentions
            .iter()
            .map(|r| super::access::parse_retention(r))
            .collect::<anyhow::Result<_>>()?,
        samples: args
            .samples
            .iter()
            .map(|s| super::access::parse_sample(s))
            .collect::<anyhow::Result<_>>()?,
        batch: i64::from(args.retention_batch.max(1)),
        pause: Duration::from_millis(50),
    })
}

/// The service's configuration from its arguments.
fn config(
    args: &ServeArgs,
    addr: SocketAddr,
    tokens: Vec<crate::api::state::Token>,
    projects: Vec<String>,
    runner: &Runner,
) -> Config {
    let secs = |s: u64| Duration::from_secs(s.max(1));
    Config {
        tokens,
        projects,
        max_body_bytes: args.max_body_mb.saturating_mul(1 << 20),
        max_decompressed_bytes: args.max_decompressed_mb.saturating_mul(1 << 20),
        body_idle_timeout: secs(args.body_idle_timeout_secs),
        request_timeout: secs(args.request_timeout_secs),
        allowed_hosts: crate::api::origin::allowed_hosts(addr, &args.allowed_hosts),
        dedup_window: Duration::from_secs(args.dedup_window_secs),
        field_limits: crate::api::upload_fields::FieldLimits {
            max_fields: args.max_upload_fields,
            max_name_bytes: args.max_field_name_bytes,
            max_value_bytes: args.max_field_value_bytes,
            max_total_bytes: args.max_fields_total_bytes,
        },
        max_report_bytes: runner.config.process.budget.max_report_bytes,
        signature_rules: runner.config.process.signature_rules.clone(),
        zip_limits: zip_limits(args),
        source_links: args.jobs.source_link.clone(),
    }
}

/// The bounds on a zipped dSYM upload.
fn zip_limits(args: &ServeArgs) -> engine::dsym_zip::ZipLimits {
    let mut limits = engine::dsym_zip::ZipLimits::default();
    limits.max_entries = args.max_zip_entries;
    limits.max_files = args.max_zip_files;
    limits.max_total_bytes = args.max_decompressed_mb.saturating_mul(1 << 20);
    limits.max_ratio = args.max_zip_ratio.max(1);
    limits
}

/// The service in this process without a socket, for tests and embedders: assembled for
/// the listen address of `args`, with its workers (if `args` asks for any) and its
/// background sweeps running until the returned sender says stop.
pub async fn in_process(args: &ServeArgs) -> anyhow::Result<(Service, watch::Sender<bool>)> {
    let service = assemble(args, args.listen).await?;
    let (stop, stopped) = watch::channel(false);
    drop(spawn_background(args, &service, &stopped));
    Ok((service, stop))
}

/// The workers (and, with workers, the listener of crashes other processes queue), the
/// sweeper of leftovers, the retention and sampling sweeper, the requeue backlog of late
/// source bundles and SQLite's statistics refresh.
fn spawn_background(
    args: &ServeArgs,
    service: &Service,
    stopped: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = super::spawn_workers(&service.runner, args.jobs.workers, stopped);
    let s = &service.state;
    if args.jobs.workers > 0 {
        // crashes queued by other processes on the same (PostgreSQL) database
        tasks.push(tokio::spawn(::worker::store::queue_wake::listen(
            s.db.clone(),
            s.wake.clone(),
            stopped.clone(),
        )));
    }
    let interval = Duration::from_secs(args.sweep_interval_secs.max(1));
    tasks.push(tokio::spawn(::worker::store::sweep::run(
        s.db.clone(),
        s.blobs.clone(),
        s.staging.clone(),
        interval,
        Duration::from_secs(args.sweep_age_secs),
        stopped.clone(),
    )));
    // the retention and sampling of each project's dumps, crashes and symbol files
    tasks.push(tokio::spawn(::worker::store::retention::run(
        s.db.clone(),
        s.blobs.clone(),
        service.retention.clone(),
        interval,
        stopped.clone(),
    )));
    // the crashes late source bundles name past their uploaders' allowances
    let backlog_limit = match args.requeue_per_minute {
        0 => u64::MAX,
        n => u64::from(n),
    };
    tasks.push(tokio::spawn(::worker::store::requeue_backlog::run(
        s.db.clone(),
        Duration::from_secs(args.requeue_backlog_interval_secs.max(1)),
        backlog_limit,
        s.wake.clone(),
        stopped.clone(),
    )));
    // SQLite's planner statistics follow the store's growth (PostgreSQL's autovacuum
    // does that itself): at start and every sweep interval
    tasks.push(tokio::spawn(::worker::store::statistics::run(
        s.db.clone(),
        interval,
        stopped.clone(),
    )));
    tasks
}

/// Runs the server until SIGTERM/Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let service = assemble(&args, addr).await?;
    let (stop, stopped) = watch::channel(false);
    let tasks = spawn_background(&args, &service, &stopped);
    let db = service.state.db.clone();
    tracing::info!(%addr, backend = db.kind(), workers = args.jobs.workers, "serving");
    // Tests and scripts read this line to learn the port when listening on port 0.
    println!("postmortem listening on http://{addr}");
    let limits = super::conn::ConnLimits {
        max_connections: args.max_connections,
        header_timeout: Duration::from_secs(args.header_timeout_secs.max(1)),
    };
    super::conn::serve(listener, service.app(), limits, super::shutdown_signal()).await;
    let _ = stop.send(true);
    for t in tasks {
        let _ = t.await;
    }
    db.close().await;
    Ok(())
}
