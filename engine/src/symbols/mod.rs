//! The symbol table: function names, source lines and inline stacks for a binary's addresses.
//!
//! [`build_symbol_table`] reads a binary and its separate debug file(s) once — DWARF for
//! functions, line rows and inlined calls, `.symtab`/`.dynsym` for the addresses DWARF does
//! not cover — and writes one versioned byte table ([`format`]) keyed by offsets from the
//! binary's link base. [`SymbolTable`] answers lookups straight from those bytes, which are
//! what the service stores and caches. Breakpad `.sym` files are read by
//! [`build_symbol_table_breakpad`] into the same format. Split DWARF (`.dwo`/`.dwp`) is
//! not read yet.

pub(crate) mod builders;
pub(crate) mod demangle;
mod error;
pub mod format;
mod line_sequences;
mod lookup;
mod on_demand;

pub use builders::{build_symbol_table, BuiltSymbols};
pub use demangle::{demangle, strip_parameters};
pub use error::SymbolsError;
pub use format::SYMBOL_TABLE_VERSION;
#[doc(hidden)]
pub use line_sequences::differences_from_gimli as line_sequences_differences_from_gimli;
pub use lookup::SymbolTable;
pub use on_demand::OnDemandSymbols;

/// Where a function's name came from; reported per frame as `symbol_source`, spelled as
/// [`SymbolSource::as_str`] says.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
pub enum SymbolSource {
    Dwarf,
    Symtab,
    Dynsym,
    Breakpad,
    Exports,
    /// A PDB's procedures (with line rows and inlined calls).
    Pdb,
    /// A PDB's public symbols: names without lines, where no procedure covers the code.
    Publics,
    /// The name the crash report itself gives the frame (its writer knew the function):
    /// used where no symbol file describes the address; never in a table.
    Report,
}

crate::names::serde_by_name!(SymbolSource);

impl SymbolSource {
    /// Every source, in code order.
    pub const ALL: [SymbolSource; 8] = [
        SymbolSource::Dwarf,
        SymbolSource::Symtab,
        SymbolSource::Dynsym,
        SymbolSource::Breakpad,
        SymbolSource::Exports,
        SymbolSource::Pdb,
        SymbolSource::Publics,
        SymbolSource::Report,
    ];

    /// The name used in reports (`symbol_source`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The code stored in the table (part of the format: never renumber).
    pub fn code(self) -> u32 {
        match self {
            SymbolSource::Dwarf => 1,
            SymbolSource::Symtab => 2,
            SymbolSource::Dynsym => 3,
            SymbolSource::Breakpad => 4,
            SymbolSource::Exports => 5,
            SymbolSource::Pdb => 6,
            SymbolSource::Publics => 7,
            SymbolSource::Report => 8,
        }
    }

    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The bit of this source in the header's source mask.
    pub fn bit(self) -> u32 {
        1 << self.code()
    }
}

/// A module's symbols held as an index, whose tables are built for the addresses a walk
/// asks about (one-shot walks: an indexed Breakpad `.sym` file): a table built with
/// [`SymbolIndex::symbols_for`] answers at those addresses as the whole table would.
pub trait SymbolIndex: Send + Sync {
    /// A table for the sorted, deduplicated table offsets `rels`.
    fn symbols_for(&self, rels: &[u64]) -> Result<BuiltSymbols, SymbolsError>;
    /// Whether any table it builds can name anything.
    fn has_symbols(&self) -> bool;
    /// The sources the whole table would list.
    fn sources(&self) -> Vec<SymbolSource>;
}

/// One entry of the inline stack at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolFrame<'a> {
    /// Demangled, without parameter list or return type.
    pub function: Option<&'a str>,
    /// Offset of the function's start from the link base; outermost entry only.
    pub function_start: Option<u64>,
    /// Innermost entry: the line row's file; outer entries: the call site's.
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub inlined: bool,
    pub source: SymbolSource,
}

#[cfg(test)]
mod tests;

/// Table offsets and ranges computed exactly as the Breakpad builder computes them (for
/// [`crate::breakpad::index`], which must skip the records the builder skips).
pub(crate) fn breakpad_ranges() -> BreakpadRanges {
    builders::Collector::new(0)
}

/// See [`breakpad_ranges`].
pub(crate) type BreakpadRanges = builders::Collector;
