//! Minidump reader: turns a Breakpad/Crashpad/minidump-writer minidump into the [`Dump`] model.
//!
//! The `minidump` crate parses the streams (system info, threads, contexts, modules,
//! exception, Crashpad info, Linux `/proc` copies); this module translates them into the
//! same model core files produce, so the walker never knows which format a crash came in.
//!
//! Memory is the exception: the memory lists are read here, straight from the directory,
//! so that every range is a slice of the caller's bytes (the crate's slices only live as
//! long as its `Minidump` value) and so that a truncated file keeps the part of its memory
//! that survived, instead of losing a whole stream. Counts in those lists come from the file
//! and are never used to size an allocation: only entries that fit in the stream are read.
//!
//! What is not an error: a missing or unreadable optional stream (no thread names, no
//! module list, no exception), a truncated memory range. Those become warnings or less
//! data. What is: no minidump header, no stream directory, no system info (without it the
//! architecture is unknown and no register context can be read), an unsupported CPU.

use std::collections::BTreeMap;

use minidump::format::MINIDUMP_STREAM_TYPE;
use minidump::system_info::{Cpu, Os as MdOs};
use minidump::{
    CodeView, Minidump, MinidumpAssertion, MinidumpContext, MinidumpCrashpadInfo,
    MinidumpException, MinidumpLinuxCpuInfo, MinidumpLinuxLsbRelease, MinidumpLinuxProcLimits,
    MinidumpLinuxProcStatus, MinidumpMiscInfo, MinidumpModule, MinidumpModuleList,
    MinidumpRawContext, MinidumpSoftErrors, MinidumpStream as _, MinidumpSystemInfo,
    MinidumpThreadList, MinidumpThreadNames, Module as _,
};

use super::linux_maps;
use super::wow64;
use super::{
    Arch, CrashInfo, Distribution, Dump, DumpError, DumpFormat, ExceptionInfo, Handle, Identity,
    Limit, Mapping, MemoryMap, Module, Os, RegisterSet, SystemInfo, Thread, UnloadedModule,
    Warning,
};
use crate::arch::{aarch64, arm, x86, x86_64};
use crate::ids::breakpad_debug_id_from_build_id;

/// `exception_code` Breakpad and minidump-writer use for a dump that was requested, not
/// caused by a signal (`MD_EXCEPTION_CODE_LIN_DUMP_REQUESTED`).
const LINUX_DUMP_REQUESTED: u32 = 0xFFFF_FFFF;

/// Size of a `MINIDUMP_MEMORY_DESCRIPTOR` (u64 start, u32 size, u32 rva).
const MEMORY_DESCRIPTOR_SIZE: usize = 16;
/// Size of a `MINIDUMP_MEMORY_DESCRIPTOR64` (u64 start, u64 size).
const MEMORY_DESCRIPTOR64_SIZE: usize = 16;

/// Reads a minidump. Every slice of process memory in the result borrows `bytes`. What
/// the minidump crate logs as it reads (e.g. a Windows CPU context's XSAVE state it
/// ignores) becomes the report's `minidump-reader` warnings, not lines on stderr.
pub fn read(bytes: &[u8]) -> Result<Dump<'_>, DumpError> {
    let (read, logged) = super::reader_log::collect(|| read_dump(bytes));
    let mut dump = read?;
    dump.warnings.extend(logged.into_iter().map(|message| {
        Warning::new(
            "minidump-reader",
            format!("the minidump reader noted: {message}"),
        )
    }));
    Ok(dump)
}

fn read_dump(bytes: &[u8]) -> Result<Dump<'_>, DumpError> {
    let md = Minidump::read(bytes).map_err(header_error)?;
    let mut warnings = Vec::new();

    let system_info: MinidumpSystemInfo = md.get_stream().map_err(|e| {
        DumpError::Malformed(format!(
            "the minidump has no readable system info stream ({}), so its CPU is unknown",
            e.name()
        ))
    })?;
    let arch = arch_of(system_info.cpu)?;
    let os = os_of(system_info.os);
    let misc: Option<MinidumpMiscInfo> = md.get_stream().ok();
    let exception: Option<MinidumpException> = md.get_stream().ok();
    let crashed_tid = exception.as_ref().map(|e| e.get_crashing_thread_id());

    let facts = ContextFacts {
        arch,
        system_info: &system_info,
        misc: misc.as_ref(),
        exception: exception.as_ref(),
    };
    let (mut threads, stack_ranges, recorded) = threads_of(bytes, &md, &facts, &mut warnings);
    let memory = memory_of(bytes, &md, &stack_ranges, &mut warnings);
    let pcs: Vec<u64> = threads.iter().filter_map(|t| t.registers.pc()).collect();
    let list = module_list(&md, bytes, &system_info, &pcs, &mut warnings);
    let modules = modules_of(&md, list, &memory);
    let unloaded_modules = unloaded_modules_of(&md, bytes, &mut warnings);
    // a 32-bit process that a 64-bit writer dumped: its threads' 32-bit registers
    let wow64 = arch == Arch::X86_64
        && os == Os::Windows
        && wow64::thirty_two_bit_view(&modules, &recorded, &memory, &mut threads, &mut warnings);
    let arch = if wow64 { Arch::X86 } else { arch };

    // Crash.
    let assertion = md
        .get_stream::<MinidumpAssertion>()
        .ok()
        .and_then(|a| assertion_text(&a));
    let crash = exception
        .as_ref()
        .and_then(|e| crash_of(e, &system_info, os, assertion.clone()))
        .or_else(|| {
            // An assertion without an exception stream still says why the process died.
            assertion.map(|a| CrashInfo {
                tid: crashed_tid.unwrap_or(0),
                assertion: Some(a),
                ..CrashInfo::default()
            })
        });

    // Process facts.
    let crashpad: Option<MinidumpCrashpadInfo> = md.get_stream().ok();
    let annotations = crashpad.as_ref().map(annotations_of).unwrap_or_default();
    let writer = writer_of(&md, crashpad.is_some());
    let pid = misc
        .as_ref()
        .and_then(|m| m.raw.process_id().copied())
        .or_else(|| {
            md.get_stream::<MinidumpLinuxProcStatus>()
                .ok()
                .and_then(|s| linux_status_pid(&s))
        });
    let command_line = md
        .get_raw_stream(MINIDUMP_STREAM_TYPE::LinuxCmdLine as u32)
        .ok()
        .and_then(command_line_of);
    let executable = modules.iter().find(|m| m.main).and_then(|m| m.path.clone());
    let created = rfc3339_utc(u64::from(md.header.time_date_stamp));
    let system = system_of(&md, bytes, &system_info, misc.as_ref());

    Ok(Dump {
        format: DumpFormat::Minidump,
        arch,
        os,
        writer,
        pid,
        executable,
        command_line,
        created,
        threads,
        modules,
        unloaded_modules,
        memory,
        regions: super::regions::of_minidump(
            md.get_raw_stream(MINIDUMP_STREAM_TYPE::LinuxMaps as u32)
                .ok(),
            md.get_raw_stream(MINIDUMP_STREAM_TYPE::MemoryInfoListStream as u32)
                .ok(),
        ),
        crash,
        annotations,
        warnings,
        pac_mask: None,
        system,
    })
}

