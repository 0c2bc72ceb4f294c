//! `postmortem upload PATH…`: sends a build's binaries and debug files to a postmortem
//! server, only those it lacks. The files are found and identified here (`scan`), the
//! server is asked once which it lacks (`send::Client::missing`), and each missing one
//! goes up compressed in resumable chunks (`send::Client::upload`). With
//! `--include-sources`, the same query asks which build-ids lack a source bundle, and
//! each such bundle is made of this machine's sources (`sources`) and sent the same way.
//! A progress bar on a terminal; one line per file and a summary otherwise. The exit code
//! says what a CI pipeline needs to know (see [`exit`] and docs/upload.md).

mod scan;
mod send;
mod sources;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use send::{Client, Outgoing, Presence, SendError};

/// The exit codes of `postmortem upload`.
pub mod exit {
    /// Every file is on the server (sent now or already there).
    pub const OK: u8 = 0;
    /// Bad arguments, or a path that cannot be read (clap's own code for usage errors).
    pub const USAGE: u8 = 2;
    /// The server could not be reached, or kept failing (network, 5xx, timeouts): retry.
    pub const UNREACHABLE: u8 = 3;
    /// The token was refused (401, 403).
    pub const AUTH: u8 = 4;
    /// The server refused one or more files (another file holds its identity, or it is
    /// not a file the server indexes); the others were sent.
    pub const REFUSED: u8 = 5;
}

/// Arguments of `postmortem upload`.
#[derive(Debug, clap::Args)]
pub struct UploadArgs {
    /// Files and directories to look in (directories are walked; symbolic links inside
    /// them are not followed).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The server's base URL.
    #[arg(long, env = "POSTMORTEM_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A bearer token with the `symbols` scope.
    #[arg(long, env = "POSTMORTEM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The project the files belong to: sent as `X-Postmortem-Project` (a project token's
    /// own project without it).
    #[arg(long, env = "POSTMORTEM_PROJECT")]
    pub project: Option<String>,
    /// List what would be sent (the server is still asked what it lacks); send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also send, for each build-id whose debug information has line tables, a source
    /// bundle of the source files those tables name that exist on this machine (only
    /// when the server lacks one for that build-id).
    #[arg(long)]
    pub include_sources: bool,
    /// Also list the files that look like binaries but cannot be identified.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Runs `postmortem upload`.
pub fn run(args: UploadArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let spinner = bar(tty, None);
    let scanned = scan::scan(&args.paths, || spinner.inc(1));
    spinner.finish_and_clear();
    let scanned = match scanned {
        Ok(s) => s,
        Err(e) => {
            eprintln!("postmortem upload: {e:#}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    if args.verbose {
        for (path, why) in &scanned.unusable {
            println!("skipped {}: {why}", path.display());
        }
    }
    let client = Client::new(&args.url, args.token.clone(), args.project.clone());
    let files: Vec<&scan::Found> = scanned.found.iter().collect();
    let with_sources = match args.include_sources {
        true => sources::candidates(&scanned.found),
        false => Vec::new(),
    };
    let bundle_ids: Vec<String> = with_sources.iter().map(|(id, _)| id.clone()).collect();
    let (presence, bundles_lacking) = match client.missing(&files, &bundle_ids) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("postmortem upload: {e}");
            return Ok(ExitCode::from(code_of(&e)));
        }
    };
    let bundles: Vec<&(String, &scan::Found)> = with_sources
        .iter()
        .zip(bundles_lacking)
        .filter_map(|(b, lacking)| lacking.then_some(b))
        .collect();
    let mut tally = Tally {
        sources: args.include_sources,
        bundles_present: with_sources.len() - bundles.len(),
        ..Tally::default()
    };
    let mut to_send = Vec::new();
    for (f, p) in files.iter().zip(presence) {
        match p {
            Presence::Present => tally.present += 1,
            Presence::Missing => to_send.push(*f),
            Presence::Conflict(sha) => {
                tally.refused += 1;
                println!(
                    "refused {}: the server holds another file ({sha}) for its identity \
                     (first upload wins)",
                    f.path.display()
                );
            }
        }
    }
    if args.dry_run {
        for f in &to_send {
            println!("would upload {} ({})", f.path.display(), human(f.size));
            tally.bytes += f.size;
        }
        tally.uploaded = to_send.len();
        for (id, f) in &bundles {
            println!(
                "would upload the source bundle of {id} (sources named by {})",
                f.path.display()
            );
        }
        tally.bundles_sent = bundles.len();
    } else {
        send_all(&client, &to_send, tty, &mut tally);
        send_bundles(&client, &bundles, &mut tally);
    }
    println!(
        "{}",
        tally.summary(&scanned, args.dry_run, started.elapsed())
    );
    Ok(ExitCode::from(tally.exit_code()))
}

/// Sends each file, counting what happened.
fn send_all(client: &Client, files: &[&scan::Found], tty: bool, tally: &mut Tally) {
    let total: u64 = files.iter().map(|f| f.size).sum();
    let bar = bar(tty, Some(total));
    let mut done_before = 0u64;
    for f in files {
        bar.set_message(f.name.clone().unwrap_or_default());
        let mut progress = |held: u64, compressed: u64| {
            // shown in the file's own bytes: its share of what the server holds
            let share = if compressed == 0 {
                0
            } else {
                (held as u128 * f.size as u128 / compressed as u128) as u64
            };
            bar.set_position(done_before + share);
        };
        match client.upload(&Outgoing::of(f), &mut progress) {
            Ok(sent) => {
                tally.uploaded += 1;
                tally.bytes += f.size;
                tally.compressed += sent.compressed;
                tally.resumed += sent.resumed;
                let resumed = match sent.resumed {
                    0 => String::new(),
                    n => format!(", resumed ×{n}, {} sent by this run", human(sent.sent)),
                };
                let line = format!(
                    "uploaded {} ({}, {} compressed{resumed})",
                    f.path.display(),
                    human(f.size),
                    human(sent.compressed),
                );
                bar.suspend(|| println!("{line}"));
            }
            Err(e) => {
                bar.suspend(|| println!("failed {}: {e}", f.path.display()));
                tally.fail(&e);
            }
        }
        done_before += f.size;
        bar.set_position(done_before);
    }
    bar.finish_and_clear();
}

/// Makes and sends each build's source bundle (after the files: a bundle is of no use
/// without its debug file), counting what happened.
fn send_bundles(client: &Client, bundles: &[&(String, &scan::Found)], tally: &mut Tally) {
    for (id, f) in bundles {
        let bundle = match sources::make(id, &f.path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                tally.bundles_empty += 1;
                println!(
                    "no source bundle for {id}: none of the sources {} names is here",
                    f.path.display()
                );
                continue;
            }
            Err(e) => {
                tally.bundles_empty += 1;
                println!("no source bundle for {id}: {e:#}");
                continue;
            }
        };
        let name = format!("{id}.sources.zip");
        let outgoing = Outgoing {
            path: bundle.file.path(),
            name: Some(&name),
            size: bundle.size,
            sha256: &bundle.sha256,
            source_bundle: Some(id),
        };
        match client.upload(&outgoing, &mut |_, _| {}) {
            Ok(sent) => {
                tally.bundles_sent += 1;
                println!(
                    "uploaded the source bundle of {id} ({} files named by {}, {} not here; \
                     {}, {} compressed)",
                    bundle.files,
                    bundle.from.display(),
                    bundle.left_out,
                    human(bundle.size),
                    human(sent.compressed)
                );
            }
            Err(e) => {
                println!("failed the source bundle of {id}: {e}");
                tally.fail(&e);
            }
        }
    }
}

