//! `postmortem bench`: the figures docs/performance.md quotes, measured by a command anyone
//! can run.
//!
//! - `bench unwind FILE`: unwind-table build throughput (MB of `.eh_frame` + `.debug_frame`
//!   per second), table size ÷ source size, and the median time of one rule lookup from the
//!   table bytes — side by side with the same lookups done by gimli's own `UnwindTable`
//!   evaluation (find the FDE through `.eh_frame_hdr`, run its CFI program to the pc).
//! - `bench walk DUMP [--symbols DIR]… [--symbols-path STORE]…`: the time to walk and symbolize every thread of a
//!   dump with tables already built (as in the service with a warm cache).
//! - `bench store --db URL`: a store of a million crashes filled through its own insert
//!   path, and the time of every dashboard and reprocess query on it (`bench_store`).
//! - `bench inflate FILE`: the time to inflate each compressed section of a binary or debug
//!   file with the walk's own inflater — the floor of a one-shot walk that needs that
//!   section's DWARF (a zlib stream is read from its start: no walk can inflate less of it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engine::dump::read_dump;
use engine::process::{process, ModuleTables, ProcessOptions, TableProvider};
use engine::unwind::{build_from_elf, UnwindTable};
use object::{Object, ObjectSection};
use sha2::Digest;

use postmortem_cli::files::FileProvider;

/// Bench output goes to a buffer written once at the end, so a closed pipe
/// (`postmortem bench … | head`) ends the command quietly instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        OUT.with(|o| {
            use std::fmt::Write as _;
            let _ = writeln!(o.borrow_mut(), $($arg)*);
        })
    };
}

