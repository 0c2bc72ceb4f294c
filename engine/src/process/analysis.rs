//! Why the process died, in words a person at 2 a.m. can act on: `SIGSEGV / SEGV_MAPERR
//! at 0x18` becomes "read or write through a null pointer: NULL + 0x18", with the
//! evidence it rests on (addresses, the stack pointer, the functions involved, glibc's
//! abort message read from the dump's memory). Only what the dump and the walk show is
//! said; where they show nothing more than the signal, there is no analysis.
//!
//! Linux dumps say why by a signal and its `si_code`; Windows minidumps by an exception
//! code ([`windows`]). Both end in the same kinds where the meaning is the same: the
//! memory faults, the stack, a division, an illegal instruction share the functions below.

mod heap;
mod msvc_throw;
mod rust_panic;
mod windows;

use std::collections::BTreeMap;

use crate::dump::{self, Dump};
use crate::report::{self, hex_addr, AccessKind, Addr, Analysis, AnalysisKind, CrashInstruction};

use crate::tables::Loaded;

const SIGILL: u32 = 4;
const SIGABRT: u32 = 6;
const SIGBUS: u32 = 7;
const SIGFPE: u32 = 8;
const SIGSEGV: u32 = 11;
/// `si_code`s of SIGSEGV and SIGFPE.
const SEGV_MAPERR: i32 = 1;
const SEGV_ACCERR: i32 = 2;
const SI_KERNEL: i32 = 0x80;
const FPE_INTDIV: i32 = 1;

/// Addresses below this are "null": a null pointer plus a field's offset.
const NULL_PAGE: u64 = 0x1000;
/// A fault this far below the stack pointer (or less) is the stack running out: a frame
/// is allocated below the pointer before it is touched (large locals, `alloca`).
const STACK_REACH: u64 = 256 << 10;
/// Longest abort message read.
const MAX_MESSAGE: usize = 4096;

/// The analysis of `crash`, whose thread the walk put first in `threads`.
pub(super) fn analyse(
    dump: &Dump<'_>,
    loaded: &[Loaded],
    crash: &dump::CrashInfo,
    threads: &[report::Thread],
    instruction: Option<&CrashInstruction>,
) -> Option<Analysis> {
    let thread = threads.iter().find(|t| t.crashed)?;
    let frame0 = thread.frames.first()?;
    let c = Crashed {
        dump,
        loaded,
        thread,
        frame0,
        caller: thread.frames.iter().find(|f| !f.inlined && f.index > 0),
        pc: frame0.pc.get(),
        sp: frame0.sp.map(Addr::get),
        instruction,
    };
    let mut evidence = BTreeMap::new();
    evidence.insert("thread".to_string(), thread.tid.to_string());
    evidence.insert("pc".to_string(), hex_addr(c.pc));
    if let Some(f) = described(frame0) {
        evidence.insert("function".to_string(), f);
    }
    if let Some(f) = c.caller.and_then(described) {
        evidence.insert("caller".to_string(), f);
    }
    let heap = heap::analyse(dump, evidence.clone());
    let mut analysis = match (crash.signal, &crash.exception) {
        (Some(signal), _) => by_signal(&c, signal, crash, evidence),
        (None, Some(exception)) => windows::analyse(&c, exception, crash.address, evidence),
        (None, None) => None,
    };
    // An Android GWP-ASan/MTE error names the bug better than the signal it raised.
    if heap.is_some() {
        analysis = heap;
    }
    // An Android tombstone's own diagnosis (debuggerd's `Cause:`), beside ours.
    if let (Some(a), Some(cause)) = (analysis.as_mut(), dump.annotations.get("android.cause.0")) {
        a.evidence.insert("cause".to_string(), cause.clone());
    }
    analysis
}

/// The crashed thread as the walk left it, and where to read more: what every kind's
/// evidence is drawn from.
struct Crashed<'a, 'd> {
    dump: &'a Dump<'d>,
    loaded: &'a [Loaded],
    thread: &'a report::Thread,
    frame0: &'a report::Frame,
    /// The first physical frame above frame 0: the one that called, or jumped.
    caller: Option<&'a report::Frame>,
    pc: u64,
    sp: Option<u64>,
    /// The instruction at `pc`, when it was decoded.
    instruction: Option<&'a CrashInstruction>,
}

