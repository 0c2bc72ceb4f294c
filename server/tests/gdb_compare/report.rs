//! Runs `postmortem walk` and checks every report against `report.schema.json`.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The CLI under test, built by cargo for this test binary.
pub const POSTMORTEM: &str = env!("CARGO_BIN_EXE_postmortem");

/// Runs `postmortem walk CORE --symbols DIR --format json` and returns its raw output.
pub fn walk(core: &Path, symbols: &Path) -> Output {
    Command::new(POSTMORTEM)
        .arg("walk")
        .arg(core)
        .arg("--symbols")
        .arg(symbols)
        .args(["--format", "json"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run postmortem")
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

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report.schema.json");
        let text = std::fs::read_to_string(&path).expect("read report.schema.json");
        let schema: Value = serde_json::from_str(&text).expect("report.schema.json is JSON");
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("report.schema.json is a valid draft 2020-12 schema")
    })
}

/// Panics with every violation when `report` does not follow `report.schema.json`.
pub fn assert_valid(report: &Value) {
    let errors: Vec<String> = validator()
        .iter_errors(report)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the report does not follow report.schema.json:\n{}",
        errors.join("\n")
    );
}
