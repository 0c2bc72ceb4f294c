//! ELF core reader: turns a Linux core file (kernel, gcore, qemu-user) into the [`Dump`] model.
//!
//! A core holds threads in NT_PRSTATUS notes, process facts in NT_PRPSINFO / NT_SIGINFO /
//! NT_AUXV, mapped files in NT_FILE and memory in PT_LOAD segments. Memory is borrowed from
//! the core's bytes, never copied. Everything from the file is untrusted: reads are bounds
//! checked, counts are checked against the bytes before allocating, and a truncated core is
//! read as far as it goes (warning `truncated-dump`). i386 and 32-bit arm cores (ELF32,
//! `EM_386`, `EM_ARM`) are read with the 32-bit layouts of the notes; their 32-bit
//! auxiliary vector is widened to the 64-bit layout once, so the module readers read one
//! layout (the dynamic linker's structures they read in the process's word size). Not
//! handled: big-endian cores, 32-bit cores of other architectures (refused with
//! `UnsupportedArch`), floating-point and vector registers.

mod modules;
mod notes;
pub(crate) mod parse;
#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod synth;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;

use self::modules::{CoreLoad, LoadIndex};
use self::notes::{
    auxv_get, FileMapping, PrPsInfo, SigInfo, AT_EXECFN, NT_ARM_PAC_MASK, NT_AUXV, NT_FILE,
    NT_PRPSINFO, NT_PRSTATUS, NT_SIGINFO,
};
use self::parse::{Header, NoteIter, EM_386, EM_AARCH64, EM_ARM, PF_X, PT_LOAD, PT_NOTE};
use super::{Arch, CrashInfo, Dump, DumpError, DumpFormat, MemoryMap, Module, Os, Thread, Warning};

/// What the notes of a core say, gathered in one pass.
#[derive(Default)]
struct Notes<'a> {
    threads: Vec<Thread>,
    /// `pr_cursig` of the first NT_PRSTATUS (the thread the kernel writes first).
    first_cursig: Option<u16>,
    siginfo: Option<SigInfo>,
    prpsinfo: Option<PrPsInfo>,
    /// In the 64-bit layout (an i386 core's is widened).
    auxv: Cow<'a, [u8]>,
    files: Option<Vec<FileMapping>>,
    pac_mask: Option<u64>,
    /// A note only gdb writes (owner `GDB`, e.g. the target description).
    gdb_note: bool,
    /// Notes that could not be decoded.
    bad: usize,
    /// The system whose notes another kernel writes (`NetBSD-CORE`, `FreeBSD`,
    /// `OpenBSD`): its threads and registers are laid out otherwise than Linux's.
    other_system: Option<&'static str>,
}

/// The system a core's note owner names, where it is not Linux: NetBSD writes
/// `NetBSD-CORE` (and `NetBSD-CORE@LWP` per thread), FreeBSD `FreeBSD`, OpenBSD
/// `OpenBSD` (their own `elf_core` writers; gdb and lldb read them).
fn other_system(owner: &[u8]) -> Option<&'static str> {
    if owner.starts_with(b"NetBSD-CORE") {
        Some("NetBSD")
    } else if owner == b"FreeBSD" {
        Some("FreeBSD")
    } else if owner.starts_with(b"OpenBSD") {
        Some("OpenBSD")
    } else {
        None
    }
}

impl<'a> Notes<'a> {
    fn add(&mut self, note: parse::Note<'a>, arch: Arch) {
        if note.name == b"GDB" {
            self.gdb_note = true;
            return;
        }
        if let Some(system) = other_system(note.name) {
            self.other_system.get_or_insert(system);
            return;
        }
        if note.name != b"CORE" && note.name != b"LINUX" {
            return;
        }
        let elf32 = matches!(arch, Arch::X86 | Arch::Arm);
        let ok = match note.n_type {
            NT_PRSTATUS => match if elf32 {
                notes::prstatus32(note.desc, arch)
            } else {
                notes::prstatus(note.desc, arch)
            } {
                Some(s) => {
                    if self.threads.is_empty() {
                        self.first_cursig = Some(s.cursig);
                    }
                    self.threads.push(Thread {
                        tid: s.tid,
                        name: None,
                        registers: s.registers,
                        prewalked: None,
                        evidence: false,
                    });
                    true
                }
                None => false,
            },
            NT_PRPSINFO if self.prpsinfo.is_none() => {
                self.prpsinfo = if elf32 {
                    notes::prpsinfo32(note.desc)
                } else {
                    notes::prpsinfo(note.desc)
                };
                self.prpsinfo.is_some()
            }
            // gcore writes one NT_SIGINFO per thread; the first one is the process's.
            NT_SIGINFO if self.siginfo.is_none() => {
                self.siginfo = if elf32 {
                    notes::siginfo32(note.desc)
                } else {
                    notes::siginfo(note.desc)
                };
                self.siginfo.is_some()
            }
            NT_AUXV if self.auxv.is_empty() => {
                self.auxv = if elf32 {
                    Cow::Owned(notes::auxv_widen(note.desc))
                } else {
                    Cow::Borrowed(note.desc)
                };
                true
            }
            NT_FILE if self.files.is_none() => {
                self.files = if elf32 {
                    notes::nt_file32(note.desc)
                } else {
                    notes::nt_file(note.desc)
                };
                self.files.is_some()
            }
            NT_ARM_PAC_MASK if arch == Arch::Aarch64 => {
                self.pac_mask = notes::pac_mask(note.desc);
                self.pac_mask.is_some()
            }
            _ => true,
        };
        if !ok {
            self.bad += 1;
        }
    }
}

