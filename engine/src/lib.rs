//! The postmortem engine: crash dump bytes and binaries in, a symbolized report out.
//!
//! # Example
//!
//! A minidump of a small C program that wrote through a null pointer, walked with the
//! program's own unwind rules and symbols (the library's other modules have no files
//! here, so their frames come from scanning):
//!
//! ```
//! use postmortem_engine::{
//!     build_tables, process_dump, Dump, Module, ModuleTables, ProcessOptions, TableInput,
//!     TableProvider,
//! };
//!
//! let dump = include_bytes!(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../fixtures/reports/dumps/x86_64.dmp"
//! ));
//! let program = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/reports/bin/crash"));
//!
//! /// Hands the program's tables over for the module the dump names `crash`.
//! struct OneProgram(ModuleTables);
//!
//! impl TableProvider for OneProgram {
//!     fn tables(&self, _dump: &Dump<'_>, module: &Module) -> Option<ModuleTables> {
//!         (module.name == "crash").then(|| self.0.clone())
//!     }
//! }
//!
//! // Tables are built once per build and may be cached by the caller (see `StoredTables`).
//! let tables = build_tables(Some(TableInput { name: "crash", bytes: program }), &[]);
//! let report = process_dump(dump, &OneProgram(tables), &ProcessOptions::default())?;
//!
//! let crash = report.crash.as_ref().expect("the dump records a crash");
//! assert_eq!(crash.reason, "SIGSEGV / SEGV_MAPERR at 0x0");
//! let frame = &report.threads[crash.thread].frames[0];
//! assert_eq!(frame.function.as_deref(), Some("store"));
//! assert_eq!(frame.line, Some(21));
//! // the JSON document (`postmortem.report/1`), and the same for people
//! let json = serde_json::to_string(&report)?;
//! assert!(json.contains(r#""function":"store""#));
//! print!("{}", postmortem_engine::report::text::render(&report));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The pipeline
//!
//! The pipeline, one module per step:
//! 1. [`dump`] reads an ELF core or a minidump into one [`dump::Dump`] model: threads with
//!    registers, modules with build-ids, memory as bounds-checked ranges, crash info.
//! 2. [`unwind`] turns a binary's unwind sections (`.eh_frame`, `.debug_frame`, …) into one
//!    normalized, versioned byte table, looked up without deserialization.
//! 3. [`symbols`] turns a binary's symbols and DWARF into a versioned symbol table.
//! 4. [`walk`] replays each thread's stack: unwind table ▶ frame pointer ▶ stack scan.
//! 5. [`report`] assembles the `postmortem.report/1` document (JSON and text).
//!
//! [`process`] ties the steps together for one dump and a set of symbol files;
//! [`resolve`] is the one rule for which files describe a module, whatever holds them.
//!
//! What it never does: network, database or file I/O, spawning tasks, or depending on
//! an async runtime (scoped threads, joined before a call returns, split one `.sym` build
//! in two and hash a large dump beside its walk). The engine takes bytes and returns values, which is
//! what makes every parser fuzzable and testable with literal bytes; callers (the CLI's
//! `walk`, `postmortem-walk`, the service's workers) find the files and hand them over.

#![forbid(unsafe_code)]
// Every public item is documented where it is part of the embedding API: the items
// re-exported below, which carry `#[warn(missing_docs)]` where their module allows it.
// The modules themselves are public for the workspace's own crates (the CLI, the
// service, the tests and the fuzz targets reach into them); their hundreds of internal
// `pub` items are documented where it helps, so the lint is allowed on each module.
#![warn(missing_docs)]

// The modules from the bottom layer up; a module names only modules of its own layer or
// below it (`tests/layers.rs` holds the order and rejects an upward reference).
// 0. Shared pieces every layer may use.
#[allow(missing_docs)]
pub mod arch;
#[allow(missing_docs)]
pub mod ids;
mod names;
#[allow(missing_docs)]
pub mod ranges;
#[allow(missing_docs)]
pub mod signals;
pub mod warning;
// 1. Dump bytes into the one `Dump` model.
#[allow(missing_docs)]
pub mod dump;
// 2. Binaries' headers and containers.
#[allow(missing_docs)]
pub mod binary;
#[allow(missing_docs)]
pub mod dsym_zip;
#[allow(missing_docs)]
pub mod dyld_cache;
#[allow(missing_docs)]
pub mod macho_fat;
// 3. Unwind tables.
#[allow(missing_docs)]
pub mod unwind;
// 4. Symbol tables.
#[allow(missing_docs)]
pub mod symbols;
// 5. Both tables from Breakpad `.sym` files.
#[allow(missing_docs)]
pub mod breakpad;
// 6. What an uploaded file is.
#[allow(missing_docs)]
pub mod identify;
// 7. The walk.
#[allow(missing_docs)]
pub mod walk;
// 8. The report.
#[allow(missing_docs)]
pub mod report;
// 9. Which files describe a module, and its tables built from them (or its sources).
#[allow(missing_docs)]
pub mod resolve;
#[allow(missing_docs)]
pub mod source_bundle;
#[allow(missing_docs)]
pub mod tables;
// 10. The pipeline.
#[allow(missing_docs)]
pub mod process;
// 11. Scrubbing a dump's memory and strings before it is stored.
#[allow(missing_docs)]
pub mod scrub;

// The embedding API: a dump and a provider of tables in, a report out.
pub use dump::{read_dump, Dump, DumpError, Module};
pub use process::{
    build_tables, on_demand_tables, process, process_dump, DumpSha256, ModuleTables, NoTables,
    ProcessOptions, StoredTables, SymbolTables, TableInput, TableProvider, Tables, UnwindTables,
};
pub use report::{Addr, Report};
pub use walk::WalkOptions;
pub use warning::Warning;

/// The old path of [`breakpad::index`], kept for callers outside the engine.
pub use breakpad::index as breakpad_index;