fn found(
    kind: AnalysisKind,
    summary: String,
    evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    Some(Analysis {
        kind,
        summary,
        evidence,
        stacks: Vec::new(),
    })
}

/// The analysis of a crash a Linux signal describes.
fn by_signal(
    c: &Crashed<'_, '_>,
    signal: u32,
    crash: &dump::CrashInfo,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    match (signal, crash.code) {
        (SIGABRT, _) => abort(c, evidence),
        (SIGFPE, Some(FPE_INTDIV)) => divide_by_zero(c, evidence),
        (SIGSEGV | SIGBUS | SIGILL, code) => {
            if let Some(a) = branch_fault(c, in_code(c.dump, c.pc), &mut evidence) {
                return Some(a);
            }
            if signal == SIGILL {
                return illegal_instruction(c, evidence);
            }
            let mapped = match (signal, code) {
                (SIGSEGV, Some(SEGV_MAPERR)) => Mapped::No,
                (SIGSEGV, Some(SEGV_ACCERR)) => Mapped::Denied,
                // SIGBUS codes mean other things than SIGSEGV's
                _ => Mapped::Unknown,
            };
            let fault = MemoryFault {
                address: crash.address,
                way: None,
                mapped,
                general_protection: c.dump.arch == dump::Arch::X86_64
                    && signal == SIGSEGV
                    && code == Some(SI_KERNEL),
            };
            memory_fault(c, &fault, evidence)
        }
        _ => None,
    }
}

/// The analysis of `SIGABRT`: abort()'s message, a Rust panic that aborted, or an uncaught
/// C++ exception and where it was thrown.
fn abort(c: &Crashed<'_, '_>, mut evidence: BTreeMap<String, String>) -> Option<Analysis> {
    let thread = c.thread;
    let message = abort_message(c.dump, c.loaded);
    let caller = program_caller(thread);
    if let Some(cf) = &caller {
        evidence.insert("caller".to_string(), cf.clone());
    }
    let thrown = thread.frames.iter().any(|f| {
        matches!(
            f.function.as_deref(),
            Some("__cxa_throw" | "__cxa_rethrow" | "_Unwind_RaiseException")
        )
    });
    if let Some(site) = rust_panic::site(thread) {
        return rust_abort(c, site, evidence);
    }
    let exception = thrown
        .then(|| thrown_exception(c.dump, c.loaded, thread))
        .flatten();
    let what = match &exception {
        Some(e) => {
            evidence.insert("exception_type".to_string(), e.type_name.clone());
            if let Some(w) = &e.what {
                evidence.insert("what".to_string(), w.clone());
            }
            match &e.what {
                Some(w) => format!(" {} ({w:?})", e.type_name),
                None => format!(" {}", e.type_name),
            }
        }
        None => String::new(),
    };
    let summary = match (&message, &caller) {
        (Some(m), _) => format!("abort(): {m}"),
        (None, Some(cf)) if thrown => format!(
            "an uncaught C++ exception{what}, thrown in {cf}: no handler took it (or it \
             left a noexcept function), so std::terminate called abort()"
        ),
        (None, Some(cf)) => format!("abort() called from {cf}"),
        (None, None) => "abort() called".to_string(),
    };
    if let Some(m) = message {
        evidence.insert("message".to_string(), m);
    }
    found(AnalysisKind::Abort, summary, evidence)
}

