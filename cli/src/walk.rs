//! `postmortem walk`: a dump and the files on this machine in, a report out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use engine::process::{process_dump, DumpSha256, ProcessOptions};

use crate::files::FileProvider;
use crate::source_files::WalkSources;
use crate::stackwalk::{Level, Log, StackwalkArgs};
use crate::table_cache::TableCache;
use engine::dump::compressed::{self, Compression, Limit};
use mapped::Mapped;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// The postmortem report (`docs/report-format.md`).
    Json,
    /// The report for a terminal, gdb-like.
    Text,
    /// minidump-stackwalk's JSON document (as `--json`).
    StackwalkJson,
    /// minidump-stackwalk's human-readable text (as `--human`).
    StackwalkHuman,
    /// For an Apple crash report (`.ips`, `.crash`): the report re-rendered symbolicated
    /// in the `.crash` layout, as `symbolicatecrash` and `atos` give it.
    Apple,
}

#[derive(clap::Args, Debug)]
pub struct WalkArgs {
    /// The crash dump: an ELF core file, a minidump or an Apple crash report (`.ips`,
    /// `.crash`), as it is or compressed with zstd, xz, lz4, bzip2 or gzip (told by its
    /// content, whatever its name).
    pub dump: PathBuf,
    /// Breakpad symbol stores, as minidump-stackwalk takes them after the dump (the same
    /// as --symbols-path).
    #[arg(value_name = "SYMBOLS_PATH")]
    pub stores: Vec<PathBuf>,
    /// Directories (or files) with binaries and debug files, matched by build-id.
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Breakpad symbol stores, as minidump-stackwalk's `--symbols-path`: each module's
    /// `.sym` file is read from `STORE/<debug_file>/<DEBUG_ID>/<name>.sym` (the layout
    /// `dump_syms` output is filed in). Nothing else in a store is looked at, and it is
    /// never listed: fast for a large store. Binaries go in `--symbols`.
    #[arg(long = "symbols-path", value_name = "STORE")]
    pub symbols_path: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Write the report here instead of standard output.
    #[arg(long, value_name = "FILE", alias = "output-file")]
    pub output: Option<PathBuf>,
    /// Do not look in /usr/lib/debug/.build-id.
    #[arg(long)]
    pub no_system_debug: bool,
    /// Do not open the module paths recorded in the dump: only files under --symbols
    /// (and the system debug root) are used.
    #[arg(long)]
    pub no_dump_paths: bool,
    /// Build every module's tables whole, as the service does, instead of only what this
    /// walk looks at (Breakpad records, `.eh_frame` FDEs): slower; the report is the same.
    #[arg(long)]
    pub whole_tables: bool,
    /// Keep every module's tables whole in DIR and read them from there: the first walk of
    /// a build's files builds them whole (slower than a one-shot walk), later walks of any
    /// dump of those files skip reading their debug information. For walking many dumps of
    /// the same builds. The report is the same.
    #[arg(long, value_name = "DIR", env = "POSTMORTEM_TABLE_CACHE")]
    pub table_cache: Option<PathBuf>,
    /// Put the dump's SHA-256 in the report (`dump.sha256`, which the service's reports
    /// always have). Off by default: it means reading the whole dump, which for a large
    /// core takes many times as long as the walk, which reads a few pages of it.
    #[arg(long)]
    pub sha256: bool,
    /// The most bytes a compressed dump may decompress to (suffixes K, M, G, T in units of
    /// 1024). It is decompressed into a temporary file (under TMPDIR) that is removed when
    /// the walk ends.
    #[arg(long, value_name = "SIZE", default_value = "32G", value_parser = parse_size)]
    pub max_decompressed_size: u64,
    /// Crash signature rules file (docs/grouping.md), replacing the built-in rules, or
    /// extending them when its first rule is `extends builtin`.
    #[arg(long)]
    pub signature_rules: Option<PathBuf>,
    /// Do not read the source files frames name at their recorded paths: without
    /// `--source-bundle` the report's frames get no `pre_context`, `context_line` or
    /// `post_context` (by default each frame's source file is read at the path its debug
    /// information records, for a walk on the machine that built the code;
    /// docs/source-context.md).
    #[arg(long)]
    pub no_source_context: bool,
    /// A source bundle (`postmortem upload --include-sources` makes them; the format is in
    /// docs/source-context.md): frames of its build-id take their source lines from it
    /// before the files at their recorded paths. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub source_bundle: Vec<PathBuf>,
    /// A source-link mapping, `PREFIX=URL_TEMPLATE [WEB_TEMPLATE]`: a frame whose file
    /// lies under PREFIX gets its lines from the URL (`{path}` the rest of the path,
    /// `{commit}` the value of `--source-commit`, `{build_id}` the frame's module's), after
    /// the bundles and debuginfod servers, before the file at its recorded path
    /// (docs/source-context.md). Repeatable: the first mapping whose prefix a file has is
    /// used.
    #[arg(long, value_name = "MAPPING")]
    pub source_link: Vec<sources::source_link::Mapping>,
    /// The commit (or revision) the crashed build was made from, for the `{commit}` of
    /// `--source-link` templates.
    #[arg(long, value_name = "REV")]
    pub source_commit: Option<String>,
    #[command(flatten)]
    pub budget: crate::budget::BudgetArgs,
    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
    #[command(flatten)]
    pub stackwalk: StackwalkArgs,
}

