//! `postmortem-walk DUMP [--symbols DIR]… [--symbols-path STORE]…`: `postmortem walk` as
//! a program of its own — the same options and the same report, from a binary that links
//! only the engine, so a crash handler or a pipeline that walks one dump per process does
//! not pay for loading the service (see the crate documentation). It is shipped linked
//! statically (`cargo rustc --release -p postmortem-cli --bin postmortem-walk -- -C
//! target-feature=+crt-static`, as the Dockerfile builds it): no shared libraries to
//! load and relocate at each start (0.6 ms to start instead of 1.0 ms on the 2-core
//! machine; docs/performance.md).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use postmortem_cli::walk::{run, WalkArgs};

/// Walk the stacks of a crash dump (ELF core file or minidump) and print the report.
#[derive(Debug, Parser)]
#[command(name = "postmortem-walk", version, about)]
struct Cli {
    #[command(flatten)]
    args: WalkArgs,
}

fn main() -> ExitCode {
    match run(Cli::parse().args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("postmortem-walk: {e:#}");
            ExitCode::from(1)
        }
    }
}