thread_local! {
    static OUT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn flush_output() -> anyhow::Result<()> {
    use std::io::Write;
    let text = OUT.with(|o| std::mem::take(&mut *o.borrow_mut()));
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Unwind-table build speed, size and lookup time on one binary.
    Unwind {
        /// An ELF binary (e.g. the largest shared object on the machine).
        file: PathBuf,
        /// Build repetitions (the median is reported).
        #[arg(long, default_value_t = 5)]
        builds: usize,
        /// Lookups timed.
        #[arg(long, default_value_t = 200_000)]
        lookups: usize,
    },
    /// Warm walk + symbolize time of one dump.
    Walk {
        dump: PathBuf,
        #[arg(long = "symbols", value_name = "DIR")]
        symbols: Vec<PathBuf>,
        /// Breakpad symbol stores, read at their layout paths (as `walk --symbols-path`).
        #[arg(long = "symbols-path", value_name = "STORE")]
        symbols_path: Vec<PathBuf>,
        /// Repetitions (the median is reported).
        #[arg(long, default_value_t = 50)]
        runs: usize,
        /// Do not look in /usr/lib/debug/.build-id.
        #[arg(long)]
        no_system_debug: bool,
        /// Do not open the module paths recorded in the dump.
        #[arg(long)]
        no_dump_paths: bool,
    },
    /// A store filled with many crashes, and the time of each dashboard and reprocess
    /// query on it (bench/store.sh).
    Store(super::bench_store::StoreArgs),
    /// Inflate time of each compressed section of one file (e.g. libc6-dbg's debug file).
    Inflate {
        file: PathBuf,
        /// Repetitions per section (the median is reported).
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let result = run_bench(args);
    flush_output()?;
    result
}

fn run_bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Unwind {
            file,
            builds,
            lookups,
        } => bench_unwind(&file, builds.max(1), lookups.max(1)),
        What::Walk {
            dump,
            symbols,
            symbols_path,
            runs,
            no_system_debug,
            no_dump_paths,
        } => {
            let mut files =
                FileProvider::new(&symbols, !no_system_debug).with_breakpad_stores(&symbols_path);
            if no_dump_paths {
                files = files.without_dump_paths();
            }
            bench_walk(&dump, files, runs.max(1))
        }
        What::Inflate { file, runs } => bench_inflate(&file, runs.max(1)),
        What::Store(args) => {
            // printed as it goes (a fill takes minutes), not buffered
            flush_output()?;
            super::runtime()?.block_on(super::bench_store::run(args))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn bench_inflate(path: &std::path::Path, runs: usize) -> anyhow::Result<ExitCode> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = object::File::parse(&*data).context("not a binary object reads")?;
    let mut total = Duration::ZERO;
    let mut any = false;
    for section in file.sections() {
        let compressed = section.compressed_data().context("a section's header")?;
        if compressed.format == object::CompressionFormat::None {
            continue;
        }
        any = true;
        let name = section.name().unwrap_or("?");
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let bytes = compressed
                .decompress()
                .with_context(|| format!("inflating {name}"))?;
            times.push(t.elapsed());
            std::hint::black_box(bytes);
        }
        let m = median(times);
        total += m;
        outln!(
            "{name}: {} -> {} bytes, median {:.2} ms over {runs} runs",
            compressed.data.len(),
            compressed.uncompressed_size,
            m.as_secs_f64() * 1e3
        );
    }
    if !any {
        outln!("no compressed sections");
    } else {
        outln!("all: {:.2} ms", total.as_secs_f64() * 1e3);
    }
    Ok(ExitCode::SUCCESS)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A small deterministic generator (xorshift), so runs are repeatable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn bench_unwind(path: &PathBuf, builds: usize, lookups: usize) -> anyhow::Result<ExitCode> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut times = Vec::new();
    let mut built = None;
    for _ in 0..builds {
        let t = Instant::now();
        let b = build_from_elf(&data, &[]).context("building the unwind table")?;
        times.push(t.elapsed());
        built = Some(b);
    }
    let Some(built) = built else {
        bail!("no build ran")
    };
    let build_time = median(times);
    let src = built.stats.source_bytes as f64;
    outln!("file: {}", path.display());
    outln!(
        "source: {:.1} MB of unwind sections, {} FDEs ({} skipped)",
        src / 1e6,
        built.stats.entries,
        built.stats.entries_skipped
    );
    if let Some(e) = &built.stats.first_error {
        outln!("first skipped entry: {e}");
    }
    outln!(
        "table: {} rows, {} distinct rules, {:.1} MB",
        built.stats.rows,
        built.stats.palette,
        built.stats.table_bytes as f64 / 1e6
    );
    outln!(
        "build: median {:.1} ms over {builds} builds = {:.0} MB/s",
        build_time.as_secs_f64() * 1e3,
        src / 1e6 / build_time.as_secs_f64()
    );
    outln!(
        "size: table bytes / unwind section bytes = {:.3}",
        built.stats.table_bytes as f64 / src
    );
    let table = UnwindTable::open(&built.bytes).context("opening the table")?;

    // Addresses: random pcs inside rows that have a rule.
    let file = object::File::parse(&*data).context("parsing")?;
    let link_base = engine::binary::link_base(&file);
    let rows: Vec<u64> = table
        .rows()
        .filter(|(_, r)| r.is_some())
        .map(|(s, _)| s)
        .collect();
    if rows.is_empty() {
        bail!("the table has no rows with rules");
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let addrs: Vec<u64> = (0..lookups)
        .map(|_| rows[(rng.next() % rows.len() as u64) as usize] + rng.next() % 4)
        .collect();

    // ours: time batches of 1000 lookups, report the median per lookup
    let mut ours = Vec::new();
    let mut found = 0usize;
    for chunk in addrs.chunks(1000) {
        let t = Instant::now();
        for &a in chunk {
            if std::hint::black_box(table.find(a)).is_some() {
                found += 1;
            }
        }
        ours.push(t.elapsed() / chunk.len() as u32);
    }
    let ours = median(ours);

    // gimli: eh_frame_hdr binary search + CFI evaluation, the same addresses
    let gimli_time = gimli_lookups(&file, link_base, &addrs)?;
    outln!(
        "lookup: median {:.0} ns (postmortem table, {found}/{} found) vs {:.0} ns (gimli UnwindTable evaluation)",
        ours.as_nanos() as f64,
        addrs.len(),
        gimli_time.as_nanos() as f64
    );
    Ok(ExitCode::SUCCESS)
}

fn gimli_lookups(
    file: &object::File<'_>,
    link_base: u64,
    addrs: &[u64],
) -> anyhow::Result<Duration> {
    use gimli::{BaseAddresses, EhFrame, EhFrameHdr, LittleEndian, UnwindContext, UnwindSection};
    let (Some(eh), Some(hdr)) = (
        file.section_by_name(".eh_frame"),
        file.section_by_name(".eh_frame_hdr"),
    ) else {
        bail!("gimli comparison needs .eh_frame and .eh_frame_hdr");
    };
    let eh_data = eh.data()?;
    let hdr_data = hdr.data()?;
    let mut bases = BaseAddresses::default()
        .set_eh_frame(eh.address())
        .set_eh_frame_hdr(hdr.address());
    if let Some(t) = file.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    let eh_frame = EhFrame::new(eh_data, LittleEndian);
    let parsed = EhFrameHdr::new(hdr_data, LittleEndian).parse(&bases, 8)?;
    let Some(table) = parsed.table() else {
        bail!(".eh_frame_hdr has no search table");
    };
    let mut ctx = Box::new(UnwindContext::new());
    let mut times = Vec::new();
    for chunk in addrs.chunks(1000) {
        let t = Instant::now();
        for &a in chunk {
            let svma = a + link_base;
            let r = table.unwind_info_for_address(
                &eh_frame,
                &bases,
                &mut ctx,
                svma,
                EhFrame::cie_from_offset,
            );
            std::hint::black_box(r.is_ok());
        }
        times.push(t.elapsed() / chunk.len() as u32);
    }
    Ok(median(times))
}

/// Tables built once, handed out on every run (a warm cache).
struct Warm(Vec<Option<ModuleTables>>);

impl TableProvider for Warm {
    fn tables(
        &self,
        dump: &engine::dump::Dump<'_>,
        module: &engine::dump::Module,
    ) -> Option<ModuleTables> {
        let i = dump.modules.iter().position(|m| m.base == module.base)?;
        self.0.get(i)?.clone()
    }
}

fn bench_walk(path: &PathBuf, files: FileProvider, runs: usize) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let t = Instant::now();
    let dump = read_dump(&bytes).context("reading the dump")?;
    let warm = Warm(
        dump.modules
            .iter()
            .map(|m| files.tables(&dump, m))
            .collect(),
    );
    let cold = t.elapsed();
    // The service knows a dump's sha256 from its content-addressed blob key.
    let opts =
        ProcessOptions::default().with_dump_sha256(engine::ids::hex(&sha2::Sha256::digest(&bytes)));
    let mut times = Vec::new();
    let mut frames = 0usize;
    for _ in 0..runs {
        let t = Instant::now();
        let dump = read_dump(&bytes).context("reading the dump")?;
        let report = process(&dump, &bytes, &warm, &opts);
        times.push(t.elapsed());
        frames = report.threads.iter().map(|t| t.frames.len()).sum();
    }
    outln!(
        "dump: {} ({} threads, {frames} frames)",
        path.display(),
        dump.threads.len()
    );
    outln!(
        "tables: built in {:.1} ms (cold, once)",
        cold.as_secs_f64() * 1e3
    );
    outln!(
        "walk+symbolize with warm tables: median {:.3} ms over {runs} runs",
        median(times).as_secs_f64() * 1e3
    );
    Ok(ExitCode::SUCCESS)
}
