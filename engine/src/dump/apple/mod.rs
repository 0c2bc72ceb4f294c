//! Apple's own crash reports: the `.ips` JSON of macOS 12+ / iOS 15+ ([`ips`]) and the
//! legacy `.crash` text ([`crash_text`]), read into one [`AppleReport`] and then into the
//! engine's [`Dump`] model.
//!
//! A report is not a dump: it holds no memory, and its threads were walked on the device.
//! So each thread of the `Dump` carries the device's frames ([`super::Thread::prewalked`]),
//! which the pipeline symbolizes instead of walking; its images become modules identified
//! by their `LC_UUID` (the build-id a Mach-O binary or dSYM is indexed by), so the same
//! file lookup, symbol tables, crash analysis and signature serve reports and dumps alike.
//! The report's own names of frames (system libraries' symbols the device knew) are kept
//! for the frames no symbol file describes.
//!
//! Both readers live in this room because they share the model, its bounds and the naming
//! of Mach exceptions ([`exception`]); each format's parsing is its own module.

pub mod crash_text;
pub mod exception;
pub mod ips;

use std::collections::BTreeMap;

use super::{
    Arch, CrashInfo, Dump, DumpError, DumpFormat, GivenFrame, Identity, MemoryMap, Module, Os,
    Regions, RegisterSet, SystemInfo, Thread,
};

/// The largest report read: real ones are tens of KiB (a few hundred KiB for a process
/// with hundreds of threads); past this it is not a crash report.
pub const MAX_REPORT_BYTES: usize = 16 << 20;
/// Most images (binaries) a report may list.
pub const MAX_IMAGES: usize = 8192;
/// Most threads a report may list (with its last exception backtrace).
pub const MAX_THREADS: usize = 4096;
/// Most frames one thread may list: Apple's reporter writes at most 512.
pub const MAX_FRAMES: usize = 1024;
/// Most bytes kept of one name, path or message.
pub const MAX_TEXT: usize = 4096;

/// The name a report gives the backtrace of the last uncaught Objective-C exception,
/// listed as a thread of its own.
pub const LAST_EXCEPTION_BACKTRACE: &str = "Last Exception Backtrace";

/// Why some bytes are not an Apple crash report this reader can use.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AppleError {
    #[error("the report is {0} bytes, more than the {MAX_REPORT_BYTES} a crash report may be")]
    TooLarge(usize),
    #[error("the .ips header line is not a JSON object: {0}")]
    Header(String),
    #[error("the .ips body is not the JSON of a crash report: {0}")]
    Body(String),
    #[error("the .ips report is of bug type {0}, not a crash (309) or legacy crash (109)")]
    NotACrash(String),
    #[error("the report lists {what} {count}, more than the {max} allowed")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error(
        "frame {frame} of thread {thread} names image {image}, which the report does not list"
    )]
    NoSuchImage {
        thread: usize,
        frame: usize,
        image: usize,
    },
    #[error("frame {frame} of thread {thread} lies past the end of the address space")]
    AddressOverflow { thread: usize, frame: usize },
    #[error("the report's CPU type {0:?} is not one postmortem reads (x86_64, arm64, arm64e)")]
    Arch(String),
    #[error("the .crash text has no thread with frames and no Binary Images section")]
    NoContent,
    #[error("line {line} of the .crash text: {why}")]
    Line { line: usize, why: String },
}

impl From<AppleError> for DumpError {
    fn from(e: AppleError) -> Self {
        match e {
            AppleError::Arch(a) => DumpError::UnsupportedArch(a),
            AppleError::NotACrash(_) => DumpError::Unsupported(e.to_string()),
            other => DumpError::Malformed(other.to_string()),
        }
    }
}

/// Which of Apple's formats a report is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppleFormat {
    Ips,
    Crash,
}