/// The machine and process beyond threads and modules, read as minidump-stackwalk reads
/// them (its `system_info`, `lsb_release`, `linux_memory_map_count` and
/// `process_uptime`), so its JSON can be given field for field.
fn system_of(
    md: &Minidump<'_, &[u8]>,
    file: &[u8],
    system_info: &MinidumpSystemInfo,
    misc: Option<&MinidumpMiscInfo>,
) -> SystemInfo {
    let (version, build) = system_info.os_parts();
    let os_version = Some(match build {
        Some(b) => format!("{version} {b}"),
        None => version,
    });
    let microcode = md
        .get_stream::<MinidumpLinuxCpuInfo>()
        .ok()
        .and_then(|info| {
            info.iter().find_map(|(key, value)| {
                (key.as_bytes() == b"microcode").then(|| value.to_string_lossy().into_owned())
            })
        })
        .and_then(|v| u64::from_str_radix(v.strip_prefix("0x")?, 16).ok())
        .map(|v| format!("{v:#x}"));
    let distribution = md.get_stream::<MinidumpLinuxLsbRelease>().ok().map(|lsb| {
        let mut d = Distribution::default();
        for (key, value) in lsb.iter() {
            let value = bounded(&value.to_string_lossy());
            match key.as_bytes() {
                b"DISTRIB_ID" | b"ID" => d.id = value,
                b"DISTRIB_RELEASE" | b"VERSION_ID" => d.release = value,
                b"DISTRIB_CODENAME" | b"VERSION_CODENAME" => d.codename = value,
                b"DISTRIB_DESCRIPTION" | b"PRETTY_NAME" => d.description = value,
                _ => {}
            }
        }
        d
    });
    // the maps stream through our own parser: the minidump crate's panics on some
    // damaged paths (tests/minidump.rs)
    let memory_map_count = md
        .get_raw_stream(MINIDUMP_STREAM_TYPE::LinuxMaps as u32)
        .ok()
        .and_then(|raw| u32::try_from(linux_maps::parse(raw).len()).ok());
    let uptime_seconds = misc
        .and_then(|m| m.raw.process_create_time().copied())
        .and_then(|start| u64::from(md.header.time_date_stamp).checked_sub(u64::from(start)));
    let limits = md.get_stream::<MinidumpLinuxProcLimits>().ok().map(|l| {
        l.iter()
            .filter(|line| !line.is_empty())
            .skip(1) // the header
            .take(MAX_SYSTEM_ITEMS)
            .filter_map(|line| limit_of(&line.to_string_lossy()))
            .collect()
    });
    let handles = md
        .get_raw_stream(MINIDUMP_STREAM_TYPE::HandleDataStream as u32)
        .ok()
        .and_then(|raw| handles_of(raw, file));
    // a writer's error list is small; a huge one is not kept in every report
    let writer_errors = md
        .get_stream::<MinidumpSoftErrors>()
        .ok()
        .map(|e| e.as_ref().to_string())
        .filter(|e| e.len() <= MAX_WRITER_ERRORS);
    SystemInfo {
        os_version: os_version.map(|v| bounded(&v)),
        cpu_info: system_info.cpu_info().map(|c| bounded(&c)),
        cpu_count: Some(u32::from(system_info.raw.number_of_processors)),
        cpu_microcode_version: microcode,
        distribution,
        memory_map_count,
        uptime_seconds,
        limits,
        handles,
        writer_errors,
    }
}

/// Most handles, limits kept of a dump (a process has a few hundred descriptors; the
/// report is not the place for a million).
const MAX_SYSTEM_ITEMS: usize = 4096;
/// Longest writer's error list kept, in bytes.
const MAX_WRITER_ERRORS: usize = 64 << 10;
/// Longest text kept of a system string (an OS version, a CPU name, a file name).
const MAX_SYSTEM_TEXT: usize = 1024;

/// `text` cut to [`MAX_SYSTEM_TEXT`] bytes (at a character boundary).
fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_SYSTEM_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().to_string()
}

/// The handle data stream (`MINIDUMP_HANDLE_DATA_STREAM`): each descriptor's handle and
/// its type and object names (UTF-16 `MINIDUMP_STRING`s elsewhere in the file, `0` for
/// none). Read here rather than by the minidump crate so that hostile counts and names
/// stay bounded: at most [`MAX_SYSTEM_ITEMS`] descriptors, names cut to
/// [`MAX_SYSTEM_TEXT`].
fn handles_of(stream: &[u8], file: &[u8]) -> Option<Vec<Handle>> {
    let header = usize::try_from(le_u32(stream, 0)?).ok()?;
    let size = usize::try_from(le_u32(stream, 4)?).ok()?;
    let count = usize::try_from(le_u32(stream, 8)?).ok()?;
    if size < 16 || header < 16 {
        return None;
    }
    let name = |rva: u32| minidump_string(file, rva).map(|n| bounded(&n));
    let mut out = Vec::new();
    for i in 0..count.min(MAX_SYSTEM_ITEMS) {
        // a count larger than the stream holds: the descriptors it holds
        let Some(d) = header
            .checked_add(i.saturating_mul(size))
            .and_then(|at| stream.get(at..at.checked_add(16)?))
        else {
            break;
        };
        out.push(Handle {
            handle: Some(u64::from_le_bytes(d.get(..8)?.try_into().ok()?)),
            type_name: name(le_u32(d, 8)?),
            object_name: name(le_u32(d, 12)?),
        });
    }
    Some(out)
}

