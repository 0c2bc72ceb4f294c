//! Android tombstones: what debuggerd writes when a native process crashes, in its text
//! form ([`text`], `/data/tombstones/tombstone_NN` and logcat) and as `tombstone.proto`
//! ([`proto`], `tombstone_NN.pb`, Android 12+), read into one [`Tombstone`] and then
//! into the engine's [`Dump`] model.
//!
//! Like an Apple crash report, a tombstone is not a dump: the device already walked every
//! thread (libunwindstack), so each thread of the `Dump` carries the device's frames
//! ([`super::Thread::prewalked`]), which the pipeline symbolizes by build-id instead of
//! walking. The device's own `(function+offset)` names are kept for frames no symbol file
//! describes.
//!
//! ## Addresses
//!
//! A tombstone frame gives `rel_pc`: libunwindstack's `Elf::GetRelPc`, `pc − map start +
//! elf_offset + load_bias`, where `load_bias` is `p_vaddr − p_offset` of the ELF's first
//! executable `PT_LOAD`. That is the pc's address in the ELF file's own virtual addresses
//! (what `llvm-symbolizer --obj=FILE ADDR` and `addr2line -e FILE ADDR` take). The engine's
//! tables are keyed by offset from the file's link base (`svma − link_base`); the modules
//! made here put that offset at `pc − load_base = rel_pc`, which is exact when the link
//! base is 0 — true of every ELF Android's linker loads (position-independent `ET_DYN`
//! objects whose first `PT_LOAD` has `p_vaddr` 0; Android refuses `ET_EXEC` since 5.0).
//! Absolute addresses are the device's where the tombstone gives them (the proto's `pc`;
//! the text's memory map: the start of the file's mapping at offset 0), else made up,
//! one module after another (a `tombstone-addresses` warning says so).
//!
//! A caller's pc is *not* its return address: libunwindstack's `Unwinder::FillInFrame`
//! stores `rel_pc − pc_adjustment` and `pc − pc_adjustment` for every frame but the
//! first (and those after a signal frame), `GetPcAdjustment` being 4 on arm64, 1 on x86
//! and x86_64, 2 or 4 on arm: the address already lies inside the call instruction, where
//! `addr2line` and `ndk-stack` look it up as it is. The pipeline looks callers up at their
//! return address − [`Arch::call_back`], so each caller is given here at the device's pc +
//! `call_back`: the lookup lands on the device's own address, and on arm64, x86 and
//! x86_64 the pc the report shows is the return address again.

pub mod heap;
pub mod logcat;
pub mod memory;
pub mod proto;
pub mod text;

use std::collections::BTreeMap;

use super::{
    Arch, CrashInfo, Dump, DumpError, DumpFormat, GivenFrame, Identity, Mapping, MemoryMap, Module,
    Os, Regions, RegisterSet, SystemInfo, Thread, Warning,
};

/// The largest tombstone read: real ones are tens to hundreds of KiB (a few MiB with
/// every thread's memory dumps and logs in a proto); past this it is not a tombstone.
pub const MAX_TOMBSTONE_BYTES: usize = 32 << 20;
/// Most threads a tombstone may list.
pub const MAX_THREADS: usize = 4096;
/// Most frames one thread may list: libunwindstack stops at 256 (debuggerd's
/// `kMaxFrames`); reports of other unwinders may hold more.
pub const MAX_FRAMES: usize = 1024;
/// Most frames of all threads together.
pub const MAX_TOTAL_FRAMES: usize = 65536;
/// Most memory mappings a tombstone may list.
pub const MAX_MAPPINGS: usize = 65536;
/// Most lines a text tombstone may have.
pub const MAX_LINES: usize = 1 << 20;
/// Most bytes kept of one name, path or message.
pub const MAX_TEXT: usize = 4096;
/// Most causes (`Cause:` lines) kept.
pub const MAX_CAUSES: usize = 64;

/// The annotation holding the tombstone's `Abort message` (what the crash analysis of a
/// `SIGABRT` reports as abort()'s message).
pub const ABORT_MESSAGE_ANNOTATION: &str = "android.abort_message";