/// The analysis of a Rust panic that aborted (`panic=abort`, or a panic while panicking),
/// from the panicking frame `site`: where, and the message when the dump holds it.
fn rust_abort(
    c: &Crashed<'_, '_>,
    site: &report::Frame,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let thread = c.thread;
    let at = described(site).unwrap_or_else(|| site.pc.to_string());
    evidence.insert("panicked_in".to_string(), at.clone());
    // the program's frame, not std's abort machinery
    evidence.insert("caller".to_string(), at.clone());
    let (message, panicked_at) = match rust_panic::message(c.dump, c.loaded, thread, site) {
        Ok(h) => (h.message, h.location),
        Err(e) => (Err(e), None),
    };
    let location = match (&site.file, site.line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        _ => None,
    };
    let mut summary = format!("a Rust panic in {at}");
    // the frame's line, else std's own location (no debug information)
    if let Some(l) = location.as_ref().or(panicked_at.as_ref()) {
        summary.push_str(&format!(" ({l})"));
    }
    if let Some(l) = location {
        evidence.insert("location".to_string(), l);
    }
    if let Some(l) = panicked_at {
        evidence.insert("panicked_at".to_string(), l);
    }
    match message {
        Ok(m) => {
            summary.push_str(&format!(": {m:?}"));
            evidence.insert("message".to_string(), m);
        }
        Err(why) => {
            evidence.insert("message_unread".to_string(), why.as_str().to_string());
        }
    }
    summary.push_str(", aborting (panic=abort, or a panic while panicking)");
    found(AnalysisKind::Abort, summary, evidence)
}

/// Which way a faulting access went: what the system reports (Windows) or the decoded
/// instruction shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Read,
    Write,
    ReadWrite,
    Execute,
}

impl Way {
    fn of(k: AccessKind) -> Way {
        match k {
            AccessKind::Read => Way::Read,
            AccessKind::Write => Way::Write,
            AccessKind::ReadWrite => Way::ReadWrite,
        }
    }

    /// The evidence's `access`: as the report's instruction accesses name it.
    fn as_str(self) -> &'static str {
        match self {
            Way::Read => AccessKind::Read.as_str(),
            Way::Write => AccessKind::Write.as_str(),
            Way::ReadWrite => AccessKind::ReadWrite.as_str(),
            Way::Execute => "execute",
        }
    }
}

/// "read", "write", "read and write", "execute", or "read or write" when unknown.
fn way(access: Option<Way>) -> &'static str {
    match access {
        Some(Way::Read) => "read",
        Some(Way::Write) => "write",
        Some(Way::ReadWrite) => "read and write",
        Some(Way::Execute) => "execute",
        None => "read or write",
    }
}

/// Whether the page at a faulting address was mapped, as the system says (Linux's
/// `SEGV_MAPERR`/`SEGV_ACCERR`) or the dump shows (a Windows image is mapped whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mapped {
    /// Nothing is mapped there.
    No,
    /// Mapped, but not for this access: read-only, or not executable.
    Denied,
    Unknown,
}

/// What the system reports of a memory fault.
struct MemoryFault {
    address: Option<u64>,
    /// Which way the access went, when the system says (Windows does; a signal does not,
    /// and the decoded instruction is asked instead).
    way: Option<Way>,
    mapped: Mapped,
    /// An x86_64 general-protection fault: the CPU reports no address (a non-canonical
    /// one), `address` is not the fault's.
    general_protection: bool,
}

/// A call or jump that sent the pc nowhere: into the null page (a null function pointer)
/// or, unless `in_code`, outside all code. Takes the evidence when it is one.
fn branch_fault(
    c: &Crashed<'_, '_>,
    in_code: bool,
    evidence: &mut BTreeMap<String, String>,
) -> Option<Analysis> {
    let from = c
        .caller
        .and_then(described)
        .map(|cf| format!(", called from {cf}"))
        .unwrap_or_default();
    if c.pc < NULL_PAGE {
        return found(
            AnalysisKind::NullPointer,
            format!(
                "call through a null function pointer (pc {}){from}",
                hex_addr(c.pc)
            ),
            std::mem::take(evidence),
        );
    }
    if !in_code {
        // mapped, but the dump says not for execution: the heap, a stack, a module's data
        let into = if c.dump.regions.executable(c.pc) == Some(false) {
            "into memory mapped but not executable (heap, stack or data)"
        } else {
            "outside all code"
        };
        return found(
            AnalysisKind::BadJump,
            format!(
                "jump to {}, {into}: a corrupted function pointer or return address{from}",
                hex_addr(c.pc)
            ),
            std::mem::take(evidence),
        );
    }
    None
}

/// An illegal instruction in code.
fn illegal_instruction(
    c: &Crashed<'_, '_>,
    evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let at = described(c.frame0).unwrap_or_else(|| hex_addr(c.pc));
    found(
        AnalysisKind::IllegalInstruction,
        format!(
            "illegal instruction in {at}: a trap the compiler put there (__builtin_trap, \
             unreachable code reached, a hardening check) or code for another CPU"
        ),
        evidence,
    )
}