/// One line of `/proc/PID/limits` (columns separated by runs of spaces).
fn limit_of(line: &str) -> Option<Limit> {
    let mut columns = line.split("  ").map(str::trim).filter(|c| !c.is_empty());
    Some(Limit {
        name: columns.next()?.to_string(),
        soft: columns.next()?.to_string(),
        hard: columns.next()?.to_string(),
        unit: columns.next().unwrap_or("n/a").to_string(),
    })
}

/// What reading a thread's register context needs.
struct ContextFacts<'a> {
    arch: Arch,
    system_info: &'a MinidumpSystemInfo,
    misc: Option<&'a MinidumpMiscInfo>,
    exception: Option<&'a MinidumpException<'a>>,
}

/// A thread's stack as the thread list records it: (start address, file offset, size).
type StackRange = (u64, u64, u64);

/// The threads, with the exception context replacing the crashed thread's own context,
/// and where each one's stack is in the file.
fn threads_of<'d>(
    bytes: &'d [u8],
    md: &Minidump<'_, &[u8]>,
    facts: &ContextFacts<'_>,
    warnings: &mut Vec<Warning>,
) -> (Vec<Thread>, Vec<StackRange>, Vec<wow64::Recorded<'d>>) {
    let arch = facts.arch;
    let names: Option<MinidumpThreadNames> = md.get_stream().ok();
    let Some(list) = thread_list(bytes, md, warnings) else {
        return (Vec::new(), Vec::new(), Vec::new());
    };
    let exception_context = facts
        .exception
        .and_then(|e| e.context(facts.system_info, facts.misc))
        .map(|c| registers_of(arch, &c));
    let crashed_tid = facts.exception.map(|e| e.get_crashing_thread_id());
    let context_bytes = |l: &minidump::format::MINIDUMP_LOCATION_DESCRIPTOR| {
        file_slice(bytes, u64::from(l.rva), u64::from(l.data_size))
    };
    let mut threads = Vec::new();
    let mut stack_ranges = Vec::new();
    let mut recorded = Vec::new();
    for t in &list.threads {
        let tid = t.raw.thread_id;
        let own = t
            .context(facts.system_info, facts.misc)
            .map(|c| registers_of(arch, &c));
        let crashed = crashed_tid == Some(tid);
        let registers = match (&exception_context, crashed) {
            (Some(ctx), true) => ctx.clone(),
            _ => own.unwrap_or_else(|| {
                warnings.push(Warning::new(
                    "memory-missing",
                    format!("thread {tid} has no readable register context"),
                ));
                RegisterSet::new(arch)
            }),
        };
        let name = names
            .as_ref()
            .and_then(|n| n.get_name(tid))
            .map(|s| s.into_owned())
            .filter(|s| !s.is_empty());
        threads.push(Thread {
            tid,
            name,
            registers,
            prewalked: None,
            evidence: false,
        });
        let stack = &t.raw.stack;
        stack_ranges.push((
            stack.start_of_memory_range,
            u64::from(stack.memory.rva),
            u64::from(stack.memory.data_size),
        ));
        let exception = facts.exception.filter(|_| crashed);
        recorded.push(wow64::Recorded {
            teb: t.raw.teb,
            context: match exception {
                Some(e) => context_bytes(&e.raw.thread_context),
                None => context_bytes(&t.raw.thread_context),
            },
        });
    }
    (threads, stack_ranges, recorded)
}

/// The thread list, or none (with a warning) where it cannot be read.
fn thread_list<'m>(
    bytes: &'m [u8],
    md: &'m Minidump<'_, &[u8]>,
    warnings: &mut Vec<Warning>,
) -> Option<MinidumpThreadList<'m>> {
    match md.get_stream() {
        Ok(list) => Some(list),
        Err(minidump::Error::StreamSizeMismatch { expected, actual }) if actual > expected => {
            // Wine's dbghelp, when a callback leaves threads out, keeps the stream's size
            // for every thread and writes the smaller count: the threads counted are all
            // there, followed by unused bytes, which the minidump crate refuses.
            let counted = md
                .get_raw_stream(MinidumpThreadList::STREAM_TYPE)
                .ok()
                .and_then(|raw| raw.get(..expected))
                .and_then(|raw| MinidumpThreadList::read(raw, bytes, md.endian, None).ok());
            let Some(list) = counted else {
                warnings.push(Warning::new(
                    "truncated-dump",
                    "the minidump's thread list could not be read; no thread can be \
                              walked",
                ));
                return None;
            };
            warnings.push(Warning::new(
                "minidump-reader",
                format!(
                    "the minidump's thread list is {} bytes longer than its {} threads (as \
                     wine's dbghelp writes it when threads are left out); the threads \
                     counted are read",
                    actual - expected,
                    list.threads.len()
                ),
            ));
            Some(list)
        }
        Err(e) => {
            warnings.push(Warning::new(
                "truncated-dump",
                format!(
                    "the minidump's thread list could not be read ({}); no thread can be walked",
                    e.name()
                ),
            ));
            None
        }
    }
}

/// Memory: thread stacks, the memory list and the Memory64 list, all borrowed.
fn memory_of<'d>(
    bytes: &'d [u8],
    md: &Minidump<'_, &[u8]>,
    stack_ranges: &[StackRange],
    warnings: &mut Vec<Warning>,
) -> MemoryMap<'d> {
    let mut ranges: Vec<(u64, &[u8])> = Vec::new();
    for &(addr, rva, size) in stack_ranges {
        if let Some(b) = file_slice(bytes, rva, size) {
            ranges.push((addr, b));
        }
    }
    let mut truncated_memory = false;
    for dir in md.all_streams() {
        let stream = file_slice(
            bytes,
            u64::from(dir.location.rva),
            u64::from(dir.location.data_size),
        )
        .unwrap_or(&[]);
        if dir.stream_type == MINIDUMP_STREAM_TYPE::MemoryListStream as u32 {
            truncated_memory |= memory_list(bytes, stream, &mut ranges);
        } else if dir.stream_type == MINIDUMP_STREAM_TYPE::Memory64ListStream as u32 {
            truncated_memory |= memory64_list(bytes, stream, &mut ranges);
        }
    }
    if truncated_memory {
        warnings.push(Warning::new(
            "truncated-dump",
            "the minidump ends before some of the memory it lists; those bytes are \
                      missing",
        ));
    }
    MemoryMap::new(ranges)
}

