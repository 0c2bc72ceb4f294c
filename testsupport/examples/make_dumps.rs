//! The dump-making half of the test support as a command, for `fixtures/reports/make.sh`,
//! which builds the report corpus the `reports_unchanged` test walks:
//!
//! - `make_dumps record PROG`: runs `PROG` (in its own directory) until it crashes and
//!   records the crash as a minidump (`PROG.dmp`, minidump-writer) and as the kernel's
//!   core (`core`) of the same instant ([`record::record_crash`]; x86_64 Linux);
//! - `make_dumps arm64-minidump CORE OUT`: writes the minidump of the aarch64 core `CORE`
//!   (QEMU's) to `OUT`, in the layout minidump-writer writes for a crash
//!   ([`core_to_minidump`] with [`Layout::Client`]); build-ids come from the core.
//!
//! Made a command so the corpus is produced by the same code the other tests use.

// A tool for making test fixtures: a failure aborts with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use postmortem_testsupport::core_to_minidump::{core_to_minidump, Layout};
use postmortem_testsupport::record;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["record", prog] => {
            let crash = record::record_crash(Path::new(prog));
            println!("minidump {}", crash.minidump.display());
            println!("core {}", crash.core.display());
        }
        ["arm64-minidump", core, out] => {
            let bytes = std::fs::read(core).expect("read the core");
            let converted = core_to_minidump(&bytes, Layout::Client, |_| None);
            std::fs::write(out, converted.bytes).expect("write the minidump");
        }
        _ => {
            eprintln!("usage: make_dumps record PROG | make_dumps arm64-minidump CORE OUT");
            std::process::exit(2);
        }
    }
}