/// The annotation naming a GWP-ASan/MTE heap error's kind (`use-after-free`, …; see
/// [`heap`]), which the crash analysis takes for its kind; `.tool`, `.cause`,
/// `.address` and `.size` beside it.
pub const MEMORY_ERROR_ANNOTATION: &str = "android.memory_error";

/// Where the made-up addresses of modules whose mapping the tombstone does not give begin.
const SYNTHETIC_BASE: u64 = 0x7000_0000_0000;
/// The 32-bit architectures' made-up base.
const SYNTHETIC_BASE_32: u64 = 0x4000_0000;
/// Alignment (and least gap) of made-up module bases.
const SYNTHETIC_ALIGN: u64 = 0x10_0000;

/// A bound passed: `count` of `what`, at most `max` (the readers' one spelling of it).
fn too_many(what: &'static str, count: usize, max: usize) -> TombstoneError {
    TombstoneError::TooMany { what, count, max }
}

/// Why some bytes are not a tombstone this reader can use.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TombstoneError {
    #[error("the tombstone is {0} bytes, more than the {MAX_TOMBSTONE_BYTES} one may be")]
    TooLarge(usize),
    #[error("not an Android tombstone: no `*** *** ***` header line")]
    NoHeader,
    #[error("the log holds no tombstone: no `DEBUG` line with debuggerd's `*** *** ***` header")]
    NotInLog,
    #[error("the tombstone.proto does not decode: {0}")]
    Proto(String),
    #[error("the tombstone lists {what} {count}, more than the {max} allowed")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("the tombstone's ABI {0:?} is not one postmortem reads (arm, arm64, x86, x86_64)")]
    Arch(String),
    #[error("the tombstone has no thread with a backtrace")]
    NoThreads,
    #[error("line {line} of the tombstone: {why}")]
    Line { line: usize, why: String },
}

impl From<TombstoneError> for DumpError {
    fn from(e: TombstoneError) -> Self {
        match e {
            TombstoneError::Arch(a) => DumpError::UnsupportedArch(a),
            TombstoneError::NoHeader | TombstoneError::NotInLog => DumpError::NotADump,
            other => DumpError::Malformed(other.to_string()),
        }
    }
}

/// Which of debuggerd's forms a tombstone is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TombstoneFormat {
    Text,
    Proto,
}

/// The signal that ended the process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignalInfo {
    /// Linux's number (Android is Linux).
    pub number: u32,
    /// `SIGSEGV`.
    pub name: Option<String>,
    pub code: Option<i32>,
    /// `SEGV_MAPERR`.
    pub code_name: Option<String>,
    pub fault_address: Option<u64>,
}

/// One frame as the device walked it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// The pc in the ELF file's virtual addresses (see the module documentation).
    pub rel_pc: u64,
    /// The absolute pc, where the tombstone gives it (the proto).
    pub pc: Option<u64>,
    pub sp: Option<u64>,
    /// The mapped file (`/apex/com.android.runtime/lib64/bionic/libc.so`); `None` for
    /// `<unknown>` or an anonymous mapping.
    pub file: Option<String>,
    /// Offset in `file` where the ELF starts (a library stored uncompressed in an APK).
    pub file_map_offset: u64,
    pub function: Option<String>,
    pub function_offset: Option<u64>,
    /// The ELF's `NT_GNU_BUILD_ID`.
    pub build_id: Option<Vec<u8>>,
}

/// One thread of the tombstone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TombThread {
    pub id: u32,
    pub name: Option<String>,
    /// Its registers by the tombstone's names (`x0`, `lr`, `pst`, `rip`).
    pub registers: Vec<(String, u64)>,
    pub frames: Vec<Frame>,
}

/// One mapping of the process (`memory map` section, `memory_mappings`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TombMapping {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    pub offset: u64,
    pub execute: bool,
    pub name: Option<String>,
    pub build_id: Option<Vec<u8>>,
}