/// At most this many of a minidump's modules are read: a real process loads a few
/// thousand at most, and each module read costs about 1.4 KiB, so a hostile dump listing
/// millions would otherwise cost gigabytes before any bound on what is walked applied.
/// (`--max-modules`, which bounds what is walked, stored and shown, cuts further.)
const MAX_READ_MODULES: usize = 16_384;

/// Bytes of one `MINIDUMP_MODULE` entry of the module list stream.
const MODULE_ENTRY: usize = 108;

/// The module list, read by the minidump crate; of a list longer than
/// [`MAX_READ_MODULES`], only that many entries are read (those the threads' pcs are in
/// first, then the first ones listed, which start with the main executable), with a
/// `modules-cut` warning.
fn module_list(
    md: &Minidump<'_, &[u8]>,
    bytes: &[u8],
    system_info: &MinidumpSystemInfo,
    pcs: &[u64],
    warnings: &mut Vec<Warning>,
) -> Option<MinidumpModuleList> {
    let raw = md
        .get_raw_stream(MINIDUMP_STREAM_TYPE::ModuleListStream as u32)
        .ok()?;
    let count = le_u32(raw, 0).and_then(|c| usize::try_from(c).ok())?;
    if count <= MAX_READ_MODULES || md.endian != minidump::Endian::Little {
        return md.get_stream::<MinidumpModuleList>().ok();
    }
    let held = count.min(raw.len().saturating_sub(4) / MODULE_ENTRY);
    let entry = |i: usize| raw.get(4 + i * MODULE_ENTRY..4 + (i + 1) * MODULE_ENTRY);
    let mut pcs = pcs.to_vec();
    pcs.sort_unstable();
    let runs_a_thread = |i: &usize| {
        entry(*i).is_some_and(|e| {
            let (base, size) = (le_u64(e, 0).unwrap_or(0), le_u32(e, 8).unwrap_or(0));
            let first_pc = pcs.partition_point(|&pc| pc < base);
            pcs.get(first_pc)
                .is_some_and(|&pc| pc - base < u64::from(size))
        })
    };
    let mut chosen = vec![false; held];
    let mut kept = 0usize;
    for i in (0..held).filter(runs_a_thread).chain(0..held) {
        if kept >= MAX_READ_MODULES {
            break;
        }
        if let Some(c) = chosen.get_mut(i).filter(|c| !**c) {
            *c = true;
            kept += 1;
        }
    }
    let keep: Vec<usize> = (0..held)
        .filter(|&i| chosen.get(i).copied().unwrap_or(false))
        .collect();
    let mut cut = Vec::with_capacity(4 + keep.len() * MODULE_ENTRY);
    cut.extend_from_slice(&u32::try_from(keep.len()).unwrap_or(0).to_le_bytes());
    for e in keep.iter().filter_map(|&i| entry(i)) {
        cut.extend_from_slice(e);
    }
    warnings.push(Warning::new(
        "modules-cut",
        format!(
            "the dump lists {count} modules; only {} were read (those the threads run in, \
             then the first listed): frames in the others have no module",
            keep.len()
        ),
    ));
    MinidumpModuleList::read(&cut, bytes, md.endian, Some(system_info)).ok()
}

/// The loaded modules of `list`, sorted by base, each with its `/proc/self/maps` mappings.
fn modules_of(
    md: &Minidump<'_, &[u8]>,
    list: Option<MinidumpModuleList>,
    memory: &MemoryMap<'_>,
) -> Vec<Module> {
    let mut maps: Vec<Mapping> = md
        .get_raw_stream(MINIDUMP_STREAM_TYPE::LinuxMaps as u32)
        .map(linux_maps::parse)
        .unwrap_or_default();
    maps.sort_unstable_by_key(|m| m.start);
    let mut budget = linux_maps::budget(maps.len());
    let mut modules = Vec::new();
    if let Some(list) = list {
        for (i, m) in list.iter().enumerate() {
            let (base, end) = range_of(m);
            // `/proc/self/maps` ranges (end exclusive) inside the module
            let mappings = linux_maps::within(&maps, base, end, &mut budget);
            modules.push(module_of(m, i == 0, mappings, memory));
        }
    }
    modules.sort_by_key(|m: &Module| m.base);
    modules
}

/// The modules the process had unloaded: the `MINIDUMP_UNLOADED_MODULE_LIST`'s header
/// (`SizeOfHeader`, `SizeOfEntry`, `NumberOfEntries`), then entries (`BaseOfImage`,
/// `SizeOfImage`, `CheckSum`, `TimeDateStamp`, `ModuleNameRva` to a `MINIDUMP_STRING`).
/// Read here rather than by the minidump crate, which drops the whole list when its count
/// is larger than the stream holds: the entries the stream holds are kept (at most
/// [`MAX_SYSTEM_ITEMS`]), and a warning says how many were not there.
fn unloaded_modules_of(
    md: &Minidump<'_, &[u8]>,
    file: &[u8],
    warnings: &mut Vec<Warning>,
) -> Vec<UnloadedModule> {
    let Ok(stream) = md.get_raw_stream(MINIDUMP_STREAM_TYPE::UnloadedModuleListStream as u32)
    else {
        return Vec::new();
    };
    let header = le_u32(stream, 0).and_then(|h| usize::try_from(h).ok());
    let size = le_u32(stream, 4).and_then(|s| usize::try_from(s).ok());
    let count = le_u32(stream, 8).and_then(|c| usize::try_from(c).ok());
    let (Some(header), Some(size), Some(count)) = (header, size, count) else {
        return Vec::new();
    };
    if header < 12 || size < 24 {
        warnings.push(Warning::new(
            "truncated-dump",
            format!(
                "the minidump's unloaded-module list has a header of {header} bytes and \
                 entries of {size} (at least 12 and 24): not read"
            ),
        ));
        return Vec::new();
    }
    let name = |rva: u32| minidump_string(file, rva);
    let mut out = Vec::new();
    let mut missing = 0usize;
    for i in 0..count.min(MAX_SYSTEM_ITEMS) {
        let Some(e) = header
            .checked_add(i.saturating_mul(size))
            .and_then(|at| stream.get(at..at.checked_add(24)?))
        else {
            missing = count.min(MAX_SYSTEM_ITEMS) - i;
            break;
        };
        let (Some(base), Some(length), Some(stamp), Some(rva)) =
            (le_u64(e, 0), le_u32(e, 8), le_u32(e, 16), le_u32(e, 20))
        else {
            break;
        };
        let Some(path) = name(rva) else {
            missing += 1;
            continue;
        };
        let name = file_name(&path).to_owned();
        out.push(UnloadedModule {
            path: (path != name).then_some(path),
            name,
            base,
            end: base.saturating_add(u64::from(length)),
            build_id: None,
            debug_id: None,
            // as minidump-stackwalk gives it (rust-minidump's unloaded-module code id)
            code_id: Some(format!("{stamp:08x}{length:x}")),
        });
    }
    if missing > 0 || count > MAX_SYSTEM_ITEMS {
        warnings.push(Warning::new(
            "truncated-dump",
            format!(
                "the minidump's unloaded-module list says {count} modules; {} could be read",
                out.len()
            ),
        ));
    }
    out
}

