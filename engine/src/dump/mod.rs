//! The `Dump` model: one description of a crashed process, whatever file it came from.
//!
//! Readers (`elf_core`, `minidump`) parse untrusted bytes into this model; the walker
//! and symbolizer only ever see the model. Memory is borrowed from the dump bytes (never
//! copied) and read through [`MemoryMap`], which answers `None` for bytes the dump lacks, so a
//! truncated dump is simply a dump with less memory.

pub mod android;
pub mod apple;
pub mod compressed;
pub mod elf_core;
mod error;
mod linux_maps;
mod memory;
pub mod microdump;
pub mod minidump;
mod reader_log;
mod regions;
mod registers;
mod wow64;

use std::collections::BTreeMap;

pub use crate::arch::x86_64::REGISTER_NAMES as X86_64_REGISTER_NAMES;
pub use crate::arch::Arch;
pub(crate) use crate::ids::{hex, unhex};
pub use crate::warning::Warning;
pub use error::DumpError;
pub use memory::MemoryMap;
pub use regions::Regions;
pub use registers::{FrameRegisters, RegisterSet, REGISTER_SLOTS};

/// Which file format a dump came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum DumpFormat {
    ElfCore,
    Minidump,
    /// Apple's `.ips` crash report (JSON), walked on the device.
    AppleIps,
    /// Apple's legacy `.crash` text report, walked on the device.
    AppleCrash,
    /// Android's text tombstone (debuggerd), walked on the device.
    AndroidTombstone,
    /// Android's `tombstone.proto` (debuggerd, Android 12+), walked on the device.
    AndroidTombstoneProto,
    /// Breakpad's microdump (text in a logcat): registers and stack memory, walked.
    Microdump,
}

impl DumpFormat {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The operating system, as far as the dump proves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Os {
    Linux,
    Android,
    Macos,
    Ios,
    Windows,
    Unknown,
}

impl Os {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One thread of the crashed process.
#[derive(Debug, Clone)]
pub struct Thread {
    pub tid: u32,
    pub name: Option<String>,
    /// The full register context as recorded (for the crashed thread: at the fault).
    pub registers: RegisterSet,
    /// The frames the dump's writer already walked (an Apple crash report's, on the
    /// device), innermost first: symbolized as they are, never walked again. `None` for
    /// a dump whose threads are walked from their registers and memory.
    pub prewalked: Option<Vec<GivenFrame>>,
    /// Not a thread of the process: a stack the crash report gives as evidence (an
    /// Android GWP-ASan or MTE error's `deallocated by`/`allocated by` backtraces), named
    /// by `name`. Symbolized as the threads are, then shown among the crash analysis's
    /// `stacks`, never among the report's threads.
    pub evidence: bool,
}

/// A frame a crash report lists (see [`Thread::prewalked`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GivenFrame {
    /// Frame 0: the pc; the others: a return address.
    pub pc: u64,
    /// The function the report names there, where its writer knew it.
    pub function: Option<String>,
    /// `pc`'s offset from that function's start.
    pub function_offset: Option<u64>,
}

/// How a module's identity was established (the report's `identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Identity {
    /// The build-id (or debug-id) was read from the dump itself.
    BuildId,
    /// The dump holds no build-id for it; files can only be matched by path.
    Path,
    /// Nothing identifies it.
    #[default]
    None,
}

crate::names::serde_by_name!(Identity);

impl Identity {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One mapping of a module's file into the address space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub file_offset: u64,
    /// Whether the mapping is executable, when the dump says (`None`: unknown).
    pub executable: Option<bool>,
}

/// A mapped binary (executable, shared object, vdso).
#[derive(Debug, Clone, Default)]
pub struct Module {
    /// File name (`libc.so.6`).
    pub name: String,
    /// Path in the crashed process.
    pub path: Option<String>,
    /// Lowest mapped address.
    pub base: u64,
    /// One past the highest mapped address.
    pub end: u64,
    /// The run-time address of the binary's link-time base (lowest `PT_LOAD` vaddr rounded
    /// down to the page): `runtime = svma - link_base + load_base`. Usually equal to `base`.
    pub load_base: u64,
    /// GNU build-id bytes.
    pub build_id: Option<Vec<u8>>,
    /// Breakpad-style debug identifier, where the dump records one (minidumps).
    pub debug_id: Option<String>,
    /// The debug file's name where the dump records one that differs from the module's
    /// (a minidump's PDB name for a Windows module); otherwise the module's own name is it.
    pub debug_file: Option<String>,
    /// Code identifier as minidumps record it.
    pub code_id: Option<String>,
    /// The version the dump records for it (a minidump's file version: Windows
    /// resources, or for an ELF module the number its soname ends in).
    pub version: Option<String>,
    pub identity: Identity,
    /// The main executable.
    pub main: bool,
    pub mappings: Vec<Mapping>,
}

