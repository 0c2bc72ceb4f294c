//! What the two command-line programs share: `postmortem walk` (in the all-in-one
//! `postmortem` binary, which also runs the service) and `postmortem-walk` (the walk
//! alone, a drop-in for `minidump-stackwalk` in crash handlers and pipelines).
//!
//! A one-shot walk of a small dump takes a few milliseconds, and starting a process is a
//! good part of that: the service's dependencies (HTTP, databases, S3) give the
//! `postmortem` binary five times the code and nine times the relocations the loader
//! applies before `main`. This package depends on the engine and `postmortem-sources` (a
//! blocking HTTP client for debuginfod servers, made only when one is asked) — no async
//! runtime, database or object store — so `postmortem-walk` stays small.
//!
//! [`files`] is where this machine's files are (`--symbols`, the dump's recorded paths,
//! `/usr/lib/debug`) as an `engine::resolve::FileSource`: which of them describe a
//! module is the engine's rule, the same the service's workers apply to uploads;
//! [`remote`] the flags of the debuginfod servers asked for what no local file gives;
//! [`source_files`] the source lines around each frame, from the files at their recorded
//! paths.

#![forbid(unsafe_code)]

mod apple_files;
pub mod budget;
pub mod files;
pub mod remote;
pub mod source_files;
pub mod stackwalk;
pub mod table_cache;
pub mod walk;

use anyhow::Context;
use engine::report::signature::SignatureRules;

/// The signature rules of `--signature-rules FILE`, or the built-in ones.
pub fn signature_rules(
    path: Option<&std::path::Path>,
) -> anyhow::Result<std::sync::Arc<SignatureRules>> {
    let Some(path) = path else {
        return Ok(std::sync::Arc::new(SignatureRules::default()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading signature rules {}", path.display()))?;
    let rules = SignatureRules::parse(&text).with_context(|| format!("in {}", path.display()))?;
    Ok(std::sync::Arc::new(rules))
}