/// An Android tombstone, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub format: TombstoneFormat,
    pub arch: Arch,
    pub build_fingerprint: Option<String>,
    pub revision: Option<String>,
    pub timestamp: Option<String>,
    pub pid: Option<u32>,
    /// The crashed thread's id.
    pub tid: Option<u32>,
    pub uid: Option<u32>,
    pub selinux_label: Option<String>,
    /// The command line, its words joined by spaces.
    pub command_line: Option<String>,
    pub signal: Option<SignalInfo>,
    pub abort_message: Option<String>,
    /// debuggerd's guesses at the cause (`null pointer dereference`).
    pub causes: Vec<String>,
    /// The crashed thread first, then the others in the tombstone's order.
    pub threads: Vec<TombThread>,
    pub mappings: Vec<TombMapping>,
    /// Whether the text was taken from logcat ([`logcat`]).
    pub from_logcat: bool,
    /// The first cause that is a heap memory error (GWP-ASan, MTE), with its stacks.
    pub memory_error: Option<heap::MemoryError>,
    /// The memory dumped near the registers, every thread's.
    pub memory: memory::Dumps,
}

impl Tombstone {
    /// An empty tombstone of `format`, for the readers to fill in.
    pub(crate) fn new(format: TombstoneFormat) -> Self {
        Tombstone {
            format,
            arch: Arch::Aarch64,
            build_fingerprint: None,
            revision: None,
            timestamp: None,
            pid: None,
            tid: None,
            uid: None,
            selinux_label: None,
            command_line: None,
            signal: None,
            abort_message: None,
            causes: Vec::new(),
            threads: Vec::new(),
            mappings: Vec::new(),
            from_logcat: false,
            memory_error: None,
            memory: memory::Dumps::default(),
        }
    }
}

/// Whether `bytes` look like a tombstone, and which form: the text's first non-blank line
/// is the `*** *** ***` header, or the bytes are a logcat ([`logcat::sniff`]: the text
/// tombstone is in it, or it is no dump); a proto is told by decoding it
/// ([`proto::plausible`] for its first byte, [`parse`] for the rest).
pub fn sniff(bytes: &[u8]) -> Option<TombstoneFormat> {
    if text::has_header(bytes) || logcat::sniff(bytes) {
        Some(TombstoneFormat::Text)
    } else if proto::plausible(bytes) {
        Some(TombstoneFormat::Proto)
    } else {
        None
    }
}

/// Reads a tombstone of either form.
pub fn parse(bytes: &[u8]) -> Result<Tombstone, TombstoneError> {
    if bytes.len() > MAX_TOMBSTONE_BYTES {
        return Err(TombstoneError::TooLarge(bytes.len()));
    }
    if text::has_header(bytes) {
        text::parse(bytes)
    } else if logcat::sniff(bytes) {
        let log = String::from_utf8_lossy(bytes);
        let log = logcat::without_colors(&log);
        let mut t = text::parse_lines(logcat::tombstone_lines(&log)?)?;
        t.from_logcat = true;
        Ok(t)
    } else {
        proto::parse(bytes)
    }
}

/// Reads a tombstone into the [`Dump`] model (see the module documentation).
pub fn read(bytes: &[u8]) -> Result<Dump<'static>, DumpError> {
    Ok(parse(bytes)?.into_dump())
}

/// The architecture of a tombstone's `ABI:` (`arm64`) or the proto's `Architecture`.
pub(crate) fn arch_of(abi: &str) -> Result<Arch, TombstoneError> {
    match abi.trim() {
        "arm64" | "arm64-v8a" | "aarch64" => Ok(Arch::Aarch64),
        "arm" | "armeabi-v7a" | "armeabi" => Ok(Arch::Arm),
        "x86_64" => Ok(Arch::X86_64),
        "x86" => Ok(Arch::X86),
        other => Err(TombstoneError::Arch(cut(other))),
    }
}