/// Crashpad's annotations: the process's, then each module's (the first of a key wins).
fn annotations_of(info: &MinidumpCrashpadInfo) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    for (k, v) in &info.simple_annotations {
        annotations.insert(k.clone(), v.clone());
    }
    for module_info in &info.module_list {
        for (k, v) in &module_info.simple_annotations {
            annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &module_info.annotation_objects {
            if let minidump::MinidumpAnnotation::String(s) = v {
                annotations.entry(k.clone()).or_insert_with(|| s.clone());
            }
        }
    }
    annotations
}

/// Maps the crate's error for an unreadable header or directory to ours.
fn header_error(e: minidump::Error) -> DumpError {
    match e {
        minidump::Error::HeaderMismatch => DumpError::NotADump,
        minidump::Error::MissingHeader => {
            DumpError::Truncated("the file ends inside the minidump header".into())
        }
        minidump::Error::MissingDirectory => {
            DumpError::Truncated("the file ends inside the minidump's stream directory".into())
        }
        minidump::Error::VersionMismatch => {
            DumpError::Unsupported("the minidump header has an unknown version".into())
        }
        other => DumpError::Malformed(format!("minidump: {}", other.name())),
    }
}

fn arch_of(cpu: Cpu) -> Result<Arch, DumpError> {
    match cpu {
        Cpu::X86_64 => Ok(Arch::X86_64),
        // Cpu::Arm64 covers both the Windows ARM64 id and Breakpad's old ARM64 id.
        Cpu::Arm64 => Ok(Arch::Aarch64),
        Cpu::X86 => Ok(Arch::X86),
        Cpu::Arm => Ok(Arch::Arm),
        other => Err(DumpError::UnsupportedArch(format!("minidump CPU {other}"))),
    }
}

fn os_of(os: MdOs) -> Os {
    match os {
        MdOs::Linux => Os::Linux,
        MdOs::Android => Os::Android,
        MdOs::MacOs => Os::Macos,
        MdOs::Ios => Os::Ios,
        MdOs::Windows => Os::Windows,
        _ => Os::Unknown,
    }
}

/// The slice `[rva, rva + size)` of the file, cut at the end of the file (a truncated
/// minidump keeps what it has); `None` when not even the first byte is present.
fn file_slice(bytes: &[u8], rva: u64, size: u64) -> Option<&[u8]> {
    let start = usize::try_from(rva).ok()?;
    let rest = bytes.get(start..)?;
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let slice = &rest[..rest.len().min(size)];
    (!slice.is_empty()).then_some(slice)
}

/// The `MINIDUMP_STRING` at `rva` in the file (a u32 byte length, then UTF-16LE), at
/// most `2 * MAX_SYSTEM_TEXT` bytes of it; `None` for RVA 0 or one past the file.
fn minidump_string(file: &[u8], rva: u32) -> Option<String> {
    let at = usize::try_from(rva).ok().filter(|&a| a != 0)?;
    let len = usize::try_from(le_u32(file, at)?)
        .ok()?
        .min(2 * MAX_SYSTEM_TEXT);
    let from = at.checked_add(4)?;
    let bytes = file.get(from..from.checked_add(len)?)?;
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    Some(String::from_utf16_lossy(&units))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// Adds the ranges of a `MINIDUMP_MEMORY_LIST` stream. Only descriptors that lie inside the
/// stream are read, whatever count it claims. Returns whether anything was cut short.
///
/// Breakpad's Mac writer aligns the descriptors to 8 bytes: 4 bytes of padding follow the
/// count, which the stream's size shows (8 + 16 × count instead of 4 + 16 × count).
/// rust-minidump and Breakpad's processor read that layout the same way.
fn memory_list<'d>(bytes: &'d [u8], stream: &[u8], out: &mut Vec<(u64, &'d [u8])>) -> bool {
    let Some(count) = le_u32(stream, 0) else {
        return !stream.is_empty();
    };
    let padded_len = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(MEMORY_DESCRIPTOR_SIZE))
        .and_then(|n| n.checked_add(8));
    let first = if padded_len == Some(stream.len()) {
        8
    } else {
        4
    };
    let present = (stream.len() - first) / MEMORY_DESCRIPTOR_SIZE;
    let mut truncated = usize::try_from(count).map_or(true, |c| c > present);
    for i in 0..present.min(usize::try_from(count).unwrap_or(usize::MAX)) {
        let at = first + i * MEMORY_DESCRIPTOR_SIZE;
        let (Some(addr), Some(size), Some(rva)) = (
            le_u64(stream, at),
            le_u32(stream, at + 8),
            le_u32(stream, at + 12),
        ) else {
            break;
        };
        match file_slice(bytes, u64::from(rva), u64::from(size)) {
            Some(b) => {
                truncated |= (b.len() as u64) < u64::from(size);
                out.push((addr, b));
            }
            None => truncated |= size > 0,
        }
    }
    truncated
}

/// Adds the ranges of a `MINIDUMP_MEMORY64_LIST` stream (full dumps): the ranges' bytes are
/// consecutive from one base offset. Returns whether anything was cut short.
fn memory64_list<'d>(bytes: &'d [u8], stream: &[u8], out: &mut Vec<(u64, &'d [u8])>) -> bool {
    let (Some(count), Some(mut rva)) = (le_u64(stream, 0), le_u64(stream, 8)) else {
        return !stream.is_empty();
    };
    let present = (stream.len() - 16) / MEMORY_DESCRIPTOR64_SIZE;
    let wanted = usize::try_from(count).unwrap_or(usize::MAX);
    let mut truncated = wanted > present;
    for i in 0..present.min(wanted) {
        let at = 16 + i * MEMORY_DESCRIPTOR64_SIZE;
        let (Some(addr), Some(size)) = (le_u64(stream, at), le_u64(stream, at + 8)) else {
            break;
        };
        match file_slice(bytes, rva, size) {
            Some(b) => {
                truncated |= (b.len() as u64) < size;
                out.push((addr, b));
            }
            None => truncated |= size > 0,
        }
        let Some(next) = rva.checked_add(size) else {
            return true;
        };
        rva = next;
    }
    truncated
}

