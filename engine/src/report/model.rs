//! Serde types of `postmortem.report/1`, field for field as `docs/report-format.md` lists them.
//!
//! Every documented field is always present (`null` when unknown), so nothing here uses
//! `skip_serializing_if`. Addresses are [`Addr`]s, written as lower-case hex strings.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Addr;

pub use crate::dump::{Arch, Distribution, DumpFormat, Identity, Os, SystemInfo};
pub use crate::symbols::SymbolSource;
pub use crate::unwind::UnwindSource;
pub use crate::walk::{EndReason, Trust};
pub use crate::warning::Warning;

/// One crash's `postmortem.report/1` document (`docs/report-format.md` describes every
/// field; `report.schema.json` is its JSON Schema).
#[warn(missing_docs)]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Always [`super::SCHEMA`].
    pub schema: String,
    /// The program that made the report, and its table format versions.
    pub processor: Processor,
    /// The dump: its format, size, system, the process it recorded.
    pub dump: DumpInfo,
    /// Why the process died; `null` for a dump of a live process.
    pub crash: Option<Crash>,
    /// Every thread walked, the crashed thread first.
    pub threads: Vec<Thread>,
    /// Every module of the dump, in dump order, with the files that described it.
    pub modules: Vec<Module>,
    /// Modules the process had unloaded, as the dump lists them.
    pub unloaded_modules: Vec<UnloadedModule>,
    /// Key-value pairs the dump carries (a minidump's crashpad annotations).
    pub annotations: BTreeMap<String, String>,
    /// The crash signature for grouping; `null` without a crash.
    pub signature: Option<Signature>,
    /// What made the report less than complete.
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Processor {
    pub name: String,
    pub version: String,
    pub unwind_table_version: u32,
    pub symbol_table_version: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DumpInfo {
    pub format: DumpFormat,
    /// Absent when the caller did not want it (`postmortem walk` without `--sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub size: u64,
    pub os: Os,
    pub arch: Arch,
    pub writer: Option<String>,
    pub pid: Option<u32>,
    pub executable: Option<String>,
    pub command_line: Option<String>,
    pub created: Option<String>,
    /// The machine and process as the dump describes them (a minidump's system streams);
    /// every field null for a core, and the whole object for reports stored before it
    /// existed.
    #[serde(default)]
    pub system: SystemInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Crash {
    pub thread: usize,
    pub tid: u32,
    pub reason: String,
    pub signal: Option<u32>,
    pub signal_name: Option<String>,
    pub code: Option<i32>,
    pub code_name: Option<String>,
    pub address: Option<Addr>,
    pub exception: Option<Exception>,
    pub assertion: Option<String>,
    /// What kind of bug the crash looks like, with the evidence; `null` when nothing
    /// more can be said than `reason` (and absent in reports stored before it existed).
    #[serde(default)]
    pub analysis: Option<Analysis>,
    /// The instruction the crashed thread was at, decoded (x86_64), with the memory it
    /// accesses; `null` where its bytes are not at hand or it does not decode (and absent
    /// in reports stored before it existed).
    #[serde(default)]
    pub instruction: Option<CrashInstruction>,
}

/// The crashing instruction (see [`Crash::instruction`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CrashInstruction {
    /// As a disassembler prints it (`mov dword [rdi], eax`).
    pub text: String,
    /// The memory it reads or writes, at the addresses the crashed thread's registers
    /// give: its memory operands, then the stack slot a push, call, pop or return uses.
    pub accesses: Vec<MemoryAccess>,
    /// Where a call, jump or return sends the pc (a register's value, a pointer read
    /// from the dump, the return address on the stack), when the dump tells; `null` for
    /// other instructions (and in reports stored before it existed).
    #[serde(default)]
    pub jump: Option<Addr>,
}

impl CrashInstruction {
    /// The instruction and what it accessed, for people: `mov dword [rdi], eax (write of
    /// 4 bytes at 0x0)`.
    pub fn describe(&self) -> String {
        let accesses: Vec<String> = self
            .accesses
            .iter()
            .map(|a| {
                let what = a.access.map_or("access", AccessKind::as_str);
                match a.size {
                    Some(n) => format!("{what} of {n} bytes at {}", a.address),
                    None => format!("{what} at {}", a.address),
                }
            })
            .collect();
        if accesses.is_empty() {
            self.text.clone()
        } else {
            format!("{} ({})", self.text, accesses.join("; "))
        }
    }
}

/// One memory access of the crashing instruction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryAccess {
    pub address: Addr,
    /// Bytes accessed, where the instruction says.
    pub size: Option<u32>,
    /// Which way, where the kind of instruction makes it certain.
    pub access: Option<AccessKind>,
    /// The address's base register held 0: a field of a null pointer.
    pub base_null: bool,
}