impl Module {
    /// Whether this is the kernel's vdso, by the names cores (`linux-vdso.so.1`) and
    /// minidumps (`linux-gate.so`) give it: no file on disk describes it, and in a core
    /// its whole image is in the dump.
    pub fn is_vdso(&self) -> bool {
        self.name == "[vdso]"
            || self.name.starts_with("linux-vdso.so")
            || self.name.starts_with("linux-gate.so")
    }
    /// For a Windows module (no build-id, a code id of `TimeDateStamp` and `SizeOfImage`,
    /// 9 to 16 hex digits): the code id upper-case, which names its PE file with the
    /// module's name.
    pub fn pe_code_id(&self) -> Option<String> {
        if self.build_id.is_some() {
            return None;
        }
        let id = self.code_id.as_deref()?;
        ((9..=16).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| crate::ids::normalize_code_id(id))
    }
    /// Build-id as lower-case hex, as `readelf -n` prints it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }
    /// The Breakpad debug-id, upper-case: the dump's, else for an ELF module the one
    /// Breakpad derives from the build-id (what a `.sym` file's `MODULE` line names).
    pub fn breakpad_debug_id(&self) -> Option<String> {
        self.debug_id
            .as_ref()
            .map(|d| d.to_ascii_uppercase())
            .or_else(|| {
                self.build_id
                    .as_deref()
                    .map(crate::ids::breakpad_debug_id_from_build_id)
            })
    }
    /// Where a Breakpad symbol store keeps this module's `.sym` file, relative to the
    /// store: `<debug_file>/<DEBUG_ID>/<debug_file>.sym` (a `.pdb` name's extension
    /// replaced), the layout `dump_syms` output is filed in and minidump-stackwalk reads.
    /// None without a debug id, or for a name that could leave the store (`..`, empty).
    pub fn breakpad_sym_path(&self) -> Option<String> {
        let file = self.debug_file.as_deref().unwrap_or(&self.name);
        let file = file.rsplit(['/', '\\']).next().unwrap_or(file);
        if file.is_empty() || file == "." || file == ".." || file.contains('\0') {
            return None;
        }
        let id = self.breakpad_debug_id()?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let stem = file
            .len()
            .checked_sub(4)
            .and_then(|at| Some((file.get(..at)?, file.get(at..)?)))
            .filter(|(_, ext)| ext.eq_ignore_ascii_case(".pdb"))
            .map_or(file, |(stem, _)| stem);
        Some(format!("{file}/{id}/{stem}.sym"))
    }
    /// Whether `addr` falls inside one of the module's executable mappings (or inside the
    /// module at all where the dump does not say which mappings are executable).
    pub fn contains_code(&self, addr: u64) -> bool {
        if addr < self.base || addr >= self.end {
            return false;
        }
        if self.mappings.is_empty() {
            return true;
        }
        self.mappings
            .iter()
            .any(|m| addr >= m.start && addr < m.end && m.executable != Some(false))
    }
}

/// A module the dump says was loaded once and unloaded since.
#[derive(Debug, Clone)]
pub struct UnloadedModule {
    pub name: String,
    /// The path the dump records, where it is more than the name
    /// (`C:\windows\system32\version.dll`).
    pub path: Option<String>,
    pub base: u64,
    pub end: u64,
    pub build_id: Option<Vec<u8>>,
    pub debug_id: Option<String>,
    /// A Windows module's code id: its `TimeDateStamp` and `SizeOfImage` in hex.
    pub code_id: Option<String>,
}