/// Windows CONTEXT flag groups, shared by every architecture's context.
const CONTROL: u64 = 0x1;
const INTEGER: u64 = 0x2;
const SEGMENTS: u64 = 0x4;

/// The register groups a context holds, by its flags. A context whose flags name no
/// group at all, only its CPU (Breakpad's Mac writer sets `context_flags` to the
/// architecture bit alone: `0x0010_0000` on x86_64), holds every register its size
/// holds: rust-minidump and Breakpad's processor read all of them whatever the flags say,
/// and a context of that size from that writer has them all. Where the flags do name
/// groups (Windows, Crashpad, minidump-writer), only those are known.
fn groups_of(flags: u64) -> u64 {
    const GROUPS: u64 = 0xff;
    if flags & GROUPS == 0 {
        CONTROL | INTEGER | SEGMENTS
    } else {
        flags
    }
}

/// Converts a minidump CPU context into registers by DWARF number. Only the register groups
/// the context's flags declare present become known ([`groups_of`]).
fn registers_of(arch: Arch, ctx: &MinidumpContext) -> RegisterSet {
    let mut r = RegisterSet::new(arch);
    match &ctx.raw {
        MinidumpRawContext::Amd64(c) if arch == Arch::X86_64 => {
            use x86_64::Reg::*;
            let flags = groups_of(u64::from(c.context_flags));
            if flags & INTEGER != 0 {
                for (reg, v) in [
                    (Rax, c.rax),
                    (Rdx, c.rdx),
                    (Rcx, c.rcx),
                    (Rbx, c.rbx),
                    (Rsi, c.rsi),
                    (Rdi, c.rdi),
                    (Rbp, c.rbp),
                    (R8, c.r8),
                    (R9, c.r9),
                    (R10, c.r10),
                    (R11, c.r11),
                    (R12, c.r12),
                    (R13, c.r13),
                    (R14, c.r14),
                    (R15, c.r15),
                ] {
                    r.set(reg, v);
                }
            }
            if flags & CONTROL != 0 {
                r.set(Rsp, c.rsp);
                r.set(Rip, c.rip);
                r.set(Rflags, u64::from(c.eflags));
                r.set(Cs, u64::from(c.cs));
                r.set(Ss, u64::from(c.ss));
            }
            if flags & SEGMENTS != 0 {
                r.set(Es, u64::from(c.es));
                r.set(Ds, u64::from(c.ds));
                r.set(Fs, u64::from(c.fs));
                r.set(Gs, u64::from(c.gs));
            }
        }
        MinidumpRawContext::Arm64(c) if arch == Arch::Aarch64 => {
            arm64(
                &mut r,
                groups_of(u64::from(c.context_flags)),
                &c.iregs,
                c.sp,
                c.pc,
                c.cpsr,
            );
        }
        MinidumpRawContext::OldArm64(c) if arch == Arch::Aarch64 => {
            arm64(
                &mut r,
                old_arm64_groups(c.context_flags),
                &c.iregs,
                c.sp,
                c.pc,
                c.cpsr,
            );
        }
        MinidumpRawContext::X86(c) if arch == Arch::X86 => {
            use x86::Reg::*;
            let flags = groups_of(u64::from(c.context_flags));
            if flags & INTEGER != 0 {
                for (reg, v) in [
                    (Eax, c.eax),
                    (Ecx, c.ecx),
                    (Edx, c.edx),
                    (Ebx, c.ebx),
                    (Esi, c.esi),
                    (Edi, c.edi),
                ] {
                    r.set(reg, u64::from(v));
                }
            }
            if flags & CONTROL != 0 {
                r.set(Esp, u64::from(c.esp));
                r.set(Ebp, u64::from(c.ebp));
                r.set(Eip, u64::from(c.eip));
                r.set(Eflags, u64::from(c.eflags));
            }
        }
        // ARM contexts keep r0–r15 (sp, lr, pc included) in the integer group.
        MinidumpRawContext::Arm(c)
            if arch == Arch::Arm && groups_of(u64::from(c.context_flags)) & INTEGER != 0 =>
        {
            // r0–r15 in DWARF order, and cpsr (its T bit: the thread ran Thumb code)
            for (reg, v) in (arm::Reg::R0.dwarf()..).zip(c.iregs.iter()) {
                r.set(reg, u64::from(*v));
            }
            r.set(arm::CPSR_SLOT, u64::from(c.cpsr));
        }
        // A context of another CPU than the system info says: nothing is trusted.
        _ => {}
    }
    r
}

/// The groups of Breakpad's first arm64 context (`MDRawContextARM64_Old`, 64-bit flags
/// with `0x8000_0000` as its CPU bit). Its one register array holds x0–x30, sp and pc
/// together, and its Android writer sets `MD_CONTEXT_ARM64_FULL_OLD` as
/// `0x8000_0006` (integer and floating point, no control bit): the integer group there
/// stands for every register of the array, as Breakpad's processor and rust-minidump
/// read it.
fn old_arm64_groups(flags: u64) -> u64 {
    let groups = groups_of(flags & !0x8000_0000);
    if groups & INTEGER != 0 {
        groups | CONTROL
    } else {
        groups
    }
}

/// aarch64: x0–x28 in the integer group; fp, lr, sp, pc and pstate in the control group.
fn arm64(r: &mut RegisterSet, flags: u64, iregs: &[u64; 31], sp: u64, pc: u64, cpsr: u32) {
    // x0–x30 in DWARF order
    for (reg, v) in (aarch64::Reg::X0.dwarf()..).zip(iregs.iter()) {
        let group = if reg >= aarch64::FP.dwarf() {
            CONTROL
        } else {
            INTEGER
        };
        if flags & group != 0 {
            r.set(reg, *v);
        }
    }
    if flags & CONTROL != 0 {
        r.set(aarch64::Reg::Sp, sp);
        r.set(aarch64::Reg::Pc, pc);
        r.set(aarch64::Reg::Pstate, u64::from(cpsr));
    }
}