/// An integer division by zero.
fn divide_by_zero(c: &Crashed<'_, '_>, evidence: BTreeMap<String, String>) -> Option<Analysis> {
    let at = described(c.frame0).unwrap_or_else(|| hex_addr(c.pc));
    found(
        AnalysisKind::DivideByZero,
        format!("integer division by zero in {at}"),
        evidence,
    )
}

/// The crashed thread's stack overflowed: `fault` is the faulting address and how far
/// below the stack pointer it lies, when that is how it is known; otherwise the system
/// said so (Windows' EXCEPTION_STACK_OVERFLOW).
fn stack_overflow(
    c: &Crashed<'_, '_>,
    fault: Option<StackFault>,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let thread = c.thread;
    if let Some(sp) = c.sp {
        evidence.insert("sp".to_string(), hex_addr(sp));
    }
    evidence.insert("depth".to_string(), thread.frames.len().to_string());
    // A walk stopped by a frame limit (the thread's, or the dump's frame budget) saw only
    // the innermost frames of a stack that goes on: its length is a lower bound.
    let deep = if thread.end == report::EndReason::FrameLimit {
        evidence.insert("depth_cut".to_string(), thread.end.as_str().to_string());
        format!(
            "at least {} frames deep (the walk stopped at its frame limit)",
            thread.frames.len()
        )
    } else {
        format!("{} frames deep", thread.frames.len())
    };
    let mut summary = match fault {
        Some(StackFault::Below { addr, below }) => {
            evidence.insert("below_sp".to_string(), below.to_string());
            format!(
                "stack overflow: the fault at {} is {below} bytes below the stack pointer of \
                 thread {}, {deep}",
                hex_addr(addr),
                thread.tid,
            )
        }
        Some(StackFault::Above {
            addr,
            above,
            bottom,
        }) => {
            evidence.insert("above_sp".to_string(), above.to_string());
            evidence.insert("stack_bottom".to_string(), hex_addr(bottom));
            format!(
                "stack overflow: thread {}'s stack pointer was lowered past the stack's end \
                 ({}) for a new frame, whose first write faulted at {}, {above} bytes above \
                 the pointer, {deep}",
                thread.tid,
                hex_addr(bottom),
                hex_addr(addr),
            )
        }
        None => format!(
            "stack overflow: thread {} ran out of stack, {deep}",
            thread.tid
        ),
    };
    if let Some((f, n)) = most_repeated(thread) {
        summary.push_str(&format!("; {f} is {n} of them (recursion)"));
        evidence.insert("recursing".to_string(), f);
    }
    found(AnalysisKind::StackOverflow, summary, evidence)
}

/// A memory fault's analysis, once the pc is known to be in code.
fn memory_fault(
    c: &Crashed<'_, '_>,
    fault: &MemoryFault,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let dump = c.dump;
    let instruction = c.instruction;
    if let Some(i) = instruction {
        evidence.insert("instruction".to_string(), i.text.clone());
    }
    // the access of the crashing instruction that faulted: at the reported address, or
    // (no address reported) the one at a non-canonical address
    let faulted = |addr: Option<u64>| {
        instruction?.accesses.iter().find(|a| {
            let at = a.address.get();
            match addr {
                Some(addr) => at == addr,
                None => !canonical(at),
            }
        })
    };
    let from = c
        .caller
        .and_then(described)
        .map(|cf| format!(", called from {cf}"))
        .unwrap_or_default();
    if fault.general_protection {
        return general_protection(instruction, faulted(None), &from, evidence);
    }
    let addr = fault.address?;
    evidence.insert("address".to_string(), hex_addr(addr));
    let access = faulted(Some(addr));
    // what the system says, else what the instruction does
    let went = fault
        .way
        .or_else(|| access.and_then(|a| a.access).map(Way::of));
    if let Some(w) = went {
        evidence.insert("access".to_string(), w.as_str().to_string());
    }
    // a null pointer: the first page, or any offset from a base register holding 0
    if addr < NULL_PAGE || access.is_some_and(|a| a.base_null) {
        evidence.insert("offset".to_string(), hex_addr(addr));
        let what = if addr == 0 {
            "NULL".to_string()
        } else {
            format!(
                "NULL + {} (a field of a null struct or an element of a null array)",
                hex_addr(addr)
            )
        };
        return found(
            AnalysisKind::NullPointer,
            format!("{} through a null pointer: {what}", way(went)),
            evidence,
        );
    }
    if let Some(at) = stack_exhausted(c, addr) {
        return stack_overflow(c, Some(at), evidence);
    }
    match fault.mapped {
        Mapped::Denied => protection_fault(dump, fault, addr, evidence),
        Mapped::No => unmapped_access(dump, fault, addr, evidence),
        Mapped::Unknown => None,
    }
}