/// Why the process died.
#[derive(Debug, Clone, Default)]
pub struct CrashInfo {
    /// Thread id of the crashed thread.
    pub tid: u32,
    pub signal: Option<u32>,
    pub code: Option<i32>,
    /// Fault address (`si_addr`).
    pub address: Option<u64>,
    /// Windows/macOS exception: (code, name, flags).
    pub exception: Option<ExceptionInfo>,
    pub assertion: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ExceptionInfo {
    pub code: u64,
    pub name: String,
    pub flags: u64,
    /// The exception record's parameters (`ExceptionInformation`, up to
    /// `NumberParameters` of them): an access violation's way (0 read, 1 write, 8
    /// execute) and address, a fast fail's code, an MSVC C++ exception's object and type.
    pub parameters: Vec<u64>,
}

/// What a dump says of the machine and the process beyond threads, modules and memory
/// (a minidump's system-info, `/proc/cpuinfo`, `/proc/PID/maps`, `/etc/lsb-release` and
/// misc-info streams). Every field is `None` where the dump does not say: all of them
/// for a core.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SystemInfo {
    /// The OS version, as minidump-stackwalk formats it (`6.1.0 #1 SMP Debian …`).
    #[serde(default)]
    pub os_version: Option<String>,
    /// The CPU's vendor and model (`GenuineIntel family 6 model 85 stepping 7`).
    #[serde(default)]
    pub cpu_info: Option<String>,
    #[serde(default)]
    pub cpu_count: Option<u32>,
    /// `/proc/cpuinfo`'s microcode revision, hex.
    #[serde(default)]
    pub cpu_microcode_version: Option<String>,
    /// `/etc/lsb-release` (or `os-release`) of the machine.
    #[serde(default)]
    pub distribution: Option<Distribution>,
    /// How many mappings `/proc/PID/maps` listed.
    #[serde(default)]
    pub memory_map_count: Option<u32>,
    /// Seconds between the process's start and the dump.
    #[serde(default)]
    pub uptime_seconds: Option<u64>,
    /// The process's resource limits (`/proc/PID/limits`), in its order.
    #[serde(default)]
    pub limits: Option<Vec<Limit>>,
    /// The process's open handles (file descriptors on Linux).
    #[serde(default)]
    pub handles: Option<Vec<Handle>>,
    /// Errors the dump's writer met and recorded (a JSON document, Crashpad's and
    /// minidump-writer's "soft errors" stream).
    #[serde(default)]
    pub writer_errors: Option<String>,
}

/// One resource limit: `soft` and `hard` are a number or `unlimited`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limit {
    pub name: String,
    pub soft: String,
    pub hard: String,
    pub unit: String,
}

/// One open handle: its number, and where the dump says, its type and what it names (on
/// Linux, the file a descriptor refers to).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Handle {
    pub handle: Option<u64>,
    pub type_name: Option<String>,
    pub object_name: Option<String>,
}

/// A Linux distribution as `/etc/lsb-release` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    pub id: String,
    pub release: String,
    pub codename: String,
    pub description: String,
}

/// A crashed process, as read from a dump.
#[derive(Debug, Clone)]
pub struct Dump<'d> {
    pub format: DumpFormat,
    pub arch: Arch,
    pub os: Os,
    /// What wrote the dump when it tells (`linux-kernel`, `gcore`, `qemu-user`, …).
    pub writer: Option<String>,
    pub pid: Option<u32>,
    pub executable: Option<String>,
    pub command_line: Option<String>,
    /// RFC 3339 time recorded in the dump itself.
    pub created: Option<String>,
    /// In dump order.
    pub threads: Vec<Thread>,
    /// Sorted by `base`.
    pub modules: Vec<Module>,
    pub unloaded_modules: Vec<UnloadedModule>,
    pub memory: MemoryMap<'d>,
    /// What the process had mapped, whether or not `memory` holds its bytes (empty where
    /// the dump does not list it).
    pub regions: Regions,
    pub crash: Option<CrashInfo>,
    pub annotations: BTreeMap<String, String>,
    pub warnings: Vec<Warning>,
    /// aarch64 pointer-authentication mask (NT_ARM_PAC_MASK), when recorded.
    pub pac_mask: Option<u64>,
    pub system: SystemInfo,
}

impl Dump<'_> {
    /// The module containing `addr`, by index.
    pub fn module_index_for(&self, addr: u64) -> Option<usize> {
        module_containing(&self.modules, addr)
    }

    /// Keeps at most `max` (at least 1) of the dump's modules, so that a dump listing a
    /// hundred thousand costs no more lookups, walking and report than `max`: the modules
    /// the threads are executing in first, then the main executable, then the others by
    /// address. A `modules-cut` warning says how many were left out; a frame in one of
    /// them has no module.
    pub fn cut_modules(&mut self, max: usize) {
        let max = max.max(1);
        let total = self.modules.len();
        if total <= max {
            return;
        }
        let mut keep = vec![false; total];
        let mut kept = 0usize;
        let pcs = self.threads.iter().filter_map(|t| t.registers.pc());
        let main = self.modules.iter().position(|m| m.main);
        let first = pcs.filter_map(|pc| module_containing(&self.modules, pc));
        for i in first.chain(main).chain(0..total) {
            if kept >= max {
                break;
            }
            if let Some(k) = keep.get_mut(i).filter(|k| !**k) {
                *k = true;
                kept += 1;
            }
        }
        let mut flags = keep.into_iter();
        self.modules.retain(|_| flags.next().unwrap_or(false));
        self.warnings.push(Warning::new(
            "modules-cut",
            format!(
                "the dump lists {total} modules; only {max} were used (those the threads run \
                 in, the main executable, then by address): frames in the other {} have no \
                 module",
                total - max
            ),
        ));
    }
}