/// The last component of a path, Unix or Windows.
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The address range a module's record gives, end exclusive.
fn range_of(m: &MinidumpModule) -> (u64, u64) {
    let base = m.raw.base_of_image;
    (base, base.saturating_add(u64::from(m.raw.size_of_image)))
}

fn module_of(
    m: &MinidumpModule,
    first: bool,
    mappings: Vec<Mapping>,
    memory: &MemoryMap<'_>,
) -> Module {
    let (base, end) = range_of(m);
    let path = (!m.name.is_empty()).then(|| m.name.clone());
    let mut build_id = match &m.codeview_info {
        Some(CodeView::Elf(elf)) if elf.build_id.iter().any(|&b| b != 0) => {
            Some(elf.build_id.clone())
        }
        _ => None,
    };
    if build_id.is_none() && !matches!(m.codeview_info, Some(CodeView::Pdb70(_))) {
        // No build-id record: the dump may still hold the module's first pages (the vdso
        // always; others when the writer captured them), whose notes carry the build-id.
        build_id = build_id_from_memory(memory, base, end);
    }
    let debug_id = m
        .debug_identifier()
        .map(|d| d.breakpad().to_string())
        .or_else(|| build_id.as_deref().map(breakpad_debug_id_from_build_id));
    // Breakpad's debug file: a PDB's name for a Windows module, the module's own name
    // otherwise (kept only where it differs)
    let debug_file = m
        .debug_file()
        .map(|f| file_name(&f).to_owned())
        .filter(|f| !f.is_empty() && f != file_name(&m.name));
    let code_id = m
        .code_identifier()
        .map(|c| c.to_string())
        .or_else(|| build_id.as_deref().map(super::hex));
    let identity = if build_id.is_some() || debug_id.is_some() {
        Identity::BuildId
    } else if path.is_some() {
        Identity::Path
    } else {
        Identity::None
    };
    Module {
        name: file_name(&m.name).to_owned(),
        path,
        base,
        end,
        // Minidumps record where the module's first byte is mapped, which for ELF is the
        // link-time base (first PT_LOAD, page-aligned) after relocation.
        load_base: base,
        build_id,
        debug_id,
        debug_file,
        code_id,
        version: m.version().map(|v| v.into_owned()),
        identity,
        main: first,
        mappings,
    }
}