/// Which way a [`MemoryAccess`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum AccessKind {
    Read,
    Write,
    ReadWrite,
}

crate::names::serde_by_name!(AccessKind);

impl AccessKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The crash read as a person would read it: a short kind, one sentence, and the
/// evidence it rests on (addresses, registers, functions, a message from memory).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analysis {
    pub kind: AnalysisKind,
    pub summary: String,
    /// Named facts, e.g. `address`, `offset`, `pc`, `sp`, `function`, `caller`,
    /// `message`, `depth`.
    pub evidence: BTreeMap<String, String>,
    /// Stacks the crash report gives as evidence, symbolized as threads are: an Android
    /// GWP-ASan/MTE error's `deallocated by` and `allocated by` backtraces (each named
    /// so). Left out of the document when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<Thread>,
}

/// The kinds of [`Analysis`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum AnalysisKind {
    /// A read or write through a null pointer, or a call through a null function
    /// pointer: the address lies in the first page.
    NullPointer,
    /// The fault lies just below the thread's stack pointer, in memory the dump does not
    /// hold: the stack ran into its guard page.
    StackOverflow,
    /// The program counter lies outside all code: a corrupted function pointer or return
    /// address sent the thread there.
    BadJump,
    /// `abort()`, with glibc's message when the dump holds it (a failed assertion, a heap
    /// check, a stack protector).
    Abort,
    /// An access to an address nothing is mapped at (a dangling or corrupted pointer).
    UnmappedAccess,
    /// An access the mapping does not allow: a write to read-only memory (a string
    /// literal), or executing data.
    ProtectionFault,
    /// An x86_64 general-protection fault: the CPU reports no address (a non-canonical
    /// pointer).
    GeneralProtection,
    /// An integer division by zero.
    DivideByZero,
    /// SIGILL in code: a compiler-inserted trap (`__builtin_trap`, `ud2`) or an
    /// instruction this CPU lacks.
    IllegalInstruction,
    /// A heap object used after it was freed (an Android GWP-ASan or MTE report says so).
    UseAfterFree,
    /// A heap object freed twice (GWP-ASan).
    DoubleFree,
    /// `free` of a pointer the allocator never returned (GWP-ASan).
    InvalidFree,
    /// An access past a heap object's end (GWP-ASan, MTE).
    BufferOverflow,
    /// An access before a heap object's start (GWP-ASan, MTE).
    BufferUnderflow,
}

crate::names::serde_by_name!(AnalysisKind);