/// The last of `modules` (sorted by base, as every dump reader leaves them) that starts
/// at or below `addr`, by index — whether or not it reaches `addr`. The one search by
/// address the engine has: [`module_containing`] and the code readers build on it.
pub fn module_starting_at_or_below(modules: &[Module], addr: u64) -> Option<usize> {
    modules.partition_point(|m| m.base <= addr).checked_sub(1)
}

/// The module of `modules` (sorted by base) whose range holds `addr`, by index.
pub fn module_containing(modules: &[Module], addr: u64) -> Option<usize> {
    let i = module_starting_at_or_below(modules, addr)?;
    (addr < modules.get(i)?.end).then_some(i)
}

crate::names::serde_by_name!(Arch);
crate::names::serde_by_name!(DumpFormat);
crate::names::serde_by_name!(Os);

/// Each is shown by its report name.
macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    )*};
}
display_by_name!(Arch, DumpFormat, Os);

/// Reads a dump of any supported format, told apart by its magic bytes (an Apple crash
/// report by its first line: [`apple::sniff`]; a Breakpad microdump by its begin marker:
/// [`microdump::sniff`]; an Android tombstone by its header line, or for a
/// `tombstone.proto` by decoding it: [`android::sniff`]).
pub fn read_dump(bytes: &[u8]) -> Result<Dump<'_>, DumpError> {
    if bytes.starts_with(b"\x7fELF") {
        elf_core::read(bytes)
    } else if bytes.starts_with(b"MDMP") {
        minidump::read(bytes)
    } else if apple::sniff(bytes).is_some() {
        apple::read(bytes)
    } else if !android::text::has_header(bytes) && microdump::sniff(bytes) {
        // before a logcat's tombstone: a log with a microdump is read for it
        microdump::read(bytes)
    } else if android::sniff(bytes) == Some(android::TombstoneFormat::Text)
        || android::proto::fingerprinted(bytes)
    {
        android::read(bytes)
    } else if android::sniff(bytes) == Some(android::TombstoneFormat::Proto) {
        // A proto has no magic: bytes that neither start as a tombstone does (its build
        // fingerprint) nor decode as one are no dump at all.
        android::read(bytes).map_err(|_| DumpError::NotADump)
    } else {
        Err(DumpError::NotADump)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(name: &str, debug_file: Option<&str>, debug_id: Option<&str>) -> Module {
        Module {
            name: name.into(),
            debug_id: debug_id.map(Into::into),
            debug_file: debug_file.map(Into::into),
            ..Module::default()
        }
    }

    #[test]
    fn breakpad_sym_paths_follow_the_store_layout() {
        let id = "0123456789abcdef0123456789abcdef1";
        let up = "0123456789ABCDEF0123456789ABCDEF1";
        assert_eq!(
            module("libc.so.6", None, Some(id)).breakpad_sym_path(),
            Some(format!("libc.so.6/{up}/libc.so.6.sym"))
        );
        // a PDB's extension is replaced, in any case; the leaf of a Windows path is used
        assert_eq!(
            module("app.exe", Some("C:\\build\\app.PDB"), Some(id)).breakpad_sym_path(),
            Some(format!("app.PDB/{up}/app.sym"))
        );
        // an ELF module with only a build-id: the id Breakpad derives from it
        let mut elf = module("a.so", None, None);
        elf.build_id = Some((0u8..20).collect());
        assert_eq!(
            elf.breakpad_sym_path(),
            Some("a.so/030201000504070608090A0B0C0D0E0F0/a.so.sym".into())
        );
        // nothing that could leave the store, and nothing without an id
        assert_eq!(module("..", None, Some(id)).breakpad_sym_path(), None);
        assert_eq!(module("x/", None, Some(id)).breakpad_sym_path(), None);
        assert_eq!(module("a.so", None, Some("../x")).breakpad_sym_path(), None);
        assert_eq!(module("a.so", None, None).breakpad_sym_path(), None);
    }
}