/// Reads an ELF core file: its segments (memory and notes), then the warnings about what
/// could not be read, the modules, and the process facts the notes give.
pub fn read(bytes: &[u8]) -> Result<Dump<'_>, DumpError> {
    let header = Header::parse(bytes)?;
    let arch = match header.machine {
        EM_AARCH64 => Arch::Aarch64,
        EM_386 => Arch::X86,
        EM_ARM => Arch::Arm,
        _ => Arch::X86_64,
    };
    let (phdrs, truncated) = parse::program_headers(bytes, &header)?;
    let segments = Segments::read(bytes, &phdrs, arch, truncated);
    let mut warnings = read_warnings(&segments, bytes.len())?;
    let Segments {
        ranges,
        loads,
        notes,
        ..
    } = segments;
    let memory = MemoryMap::new(ranges);
    let (modules, executable) = find_modules(&notes, &memory, &loads, arch, &mut warnings);
    let crash = crash_info(&notes);
    let writer = writer(&header, &notes);
    let (pid, command_line) = process(&notes);

    Ok(Dump {
        format: DumpFormat::ElfCore,
        arch,
        os: Os::Linux,
        writer: writer.map(str::to_string),
        pid,
        executable,
        command_line,
        created: None,
        threads: notes.threads,
        modules,
        unloaded_modules: Vec::new(),
        memory,
        regions: super::Regions::new(loads.iter().map(|l| (l.start, l.end, Some(l.executable)))),
        crash,
        annotations: BTreeMap::new(),
        warnings,
        pac_mask: notes.pac_mask,
        system: Default::default(),
    })
}

/// What the program headers give: memory, the mapped ranges and the notes.
struct Segments<'a> {
    /// PT_LOAD bytes present in the file, by address (borrowed from the core).
    ranges: Vec<(u64, &'a [u8])>,
    /// Every PT_LOAD's address range, whether or not its bytes are in the file.
    loads: Vec<CoreLoad>,
    notes: Notes<'a>,
    /// Whether the file ends before what its headers describe.
    truncated: bool,
}

