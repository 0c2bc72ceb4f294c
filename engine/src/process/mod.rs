//! One dump plus the tables of its modules in, one `postmortem.report/1` document out.
//!
//! The engine never opens files or databases: callers (the CLI, the service's jobs)
//! implement [`TableProvider`] to hand over the unwind and symbol table bytes of each
//! module, built once per build-id with [`build_tables`] and cached however they like.
//! The vdso, whose image lives in the dump's own memory, is handled here.
//!
//! [`process`] runs the steps in order, one module each: load and open each module's
//! tables ([`tables`]), the module list ([`modules`]), walk and symbolize the threads
//! ([`threads`]), then assemble the report here.

mod analysis;
mod dsym_warnings;
mod instruction;
mod modules;
mod stored;
mod threads;

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::dump::{self, Dump, DumpError};
use crate::report::signature::SignatureRules;
use crate::report::{self, hex_addr, Addr, Report};
use crate::signals;
use crate::symbols;
use crate::unwind;
use crate::walk::WalkOptions;

pub use crate::tables::{
    build_tables, build_tables_from_breakpad, indexed_breakpad_tables, on_demand_tables, CodeImage,
    ModuleTables, NoTables, SymbolTables, TableInput, TableProvider, Tables, UnwindTables,
};
pub use stored::{StoredTables, NOTES_VERSION};

/// Options of one processing run: `ProcessOptions::default()`, then set the fields that
/// differ (the struct is `#[non_exhaustive]`, so new options do not break callers).
#[warn(missing_docs)]
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ProcessOptions {
    /// How each thread is walked (frame limits, scanning).
    pub walk: WalkOptions,
    /// Whether the report gets the dump's sha256, and whether it must be computed.
    pub dump_sha256: DumpSha256,
    /// How the crash signature is made (`--signature-rules`; built-in by default).
    pub signature_rules: Arc<SignatureRules>,
    /// Threads walked, frames in all, report bytes: what one dump may cost.
    pub budget: report::budget::Budget,
    /// Where the source lines around each frame come from; none by default.
    pub source_context: report::source_context::SourceContextOptions,
}

impl ProcessOptions {
    /// The same options with the dump's sha256 already known.
    pub fn with_dump_sha256(mut self, sha256: String) -> Self {
        self.dump_sha256 = DumpSha256::Known(sha256);
        self
    }
}

/// Whether and how the report gets the dump's sha256 (`dump.sha256`).
#[warn(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DumpSha256 {
    /// Computed here (beside the walk, for a large dump).
    #[default]
    Compute,
    /// Already known, lower-case hex: the service stores dumps content-addressed and
    /// hashes them while it stages the upload, so hashing a large core is not repeated.
    Known(String),
    /// Not wanted: the report has no `dump.sha256`. A one-shot walk does not read a
    /// mapped core whole to hash it (`postmortem walk` without `--sha256`): for a 160 MB
    /// core that took ten times as long as the walk.
    Omit,
}

/// Reads the dump, walks and symbolizes every thread, and assembles the report.
pub fn process_dump(
    dump_bytes: &[u8],
    provider: &dyn TableProvider,
    options: &ProcessOptions,
) -> Result<Report, DumpError> {
    let mut dump = dump::read_dump(dump_bytes)?;
    dump.cut_modules(options.budget.max_modules);
    Ok(process(&dump, dump_bytes, provider, options))
}

/// Assembles the report of an already-read dump.
pub fn process(
    dump: &Dump<'_>,
    dump_bytes: &[u8],
    provider: &dyn TableProvider,
    options: &ProcessOptions,
) -> Report {
    let mut warnings: Vec<report::Warning> = dump.warnings.clone();
    // Hashing a large core takes as long as the rest of a one-shot walk: it runs on the
    // other core meanwhile. (The service knows the hash already; a small dump hashes in
    // less time than a thread takes to start.)
    std::thread::scope(|scope| {
        let sha256 = match &options.dump_sha256 {
            DumpSha256::Known(known) => Hash::Known(Some(known.clone())),
            DumpSha256::Omit => Hash::Known(None),
            DumpSha256::Compute if dump_bytes.len() >= HASH_APART_BYTES => {
                Hash::Running(scope.spawn(|| crate::ids::hex(&Sha256::digest(dump_bytes))))
            }
            DumpSha256::Compute => Hash::Known(Some(crate::ids::hex(&Sha256::digest(dump_bytes)))),
        };
        let loaded = crate::tables::load(dump, provider);
        let opened = crate::tables::Opened::new(&loaded);
        let modules = modules::reports(dump, provider, &loaded, &opened, &mut warnings);
        let order = threads::order(dump, options, &mut warnings);
        let walked = threads::walk_all(dump, &opened, &order, options, &mut warnings);
        let symbolized = threads::symbolize(dump, opened, &order, walked);
        let (threads, evidence_stacks) = threads::split_evidence(dump, &order, symbolized);
        if matches!(
            dump.format,
            dump::DumpFormat::AppleIps | dump::DumpFormat::AppleCrash
        ) {
            warnings.extend(report::apple::missing_dsyms(&modules, &threads));
        }
        if matches!(
            dump.format,
            dump::DumpFormat::AndroidTombstone | dump::DumpFormat::AndroidTombstoneProto
        ) {
            warnings.extend(report::android::missing_libraries(&modules, &threads));
        }
        let instruction = dump.crash.as_ref().and_then(|_| {
            let t = threads.iter().find(|t| t.crashed)?;
            let pc = t.frames.first()?.pc.get();
            instruction::crashing_instruction(dump, &loaded, pc, &t.registers)
        });
        let mut analysis = dump
            .crash
            .as_ref()
            .and_then(|c| analysis::analyse(dump, &loaded, c, &threads, instruction.as_ref()));
        if let Some(a) = analysis.as_mut() {
            a.stacks = evidence_stacks;
        }
        let sha256 = match sha256 {
            Hash::Known(h) => h,
            // a panic in the hasher stays a panic, as if it had run on this thread
            Hash::Running(h) => Some(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))),
        };
        // The signature comes from the crashed thread (first by the ordering rule), and
        // the analysis's kind where the rules want it; a dump of a live process has none.
        let signature = threads.iter().find(|t| t.crashed).and_then(|t| {
            options
                .signature_rules
                .signature_of(dump.os, t, analysis.as_ref())
        });
        let mut report = assemble(dump, dump_bytes, threads, modules, warnings, sha256);
        report.signature = signature;
        if let Some(c) = report.crash.as_mut() {
            c.analysis = analysis;
            c.instruction = instruction;
        }
        if let Some(sources) = &options.source_context.provider {
            report::source_context::attach(
                &mut report,
                sources.as_ref(),
                &options.source_context.limits,
            );
        }
        report::budget::fit(&mut report, options.budget.max_report_bytes);
        report
    })
}