/// One binary image the report lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    /// `LC_UUID`; `None` for the placeholder image (`???`, all zeros).
    pub uuid: Option<[u8; 16]>,
    /// Load address of its `__TEXT` segment.
    pub base: u64,
    /// Size of the image when the report says (`.crash`: end − base + 1).
    pub size: Option<u64>,
    pub name: String,
    pub path: Option<String>,
    /// `x86_64`, `arm64`, `arm64e`, when the report says.
    pub arch: Option<String>,
    /// The bundle version the report gives (`.ips` `CFBundleShortVersionString`).
    pub version: Option<String>,
}

/// One frame as the device walked it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// Index into [`AppleReport::images`]; `None` for an address no image holds.
    pub image: Option<usize>,
    /// The absolute address: the pc (frame 0) or a return address.
    pub address: u64,
    /// The symbol the report itself names there (`start`, `_dispatch_client_callout`).
    pub symbol: Option<String>,
    /// The address's offset from that symbol.
    pub symbol_offset: Option<u64>,
    /// Source file and line where the report already carries them (symbolicated).
    pub source: Option<(String, u32)>,
}

/// One thread of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportThread {
    /// The thread id (`.ips`); `None` where the report gives only its number.
    pub id: Option<u64>,
    pub name: Option<String>,
    /// The dispatch queue it was running.
    pub queue: Option<String>,
    pub frames: Vec<Frame>,
    /// Its registers by the report's names (`rip`, `x0`, `fp`), for the crashed thread.
    pub registers: Vec<(String, u64)>,
}

/// The Mach exception that ended the process, as the report names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppleException {
    /// `EXC_BAD_ACCESS`.
    pub type_name: String,
    /// `SIGSEGV`.
    pub signal: Option<String>,
    /// The exception codes (`rawCodes`; `.crash`: the hex `Exception Codes` line).
    pub codes: Vec<u64>,
    /// What the report says of the codes: `KERN_INVALID_ADDRESS at 0x0000000000000001`.
    pub subtype: Option<String>,
}

/// An Apple crash report, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppleReport {
    pub format: AppleFormat,
    pub arch: Arch,
    pub os: Os,
    pub process: Option<String>,
    pub pid: Option<u32>,
    pub path: Option<String>,
    pub os_version: Option<String>,
    /// When it crashed, as the report writes it.
    pub time: Option<String>,
    pub hardware: Option<String>,
    pub images: Vec<Image>,
    pub threads: Vec<ReportThread>,
    /// Index into `threads` of the thread that crashed.
    pub crashed: Option<usize>,
    pub exception: Option<AppleException>,
    /// `Termination Reason`: `Namespace SIGNAL, Code 11 Segmentation fault: 11`.
    pub termination: Option<String>,
    /// Application-specific information (`asi`): messages by the image that wrote them.
    pub asi: Vec<(String, String)>,
    /// The backtrace of the last uncaught Objective-C exception, when recorded.
    pub last_exception_backtrace: Vec<Frame>,
}

/// Whether `bytes` look like an Apple crash report, and which: an `.ips` begins with its
/// JSON header object (naming a `bug_type`), a `.crash` with its `Incident Identifier:`
/// or `Process:` line.
pub fn sniff(bytes: &[u8]) -> Option<AppleFormat> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let head = &bytes[start..bytes.len().min(start + 4096)];
    if head.starts_with(b"{") {
        let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
        let has = |s: &[u8]| line.windows(s.len()).any(|w| w == s);
        return (has(b"\"bug_type\"") || has(b"\"incident_id\"")).then_some(AppleFormat::Ips);
    }
    [
        b"Incident Identifier:".as_slice(),
        b"Process:",
        b"Hardware Model:",
    ]
    .iter()
    .any(|p| head.starts_with(p))
    .then_some(AppleFormat::Crash)
}

/// Reads an Apple crash report of either format.
pub fn parse(bytes: &[u8]) -> Result<AppleReport, AppleError> {
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(AppleError::TooLarge(bytes.len()));
    }
    match sniff(bytes) {
        Some(AppleFormat::Ips) => ips::parse(bytes),
        _ => crash_text::parse(bytes),
    }
}

/// Reads an Apple crash report into the [`Dump`] model (see the module documentation).
pub fn read(bytes: &[u8]) -> Result<Dump<'static>, DumpError> {
    Ok(parse(bytes)?.into_dump())
}