impl WalkArgs {
    /// The output asked for, by --format or minidump-stackwalk's flags.
    fn output_format(&self) -> Format {
        if self.stackwalk.json {
            Format::StackwalkJson
        } else if self.stackwalk.human || self.stackwalk.cyborg.is_some() {
            Format::StackwalkHuman
        } else {
            self.format
        }
    }
}

/// The dump's bytes, mapped: the file itself, or for a compressed one, the temporary file
/// it was decompressed into (deleted as soon as it is closed).
pub fn open_dump(path: &Path, limit: Limit) -> anyhow::Result<Mapped> {
    let file = Mapped::open(path)?;
    let Some(format) = Compression::of(file.as_ref()) else {
        return Ok(file);
    };
    let out = tempfile::tempfile().context("creating a temporary file to decompress into")?;
    let mut writer = std::io::BufWriter::new(&out);
    compressed::decompress(format, file.as_ref(), &mut writer, limit)?;
    drop(writer);
    Ok(Mapped::of_file(out)?)
}

/// A size in bytes with an optional binary suffix: `4096`, `512M`, `32G`.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown size suffix {c:?} (K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 4096, 512M, 32G)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

pub fn run(args: WalkArgs) -> anyhow::Result<ExitCode> {
    // a walk is its process's one job: its helper threads share one malloc arena
    mapped::arenas::one_arena();
    let mut log = Log::open(&args.stackwalk)?;
    // mapped: the walk reads a few pages of a core that may be hundreds of megabytes
    let bytes = match open_dump(&args.dump, Limit(args.max_decompressed_size)) {
        Ok(b) => b,
        Err(e) => {
            log.say(
                Level::Error,
                &format!("postmortem: cannot read {}: {e:#}", args.dump.display()),
            );
            return Ok(ExitCode::from(2));
        }
    };
    let configured = args.remote.config()?;
    let sources = configured.config;
    for p in configured.problems {
        log.say(Level::Error, &format!("postmortem: remote sources: {p}"));
    }
    let mut provider = file_provider(&args, &sources);
    let mut options = process_options(&args)?;
    let source_files = match WalkSources::open(&args.source_bundle, !args.no_source_context) {
        // the debuginfod servers' sources: a Remote of their own (the files' one is the
        // provider's), no cost until a frame asks
        Ok(s) if !args.no_source_context => s
            .with_remote(sources::Remote::new(&sources))
            .with_links(&args.source_link, args.source_commit.clone()),
        Ok(s) => s,
        Err(e) => {
            log.say(Level::Error, &format!("postmortem: {e:#}"));
            return Ok(ExitCode::from(2));
        }
    };
    let format = args.output_format();
    match context_shown(format) {
        Shown::Every if source_files.any() => {
            options.source_context.provider = Some(std::sync::Arc::new(source_files));
        }
        Shown::CrashingFrame if source_files.any() => {
            options.source_context.limits.crashing_frame_only = true;
            options.source_context.provider = Some(std::sync::Arc::new(source_files));
        }
        _ => {}
    }
    let report = match process_dump(bytes.as_ref(), &provider, &options) {
        Ok(r) => r,
        Err(e) => {
            log.say(
                Level::Error,
                &format!("postmortem: {}: {e}", args.dump.display()),
            );
            return Ok(ExitCode::from(2));
        }
    };
    for p in provider.table_cache_problems() {
        log.say(Level::Error, &format!("postmortem: {p}"));
    }
    for p in provider.symbol_file_problems() {
        log.say(Level::Error, &format!("postmortem: {p}"));
    }
    log.report(&report);
    if let Some(p) = &args.stackwalk.cyborg {
        write_to(Some(p), |out| {
            engine::report::stackwalk::write_json(&report, out, args.stackwalk.pretty)
        })?;
    }
    if matches!(format, Format::Apple) {
        // the original report re-rendered symbolicated: only an Apple report has one
        let text = match engine::report::apple::render(bytes.as_ref(), &report) {
            Ok(text) => text,
            Err(e) => {
                log.say(
                    Level::Error,
                    &format!(
                        "postmortem: --format apple is for Apple crash reports (.ips, .crash): {}: {e}",
                        args.dump.display()
                    ),
                );
                return Ok(ExitCode::from(2));
            }
        };
        write_to(args.output.as_deref(), |out| {
            std::io::Write::write_all(out, text.as_bytes())
        })?;
    } else {
        write_to(args.output.as_deref(), |out| {
            render(&report, format, &args, out)
        })?;
    }
    // The process ends here: its memory goes back to the system at once, while dropping
    // the tables, the dump and the report piece by piece (unmapping each large list)
    // costs time a one-shot walk is measured by.
    // The files taken out of compressed ones go, though: they are on disk.
    provider.remove_extracted();
    std::mem::forget((provider, report, bytes));
    Ok(ExitCode::SUCCESS)
}

