//! `postmortem`: the post-mortem crash symbolizer's command line.
//!
//! Parses the command line, sets up logging and dispatches to one subcommand in `cli/`.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "postmortem", version, about = "Post-mortem crash symbolizer")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Walk and symbolize every thread of a crash dump (ELF core or minidump).
    Walk(cli::walk::WalkArgs),
    /// Measure table builds, lookups and warm walks.
    Bench(cli::bench::BenchArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Walk(args) => cli::walk::run(args),
        Command::Bench(args) => cli::bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("postmortem: {e:#}");
            ExitCode::from(1)
        }
    }
}