/// A general-protection fault (x86_64: the CPU reports no address): a branch to a
/// non-canonical address, else the access of the instruction (`faulted`) at one.
fn general_protection(
    instruction: Option<&CrashInstruction>,
    faulted: Option<&report::MemoryAccess>,
    from: &str,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    // a return or call to a non-canonical address faults on the branch itself
    let target = instruction
        .and_then(|i| i.jump)
        .map(Addr::get)
        .filter(|&t| !canonical(t));
    if let Some(t) = target {
        evidence.insert("address".to_string(), hex_addr(t));
        return found(
            AnalysisKind::BadJump,
            format!(
                "jump to the non-canonical address {}: a smashed return address or a \
                 corrupted function pointer (the branch itself faulted){from}",
                hex_addr(t)
            ),
            evidence,
        );
    }
    if let Some(a) = faulted {
        evidence.insert("address".to_string(), a.address.to_string());
        if let Some(k) = a.access {
            evidence.insert("access".to_string(), k.as_str().to_string());
        }
        return found(
            AnalysisKind::GeneralProtection,
            format!(
                "general-protection fault: a {} at the non-canonical address {} (a \
                 corrupted or freed pointer; the CPU reports no address, the \
                 instruction's operands give it)",
                way(a.access.map(Way::of)),
                a.address
            ),
            evidence,
        );
    }
    found(
        AnalysisKind::GeneralProtection,
        "general-protection fault: the CPU reports no address (a non-canonical \
         pointer, such as a corrupted or freed one)"
            .to_string(),
        evidence,
    )
}

/// An access at `addr` that its mapping does not allow (Linux's `SEGV_ACCERR`).
fn protection_fault(
    dump: &Dump<'_>,
    fault: &MemoryFault,
    addr: u64,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let module = dump
        .module_index_for(addr)
        .and_then(|i| dump.modules.get(i))
        .map(|m| m.name.clone());
    let within = module
        .as_deref()
        .map(|m| format!(" (in {m})"))
        .unwrap_or_default();
    if let Some(m) = module {
        evidence.insert("module".to_string(), m);
    }
    let summary = match fault.way {
        Some(Way::Write) => format!(
            "write to read-only memory at {}{within}: a string literal or a \
             constant",
            hex_addr(addr)
        ),
        Some(Way::Execute) => format!(
            "execution at {}{within}, which is not code: a jump into data",
            hex_addr(addr)
        ),
        Some(w) => format!(
            "{} of {}{within}, which its mapping does not allow (a no-access or \
             guard page)",
            way(Some(w)),
            hex_addr(addr)
        ),
        None => format!(
            "access to {}{within} that its mapping does not allow: a write to \
             read-only memory (a string literal, a constant) or executing data",
            hex_addr(addr)
        ),
    };
    found(AnalysisKind::ProtectionFault, summary, evidence)
}

/// An access at `addr` where nothing is mapped (Linux's `SEGV_MAPERR`), with the mapped
/// addresses one flipped bit away.
fn unmapped_access(
    dump: &Dump<'_>,
    fault: &MemoryFault,
    addr: u64,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let flips = bit_flips(dump, addr);
    let mut summary = match fault.way {
        // the system said only that the access failed; the dump shows no module
        // and no memory there
        Some(w) => format!(
            "{} of {}, where the dump shows nothing mapped (no module, no memory \
             it holds): a dangling or corrupted pointer",
            way(Some(w)),
            hex_addr(addr)
        ),
        None => format!(
            "access to unmapped memory at {}: a dangling or corrupted pointer",
            hex_addr(addr)
        ),
    };
    if !flips.is_empty() {
        summary.push_str(" (one flipped bit from mapped memory: see evidence)");
        evidence.insert("bit_flip_of".to_string(), flips.join(" "));
    }
    found(AnalysisKind::UnmappedAccess, summary, evidence)
}

