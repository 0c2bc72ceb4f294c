//! `postmortem signature`: the crash signature of stored reports under a rules file, and
//! with `--explain` which rule kept or set aside each frame (issue 37).
//!
//! It reads reports (what `walk --format json` prints, or a crash as the API returns it,
//! whose `report` field is the report) rather than dumps, so that an operator can try a
//! rules file on crashes already processed without their binaries at hand; the service
//! makes the same signature from the same rules when it processes or reprocesses a crash.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use engine::report::signature::{SignatureRules, DEFAULT_RULES};
use engine::report::Report;

/// Arguments of `postmortem signature`.
#[derive(Debug, clap::Args)]
pub struct SignatureArgs {
    /// Report files (JSON): `postmortem walk --format json` output, or an API crash
    /// (`GET /api/v1/crashes/{id}`) whose `report` is used.
    #[arg(required_unless_present_any = ["print_builtin_rules", "preview"])]
    pub reports: Vec<PathBuf>,
    /// Say, frame by frame, which rule kept or set aside each frame.
    #[arg(long)]
    pub explain: bool,
    /// Print the explanation as JSON instead of text (with `--explain`).
    #[arg(long, requires = "explain")]
    pub json: bool,
    /// Rules file replacing (or, with `extends builtin`, extending) the built-in rules.
    #[arg(long)]
    pub signature_rules: Option<PathBuf>,
    /// Print the built-in rules file and exit.
    #[arg(long)]
    pub print_builtin_rules: bool,
    /// Recompute the signatures of the stored finished crashes (of --data-dir or
    /// --database-url) and say which groups would split or merge; nothing is changed.
    #[arg(long, conflicts_with_all = ["reports", "explain"])]
    pub preview: bool,
    #[command(flatten)]
    pub storage: super::StorageArgs,
}

/// Longest report file read.
const MAX_REPORT_BYTES: u64 = 256 << 20;

pub fn run(args: SignatureArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.print_builtin_rules {
        out.write_all(DEFAULT_RULES.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let rules = super::signature_rules(args.signature_rules.as_deref())?;
    if args.preview {
        let p = super::runtime()?.block_on(async {
            let db = args.storage.db().await?;
            super::preview::preview(&db, &rules).await
        })?;
        p.write(&mut out)?;
        return Ok(ExitCode::SUCCESS);
    }
    for path in &args.reports {
        let report = read_report(path).with_context(|| format!("reading {}", path.display()))?;
        let e = explain(&rules, &report);
        if args.reports.len() > 1 {
            writeln!(out, "{}:", path.display())?;
        }
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&e)?)?;
        } else if args.explain {
            write!(out, "{}", e.to_text())?;
        } else {
            let text = e.signature.as_ref().map_or("", |s| s.text.as_str());
            writeln!(out, "{text}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The explanation of a report's signature under `rules`: its crashed thread's frames,
/// its crash analysis, its OS. A report without a crashed thread has no signature.
pub fn explain(rules: &SignatureRules, report: &Report) -> engine::report::signature::Explanation {
    let analysis = report.crash.as_ref().and_then(|c| c.analysis.as_ref());
    match report.threads.iter().find(|t| t.crashed) {
        Some(t) => rules.explain(report.dump.os, t, analysis),
        None => engine::report::signature::Explanation {
            signature: None,
            rules_version: rules.version,
            kind_prefix: None,
            frames: Vec::new(),
        },
    }
}

/// A report from a file: the report itself, or an object whose `report` is one.
fn read_report(path: &std::path::Path) -> anyhow::Result<Report> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_REPORT_BYTES,
        "the file is over {MAX_REPORT_BYTES} bytes"
    );
    let value: serde_json::Value = serde_json::from_slice(&bytes).context("not JSON")?;
    let value = match value.get("report") {
        Some(r) if r.is_object() => r.clone(),
        _ => value,
    };
    serde_json::from_value(value).context("not a postmortem report")
}