/// `s` cut to [`MAX_TEXT`] bytes at a character boundary.
pub(crate) fn cut(s: &str) -> String {
    let mut end = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// A build-id as tombstones write it (lower-case hex); `None` for an empty or odd one.
pub(crate) fn build_id_of(s: &str) -> Option<Vec<u8>> {
    super::unhex(s.trim()).filter(|b| b.iter().any(|&x| x != 0))
}

/// The file name of a mapped path: the leaf, and for a library inside an APK
/// (`base.apk!libfoo.so`) the library's name.
fn file_name(path: &str) -> &str {
    let leaf = path.rsplit('/').next().unwrap_or(path);
    leaf.rsplit('!').next().unwrap_or(leaf)
}

/// A module being made: the frames' file, its build-id and where its ELF starts.
#[derive(Debug, Clone)]
struct Pending {
    path: String,
    file_map_offset: u64,
    build_id: Option<Vec<u8>>,
    /// The absolute address of the ELF's virtual address 0, where known.
    base: Option<u64>,
    /// One past the highest rel_pc of its frames (and its caller frames' pc as given).
    span: u64,
}

impl Tombstone {
    /// The [`Dump`] this tombstone describes: each file with frames becomes a module
    /// identified by its build-id, each thread keeps the device's frames, the signal and
    /// fault address become the crash (see the module documentation for addresses).
    pub fn into_dump(self) -> Dump<'static> {
        let mut warnings = Vec::new();
        let (modules, bases) = self.modules(&mut warnings);
        let mut threads: Vec<Thread> = self
            .threads
            .iter()
            .map(|t| self.thread(t, &bases))
            .collect();
        threads.extend(self.evidence_stacks(&bases));
        let crash = self.signal.as_ref().map(|s| CrashInfo {
            tid: self
                .tid
                .or_else(|| self.threads.first().map(|t| t.id))
                .unwrap_or(0),
            signal: Some(s.number),
            code: s.code,
            address: s.fault_address,
            exception: None,
            assertion: None,
        });
        Dump {
            format: match self.format {
                TombstoneFormat::Text => DumpFormat::AndroidTombstone,
                TombstoneFormat::Proto => DumpFormat::AndroidTombstoneProto,
            },
            arch: self.arch,
            os: Os::Android,
            writer: Some("android-debuggerd".into()),
            pid: self.pid,
            executable: self
                .command_line
                .as_deref()
                .and_then(|c| c.split_whitespace().next())
                .map(str::to_string),
            command_line: self.command_line.clone(),
            created: self.timestamp.clone(),
            threads,
            modules,
            unloaded_modules: Vec::new(),
            memory: MemoryMap::owned(self.memory.ranges.clone()),
            regions: Regions::default(),
            crash,
            annotations: self.annotations(),
            warnings,
            pac_mask: None,
            system: SystemInfo {
                os_version: self.build_fingerprint.clone(),
                ..SystemInfo::default()
            },
        }
    }

    /// One thread of the dump: its registers, and its frames at absolute addresses.
    fn thread(&self, t: &TombThread, bases: &BTreeMap<(String, u64), u64>) -> Thread {
        let back = self.arch.call_back();
        let given: Vec<GivenFrame> = t
            .frames
            .iter()
            .enumerate()
            .map(|(k, f)| GivenFrame {
                // see the module documentation: callers come back to the pipeline's rule
                pc: absolute_pc(f, bases).saturating_add(if k == 0 { 0 } else { back }),
                function: f.function.clone(),
                function_offset: f.function_offset,
            })
            .collect();
        Thread {
            tid: t.id,
            name: t.name.clone(),
            registers: registers_of(self.arch, &t.registers, given.first()),
            prewalked: Some(given),
            evidence: false,
        }
    }

    /// A memory error's deallocation and allocation backtraces, as evidence stacks.
    fn evidence_stacks(&self, bases: &BTreeMap<(String, u64), u64>) -> Vec<Thread> {
        let stacks = self.memory_error.iter().flat_map(|e| &e.stacks);
        stacks
            .map(|s| {
                let as_thread = TombThread {
                    id: s.tid,
                    name: Some(s.label()),
                    registers: Vec::new(),
                    frames: s.frames.clone(),
                };
                Thread {
                    evidence: true,
                    ..self.thread(&as_thread, bases)
                }
            })
            .collect()
    }

    /// The files the frames run in as modules sorted by base, and each file's base by
    /// (path, ELF offset in the file).
    fn modules(&self, warnings: &mut Vec<Warning>) -> (Vec<Module>, BTreeMap<(String, u64), u64>) {
        let back = self.arch.call_back();
        let mut pending: BTreeMap<(String, u64), Pending> = BTreeMap::new();
        let heap_frames = self
            .memory_error
            .iter()
            .flat_map(|e| &e.stacks)
            .flat_map(|s| &s.frames);
        for f in self
            .threads
            .iter()
            .flat_map(|t| &t.frames)
            .chain(heap_frames)
        {
            let Some(path) = f.file.as_ref().filter(|p| is_file_path(p)) else {
                continue;
            };
            let key = (path.clone(), f.file_map_offset);
            let p = pending.entry(key).or_insert_with(|| Pending {
                path: path.clone(),
                file_map_offset: f.file_map_offset,
                build_id: None,
                base: None,
                span: 0,
            });
            if p.build_id.is_none() {
                p.build_id = f.build_id.clone();
            }
            if p.base.is_none() {
                p.base = f.pc.and_then(|pc| pc.checked_sub(f.rel_pc));
            }
            // a caller's pc is given back at rel_pc + call_back: still inside its module
            p.span = p.span.max(f.rel_pc.saturating_add(1 + back));
        }
        for p in pending.values_mut() {
            self.place_by_mappings(p);
        }
        let synthetic = self.place_unmapped(&mut pending);
        if synthetic > 0 {
            warnings.push(Warning::new(
                "tombstone-addresses",
                format!(
                    "the tombstone gives no absolute address for {synthetic} module(s) (no \
                     memory map lists them): their frames' addresses are made up from the \
                     device's file offsets (rel_pc), which symbolication uses as they are"
                ),
            ));
        }
        let main = self
            .command_line
            .as_deref()
            .and_then(|c| c.split_whitespace().next());
        let mut bases = BTreeMap::new();
        let mut modules: Vec<Module> = Vec::with_capacity(pending.len());
        for (key, p) in pending {
            let base = p.base.unwrap_or(0);
            bases.insert(key, base);
            modules.push(self.module(&p, base, main));
        }
        modules.sort_by_key(|m| m.base);
        (modules, bases)
    }

    /// Fills in a module's base, build-id and extent from the memory map: the file's
    /// mapping at the ELF's offset starts at the ELF's address 0.
    fn place_by_mappings(&self, p: &mut Pending) {
        let of_file = self
            .mappings
            .iter()
            .filter(|m| m.name.as_deref() == Some(p.path.as_str()));
        for m in of_file {
            if p.base.is_none() && m.offset == p.file_map_offset {
                p.base = Some(m.start);
            }
            if p.build_id.is_none() {
                p.build_id = m.build_id.clone();
            }
        }
        if let Some(base) = p.base {
            let end = self
                .mappings
                .iter()
                .filter(|m| m.name.as_deref() == Some(p.path.as_str()) && m.start >= base)
                .map(|m| m.end.saturating_sub(base))
                .max()
                .unwrap_or(0);
            p.span = p.span.max(end);
        }
    }

    /// Gives made-up bases to the modules that have none, above every known one; returns
    /// how many.
    fn place_unmapped(&self, pending: &mut BTreeMap<(String, u64), Pending>) -> usize {
        let floor = if self.arch.info().pointer_size == 4 {
            SYNTHETIC_BASE_32
        } else {
            SYNTHETIC_BASE
        };
        let mut next = pending
            .values()
            .filter_map(|p| p.base.map(|b| b.saturating_add(p.span)))
            .chain(self.mappings.iter().map(|m| m.end))
            .max()
            .unwrap_or(0)
            .max(floor);
        let mut count = 0;
        for p in pending.values_mut().filter(|p| p.base.is_none()) {
            next = align_up(next);
            p.base = Some(next);
            next = next.saturating_add(p.span.max(1));
            count += 1;
        }
        count
    }

    fn module(&self, p: &Pending, base: u64, main: Option<&str>) -> Module {
        let end = base.saturating_add(p.span.max(1));
        Module {
            name: file_name(&p.path).to_string(),
            path: Some(p.path.clone()),
            base,
            end,
            load_base: base,
            build_id: p.build_id.clone(),
            debug_id: None,
            debug_file: None,
            code_id: p.build_id.as_deref().map(super::hex),
            version: None,
            identity: if p.build_id.is_some() {
                Identity::BuildId
            } else {
                Identity::Path
            },
            main: main == Some(p.path.as_str()),
            mappings: vec![Mapping {
                start: base,
                end,
                file_offset: p.file_map_offset,
                executable: None,
            }],
        }
    }

    /// The tombstone's own facts beside the crash: fingerprint, abort message, causes.
    fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                out.insert(k.to_string(), v.clone());
            }
        };
        put("android.build_fingerprint", &self.build_fingerprint);
        put("android.revision", &self.revision);
        put("android.selinux_label", &self.selinux_label);
        put(ABORT_MESSAGE_ANNOTATION, &self.abort_message);
        put("android.uid", &self.uid.map(|u| u.to_string()));
        put(
            "android.source",
            &self.from_logcat.then(|| "logcat".to_string()),
        );
        if let Some(s) = &self.signal {
            put("android.signal", &s.name);
            put("android.signal_code", &s.code_name);
        }
        for (i, c) in self.causes.iter().enumerate() {
            out.insert(format!("android.cause.{i}"), c.clone());
        }
        if let Some(e) = &self.memory_error {
            if let Some(kind) = e.kind.as_str() {
                out.insert(MEMORY_ERROR_ANNOTATION.to_string(), kind.to_string());
            }
            out.insert(format!("{MEMORY_ERROR_ANNOTATION}.tool"), e.tool.clone());
            out.insert(format!("{MEMORY_ERROR_ANNOTATION}.cause"), e.cause.clone());
            if let Some(a) = e.address {
                out.insert(
                    format!("{MEMORY_ERROR_ANNOTATION}.address"),
                    format!("{a:#x}"),
                );
            }
            if let Some(n) = e.size {
                out.insert(format!("{MEMORY_ERROR_ANNOTATION}.size"), n.to_string());
            }
        }
        out
    }
}