/// The architecture a report's CPU type names (`X86-64`, `ARM-64`, `arm64e`).
pub(crate) fn arch_of(cpu: &str) -> Result<Arch, AppleError> {
    let c = cpu.trim().to_ascii_lowercase();
    let c = c.split([' ', '(']).next().unwrap_or("");
    match c {
        "x86-64" | "x86_64" => Ok(Arch::X86_64),
        "arm-64" | "arm64" | "arm64e" | "arm64_32" | "aarch64" => Ok(Arch::Aarch64),
        _ => Err(AppleError::Arch(cut(cpu.trim()))),
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

/// A UUID as reports write it (`01d2a9d5-1f8a-35c8-9228-7c7cca13c5fc`, either case, with
/// or without dashes); `None` for the all-zero placeholder or anything else.
pub(crate) fn uuid_of(s: &str) -> Option<[u8; 16]> {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let bytes = super::unhex(&hex)?;
    let uuid: [u8; 16] = bytes.try_into().ok()?;
    (uuid != [0; 16]).then_some(uuid)
}

/// `asi` and `Application Specific Information` lines as annotations.
fn annotations_of(report: &AppleReport) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, (image, text)) in report.asi.iter().enumerate() {
        out.insert(format!("apple.asi.{i}.{image}"), text.clone());
    }
    if let Some(t) = &report.termination {
        out.insert("apple.termination".into(), t.clone());
    }
    if let Some(e) = report.exception.as_ref().and_then(|e| e.subtype.clone()) {
        out.insert("apple.exception_subtype".into(), e);
    }
    if let Some(h) = &report.hardware {
        out.insert("apple.hardware".into(), h.clone());
    }
    out
}

impl AppleReport {
    /// The [`Dump`] this report describes: images as modules (sorted by address), threads
    /// with the device's frames, the exception as a Mach exception beside the signal it
    /// became (numbered as Linux numbers it, so that it is analysed like one).
    pub fn into_dump(self) -> Dump<'static> {
        let modules = self.modules();
        let arch = self.arch;
        let mut threads: Vec<Thread> = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| Thread {
                tid: thread_id(t.id, i),
                name: t.name.clone().or_else(|| t.queue.clone()),
                registers: registers_of(arch, &t.registers, t.frames.first()),
                prewalked: Some(t.frames.iter().map(given).collect()),
                evidence: false,
            })
            .collect();
        if !self.last_exception_backtrace.is_empty() {
            let leb = &self.last_exception_backtrace;
            threads.push(Thread {
                tid: thread_id(None, self.threads.len()),
                name: Some(LAST_EXCEPTION_BACKTRACE.into()),
                registers: registers_of(arch, &[], leb.first()),
                prewalked: Some(leb.iter().map(given).collect()),
                evidence: false,
            });
        }
        let crash = self.crash_info(&threads);
        let annotations = annotations_of(&self);
        let warnings = Vec::new();
        Dump {
            format: match self.format {
                AppleFormat::Ips => DumpFormat::AppleIps,
                AppleFormat::Crash => DumpFormat::AppleCrash,
            },
            arch,
            os: self.os,
            writer: Some("apple-crash-reporter".into()),
            pid: self.pid,
            executable: self.path.clone().or_else(|| self.process.clone()),
            command_line: None,
            created: self.time.clone(),
            threads,
            modules,
            unloaded_modules: Vec::new(),
            memory: MemoryMap::default(),
            regions: Regions::default(),
            crash,
            annotations,
            warnings,
            pac_mask: None,
            system: SystemInfo {
                os_version: self.os_version.clone(),
                cpu_info: self.hardware.clone(),
                ..SystemInfo::default()
            },
        }
    }

    /// The images as modules, sorted by base; an image's end covers every frame in it
    /// where the report gives no size.
    fn modules(&self) -> Vec<Module> {
        let mut ends: Vec<u64> = self
            .images
            .iter()
            .map(|im| im.base.saturating_add(im.size.unwrap_or(0).max(1)))
            .collect();
        let frames = self.threads.iter().flat_map(|t| &t.frames);
        for f in frames.chain(&self.last_exception_backtrace) {
            if let Some(end) = f.image.and_then(|i| ends.get_mut(i)) {
                *end = (*end).max(f.address.saturating_add(1));
            }
        }
        let main_path = self.path.as_deref();
        let mut modules: Vec<Module> = self
            .images
            .iter()
            .zip(ends)
            .filter(|(im, _)| im.uuid.is_some() || im.base != 0)
            .map(|(im, end)| Module {
                name: im.name.clone(),
                path: im.path.clone(),
                base: im.base,
                end,
                load_base: im.base,
                build_id: im.uuid.map(|u| u.to_vec()),
                debug_id: im
                    .uuid
                    .map(|u| format!("{}0", super::hex(&u).to_uppercase())),
                debug_file: None,
                code_id: im.uuid.map(|u| super::hex(&u)),
                version: im.version.clone(),
                identity: if im.uuid.is_some() {
                    Identity::BuildId
                } else {
                    Identity::Path
                },
                main: main_path.is_some() && im.path.as_deref() == main_path,
                mappings: Vec::new(),
            })
            .collect();
        modules.sort_by_key(|m| m.base);
        modules
    }

    /// The crash: its thread, the signal as Linux numbers it, the fault address, and the
    /// Mach exception with its codes.
    fn crash_info(&self, threads: &[Thread]) -> Option<CrashInfo> {
        let e = self.exception.as_ref()?;
        let tid = self
            .crashed
            .and_then(|i| threads.get(i))
            .or(threads.first())
            .map_or(0, |t| t.tid);
        Some(exception::crash_info(e, tid))
    }
}