/// Reads the GNU build-id from an ELF image mapped at `base`, when the dump holds its
/// headers and notes. Every offset comes from the image and is bounds-checked.
fn build_id_from_memory(memory: &MemoryMap<'_>, base: u64, end: u64) -> Option<Vec<u8>> {
    let ehdr = memory.read_bytes(base, 64)?;
    if ehdr.get(..4)? != b"\x7fELF" || *ehdr.get(5)? != 1 {
        return None; // not ELF, or not little-endian
    }
    let is64 = match ehdr.get(4)? {
        2 => true,
        1 => false,
        _ => return None,
    };
    let u16_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from(u16::from_le_bytes(
            b.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let word = |b: &[u8], at: usize| -> Option<u64> {
        if is64 {
            le_u64(b, at)
        } else {
            le_u32(b, at).map(u64::from)
        }
    };
    let (phoff, phentsize, phnum) = if is64 {
        (le_u64(ehdr, 32)?, u16_at(ehdr, 54)?, u16_at(ehdr, 56)?)
    } else {
        (
            u64::from(le_u32(ehdr, 28)?),
            u16_at(ehdr, 42)?,
            u16_at(ehdr, 44)?,
        )
    };
    let ph_size = if is64 { 56 } else { 32 };
    if phentsize < ph_size {
        return None;
    }
    let mut phdrs = Vec::new();
    for i in 0..phnum {
        let at = base
            .checked_add(phoff)?
            .checked_add(i.checked_mul(phentsize)?)?;
        let Some(ph) = memory.read_bytes(at, usize::try_from(ph_size).ok()?) else {
            break;
        };
        let p_type = le_u32(ph, 0)?;
        let (vaddr, filesz) = if is64 {
            (word(ph, 16)?, word(ph, 32)?)
        } else {
            (word(ph, 8)?, word(ph, 16)?)
        };
        phdrs.push((p_type, vaddr, filesz));
    }
    const PT_LOAD: u32 = 1;
    const PT_NOTE: u32 = 4;
    let link_base = phdrs
        .iter()
        .filter(|p| p.0 == PT_LOAD)
        .map(|p| p.1 & !0xfff)
        .min()?;
    for &(_, vaddr, filesz) in phdrs.iter().filter(|p| p.0 == PT_NOTE) {
        let start = base.checked_add(vaddr.checked_sub(link_base)?)?;
        if start >= end {
            continue;
        }
        let notes = memory.read_bytes(start, usize::try_from(filesz).ok()?)?;
        let mut off = 0usize;
        while off + 12 <= notes.len() {
            let namesz = usize::try_from(le_u32(notes, off)?).ok()?;
            let descsz = usize::try_from(le_u32(notes, off + 4)?).ok()?;
            let ntype = le_u32(notes, off + 8)?;
            let name_at = off + 12;
            let desc_at = name_at.checked_add(namesz.checked_add(3)? & !3)?;
            let next = desc_at.checked_add(descsz.checked_add(3)? & !3)?;
            const NT_GNU_BUILD_ID: u32 = 3;
            if ntype == NT_GNU_BUILD_ID && notes.get(name_at..name_at + namesz)? == b"GNU\0" {
                return notes.get(desc_at..desc_at + descsz).map(<[u8]>::to_vec);
            }
            off = next;
        }
    }
    None
}

fn crash_of(
    e: &MinidumpException,
    system_info: &MinidumpSystemInfo,
    os: Os,
    assertion: Option<String>,
) -> Option<CrashInfo> {
    let record = &e.raw.exception_record;
    let address = Some(e.get_crash_address(system_info.os, system_info.cpu));
    let tid = e.get_crashing_thread_id();
    match os {
        Os::Linux | Os::Android => {
            // Breakpad, Crashpad and minidump-writer store the signal number in
            // exception_code and si_code in exception_flags.
            if record.exception_code == LINUX_DUMP_REQUESTED {
                return assertion.map(|a| CrashInfo {
                    tid,
                    assertion: Some(a),
                    ..CrashInfo::default()
                });
            }
            Some(CrashInfo {
                tid,
                signal: Some(record.exception_code),
                code: Some(record.exception_flags as i32),
                address,
                exception: None,
                assertion,
            })
        }
        _ => Some(CrashInfo {
            tid,
            signal: None,
            code: None,
            address,
            exception: Some(ExceptionInfo {
                code: u64::from(record.exception_code),
                name: e
                    .get_crash_reason(system_info.os, system_info.cpu)
                    .to_string(),
                flags: u64::from(record.exception_flags),
                parameters: record
                    .exception_information
                    .iter()
                    .take(usize::try_from(record.number_parameters).unwrap_or(usize::MAX))
                    .copied()
                    .collect(),
            }),
            assertion,
        }),
    }
}

fn assertion_text(a: &MinidumpAssertion) -> Option<String> {
    let expr = a.expression().filter(|s| !s.is_empty());
    let function = a.function().filter(|s| !s.is_empty());
    let file = a.file().filter(|s| !s.is_empty());
    if expr.is_none() && function.is_none() && file.is_none() {
        return None;
    }
    let mut s = expr.unwrap_or_else(|| "assertion failed".into());
    match (function, file) {
        (Some(f), Some(file)) => s.push_str(&format!(" in {f} at {file}:{}", a.raw.line)),
        (Some(f), None) => s.push_str(&format!(" in {f}")),
        (None, Some(file)) => s.push_str(&format!(" at {file}:{}", a.raw.line)),
        (None, None) => {}
    }
    Some(s)
}

/// Which program wrote the dump, when a stream says so: Crashpad writes its info stream,
/// minidump-writer its `Moz*` streams, Breakpad its Breakpad-info stream.
fn writer_of(md: &Minidump<'_, &[u8]>, has_crashpad_info: bool) -> Option<String> {
    let has = |t: MINIDUMP_STREAM_TYPE| md.all_streams().any(|d| d.stream_type == t as u32);
    if has_crashpad_info {
        Some("crashpad".into())
    } else if has(MINIDUMP_STREAM_TYPE::MozSoftErrors) || has(MINIDUMP_STREAM_TYPE::MozLinuxLimits)
    {
        Some("minidump-writer".into())
    } else if has(MINIDUMP_STREAM_TYPE::BreakpadInfoStream) {
        Some("breakpad".into())
    } else {
        None
    }
}

fn linux_status_pid(status: &MinidumpLinuxProcStatus) -> Option<u32> {
    status.iter().find_map(|(k, v)| {
        (k.as_bytes() == b"Tgid" || k.as_bytes() == b"Pid")
            .then(|| std::str::from_utf8(v.as_bytes()).ok()?.trim().parse().ok())
            .flatten()
    })
}

/// `/proc/self/cmdline`: NUL-separated arguments, joined by spaces.
fn command_line_of(raw: &[u8]) -> Option<String> {
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then(|| args.join(" "))
}

/// Seconds since the epoch as RFC 3339 UTC (`2024-05-01T12:00:00Z`); `None` for 0, which
/// writers use for "not recorded".
fn rfc3339_utc(secs: u64) -> Option<String> {
    if secs == 0 {
        return None;
    }
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm), for days since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339_utc(0), None);
        assert_eq!(rfc3339_utc(1).as_deref(), Some("1970-01-01T00:00:01Z"));
        // `date -u -d @951782400` = 2000-02-29 00:00:00 (a leap day)
        assert_eq!(
            rfc3339_utc(951_782_400).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        // `date -u -d @4294967295` = 2106-02-07 06:28:15 (largest u32 timestamp)
        assert_eq!(
            rfc3339_utc(4_294_967_295).as_deref(),
            Some("2106-02-07T06:28:15Z")
        );
    }

    #[test]
    fn breakpad_debug_id_swaps_guid_fields() {
        // Breakpad's dump_syms prints this debug id for build-id 000102…0f…
        let id: Vec<u8> = (0u8..20).collect();
        assert_eq!(
            breakpad_debug_id_from_build_id(&id),
            "030201000504070608090A0B0C0D0E0F0"
        );
    }

    #[test]
    fn file_slice_cuts_at_end_of_file() {
        let b = [1u8, 2, 3, 4];
        assert_eq!(file_slice(&b, 2, 10), Some(&b[2..]));
        assert_eq!(file_slice(&b, 4, 1), None);
        assert_eq!(file_slice(&b, u64::MAX, u64::MAX), None);
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name("/usr/lib/libc.so.6"), "libc.so.6");
        assert_eq!(file_name("C:\\Windows\\ntdll.dll"), "ntdll.dll");
        assert_eq!(file_name("plain"), "plain");
    }

    #[test]
    fn handle_streams_stay_bounded() {
        // a file whose only name, at offset 8, claims 4 GiB
        let mut file = vec![0u8; 8];
        file.extend(u32::MAX.to_le_bytes());
        file.extend([b'x', 0]);
        let mut stream = Vec::new();
        for v in [16u32, 32, u32::MAX, 0] {
            stream.extend(v.to_le_bytes());
        }
        // a descriptor: handle, no type name, object name at `object` (0: none)
        let descriptor = |handle: u64, object: u32| {
            let mut d = handle.to_le_bytes().to_vec();
            d.extend(0u32.to_le_bytes());
            d.extend(object.to_le_bytes());
            d.extend([0u8; 16]);
            d
        };
        stream.extend(descriptor(3, 8));
        stream.extend(descriptor(4, 0));
        // claims 4 billion descriptors, holds two: two are read, nothing more allocated
        let handles = handles_of(&stream, &file).expect("handles");
        assert_eq!(handles.len(), 2);
        assert_eq!(handles[0].handle, Some(3));
        // the name claimed 4 GiB and the file holds 2 bytes of it: not read
        assert_eq!(handles[0].object_name, None);
        assert_eq!(handles[1].object_name, None);
        // a name the file holds
        let mut file2 = vec![0u8; 4];
        file2.extend(4u32.to_le_bytes());
        file2.extend([b'f', 0, b'd', 0]);
        let mut named = stream.clone();
        named.truncate(16);
        named.extend(descriptor(6, 4));
        let named = handles_of(&named, &file2).expect("handles");
        assert_eq!(named[0].object_name.as_deref(), Some("fd"));
        // headers smaller than their own fields: nothing
        assert!(handles_of(&[0u8; 16], &file).is_none());
    }
}