/// Where a fault at `addr` lies relative to the crashed thread's stack pointer, when it is
/// the thread's stack running out; `None` when it is not.
///
/// Two shapes, both with nothing the dump holds at `addr`:
/// - the fault is just below the stack pointer (within [`STACK_REACH`]): a push, a call,
///   or a frame's locals being touched after the pointer was lowered into the guard;
/// - the fault is above the stack pointer, in the frame just set up, and the stack's
///   lowest page (the start of the memory holding the innermost frame whose stack
///   pointer the dump holds) lies just above the fault: the function lowered the pointer
///   past the stack's end in one step (a large frame), and its first write, somewhere in
///   that frame, fell in the guard region. Where in the frame the boundary falls is up to
///   ASLR, so the same bug faults above or below the pointer from run to run.
fn stack_exhausted(c: &Crashed<'_, '_>, addr: u64) -> Option<StackFault> {
    let sp = c.sp?;
    if c.dump.memory.contains(addr) {
        return None;
    }
    if addr < sp.saturating_add(64) {
        let below = sp.saturating_sub(addr);
        return (below <= STACK_REACH).then_some(StackFault::Below { addr, below });
    }
    let above = addr - sp;
    if above > STACK_REACH {
        return None;
    }
    // the stack's bottom: where the memory of the innermost frame the dump holds begins
    let bottom = c
        .thread
        .frames
        .iter()
        .filter_map(|f| f.sp.map(Addr::get))
        .filter(|&s| s > addr)
        .find_map(|s| c.dump.memory.range_of(s))
        .map(|(start, _)| start)?;
    (bottom > addr && bottom - addr <= STACK_REACH).then_some(StackFault::Above {
        addr,
        above,
        bottom,
    })
}

/// A fault that is a stack overflow, relative to the stack pointer (see
/// [`stack_exhausted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StackFault {
    /// `below` bytes below the stack pointer.
    Below { addr: u64, below: u64 },
    /// `above` bytes above the stack pointer, below `bottom`, the stack's lowest byte.
    Above { addr: u64, above: u64, bottom: u64 },
}

/// The first named frame of `thread` outside the C and C++ runtimes and the system's
/// libraries: the program's own frame that led to an abort or a raised exception.
fn program_caller(thread: &report::Thread) -> Option<String> {
    thread
        .frames
        .iter()
        .find(|f| {
            !in_runtime(f)
                && f.function
                    .as_deref()
                    .is_some_and(|n| !RUNTIME_IN_PROGRAM.contains(&n))
        })
        .and_then(described)
}

/// Runtime functions a program may hold itself, linked statically: MSVC's
/// `_CxxThrowException` (vcruntime's, with `/MT`), which every `throw` calls.
const RUNTIME_IN_PROGRAM: [&str; 1] = ["_CxxThrowException"];

/// Whether an x86_64 address is canonical (bits 63..47 all equal).
fn canonical(a: u64) -> bool {
    let top = a >> 47;
    top == 0 || top == (1 << 17) - 1
}

/// `function (module)` of a frame, or `module+offset`, if it names anything.
fn described(f: &report::Frame) -> Option<String> {
    match (&f.function, &f.module, &f.module_offset) {
        (Some(func), _, _) => Some(func.clone()),
        (None, Some(m), Some(off)) => Some(format!("{m}+{off}")),
        _ => None,
    }
}

/// Whether a frame is in the C or C++ runtime (libc, the loader, libstdc++, libc++,
/// libgcc's unwinder; on Windows the system's DLLs that raise exceptions and the C and C++
/// runtimes) rather than in the program.
fn in_runtime(f: &report::Frame) -> bool {
    const RUNTIME: [&str; 16] = [
        "libc.so",
        "libc-",
        "ld-linux",
        "libstdc++",
        "libc++",
        "libgcc_s",
        "libunwind",
        "ntdll.dll",
        "kernelbase.dll",
        "kernel32.dll",
        "ucrtbase",
        "msvcrt",
        "vcruntime",
        "msvcp",
        "api-ms-win-",
        "libwinpthread",
    ];
    f.module.as_deref().is_some_and(|m| {
        let m = m.to_ascii_lowercase();
        RUNTIME.iter().any(|r| m.starts_with(r))
    })
}

