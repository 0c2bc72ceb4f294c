//! Runs `postmortem walk` and checks every report against `report.schema.json`
//! (`postmortem_testsupport::report`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub use postmortem_testsupport::report::assert_valid;
pub use postmortem_testsupport::report::output_same_with_whole_tables;

/// The CLI under test (`POSTMORTEM_BIN` when set, see `postmortem_testsupport::report`).
pub fn postmortem() -> PathBuf {
    postmortem_testsupport::report::postmortem(env!("CARGO_BIN_EXE_postmortem"))
}

/// Runs `postmortem walk CORE --symbols DIR --format json` and returns its raw output,
/// having checked that `--whole-tables` prints the same.
pub fn walk(core: &Path, symbols: &Path) -> Output {
    output_same_with_whole_tables(
        Command::new(postmortem())
            .arg("walk")
            .arg(core)
            .arg("--symbols")
            .arg(symbols)
            .args(["--format", "json"])
            .env("RUST_BACKTRACE", "1"),
    )
}

/// Runs `walk`, requires exit 0 and a report that is valid JSON and valid against the
/// schema, and returns it.
pub fn walk_report(core: &Path, symbols: &Path) -> Value {
    let out = walk(core, symbols);
    assert_eq!(
        out.status.code(),
        Some(0),
        "postmortem walk {} failed:\n{}",
        core.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "postmortem walk printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_valid(&report);
    report
}
