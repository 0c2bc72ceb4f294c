//! Symbol tables (placeholder until the symbols branch lands; same API).

/// Where a symbol came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolSource {
    Dwarf,
    Symtab,
    Dynsym,
    Breakpad,
    Exports,
}

impl SymbolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolSource::Dwarf => "dwarf",
            SymbolSource::Symtab => "symtab",
            SymbolSource::Dynsym => "dynsym",
            SymbolSource::Breakpad => "breakpad",
            SymbolSource::Exports => "exports",
        }
    }
}

pub const SYMBOL_TABLE_VERSION: u32 = 0;

#[derive(Debug, thiserror::Error)]
#[error("symbols not implemented yet")]
pub struct SymbolsError;

pub struct BuiltSymbols {
    pub bytes: Vec<u8>,
    pub sources: Vec<SymbolSource>,
}

pub fn build_symbol_table(
    _binary: Option<&[u8]>,
    _debug_files: &[&[u8]],
) -> Result<BuiltSymbols, SymbolsError> {
    Err(SymbolsError)
}

#[derive(Debug, Clone)]
pub struct SymbolFrame<'a> {
    pub function: Option<&'a str>,
    pub function_start: Option<u64>,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub inlined: bool,
    pub source: SymbolSource,
}

pub struct SymbolTable<'a> {
    _b: &'a [u8],
}

impl<'a> SymbolTable<'a> {
    pub fn open(_bytes: &'a [u8]) -> Result<Self, SymbolsError> {
        Err(SymbolsError)
    }
    pub fn lookup(&self, _offset: u64, _out: &mut Vec<SymbolFrame<'a>>) -> bool {
        false
    }
    pub fn sources(&self) -> Vec<SymbolSource> {
        vec![]
    }
}