/// Dumps from this size up are hashed on a thread of their own, beside the walk.
const HASH_APART_BYTES: usize = 4 << 20;

/// The dump's sha256: known, or being computed.
enum Hash<'scope> {
    Known(Option<String>),
    Running(std::thread::ScopedJoinHandle<'scope, String>),
}

/// The report from its parts (the caller adds the signature and the crash analysis, and
/// fits it to the budget's size).
fn assemble(
    dump: &Dump<'_>,
    dump_bytes: &[u8],
    threads: Vec<report::Thread>,
    modules: Vec<report::Module>,
    warnings: Vec<report::Warning>,
    sha256: Option<String>,
) -> Report {
    let crash = dump.crash.as_ref().map(|c| crash_of(c, &threads));
    Report {
        schema: report::SCHEMA.to_string(),
        processor: report::Processor {
            name: "postmortem".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            unwind_table_version: unwind::UNWIND_TABLE_VERSION,
            symbol_table_version: symbols::SYMBOL_TABLE_VERSION,
        },
        dump: dump_info(dump, dump_bytes, sha256),
        crash,
        threads,
        modules,
        unloaded_modules: dump
            .unloaded_modules
            .iter()
            .map(|u| report::UnloadedModule {
                name: u.name.clone(),
                path: u.path.clone(),
                base: Addr(u.base),
                end: Addr(u.end),
                build_id: u.build_id.as_deref().map(dump::hex),
                debug_id: u.debug_id.clone(),
                code_id: u.code_id.clone(),
            })
            .collect(),
        annotations: dump
            .annotations
            .clone()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        signature: None,
        warnings,
    }
}

/// The report's `dump` object.
fn dump_info(dump: &Dump<'_>, dump_bytes: &[u8], sha256: Option<String>) -> report::DumpInfo {
    report::DumpInfo {
        format: dump.format,
        sha256,
        size: dump_bytes.len() as u64,
        os: dump.os,
        arch: dump.arch,
        writer: dump.writer.clone(),
        pid: dump.pid,
        executable: dump.executable.clone(),
        command_line: dump.command_line.clone(),
        created: dump.created.clone(),
        system: dump.system.clone(),
    }
}

fn crash_of(c: &dump::CrashInfo, threads: &[report::Thread]) -> report::Crash {
    let signal_name = c.signal.and_then(signals::signal_name).map(str::to_string);
    // A Mach exception beside the signal it became (an Apple crash report's) is said as
    // Apple says it, its signal in its name: `EXC_BAD_ACCESS (SIGSEGV) /
    // KERN_INVALID_ADDRESS at 0x1`.
    let mach = c
        .exception
        .as_ref()
        .filter(|e| c.signal.is_some() && dump::apple::exception::is_mach(e));
    let code_name = match (c.signal, c.code, mach) {
        (_, _, Some(e)) => {
            dump::apple::exception::code_name(e.code, &e.parameters).map(str::to_string)
        }
        (Some(s), Some(code), None) => signals::code_name(s, code).map(str::to_string),
        _ => None,
    };
    let address = c.address.map(Addr);
    let mut reason = match (&signal_name, c.signal, &c.exception) {
        (_, _, Some(e)) if mach.is_some() => e.name.clone(),
        (Some(n), _, _) => n.clone(),
        (None, Some(s), _) => format!("signal {s}"),
        (None, None, Some(e)) => e.name.clone(),
        _ => "unknown".to_string(),
    };
    if let Some(cn) = &code_name {
        reason = format!("{reason} / {cn}");
    }
    let show_addr = c.signal.is_none_or(signals::has_fault_address);
    if let (true, Some(a)) = (show_addr, &address) {
        reason = format!("{reason} at {a}");
    }
    report::Crash {
        thread: 0,
        tid: threads.first().map(|t| t.tid).unwrap_or(c.tid),
        reason,
        signal: c.signal,
        signal_name,
        code: c.code,
        code_name,
        address,
        exception: c.exception.as_ref().map(|e| report::Exception {
            code: hex_addr(e.code),
            name: e.name.clone(),
            flags: hex_addr(e.flags),
        }),
        assertion: c.assertion.clone(),
        analysis: None,
        instruction: None,
    }
}