impl AnalysisKind {
    /// Every kind, in declaration order.
    pub fn all() -> &'static [AnalysisKind] {
        <Self as strum::VariantArray>::VARIANTS
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exception {
    pub code: String,
    pub name: String,
    pub flags: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Thread {
    pub index: usize,
    pub tid: u32,
    pub name: Option<String>,
    pub crashed: bool,
    pub registers: BTreeMap<String, Addr>,
    pub frames: Vec<Frame>,
    pub end: EndReason,
    pub end_detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Frame {
    pub index: usize,
    pub pc: Addr,
    pub sp: Option<Addr>,
    pub trust: Trust,
    pub unwind_source: Option<UnwindSource>,
    pub module: Option<String>,
    pub module_index: Option<usize>,
    pub module_offset: Option<Addr>,
    pub function: Option<String>,
    pub function_offset: Option<Addr>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub inlined: bool,
    pub symbol_source: Option<SymbolSource>,
    /// Up to five source lines before `line` (see [`super::source_context`]); empty
    /// without context (and in reports stored before it existed). Shared by the frames at
    /// one line of one file: a deep recursion's 8,192 frames hold one copy, not 8,192.
    #[serde(default)]
    pub pre_context: Arc<[String]>,
    /// The source line `line` names, where a source provider gave the file.
    #[serde(default)]
    pub context_line: Option<Arc<str>>,
    /// Up to five source lines after `line`.
    #[serde(default)]
    pub post_context: Arc<[String]>,
    /// The frame's file at its line in the build's repository (`…/blob/COMMIT/a.c#L8`),
    /// where the source provider maps the file to one (a source-link mapping); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Module {
    pub index: usize,
    pub name: String,
    pub path: Option<String>,
    pub base: Addr,
    pub end: Addr,
    pub build_id: Option<String>,
    pub debug_id: Option<String>,
    pub code_id: Option<String>,
    /// The debug file the dump names for the module where it differs from the module's
    /// own name: a Windows module's PDB, as its CodeView record gives it (`app.pdb`).
    /// Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_file: Option<String>,
    /// The version the dump records (a minidump's file version); null for a core, and
    /// absent in reports stored before it existed.
    #[serde(default)]
    pub version: Option<String>,
    pub identity: Identity,
    pub verified: bool,
    pub main: bool,
    pub status: ModuleStatus,
    pub unwind: Vec<ModuleUnwind>,
    pub symbols: Vec<SymbolSource>,
    /// The files this module's tables came from, and what each gave: a binary, its
    /// separate debug file, a Breakpad `.sym` file. Empty for a module with no file
    /// (missing, or tables read from the dump's memory). Absent in reports stored before
    /// it existed.
    #[serde(default)]
    pub files: Vec<ModuleFile>,
    /// What remote symbol sources (debuginfod servers, symbol stores) were asked for this
    /// module's files and what each answered, in the order asked. Empty when none was
    /// asked (every file was on hand, or no source is configured); absent in reports
    /// stored before it existed.
    #[serde(default)]
    pub lookups: Vec<Lookup>,
}

/// One question put to a remote symbol source for a module's file, and its answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lookup {
    /// The source, as configured (a debuginfod server's or symbol store's URL).
    pub source: String,
    pub file: RemoteFile,
    pub result: LookupResult,
    /// Why a lookup failed (`error`), or how long a miss is remembered (`not-found`).
    #[serde(default)]
    pub message: Option<String>,
    /// For a `not-found` answer that is remembered: when the miss expires and the source
    /// will be asked again (RFC 3339, UTC, whole seconds). Reckoned from when the miss was
    /// recorded, not from now, so walks of one dump within the TTL give the same report.
    /// Absent when the miss could not be kept, and in reports stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// Which file of a build a source was asked for (debuginfod's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum RemoteFile {
    /// The binary itself: its unwind sections, symbols and code.
    Executable,
    /// Its separate debug file: DWARF names, lines and inlined frames.
    Debuginfo,
    /// Its Breakpad `.sym` file, from a symbol store.
    Sym,
}

crate::names::serde_by_name!(RemoteFile);

/// A source's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum LookupResult {
    /// The source had it (fetched now, or earlier and kept in the cache).
    Fetched,
    /// The source does not have it.
    NotFound,
    /// The source could not answer: unreachable, timed out, a server error, a body cut
    /// short or too large, a file of another build.
    Error,
}

crate::names::serde_by_name!(LookupResult);

impl RemoteFile {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl LookupResult {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where a module's unwind rules came from (the report's `modules[].unwind`): the
/// sections of its files, or for the vdso of a core the image in the dump's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleUnwind {
    Rules(UnwindSource),
    DumpMemory,
}

impl ModuleUnwind {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleUnwind::Rules(s) => s.as_str(),
            ModuleUnwind::DumpMemory => "dump-memory",
        }
    }
}