/// Whether `pc` lies in a module's executable mapping (or, where the dump does not say
/// which mappings are executable, in a module).
fn in_code(dump: &Dump<'_>, pc: u64) -> bool {
    dump.modules.iter().any(|m| m.contains_code(pc))
        // JIT code lives outside modules, in memory the dump holds — unless the dump
        // says that memory was not executable (heap, stack, data)
        || (dump.memory.contains(pc) && dump.regions.executable(pc) != Some(false))
}

/// The function most frames of `thread` are in, and how many, when it repeats enough to
/// be a recursion.
fn most_repeated(thread: &report::Thread) -> Option<(String, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &thread.frames {
        if let Some(name) = f.function.as_deref() {
            *counts.entry(name).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|&(name, n)| (n, std::cmp::Reverse(name)))
        .filter(|&(_, n)| n >= 8 && n * 2 >= thread.frames.len())
        .map(|(name, n)| (name.to_string(), n))
}

/// Addresses one flipped bit away from `addr` that were mapped (at most 4): the dump holds
/// memory there or lists the region (a minidump holds no heap, but its maps or memory-info
/// list say where the heap was), as a hint that the pointer was corrupted by hardware
/// rather than by the program.
fn bit_flips(dump: &Dump<'_>, addr: u64) -> Vec<String> {
    (0..64)
        .map(|b| addr ^ (1u64 << b))
        .filter(|&a| a >= NULL_PAGE && (dump.memory.contains(a) || dump.regions.contains(a)))
        .take(4)
        .map(hex_addr)
        .collect()
}

/// An exception libstdc++ was throwing: its type, and for the standard library's
/// `logic_error`/`runtime_error` families the `what()` text.
struct Thrown {
    type_name: String,
    what: Option<String>,
}

/// `_Unwind_Exception::exception_class` of a C++ exception thrown by libstdc++
/// ("GNUCC++\0", big-endian as the ABI writes it).
const GNU_CXX_EXCEPTION: u64 = 0x474e_5543_432b_2b00;
/// Offset of `unwindHeader` in libstdc++'s `__cxa_exception` (LP64): `exceptionType` is
/// the first field, 80 bytes before it.
const UNWIND_HEADER_OFFSET: u64 = 80;
/// Size of `_Unwind_Exception` (LP64): the thrown object follows it.
const UNWIND_EXCEPTION_SIZE: u64 = 32;
/// Most stack bytes searched for the exception.
const EXCEPTION_SEARCH: u64 = 64 << 10;

/// The C++ exception a thread was throwing when `std::terminate` ran: `__cxa_throw`
/// keeps a pointer to its header in a register that the frames above it save on the
/// stack, so the thread's stack (from frame 0 up to its outermost frame) is searched for
/// a pointer to an `_Unwind_Exception` of libstdc++'s class; its `__cxa_exception` names
/// the `std::type_info`. Only what the dump holds is read (a core's heap; minidumps
/// rarely hold the heap, and then nothing is said).
fn thrown_exception(dump: &Dump<'_>, loaded: &[Loaded], thread: &report::Thread) -> Option<Thrown> {
    let sps: Vec<u64> = thread
        .frames
        .iter()
        .filter_map(|f| f.sp.map(Addr::get))
        .collect();
    let low = *sps.iter().min()?;
    let high = sps
        .iter()
        .max()?
        .saturating_add(512)
        .min(low.saturating_add(EXCEPTION_SEARCH));
    let words = dump
        .memory
        .read_bytes(low, usize::try_from(high - low).ok()?)
        .or_else(|| dump.memory.read_to_range_end(low))?;
    words
        .chunks_exact(8)
        .filter_map(|w| Some(u64::from_le_bytes(w.try_into().ok()?)))
        .filter(|&p| p.is_multiple_of(8) && p >= 0x1000)
        // a pointer to the header, to the thrown object after it, or to the start of the
        // `__cxa_exception` (or of the refcounted block before it)
        .flat_map(|p| {
            [
                Some(p),
                p.checked_sub(UNWIND_EXCEPTION_SIZE),
                p.checked_add(UNWIND_HEADER_OFFSET),
                p.checked_add(UNWIND_HEADER_OFFSET + 8),
            ]
        })
        .flatten()
        .filter(|&h| dump.memory.read_u64(h) == Some(GNU_CXX_EXCEPTION))
        .find_map(|header| {
            let type_info = dump
                .memory
                .read_u64(header.checked_sub(UNWIND_HEADER_OFFSET)?)?;
            // the name is in the library's read-only data, which a core leaves to the file
            let name = c_string(
                dump,
                loaded,
                dump.memory.read_u64(type_info.checked_add(8)?)?,
                512,
            )?;
            let name = name.strip_prefix('*').unwrap_or(&name);
            // a type's mangled name; "typeinfo name for T" demangles to T
            let type_name = crate::symbols::demangle::try_demangle(&format!("_ZTS{name}"))?
                .strip_prefix("typeinfo name for ")?
                .to_string();
            let object = header.checked_add(UNWIND_EXCEPTION_SIZE)?;
            let what = standard_message(&type_name)
                .then(|| {
                    let text = dump.memory.read_u64(object.checked_add(8)?)?;
                    c_string(dump, loaded, text, 1024)
                })
                .flatten();
            Some(Thrown { type_name, what })
        })
}

/// Whether libstdc++'s `type_name` keeps its `what()` text as a string right after the
/// vtable pointer (`std::logic_error` and `std::runtime_error` and the standard classes
/// derived from them).
fn standard_message(type_name: &str) -> bool {
    matches!(
        type_name,
        "std::logic_error"
            | "std::domain_error"
            | "std::invalid_argument"
            | "std::length_error"
            | "std::out_of_range"
            | "std::runtime_error"
            | "std::range_error"
            | "std::overflow_error"
            | "std::underflow_error"
    )
}

/// A NUL-terminated string of printable text at `addr` (at most `max` bytes), from the
/// dump's memory or else from the file of the module mapped there (read-only data a core
/// does not hold).
fn c_string(dump: &Dump<'_>, loaded: &[Loaded], addr: u64, max: usize) -> Option<String> {
    let bytes = crate::tables::read_image(dump, loaded, addr, max)?;
    let end = bytes.iter().position(|&b| b == 0)?;
    let text = std::str::from_utf8(bytes.get(..end)?).ok()?;
    (!text.is_empty() && !text.chars().any(char::is_control)).then(|| text.to_string())
}

/// abort()'s message: an Android tombstone's `Abort message` (bionic's
/// `android_set_abort_message`), else glibc's (`__abort_msg`: a failed assertion, a heap
/// check, a stack protector), read from the dump's memory through libc's symbol table.
fn abort_message(dump: &Dump<'_>, loaded: &[Loaded]) -> Option<String> {
    if let Some(m) = dump
        .annotations
        .get(crate::dump::android::ABORT_MESSAGE_ANNOTATION)
    {
        return Some(m.clone());
    }
    let (m, l) = dump
        .modules
        .iter()
        .zip(loaded)
        .find(|(m, _)| m.name.starts_with("libc.so") || m.name.starts_with("libc-"))?;
    let rel = l
        .tables
        .as_ref()?
        .code
        .as_ref()?
        .symbol_offset("__abort_msg")?;
    let pointer = dump.memory.read_u64(m.load_base.checked_add(rel)?)?;
    if pointer == 0 {
        return None;
    }
    // struct abort_msg_s { unsigned int size; char msg[]; }: `size` is the mapping's
    let size = usize::try_from(dump.memory.read_u32(pointer)?).ok()?;
    let text = dump
        .memory
        .read_bytes(
            pointer.checked_add(4)?,
            size.saturating_sub(4).clamp(1, MAX_MESSAGE),
        )
        .or_else(|| dump.memory.read_to_range_end(pointer.checked_add(4)?))?;
    let text = text.split(|&b| b == 0).next()?;
    let text = String::from_utf8_lossy(text.get(..text.len().min(MAX_MESSAGE))?);
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}