/// Which frames' source lines an output format shows.
enum Shown {
    /// Every frame's (the JSON report's `pre_context`, `context_line`, `post_context`).
    Every,
    /// The crashed thread's first frame's line (the text report, as gdb stops there).
    CrashingFrame,
    /// None: minidump-stackwalk's documents and the Apple layout have no source lines,
    /// so no source file is read for them.
    None,
}

fn context_shown(format: Format) -> Shown {
    match format {
        Format::Json => Shown::Every,
        Format::Text => Shown::CrashingFrame,
        Format::StackwalkJson | Format::StackwalkHuman | Format::Apple => Shown::None,
    }
}

/// The files of this machine, the Breakpad stores and the remote sources, as `args` ask.
fn file_provider(args: &WalkArgs, sources: &sources::config::Config) -> FileProvider {
    let stores: Vec<PathBuf> = args
        .symbols_path
        .iter()
        .chain(&args.stores)
        .cloned()
        .collect();
    let mut provider = FileProvider::new(&args.symbols, !args.no_system_debug)
        .with_breakpad_stores(&stores)
        .with_remote(sources::Remote::new(sources));
    if args.no_dump_paths {
        provider = provider.without_dump_paths();
    }
    if !args.whole_tables {
        provider = provider.building_on_demand();
    }
    provider = provider.with_table_cache(args.table_cache.as_deref().map(TableCache::new));
    provider = provider.with_max_sym_records(args.budget.budget().max_sym_records);
    provider
}

/// The walk's options as `args` ask (the source context is added by the caller).
fn process_options(args: &WalkArgs) -> anyhow::Result<ProcessOptions> {
    let mut options = ProcessOptions::default();
    if !args.sha256 {
        options.dump_sha256 = DumpSha256::Omit;
    }
    options.signature_rules = crate::signature_rules(args.signature_rules.as_deref())?;
    options.budget = args.budget.budget();
    Ok(options)
}

/// Writes the report in `format` to `out`: serialized once, straight into the buffer
/// (no document tree, no whole-output string for the JSON formats).
fn render(
    report: &engine::report::Report,
    format: Format,
    args: &WalkArgs,
    out: &mut Out<'_>,
) -> std::io::Result<()> {
    use std::io::Write;
    match format {
        Format::Json => {
            // serde_json's pretty text, written faster
            engine::report::json_text::write(&mut *out, report, true)?;
            out.write_all(b"\n")
        }
        Format::Text => out.write_all(engine::report::text::render(report).as_bytes()),
        Format::StackwalkJson => {
            engine::report::stackwalk::write_json(report, out, args.stackwalk.pretty)
        }
        Format::StackwalkHuman => {
            out.write_all(engine::report::stackwalk::human(report, args.stackwalk.brief).as_bytes())
        }
        // written by `run` from the original report, before this is reached
        Format::Apple => Ok(()),
    }
}

/// The output: a buffer of a type the serializers are compiled for, so that each of the
/// many small writes of a report is an inlined copy into the buffer, not a call through
/// `dyn Write` (a sixth of writing a deep stackwalk document was those calls); only a
/// full buffer goes through the box.
type Out<'a> = std::io::BufWriter<Box<dyn std::io::Write + 'a>>;

/// Runs `write` on a buffered file at `path`, or on stdout (a reader that went away,
/// `| head`, is no error).
fn write_to(
    path: Option<&Path>,
    write: impl FnOnce(&mut Out<'_>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    use std::io::Write;
    match path {
        Some(p) => {
            let file =
                std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            let mut out: Out<'_> = std::io::BufWriter::with_capacity(OUTPUT_BUFFER, Box::new(file));
            write(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", p.display()))
        }
        None => {
            let mut out: Out<'_> = std::io::BufWriter::with_capacity(OUTPUT_BUFFER, stdout());
            match write(&mut out).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
    }
}

/// Standard output for the report: a file on a duplicate of its descriptor, so that each
/// full buffer is one `write`. (`std::io::stdout()` is line-buffered: it searches every
/// buffer it is handed for its last newline, a pass over the whole output — 5 M
/// instructions of a deep `--json` document.) Where the descriptor cannot be duplicated,
/// `std::io::stdout()` itself.
fn stdout() -> Box<dyn std::io::Write> {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    match stdout.as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(stdout.lock()),
    }
}

/// The output buffer: a report is written through it, so a deep report costs this much
/// memory beyond the report itself.
const OUTPUT_BUFFER: usize = 64 * 1024;