/// A progress bar on a terminal (bytes when `total` is known, files seen otherwise);
/// hidden elsewhere.
fn bar(tty: bool, total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(t) => ProgressBar::new(t).with_style(
            ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {pos} files looked at")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    if !tty {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// What happened to the files.
#[derive(Debug, Default)]
struct Tally {
    present: usize,
    uploaded: usize,
    refused: usize,
    failed: usize,
    auth: bool,
    unreachable: bool,
    bytes: u64,
    compressed: u64,
    resumed: u32,
    /// Whether source bundles were asked for (`--include-sources`).
    sources: bool,
    bundles_sent: usize,
    bundles_present: usize,
    /// Build-ids with line tables but no source here (or unreadable line tables).
    bundles_empty: usize,
}

impl Tally {
    fn fail(&mut self, e: &SendError) {
        match e {
            SendError::Refused(_) => self.refused += 1,
            SendError::Auth(_) => {
                self.failed += 1;
                self.auth = true;
            }
            SendError::Unreachable(_) => {
                self.failed += 1;
                self.unreachable = true;
            }
        }
    }

    fn exit_code(&self) -> u8 {
        if self.auth {
            exit::AUTH
        } else if self.unreachable {
            exit::UNREACHABLE
        } else if self.refused > 0 {
            exit::REFUSED
        } else {
            exit::OK
        }
    }

    /// "12 files: 9 already there, 3 uploaded, 1.2 GB (…)".
    fn summary(&self, scanned: &scan::Scan, dry_run: bool, took: std::time::Duration) -> String {
        let n = scanned.found.len();
        let verb = if dry_run { "to upload" } else { "uploaded" };
        let mut s = format!(
            "{n} files: {} already there, {} {verb}, {}",
            self.present,
            self.uploaded,
            human(self.bytes)
        );
        if !dry_run && self.uploaded > 0 {
            s += &format!(" ({} compressed)", human(self.compressed));
        }
        if self.refused > 0 {
            s += &format!(", {} refused", self.refused);
        }
        if self.failed > 0 {
            s += &format!(", {} failed", self.failed);
        }
        if self.resumed > 0 {
            s += &format!(", resumed ×{}", self.resumed);
        }
        if !scanned.unusable.is_empty() {
            s += &format!(", {} not identifiable", scanned.unusable.len());
        }
        s += &format!(" in {:.1} s", took.as_secs_f64());
        if self.sources {
            s += &format!(
                "; source bundles: {} {verb}, {} already there, {} without sources here",
                self.bundles_sent, self.bundles_present, self.bundles_empty
            );
        }
        s
    }
}

fn code_of(e: &SendError) -> u8 {
    match e {
        SendError::Auth(_) => exit::AUTH,
        SendError::Unreachable(_) => exit::UNREACHABLE,
        SendError::Refused(_) => exit::REFUSED,
    }
}

/// Bytes in the largest unit that keeps one digit before the point (1.2 GB).
fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
