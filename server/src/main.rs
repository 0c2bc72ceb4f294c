//! `postmortem`: walk a dump on the command line, or run the crash service (API and
//! in-process workers), standalone workers, or database migrations.
//!
//! This file parses the command line, initializes tracing and dispatches; the work is in
//! the `postmortem_server` library (`lib.rs`), its `cli/` above all.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use postmortem_server::cli;

/// Post-mortem crash symbolizer.
#[derive(Debug, Parser)]
#[command(name = "postmortem", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start and matched at once: the size of its largest variant (serve's
// options) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Walk the stacks of a dump and print the report.
    Walk(postmortem_cli::walk::WalkArgs),
    /// Run the HTTP API with in-process workers.
    Serve(cli::serve::ServeArgs),
    /// Run workers only, sharing the queue of a PostgreSQL database.
    Worker(cli::worker::WorkerArgs),
    /// Apply the database migrations and exit.
    Migrate(cli::migrate::MigrateArgs),
    /// Queue finished crashes again (after new binaries or rules) and follow the run.
    Reprocess(cli::reprocess::ReprocessArgs),
    /// Measure table builds, lookups and warm walks (the README's figures).
    Bench(cli::bench::BenchArgs),
    /// The crash signature of reports under a rules file; `--explain` says why.
    Signature(cli::signature::SignatureArgs),
    /// Send a build's binaries and debug files to a server: only those it lacks, in
    /// resumable chunks.
    Upload(cli::upload::UploadArgs),
}

fn main() -> ExitCode {
    // `@FILE` anywhere on the command line stands for the arguments in FILE, one per
    // line (`--debuginfod=https://…`): the service's configuration file
    let args = match argfile::expand_args(argfile::parse_fromfile, argfile::PREFIX) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("postmortem: reading an @FILE of arguments: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Walk(args) => postmortem_cli::walk::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Signature(args) => cli::signature::run(args),
        Command::Upload(args) => cli::upload::run(args),
        Command::Serve(args) => cli::runtime().and_then(|rt| {
            rt.block_on(cli::serve::run(args))
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Worker(args) => cli::runtime().and_then(|rt| {
            rt.block_on(cli::worker::run(args))
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Reprocess(args) => cli::runtime().and_then(|rt| {
            rt.block_on(cli::reprocess::run(args))
                .map(|()| ExitCode::SUCCESS)
        }),
        Command::Migrate(args) => cli::runtime().and_then(|rt| {
            rt.block_on(cli::migrate::run(args))
                .map(|()| ExitCode::SUCCESS)
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("postmortem: {e:#}");
            ExitCode::from(1)
        }
    }
}
