//! The report under test: which `postmortem` binary runs, and `report.schema.json`, which
//! every report a test reads must follow.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

/// The CLI under test: `POSTMORTEM_BIN` when set (e.g. an older build, to see a new case
/// fail on it), else `built`, the one cargo built for the calling test target (pass
/// `env!("CARGO_BIN_EXE_postmortem")`, which cargo sets for the server's tests only).
pub fn postmortem(built: &str) -> PathBuf {
    std::env::var_os("POSTMORTEM_BIN")
        .map(Into::into)
        .unwrap_or_else(|| built.into())
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let path = crate::workspace_root().join("report.schema.json");
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

/// The JSON report a `postmortem walk … --format json` command prints, and its stderr:
/// the walk must exit 0, give the same report with `--whole-tables`
/// ([`output_same_with_whole_tables`]) and a report valid against the schema.
pub fn walk_report(command: &mut std::process::Command) -> (Value, String) {
    let out = output_same_with_whole_tables(command);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "the walk failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_valid(&report);
    (report, stderr)
}

/// Runs a `postmortem walk …` command as given and again with `--whole-tables`, and
/// requires the two to print the same bytes: a one-shot walk builds its tables only where
/// it looks (indexed `.sym` files, on-demand unwind rules and DWARF units), and its report
/// must be the one the whole tables — what the service builds and caches — give. Returns
/// the first run's output. A command that already asks for `--whole-tables` runs once.
pub fn output_same_with_whole_tables(command: &mut std::process::Command) -> std::process::Output {
    let out = command.output().expect("run postmortem walk");
    if command.get_args().any(|a| a == "--whole-tables") {
        // already the whole tables' walk
        return out;
    }
    let whole = command
        .arg("--whole-tables")
        .output()
        .expect("run postmortem walk --whole-tables");
    if out.status.success() {
        assert_eq!(
            whole.status.code(),
            out.status.code(),
            "--whole-tables exit status"
        );
        if out.stdout != whole.stdout {
            let a = String::from_utf8_lossy(&out.stdout);
            let b = String::from_utf8_lossy(&whole.stdout);
            panic!(
                "the report differs with --whole-tables:\n{}",
                crate::golden::unified_diff(&b, &a, "whole tables", "on demand")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The schema accepts a report written by hand from docs/report-format.md and rejects
    //! documented violations.

    use serde_json::{json, Value};

    fn sample() -> Value {
        json!({
            "schema": "postmortem.report/1",
            "processor": { "name": "postmortem", "version": "0.1.0", "unwind_table_version": 1, "symbol_table_version": 1 },
            "dump": {
                "format": "elf-core", "sha256": "0".repeat(64), "size": 4096, "os": "linux", "arch": "x86_64",
                "writer": "linux-kernel", "pid": 42, "executable": "/bin/x", "command_line": "x", "created": null,
                "system": {
                    "os_version": "6.1.0 #1 SMP", "cpu_info": "family 6 model 85 stepping 7", "cpu_count": 2,
                    "cpu_microcode_version": "0x1",
                    "distribution": { "id": "debian", "release": "12", "codename": "bookworm", "description": "Debian 12" },
                    "memory_map_count": 26, "uptime_seconds": null,
                    "limits": [{ "name": "Max stack size", "soft": "8388608", "hard": "unlimited", "unit": "bytes" }],
                    "handles": [{ "handle": 0, "type_name": null, "object_name": "/dev/null" }],
                    "writer_errors": "[]"
                }
            },
            "crash": {
                "thread": 0, "tid": 42, "reason": "SIGSEGV / SEGV_MAPERR at 0x0", "signal": 11, "signal_name": "SIGSEGV",
                "code": 1, "code_name": "SEGV_MAPERR", "address": "0x0", "exception": null, "assertion": null,
                "analysis": {
                    "kind": "null-pointer", "summary": "read or write through a null pointer: NULL",
                    "evidence": { "address": "0x0", "offset": "0x0", "function": "crash_here" }
                },
                "instruction": {
                    "text": "mov dword [rdi], eax",
                    "accesses": [{ "address": "0x0", "size": 4, "access": "write", "base_null": true }],
                    "jump": null
                }
            },
            "threads": [{
                "index": 0, "tid": 42, "name": "x", "crashed": true,
                "registers": { "rip": "0x401000", "rsp": "0x7ffc0000" },
                "frames": [{
                    "index": 0, "pc": "0x401000", "sp": "0x7ffc0000", "trust": "context", "unwind_source": null,
                    "module": "x", "module_index": 0, "module_offset": "0x1000", "function": "crash_here",
                    "function_offset": "0x4", "file": "/src/a.c", "line": 8, "column": 5, "inlined": false,
                    "symbol_source": "dwarf",
                    "pre_context": ["int crash_here(int *p) {"], "context_line": "    return *p;",
                    "post_context": ["}"]
                }],
                "end": "outermost", "end_detail": null
            }],
            "modules": [{
                "index": 0, "name": "x", "path": "/bin/x", "base": "0x400000", "end": "0x402000",
                "build_id": "0123abcd", "debug_id": "CDAB23010000000000000000000000000", "code_id": null, "version": null,
                "identity": "build-id", "verified": true, "main": true, "status": "ok",
                "unwind": ["eh_frame"], "symbols": ["dwarf", "symtab"],
                "files": [
                    { "name": "x", "build_id": "0123abcd", "kind": "binary", "gave": ["unwind"], "source": null },
                    { "name": "x.debug", "build_id": "0123abcd", "kind": "debug", "gave": ["symbols"],
                      "source": "https://debuginfod.example" }
                ],
                "lookups": [{ "source": "https://debuginfod.example", "file": "debuginfo", "result": "fetched", "message": null }]
            }],
            "unloaded_modules": [],
            "annotations": {},
            "signature": null,
            "warnings": [{ "code": "memory-missing", "message": "Stack memory is missing.", "thread": 0, "module": null }]
        })
    }

    fn valid(report: &Value) -> bool {
        super::validator().is_valid(report)
    }

    #[test]
    fn schema_accepts_a_documented_report() {
        super::assert_valid(&sample());
    }

    #[test]
    fn schema_rejects_violations() {
        let mut padded = sample();
        padded["threads"][0]["frames"][0]["pc"] = json!("0x0401000");
        let mut upper = sample();
        upper["modules"][0]["base"] = json!("0x40000A");
        let mut number = sample();
        number["crash"]["address"] = json!(0);
        let mut missing = sample();
        missing["threads"][0]["frames"][0]
            .as_object_mut()
            .expect("frame object")
            .remove("column");
        let mut extra = sample();
        extra["dump"]["extra"] = json!(1);
        let mut trust = sample();
        trust["threads"][0]["frames"][0]["trust"] = json!("guess");
        let mut end = sample();
        end["threads"][0]["end"] = json!("done");
        let mut code = sample();
        code["warnings"][0]["code"] = json!("Memory Missing");
        let mut kind = sample();
        kind["modules"][0]["files"][0]["kind"] = json!("library");
        let mut gave_nothing = sample();
        gave_nothing["modules"][0]["files"][1]["gave"] = json!([]);
        let mut analysis = sample();
        analysis["crash"]["analysis"]["kind"] = json!("bad-luck");
        let mut lookup = sample();
        lookup["modules"][0]["lookups"][0]["result"] = json!("maybe");
        let mut access = sample();
        access["crash"]["instruction"]["accesses"][0]["access"] = json!("peek");
        let mut limit = sample();
        limit["dump"]["system"]["limits"][0]["soft"] = json!(8388608);
        for (what, report) in [
            ("zero-padded hex", padded),
            ("upper-case hex", upper),
            ("numeric address", number),
            ("missing field", missing),
            ("unknown field", extra),
            ("unknown trust", trust),
            ("unknown end", end),
            ("non-kebab warning code", code),
            ("unknown file kind", kind),
            ("a file that gave nothing", gave_nothing),
            ("unknown analysis kind", analysis),
            ("unknown lookup result", lookup),
            ("unknown access direction", access),
            ("numeric limit", limit),
        ] {
            assert!(
                !valid(&report),
                "the schema accepted a report with a {what}"
            );
        }
    }
}
