//! The postmortem engine: crash dump bytes and binaries in, a symbolized report out.
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

// The modules from the bottom layer up; a module names only modules of its own layer or
// below it (`tests/layers.rs` holds the order and rejects an upward reference).
// 0. Shared pieces every layer may use.
pub mod arch;
pub mod ids;
mod names;
pub mod ranges;
pub mod signals;
pub mod warning;
// 1. Dump bytes into the one `Dump` model.
pub mod dump;
// 2. Binaries' headers and containers.
pub mod binary;
pub mod dsym_zip;
pub mod dyld_cache;
pub mod macho_fat;
// 3. Unwind tables.
pub mod unwind;
// 4. Symbol tables.
pub mod symbols;
// 5. Both tables from Breakpad `.sym` files.
pub mod breakpad;
// 6. What an uploaded file is.
pub mod identify;
// 7. The walk.
pub mod walk;
// 8. The report.
pub mod report;
// 9. Which files describe a module, and its tables built from them (or its sources).
pub mod resolve;
pub mod source_bundle;
pub mod tables;
// 10. The pipeline.
pub mod process;

/// The old path of [`breakpad::index`], kept for callers outside the engine.
pub use breakpad::index as breakpad_index;
