//! One dump plus the tables of its modules in, one `postmortem.report/1` document out.
//!
//! The engine never opens files or databases: callers (the CLI, the service's jobs)
//! implement [`TableProvider`] to hand over the unwind and symbol table bytes of each
//! module, built once per build-id with [`build_tables`] and cached however they like.
//!
//! STATUS: interface fixed; implementation in progress by the lead.

use std::sync::Arc;

use crate::dump::{Dump, Module};

/// The tables one module's files produced (see [`build_tables`]).
#[derive(Debug, Clone, Default)]
pub struct ModuleTables {
    /// Serialized unwind table (`unwind::format`), if any unwind section was found.
    pub unwind: Option<Arc<[u8]>>,
    /// Serialized symbol table (`symbols::format`), if any symbols were found.
    pub symbols: Option<Arc<[u8]>>,
    /// Whether the file's build-id equals the dump's (false for a match by path).
    pub verified: bool,
    /// Problems met while building (`unwind-table-corrupt`, `symbols-corrupt`): (code, message).
    pub warnings: Vec<(&'static str, String)>,
}

/// Supplies tables for the modules of a dump.
pub trait TableProvider {
    /// The tables for `module` of `dump`, or `None` when no file describes it (the
    /// report then marks the module `missing`).
    fn tables(&self, dump: &Dump<'_>, module: &Module) -> Option<ModuleTables>;
}