impl strum::VariantArray for ModuleUnwind {
    const VARIANTS: &'static [Self] = &[
        ModuleUnwind::Rules(UnwindSource::EhFrame),
        ModuleUnwind::Rules(UnwindSource::DebugFrame),
        ModuleUnwind::Rules(UnwindSource::Sframe),
        ModuleUnwind::Rules(UnwindSource::CompactUnwind),
        ModuleUnwind::Rules(UnwindSource::Breakpad),
        ModuleUnwind::Rules(UnwindSource::Pdata),
        ModuleUnwind::Rules(UnwindSource::PdbFrameData),
        ModuleUnwind::Rules(UnwindSource::ArmExidx),
        ModuleUnwind::Rules(UnwindSource::PeArm64),
        ModuleUnwind::DumpMemory,
    ];
}

crate::names::serde_by_name!(ModuleUnwind);

/// Whether a module's tables were found (the report's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum ModuleStatus {
    /// Unwind or symbol tables were found for its build.
    Ok,
    /// No file describes it.
    Missing,
    /// Its file was matched by path only: the tables may be another build's.
    Unverified,
    /// A file exists but gave no readable table.
    Corrupt,
}

crate::names::serde_by_name!(ModuleStatus);

impl ModuleStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One file a module's tables came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ModuleFile {
    /// The file's name (its last path component, or the name it was uploaded under).
    pub name: String,
    /// Its own build-id (lower-case hex), as read from the file; `null` for a `.sym` file.
    pub build_id: Option<String>,
    pub kind: FileKind,
    /// What the report took from it, in this order: `unwind`, `symbols`.
    pub gave: Vec<FileGave>,
    /// The remote source it was fetched from (see [`Module::lookups`]); `null` for a file
    /// found on this machine or uploaded (and absent in reports stored before it existed).
    #[serde(default)]
    pub source: Option<String>,
}

/// What a file is to its module.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, strum::VariantArray)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// The module's binary (code and its own unwind sections and symbols).
    Binary,
    /// A separate debug file (DWARF, `.debug_frame`, a full `.symtab`).
    Debug,
    /// A Breakpad `.sym` file.
    Breakpad,
}

/// A table a file gave to its module.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
pub enum FileGave {
    Unwind,
    Symbols,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnloadedModule {
    pub name: String,
    /// The path the dump records, where it is more than the name.
    #[serde(default)]
    pub path: Option<String>,
    pub base: Addr,
    pub end: Addr,
    pub build_id: Option<String>,
    pub debug_id: Option<String>,
    /// A Windows module's code id (`TimeDateStamp` then `SizeOfImage`, hex).
    #[serde(default)]
    pub code_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Signature {
    pub text: String,
    pub frames: Vec<usize>,
}

/// The report's spelling of each enum, for text output and pages (width and alignment
/// honoured, as the text report's columns need).
macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    )*};
}
display_as_str!(
    Trust,
    EndReason,
    Identity,
    ModuleStatus,
    RemoteFile,
    LookupResult,
    AnalysisKind,
    AccessKind
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The text report and the pages print `as_str`; JSON has serde's names. They are
    /// the same words, every variant.
    #[test]
    fn enum_names_in_json_are_their_as_str() {
        fn check<T: Serialize + std::fmt::Display>(values: &[T]) {
            for v in values {
                let json = serde_json::to_value(v).unwrap_or_default();
                assert_eq!(json.as_str(), Some(v.to_string().as_str()));
            }
        }
        check(&[
            Trust::Context,
            Trust::Cfi,
            Trust::Fp,
            Trust::Scan,
            Trust::Prewalked,
        ]);
        check(&[
            EndReason::Outermost,
            EndReason::PcZero,
            EndReason::StackEnd,
            EndReason::FrameLimit,
            EndReason::Loop,
            EndReason::NoCaller,
            EndReason::MemoryMissing,
            EndReason::UnwindError,
        ]);
        check(&[Identity::BuildId, Identity::Path, Identity::None]);
        assert_eq!(
            format!("[{:<4}]", Trust::Fp),
            "[fp  ]",
            "padding is honoured"
        );
        check(&[
            ModuleStatus::Ok,
            ModuleStatus::Missing,
            ModuleStatus::Unverified,
            ModuleStatus::Corrupt,
        ]);
        use strum::VariantArray;
        check(RemoteFile::VARIANTS);
        check(LookupResult::VARIANTS);
        check(AnalysisKind::VARIANTS);
        check(AccessKind::VARIANTS);
    }
}
