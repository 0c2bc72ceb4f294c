//! Test support shared by the workspace's test targets (a dev-dependency only, never
//! published): real crashes and what gdb says about them, the references the engine's and
//! the server's tests compare postmortem's reports with.
//!
//! - [`record`]: a crash program recorded twice, as a minidump (`minidump-writer`) and as
//!   the kernel's core of the same instant (x86_64 Linux; the C tools are in `c/`);
//! - [`qemu`]: aarch64 crash programs run under QEMU's user-mode emulator, and its core;
//! - [`core_to_minidump`]: the minidump of an aarch64 crash, written from QEMU's core;
//! - [`microdump`]: the Breakpad microdump (logcat lines) of an aarch64 crash, written
//!   from QEMU's core;
//! - [`program`]: a temporary directory per case that compiles the crash programs of
//!   `server/tests/crashers` and takes their cores;
//! - [`gdb`]: gdb's frames of every thread of a core (`frames.py`);
//! - [`compare`]: gdb's stacks and modules against a report's, frame by frame;
//! - [`stackwalk`]: `postmortem-walk --json` against `minidump-stackwalk --json`, field by
//!   field, with a reference stack where the walks part;
//! - [`report`]: the CLI under test and `report.schema.json`;
//! - [`moto`]: an S3-compatible server (`moto_server`) with one bucket, and what it was
//!   asked;
//! - [`command`]: a command run under a time limit, failing its test with what it printed
//!   when it hangs;
//! - [`golden`]: output compared byte for byte with a committed expectation, which
//!   `POSTMORTEM_BLESS=1` rewrites;
//! - [`windows`]: Windows x64 crash programs cross-compiled with mingw-w64 and run under
//!   wine, their minidumps (wine's dbghelp) and winedbg's backtrace of them, and Windows
//!   x86 ones (i686 mingw-w64, a 32-bit prefix);
//! - [`windows_compare`]: a report's crashed thread against winedbg's backtrace;
//! - [`wow64`]: the dump a 64-bit writer leaves of a 32-bit process (WoW64), laid out from
//!   a 32-bit minidump of it;
//! - [`apple`]: Mach-O programs, dSYMs and universal files built with clang and LLVM's
//!   tools, zipped dSYMs, and the minidump of a Mac process running them;
//! - [`dyld_cache`]: a minimal dyld shared cache (and its `.symbols` subcache) of such
//!   dylibs.
//!
//! Used by `engine/tests/minidump.rs` and by the server's `gdb_compare`, `minidump_gdb`,
//! `windows_minidump`, `service` and `reports_unchanged` tests; `examples/make_dumps.rs`
//! makes the dumps of `fixtures/reports/`. It depends on the engine (the converter reads cores with it), so
//! the engine can only take it as a dev-dependency, which keeps it out of the engine's
//! normal dependency tree.

#![forbid(unsafe_code)]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod apple;
pub mod command;
pub mod compare;
pub mod core_to_minidump;
pub mod dyld_cache;
pub mod gdb;
pub mod golden;
pub mod http_dir;
pub mod microdump;
pub mod moto;
pub mod program;
pub mod qemu;
pub mod record;
pub mod report;
pub mod stackwalk;
pub mod windows;
pub mod windows_compare;
pub mod wow64;

use std::path::{Path, PathBuf};

/// The workspace's root directory, found when the test runs: the parent of the running
/// test's package (`CARGO_MANIFEST_DIR`, which `cargo test` sets; every package is a
/// directory of the root). The path compiled into this crate is only a fallback: cargo
/// reuses a path dependency's build for another clone that shares `CARGO_TARGET_DIR`, so
/// a compiled-in path may be another clone's.
pub fn workspace_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|dir| dir.parent().map(Path::to_path_buf))
        .filter(|root| root.join("testsupport").is_dir() && root.join("Cargo.toml").is_file())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}
