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

pub mod arch;
pub mod binary;
pub mod breakpad;
pub mod dsym_zip;
pub mod dump;
pub mod dyld_cache;
pub mod identify;
pub mod macho_fat;
pub mod process;
pub mod report;
pub mod resolve;
pub mod source_bundle;
pub mod symbols;
pub mod unwind;
pub mod walk;

/// The old path of [`breakpad::index`], kept for callers outside the engine.
pub use breakpad::index as breakpad_index;