/// Whether a frame's file names a file (not `<unknown>`, `[anon:…]` or empty).
fn is_file_path(p: &str) -> bool {
    !p.is_empty() && !p.starts_with('<') && !p.starts_with('[')
}

fn align_up(x: u64) -> u64 {
    x.checked_next_multiple_of(SYNTHETIC_ALIGN).unwrap_or(x)
}

/// A frame's absolute pc: its file's base plus `rel_pc`, the tombstone's own pc for a
/// frame in no file.
fn absolute_pc(f: &Frame, bases: &BTreeMap<(String, u64), u64>) -> u64 {
    let base = f
        .file
        .as_ref()
        .and_then(|p| bases.get(&(p.clone(), f.file_map_offset)));
    match (base, f.pc) {
        (Some(b), _) => b.saturating_add(f.rel_pc),
        (None, Some(pc)) => pc,
        (None, None) => f.rel_pc,
    }
}

/// A thread's registers by the tombstone's names, its pc the first frame's where the
/// tombstone gives none (a made-up address stays consistent with the frames).
fn registers_of(arch: Arch, named: &[(String, u64)], first: Option<&GivenFrame>) -> RegisterSet {
    let mut regs = RegisterSet::new(arch);
    for (name, value) in named {
        regs.set_named(name, *value);
    }
    // The frames are at the addresses the dump uses (made up or not): the pc follows them.
    if let Some(f) = first {
        regs.set(regs.pc_reg(), f.pc);
    }
    regs
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    const TEXT: &str = "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***
Build fingerprint: 'google/raven/raven:14/UQ1A/1:user/release-keys'
ABI: 'arm64'
pid: 10, tid: 11, name: worker  >>> /system/bin/app --flag <<<
signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000008
Cause: null pointer dereference
    x0  0000000000000001  x1  0000000000000002
    lr  0000007f00001238  sp  0000007ff0000000  pc  0000007f00001100  pst 0000000060000000

backtrace:
      #00 pc 0000000000001100  /system/lib64/liba.so (f+16) (BuildId: 0a0b)
      #01 pc 0000000000001234  /system/lib64/liba.so (g+4) (BuildId: 0a0b)
      #02 pc 0000000000000200  /system/lib64/libb.so (h) (BuildId: 0c0d)

--- --- --- --- --- --- --- --- --- --- --- --- --- --- --- ---
pid: 10, tid: 12, name: other  >>> /system/bin/app --flag <<<
    x0  0000000000000003
backtrace:
      #00 pc 0000000000000300  /system/lib64/libb.so (i+8) (BuildId: 0c0d)

memory map (2 entries):
    0000007f'00000000-0000007f'00001fff r-x         0      2000  /system/lib64/liba.so (BuildId: 0a0b)
--->Fault address falls at 00000000'00000008 before any mapped regions
";

    #[test]
    fn a_text_tombstone_becomes_a_dump_at_the_devices_addresses() {
        let t = parse(TEXT.as_bytes()).unwrap();
        assert_eq!((t.pid, t.tid), (Some(10), Some(11)));
        assert_eq!(t.command_line.as_deref(), Some("/system/bin/app --flag"));
        assert_eq!(t.threads.len(), 2);
        assert_eq!(t.causes, vec!["null pointer dereference".to_string()]);
        let d = t.into_dump();
        assert_eq!(d.format, DumpFormat::AndroidTombstone);
        assert_eq!(d.arch, Arch::Aarch64);
        // liba from the memory map; libb made up, above it, and said so
        let a = d.modules.iter().find(|m| m.name == "liba.so").unwrap();
        assert_eq!((a.base, a.load_base), (0x7f_0000_0000, 0x7f_0000_0000));
        assert_eq!(a.build_id, Some(vec![0x0a, 0x0b]));
        let b = d.modules.iter().find(|m| m.name == "libb.so").unwrap();
        assert!(b.base >= SYNTHETIC_BASE && b.base % SYNTHETIC_ALIGN == 0);
        assert!(d.warnings.iter().any(|w| w.code == "tombstone-addresses"));
        // frame 0 at its pc, callers at the device's pc + 4 (aarch64's call-back)
        let given = d.threads[0].prewalked.as_ref().unwrap();
        assert_eq!(given[0].pc, 0x7f_0000_1100);
        assert_eq!(given[1].pc, 0x7f_0000_1234 + 4);
        assert_eq!(given[2].pc, b.base + 0x200 + 4);
        assert_eq!(given[1].function.as_deref(), Some("g"));
        assert_eq!(d.threads[0].registers.pc(), Some(0x7f_0000_1100));
        let crash = d.crash.unwrap();
        assert_eq!(
            (crash.tid, crash.signal, crash.code),
            (11, Some(11), Some(1))
        );
        assert_eq!(crash.address, Some(8));
        assert_eq!(d.threads[1].tid, 12);
        assert_eq!(
            d.annotations.get("android.cause.0").map(String::as_str),
            Some("null pointer dereference")
        );
    }

    #[test]
    fn read_dump_tells_tombstones_apart() {
        assert_eq!(
            crate::dump::read_dump(TEXT.as_bytes()).unwrap().format,
            DumpFormat::AndroidTombstone
        );
        // no header, no fingerprint: not a tombstone, not a dump
        assert!(matches!(
            crate::dump::read_dump(b"\x08\x01\x10\x02"),
            Err(DumpError::NotADump)
        ));
        // a proto that starts as debuggerd writes one and is cut short: malformed
        let mut pb = vec![0x08, 0x01, 0x12, 0x0b];
        pb.extend_from_slice(b"a/b/c:1/2/3");
        pb.extend_from_slice(&[0x82, 0x01, 0x40]);
        assert!(matches!(
            crate::dump::read_dump(&pb),
            Err(DumpError::Malformed(_))
        ));
    }

    #[test]
    fn abis_name_the_architectures() {
        assert_eq!(arch_of("arm64"), Ok(Arch::Aarch64));
        assert_eq!(arch_of("arm"), Ok(Arch::Arm));
        assert_eq!(arch_of("x86"), Ok(Arch::X86));
        assert_eq!(arch_of("x86_64"), Ok(Arch::X86_64));
        assert!(matches!(arch_of("riscv64"), Err(TombstoneError::Arch(_))));
    }

    #[test]
    fn files_in_apks_are_named_by_their_library() {
        assert_eq!(file_name("/system/lib64/libc.so"), "libc.so");
        assert_eq!(
            file_name("/data/app/~~x==/com.a-y==/base.apk!libfoo.so"),
            "libfoo.so"
        );
    }
}