/// A frame of the report as the pipeline takes it.
fn given(f: &Frame) -> GivenFrame {
    GivenFrame {
        pc: f.address,
        function: f.symbol.clone(),
        function_offset: f.symbol_offset,
    }
}

/// A thread's id for the report: the report's own where it fits, else its number.
pub(crate) fn thread_id(id: Option<u64>, index: usize) -> u32 {
    id.and_then(|i| u32::try_from(i).ok())
        .unwrap_or_else(|| u32::try_from(index).unwrap_or(u32::MAX))
}

/// A thread's registers by the report's names, with the pc of its first frame where the
/// report gives no registers (every thread but the crashed one).
fn registers_of(arch: Arch, named: &[(String, u64)], first: Option<&Frame>) -> RegisterSet {
    let mut regs = RegisterSet::new(arch);
    for (name, value) in named {
        regs.set_named(name, *value);
    }
    if regs.pc().is_none() {
        if let Some(f) = first {
            regs.set(regs.pc_reg(), f.address);
        }
    }
    regs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_told_apart_by_their_first_line() {
        assert_eq!(
            sniff(b"{\"app_name\":\"x\",\"bug_type\":\"309\"}\n{}"),
            Some(AppleFormat::Ips)
        );
        assert_eq!(
            sniff(b"Incident Identifier: 1\nCrashReporter Key: 2\n"),
            Some(AppleFormat::Crash)
        );
        assert_eq!(
            sniff(b"\nProcess:   CrashingTest [1710]\n"),
            Some(AppleFormat::Crash)
        );
        assert_eq!(sniff(b"{\"a\":1}\n"), None);
        assert_eq!(sniff(b"\x7fELF"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn uuids_are_read_with_or_without_dashes_and_zeros_are_none() {
        let u = uuid_of("01d2a9d5-1f8a-35c8-9228-7c7cca13c5fc").unwrap_or_default();
        assert_eq!(u[0], 0x01);
        assert_eq!(u[15], 0xfc);
        assert_eq!(uuid_of("01D2A9D51F8A35C892287C7CCA13C5FC"), Some(u));
        assert_eq!(uuid_of("00000000-0000-0000-0000-000000000000"), None);
        assert_eq!(uuid_of("xyz"), None);
    }
}
