//! minidump-stackwalk's command line on `postmortem walk` and `postmortem-walk`, so a
//! pipeline that runs `minidump-stackwalk --json --symbols-url URL DUMP STORE…` can run
//! `postmortem-walk` with the same arguments and read the same JSON: `--json`,
//! `--human`, `--cyborg FILE`, `--pretty`, `--brief`, `--output-file`, `--log-file`,
//! `--verbose LEVEL`, `--features`, symbol stores given after the dump, and (in
//! [`crate::remote`]) `--symbols-url`, `--symbols-cache`,
//! `--symbols-download-timeout-secs`. The documents themselves are made by
//! `engine::report::stackwalk` from the report.
//!
//! Flags minidump-stackwalk has for its own debugging and nothing here corresponds to
//! (`--no-color`, `--no-interactive`, `--symbols-tmp`, `--use-local-debuginfo`: local
//! files are always used) are accepted and do nothing; `--dump` and `--evil-json` are
//! not accepted.

use std::io::Write;
use std::path::PathBuf;

use engine::report::Report;

#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "minidump-stackwalk compatibility")]
pub struct StackwalkArgs {
    /// Print minidump-stackwalk's JSON document (rust-minidump's schema) instead of the
    /// postmortem report; compact unless --pretty.
    #[arg(long, conflicts_with_all = ["format", "human", "cyborg"])]
    pub json: bool,
    /// Print minidump-stackwalk's human-readable text.
    #[arg(long, conflicts_with_all = ["format", "cyborg"])]
    pub human: bool,
    /// Print the human-readable text, and write the JSON document to FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "format")]
    pub cyborg: Option<PathBuf>,
    /// Pretty-print the --json/--cyborg document.
    #[arg(long)]
    pub pretty: bool,
    /// With --human: only the summary and the crashed thread.
    #[arg(long)]
    pub brief: bool,
    /// Write diagnostics here instead of standard error.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// How much to say on standard error (or --log-file): `error` (default) says why a
    /// walk failed, `warn` adds the report's warnings, `info` each module's status and
    /// symbol-source lookups, `debug`/`trace` why each thread's walk ended.
    #[arg(long, value_name = "LEVEL", value_enum, default_value = "error")]
    pub verbose: Level,
    /// minidump-stackwalk's analysis families; postmortem's analysis is always complete,
    /// so each gives the same document.
    #[arg(long, value_name = "SET", default_value = "stable-basic",
          value_parser = ["stable-basic", "stable-all", "unstable-all"])]
    pub features: String,
    /// Accepted for minidump-stackwalk's command lines; no effect.
    #[arg(long, hide = true)]
    pub no_color: bool,
    /// Accepted for minidump-stackwalk's command lines; no effect.
    #[arg(long, hide = true)]
    pub no_interactive: bool,
    /// Accepted for minidump-stackwalk's command lines: local debug files are always used.
    #[arg(long, hide = true)]
    pub use_local_debuginfo: bool,
    /// Accepted for minidump-stackwalk's command lines: downloads are staged beside the
    /// cache.
    #[arg(long, hide = true, value_name = "DIR")]
    pub symbols_tmp: Option<PathBuf>,
}

/// `--verbose`'s levels, minidump-stackwalk's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Level {
    Off,
    #[default]
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Where diagnostics go, and how many.
pub struct Log {
    level: Level,
    sink: Box<dyn Write>,
}

impl Log {
    /// Standard error, or `--log-file` (created or truncated).
    pub fn open(args: &StackwalkArgs) -> anyhow::Result<Log> {
        let sink: Box<dyn Write> =
            match &args.log_file {
                Some(p) => Box::new(std::fs::File::create(p).map_err(|e| {
                    anyhow::anyhow!("cannot write the log file {}: {e}", p.display())
                })?),
                None => Box::new(std::io::stderr()),
            };
        Ok(Log {
            level: args.verbose,
            sink,
        })
    }

    /// Writes `message` if the level asked for includes `level`.
    pub fn say(&mut self, level: Level, message: &str) {
        if level != Level::Off && level <= self.level {
            let _ = writeln!(self.sink, "{message}");
        }
    }

    /// What a report says that a person running the walk would want logged at each
    /// level: its warnings, each module's status and lookups, each thread's end.
    pub fn report(&mut self, report: &Report) {
        for w in &report.warnings {
            self.say(Level::Warn, &format!("warn: {}: {}", w.code, w.message));
        }
        if self.level >= Level::Info {
            for m in &report.modules {
                self.say(
                    Level::Info,
                    &format!("info: module {} {} ({})", m.name, m.status, m.base),
                );
                for l in &m.lookups {
                    self.say(
                        Level::Info,
                        &format!(
                            "info:   {} {} at {}{}",
                            l.file,
                            l.result,
                            l.source,
                            l.message
                                .as_deref()
                                .map(|m| format!(": {m}"))
                                .unwrap_or_default()
                        ),
                    );
                }
            }
        }
        if self.level >= Level::Debug {
            for t in &report.threads {
                self.say(
                    Level::Debug,
                    &format!(
                        "debug: thread {} (tid {}): {} frames, walk ended: {}{}",
                        t.index,
                        t.tid,
                        t.frames.len(),
                        t.end,
                        t.end_detail
                            .as_deref()
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
    }
}