impl<'a> Segments<'a> {
    /// Reads the PT_LOAD and PT_NOTE segments of `phdrs`; `truncated` carries what reading
    /// the headers found.
    fn read(bytes: &'a [u8], phdrs: &[parse::Phdr], arch: Arch, truncated: bool) -> Self {
        let mut out = Segments {
            ranges: Vec::new(),
            loads: Vec::new(),
            notes: Notes::default(),
            truncated,
        };
        for p in phdrs {
            match p.p_type {
                PT_LOAD => {
                    if let Some(end) = p.vaddr.checked_add(p.memsz) {
                        out.loads.push(CoreLoad {
                            start: p.vaddr,
                            end,
                            executable: p.flags & PF_X != 0,
                        });
                    }
                    if p.filesz > 0 {
                        let (seg, clamped) = parse::clamp(bytes, p.offset, p.filesz);
                        out.truncated |= clamped;
                        // Memory past the address space's end cannot be addressed; drop it.
                        let room = u64::MAX - p.vaddr;
                        let keep = usize::try_from(room).unwrap_or(usize::MAX).min(seg.len());
                        out.ranges.push((p.vaddr, &seg[..keep]));
                    }
                }
                PT_NOTE => {
                    let (seg, clamped) = parse::clamp(bytes, p.offset, p.filesz);
                    out.truncated |= clamped;
                    let mut it = NoteIter::new(seg, 4);
                    for note in it.by_ref() {
                        out.notes.add(note, arch);
                    }
                    if it.cut_short() && !clamped {
                        out.notes.bad += 1;
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// The warnings about a truncated core and undecodable notes (`len`: the core's size); an
/// error when no thread survives, as there is nothing to walk.
fn read_warnings(segments: &Segments<'_>, len: usize) -> Result<Vec<Warning>, DumpError> {
    if let Some(system) = segments.notes.other_system {
        // Its threads are not in NT_PRSTATUS notes as Linux lays them out: nothing of it
        // would be read right. Say what it is rather than call it malformed.
        return Err(DumpError::Unsupported(format!(
            "a {system} core: not supported (postmortem reads Linux cores and minidumps; \
             gdb and lldb read {system} cores)"
        )));
    }
    if segments.notes.threads.is_empty() {
        return Err(if segments.truncated {
            DumpError::Truncated("no thread (NT_PRSTATUS) survives in the truncated core".into())
        } else {
            DumpError::Malformed("the core has no thread (no NT_PRSTATUS note)".into())
        });
    }
    let mut warnings = Vec::new();
    if segments.truncated {
        warnings.push(Warning::new(
            "truncated-dump",
            format!(
                "the core is truncated ({len} bytes): memory and notes past the end are missing"
            ),
        ));
    }
    if segments.notes.bad > 0 {
        warnings.push(Warning::new(
            "notes-malformed",
            format!(
                "{} note(s) of the core could not be decoded",
                segments.notes.bad
            ),
        ));
    }
    Ok(warnings)
}

/// The modules (from NT_FILE, else the dynamic linker's list in memory, plus the vDSO),
/// sorted by address with the main one marked, and the executable's path.
fn find_modules(
    notes: &Notes<'_>,
    memory: &MemoryMap<'_>,
    core_loads: &[CoreLoad],
    arch: Arch,
    warnings: &mut Vec<Warning>,
) -> (Vec<Module>, Option<String>) {
    let loads = LoadIndex::new(core_loads);
    let execfn = auxv_get(&notes.auxv, AT_EXECFN).and_then(|a| modules::read_c_string(memory, a));
    let mut found = match &notes.files {
        Some(files) => modules::from_nt_file(files, &loads, memory),
        None => modules::from_link_map(
            &notes.auxv,
            execfn.clone(),
            memory,
            core_loads,
            arch,
            warnings,
        ),
    };
    if let Some(v) = modules::vdso(&notes.auxv, &loads, core_loads, memory) {
        if !found.iter().any(|m| m.base == v.base) {
            found.push(v);
        }
    }
    found.sort_by_key(|m| m.base);
    modules::mark_main(&mut found, &notes.auxv);
    let executable = found
        .iter()
        .find(|m| m.main)
        .and_then(|m| m.path.clone())
        .or(execfn);
    (found, executable)
}

/// Which program wrote the core, told by what each writes.
fn writer(header: &Header, notes: &Notes<'_>) -> Option<&'static str> {
    if header.shnum > 0 || header.shoff != 0 || notes.gdb_note {
        Some("gcore")
    } else if notes.files.is_some() || notes.siginfo.is_some() {
        Some("linux-kernel")
    } else if !notes.auxv.is_empty() {
        // QEMU's user-mode emulator writes PRSTATUS, PRPSINFO and AUXV only.
        Some("qemu-user")
    } else {
        None
    }
}

/// The process id and command line (its arguments, else its name) from NT_PRPSINFO.
fn process(notes: &Notes<'_>) -> (Option<u32>, Option<String>) {
    match &notes.prpsinfo {
        Some(p) => {
            let cmd = if p.psargs.is_empty() {
                &p.fname
            } else {
                &p.psargs
            };
            (Some(p.pid), (!cmd.is_empty()).then(|| cmd.clone()))
        }
        None => (None, None),
    }
}

/// The crash, when the first thread has a current signal. The kernel writes the thread that
/// took the fatal signal first, with `pr_cursig` set; gcore writes 0 there (its NT_SIGINFO
/// holds the SIGSTOP gdb used to stop the process, which is no crash).
fn crash_info(notes: &Notes<'_>) -> Option<CrashInfo> {
    let cursig = notes.first_cursig.filter(|&s| s != 0)?;
    let tid = notes.threads.first()?.tid;
    let info = notes
        .siginfo
        .filter(|si| u32::try_from(si.signo).ok() == Some(u32::from(cursig)));
    let signal = u32::from(cursig);
    Some(CrashInfo {
        tid,
        signal: Some(signal),
        code: info.map(|si| si.code),
        address: info
            .filter(|_| crate::signals::has_fault_address(signal))
            .map(|si| si.addr),
        exception: None,
        assertion: None,
    })
}
