//! Breakpad `.sym` files: everything that reads them, in one place and with one tokenizer.
//!
//! A `.sym` file (written by `dump_syms` from a binary's debug information) is the symbol
//! store format of minidump tooling: a `MODULE` line, then `FILE`, `INLINE_ORIGIN`, `FUNC`
//! with its line and `INLINE` records, `PUBLIC` symbols and `STACK CFI`/`STACK WIN`
//! unwind records. It is read in three ways:
//! - [`symbols`] builds the symbol table (the format [`crate::symbols`] looks up),
//! - [`unwind`] builds the unwind table ([`crate::unwind`]'s format) from the `STACK CFI`
//!   records and, for x86, the `STACK WIN` records ([`stack_win`]; the walker evaluates
//!   their programs with [`postfix`]),
//! - [`index`] indexes a file for one walk and builds those tables only for the records
//!   the walk needs, with the two builders.
//!
//! [`write_cfi`] goes the other way: an unwind table written as `STACK CFI` records
//! (a dyld shared cache's images get `.sym` files with their unwind rules).
//!
//! All three split the text into lines with [`text`] and read each line with
//! [`tokenize`]: one reading of each record kind, so the index skips exactly the records
//! the builders skip and a malformed line means the same to every reader. The builders
//! are checked against an independent parser (`breakpad-symbols`, rust-minidump's) in
//! `engine/tests/breakpad_differential.rs`.

pub mod index;
pub mod postfix;
pub mod stack_win;
pub mod symbols;
pub(crate) mod text;
pub(crate) mod tokenize;
pub mod unwind;
pub mod write_cfi;

pub use tokenize::{parse_code_id_line, parse_module_line, BreakpadModule};
