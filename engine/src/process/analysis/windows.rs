//! Windows exceptions, analysed: a minidump of a Windows process says why it died by an
//! exception code (`EXCEPTION_ACCESS_VIOLATION`, `STATUS_STACK_BUFFER_OVERRUN`, …) rather
//! than a signal. Where the meaning is a Linux signal's (a memory fault, a stack
//! overflow, a division by zero, an illegal instruction) the analysis is the same and
//! uses the same kinds; what only Windows says (a fast fail and its code, the heap's own
//! corruption check, an MSVC C++ exception, a breakpoint) is said in its own words.
//!
//! The exception record's parameters (`ExceptionInformation`) say the rest: an access
//! violation's way (parameter 0: 0 read, 1 write, 8 execute; its address, parameter 1, is
//! the crash's `address`) and a fast fail's code (parameter 0).

use std::collections::BTreeMap;

use crate::dump::{self, Dump, ExceptionInfo};
use crate::report::{hex_addr, Analysis, AnalysisKind};

use super::msvc_throw;
use super::{
    branch_fault, c_string, described, divide_by_zero, found, illegal_instruction, in_code,
    memory_fault, program_caller, stack_overflow, Crashed, Mapped, MemoryFault, Way,
};

/// Exception codes, as `ntstatus.h` and `winnt.h` name them.
const ACCESS_VIOLATION: u64 = 0xC000_0005;
const ILLEGAL_INSTRUCTION: u64 = 0xC000_001D;
const INT_DIVIDE_BY_ZERO: u64 = 0xC000_0094;
const PRIVILEGED_INSTRUCTION: u64 = 0xC000_0096;
const STACK_OVERFLOW: u64 = 0xC000_00FD;
const HEAP_CORRUPTION: u64 = 0xC000_0374;
/// What `__fastfail` raises, whatever its code: not only stack buffer overruns.
const STACK_BUFFER_OVERRUN: u64 = 0xC000_0409;
const BREAKPOINT: u64 = 0x8000_0003;
/// The MSVC runtime's C++ exception (`0xE0` and "msc").
const MSVC_CXX_EXCEPTION: u64 = 0xE06D_7363;

/// The report's kind of what only Windows reports. The report format has no kinds of
/// their own for these yet; each is the Linux kind of the same meaning: a fast fail, the
/// heap's corruption check and an unhandled C++ exception end the process as `abort()`
/// does on Linux (glibc's heap checks, the stack protector and `std::terminate` all abort),
/// and a breakpoint is a trap instruction the program put in its code, as
/// `__builtin_trap`'s is. The evidence's `exception` tells them apart.
const FAST_FAIL_KIND: AnalysisKind = AnalysisKind::Abort;
const HEAP_CORRUPTION_KIND: AnalysisKind = AnalysisKind::Abort;
const CXX_EXCEPTION_KIND: AnalysisKind = AnalysisKind::Abort;
const BREAKPOINT_KIND: AnalysisKind = AnalysisKind::IllegalInstruction;

/// The analysis of a crash the Windows exception `e` describes; `address` is the fault
/// address of an access violation (else the exception's address).
pub(super) fn analyse(
    c: &Crashed<'_, '_>,
    e: &ExceptionInfo,
    address: Option<u64>,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    evidence.insert("exception".to_string(), e.name.clone());
    match e.code {
        ACCESS_VIOLATION => access_violation(c, e, address, evidence),
        STACK_OVERFLOW => stack_overflow(c, None, evidence),
        INT_DIVIDE_BY_ZERO => divide_by_zero(c, evidence),
        ILLEGAL_INSTRUCTION | PRIVILEGED_INSTRUCTION => {
            if let Some(a) = branch_fault(c, in_code(c.dump, c.pc), &mut evidence) {
                return Some(a);
            }
            illegal_instruction(c, evidence)
        }
        BREAKPOINT => {
            let at = raiser(c, &mut evidence);
            found(
                BREAKPOINT_KIND,
                format!(
                    "a breakpoint (int3: DebugBreak, __debugbreak) reached in {at} with no \
                     debugger attached: a trap the program put there (an assertion or a \
                     check that failed)"
                ),
                evidence,
            )
        }
        STACK_BUFFER_OVERRUN => fast_fail(c, e, evidence),
        HEAP_CORRUPTION => {
            let at = raiser(c, &mut evidence);
            found(
                HEAP_CORRUPTION_KIND,
                format!(
                    "heap corruption found by the Windows heap's own checks \
                     (STATUS_HEAP_CORRUPTION) in a call from {at}: a write past a heap \
                     block, a double free or a use after free, done earlier than this stack"
                ),
                evidence,
            )
        }
        MSVC_CXX_EXCEPTION => cxx_exception(c, e, evidence),
        _ => None,
    }
}

/// An access violation: a branch to a bad target, else a memory fault at `address`.
fn access_violation(
    c: &Crashed<'_, '_>,
    e: &ExceptionInfo,
    address: Option<u64>,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let way = access_of(e);
    // Executing at the pc failed: it is not code, even where the dump holds memory
    // there (dbghelp writes the bytes around the exception's address, mapped or
    // not); in an image it is the image's data.
    let code = match way {
        Some(Way::Execute) => {
            evidence.insert("access".to_string(), Way::Execute.as_str().to_string());
            image_of(c.dump, c.pc).is_some()
        }
        _ => in_code(c.dump, c.pc),
    };
    if let Some(a) = branch_fault(c, code, &mut evidence) {
        return Some(a);
    }
    // A non-canonical address faults as a general-protection fault, which Windows
    // reports as a read at 0xffffffffffffffff.
    let general_protection = c.dump.arch == dump::Arch::X86_64 && address == Some(u64::MAX);
    let mapped = match address {
        // an image is mapped whole, and what the dump holds was mapped: the page
        // was there but did not allow the access
        Some(a) if image_of(c.dump, a).is_some() || c.dump.memory.contains(a) => Mapped::Denied,
        Some(_) => Mapped::No,
        None => Mapped::Unknown,
    };
    let fault = MemoryFault {
        address,
        way,
        mapped,
        general_protection,
    };
    memory_fault(c, &fault, evidence)
}

/// `__fastfail` (`STATUS_STACK_BUFFER_OVERRUN`), with its code's name and meaning.
fn fast_fail(
    c: &Crashed<'_, '_>,
    e: &ExceptionInfo,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let at = raiser(c, &mut evidence);
    let summary = match e.parameters.first().copied() {
        Some(code) => {
            let name = fast_fail_name(code);
            evidence.insert("fast_fail_code".to_string(), code.to_string());
            if let Some(n) = name {
                evidence.insert("fast_fail".to_string(), n.to_string());
            }
            let what = name.map_or_else(|| format!("{code:#x}"), str::to_string);
            let mut s = format!("a fast fail, __fastfail({what}), in {at}");
            if let Some(m) = fast_fail_meaning(code) {
                s.push_str(": ");
                s.push_str(m);
            }
            s
        }
        None => format!(
            "a fast fail (__fastfail, STATUS_STACK_BUFFER_OVERRUN) in {at}, its code \
             not recorded: the program found its own state corrupt and ended at once"
        ),
    };
    found(FAST_FAIL_KIND, summary, evidence)
}

/// An unhandled MSVC C++ exception (`0xE06D7363`): the thrown type and `what()` when the
/// dump holds them.
fn cxx_exception(
    c: &Crashed<'_, '_>,
    e: &ExceptionInfo,
    mut evidence: BTreeMap<String, String>,
) -> Option<Analysis> {
    let at = raiser(c, &mut evidence);
    let read = |addr, len| crate::tables::read_image(c.dump, c.loaded, addr, len);
    let what = match msvc_throw::read_throw(&e.parameters, read) {
        Ok(t) => {
            let thrown = t.catchable.first().map(|d| {
                evidence.insert("exception_type_decorated".to_string(), d.clone());
                msvc_throw::undecorate_type(d).unwrap_or_else(|| d.clone())
            });
            if let Some(w) = std_exception_what(c, &t) {
                evidence.insert("what".to_string(), w);
            }
            match thrown {
                Some(ty) => {
                    evidence.insert("exception_type".to_string(), ty.clone());
                    match evidence.get("what") {
                        Some(w) => format!(" {ty}({w:?})"),
                        None => format!(" {ty}"),
                    }
                }
                None => String::new(),
            }
        }
        Err(err) => {
            evidence.insert("exception_type_unread".to_string(), err.to_string());
            String::new()
        }
    };
    let summary = if what.is_empty() {
        format!(
            "an unhandled C++ exception (MSVC, 0xE06D7363) thrown in {at}: no handler \
             took it; its type could not be read ({})",
            evidence
                .get("exception_type_unread")
                .map_or("no ThrowInfo", String::as_str)
        )
    } else {
        format!(
            "an unhandled C++ exception{what} thrown in {at} (MSVC, 0xE06D7363): no \
             handler took it"
        )
    };
    found(CXX_EXCEPTION_KIND, summary, evidence)
}

/// The `what()` text of a thrown `std::exception` (or a class derived from it): MSVC's
/// `std::exception` holds its message as a `const char *` right after the vtable pointer
/// (`__std_exception_data::_What`). Read where the dump holds the object (the thrower's
/// stack) and the text (the heap copy a `std::runtime_error` makes is rarely in a
/// minidump; a literal is in the module's file).
fn std_exception_what(c: &Crashed<'_, '_>, t: &msvc_throw::Throw) -> Option<String> {
    if !t.catchable.iter().any(|d| d == STD_EXCEPTION) {
        return None;
    }
    let text = c.dump.memory.read_u64(t.object.checked_add(8)?)?;
    c_string(c.dump, c.loaded, text, 1024)
}

/// The decorated name of `std::exception`'s `type_info`.
const STD_EXCEPTION: &str = ".?AVexception@std@@";

/// The program's frame that raised the exception (past the system's `RaiseException`
/// and the runtimes), named in `evidence` as the `caller`; or frame 0's description.
fn raiser(c: &Crashed<'_, '_>, evidence: &mut BTreeMap<String, String>) -> String {
    match program_caller(c.thread) {
        Some(p) => {
            evidence.insert("caller".to_string(), p.clone());
            p
        }
        None => described(c.frame0).unwrap_or_else(|| hex_addr(c.pc)),
    }
}

/// The module whose image holds `addr`, by name. A Windows module is mapped whole, from
/// its base to its size of image.
fn image_of<'m>(dump: &'m Dump<'_>, addr: u64) -> Option<&'m str> {
    let m = dump.modules.get(dump.module_index_for(addr)?)?;
    Some(m.name.as_str())
}

/// Which way an access violation went: its first parameter (`winnt.h`'s
/// `EXCEPTION_READ_FAULT` 0, `EXCEPTION_WRITE_FAULT` 1, `EXCEPTION_EXECUTE_FAULT` 8).
fn access_of(e: &ExceptionInfo) -> Option<Way> {
    match e.parameters.first()? {
        0 => Some(Way::Read),
        1 => Some(Way::Write),
        8 => Some(Way::Execute),
        _ => None,
    }
}

/// The `winnt.h` name of fast-fail code `code`.
fn fast_fail_name(code: u64) -> Option<&'static str> {
    FAST_FAIL
        .get(usize::try_from(code).ok()?)
        .copied()
        .flatten()
}

/// The fast-fail codes, by value: `FAST_FAIL_*` of the Windows SDK's `winnt.h` (10.0.22621;
/// also in rust-minidump's `minidump_common::errors::FastFailCode`). 15 to 17 are not
/// defined.
const FAST_FAIL: [Option<&str>; 77] = [
    Some("FAST_FAIL_LEGACY_GS_VIOLATION"),
    Some("FAST_FAIL_VTGUARD_CHECK_FAILURE"),
    Some("FAST_FAIL_STACK_COOKIE_CHECK_FAILURE"),
    Some("FAST_FAIL_CORRUPT_LIST_ENTRY"),
    Some("FAST_FAIL_INCORRECT_STACK"),
    Some("FAST_FAIL_INVALID_ARG"),
    Some("FAST_FAIL_GS_COOKIE_INIT"),
    Some("FAST_FAIL_FATAL_APP_EXIT"),
    Some("FAST_FAIL_RANGE_CHECK_FAILURE"),
    Some("FAST_FAIL_UNSAFE_REGISTRY_ACCESS"),
    Some("FAST_FAIL_GUARD_ICALL_CHECK_FAILURE"),
    Some("FAST_FAIL_GUARD_WRITE_CHECK_FAILURE"),
    Some("FAST_FAIL_INVALID_FIBER_SWITCH"),
    Some("FAST_FAIL_INVALID_SET_OF_CONTEXT"),
    Some("FAST_FAIL_INVALID_REFERENCE_COUNT"),
    None,
    None,
    None,
    Some("FAST_FAIL_INVALID_JUMP_BUFFER"),
    Some("FAST_FAIL_MRDATA_MODIFIED"),
    Some("FAST_FAIL_CERTIFICATION_FAILURE"),
    Some("FAST_FAIL_INVALID_EXCEPTION_CHAIN"),
    Some("FAST_FAIL_CRYPTO_LIBRARY"),
    Some("FAST_FAIL_INVALID_CALL_IN_DLL_CALLOUT"),
    Some("FAST_FAIL_INVALID_IMAGE_BASE"),
    Some("FAST_FAIL_DLOAD_PROTECTION_FAILURE"),
    Some("FAST_FAIL_UNSAFE_EXTENSION_CALL"),
    Some("FAST_FAIL_DEPRECATED_SERVICE_INVOKED"),
    Some("FAST_FAIL_INVALID_BUFFER_ACCESS"),
    Some("FAST_FAIL_INVALID_BALANCED_TREE"),
    Some("FAST_FAIL_INVALID_NEXT_THREAD"),
    Some("FAST_FAIL_GUARD_ICALL_CHECK_SUPPRESSED"),
    Some("FAST_FAIL_APCS_DISABLED"),
    Some("FAST_FAIL_INVALID_IDLE_STATE"),
    Some("FAST_FAIL_MRDATA_PROTECTION_FAILURE"),
    Some("FAST_FAIL_UNEXPECTED_HEAP_EXCEPTION"),
    Some("FAST_FAIL_INVALID_LOCK_STATE"),
    Some("FAST_FAIL_GUARD_JUMPTABLE"),
    Some("FAST_FAIL_INVALID_LONGJUMP_TARGET"),
    Some("FAST_FAIL_INVALID_DISPATCH_CONTEXT"),
    Some("FAST_FAIL_INVALID_THREAD"),
    Some("FAST_FAIL_INVALID_SYSCALL_NUMBER"),
    Some("FAST_FAIL_INVALID_FILE_OPERATION"),
    Some("FAST_FAIL_LPAC_ACCESS_DENIED"),
    Some("FAST_FAIL_GUARD_SS_FAILURE"),
    Some("FAST_FAIL_LOADER_CONTINUITY_FAILURE"),
    Some("FAST_FAIL_GUARD_EXPORT_SUPPRESSION_FAILURE"),
    Some("FAST_FAIL_INVALID_CONTROL_STACK"),
    Some("FAST_FAIL_SET_CONTEXT_DENIED"),
    Some("FAST_FAIL_INVALID_IAT"),
    Some("FAST_FAIL_HEAP_METADATA_CORRUPTION"),
    Some("FAST_FAIL_PAYLOAD_RESTRICTION_VIOLATION"),
    Some("FAST_FAIL_LOW_LABEL_ACCESS_DENIED"),
    Some("FAST_FAIL_ENCLAVE_CALL_FAILURE"),
    Some("FAST_FAIL_UNHANDLED_LSS_EXCEPTON"),
    Some("FAST_FAIL_ADMINLESS_ACCESS_DENIED"),
    Some("FAST_FAIL_UNEXPECTED_CALL"),
    Some("FAST_FAIL_CONTROL_INVALID_RETURN_ADDRESS"),
    Some("FAST_FAIL_UNEXPECTED_HOST_BEHAVIOR"),
    Some("FAST_FAIL_FLAGS_CORRUPTION"),
    Some("FAST_FAIL_VEH_CORRUPTION"),
    Some("FAST_FAIL_ETW_CORRUPTION"),
    Some("FAST_FAIL_RIO_ABORT"),
    Some("FAST_FAIL_INVALID_PFN"),
    Some("FAST_FAIL_GUARD_ICALL_CHECK_FAILURE_XFG"),
    Some("FAST_FAIL_CAST_GUARD"),
    Some("FAST_FAIL_HOST_VISIBILITY_CHANGE"),
    Some("FAST_FAIL_KERNEL_CET_SHADOW_STACK_ASSIST"),
    Some("FAST_FAIL_PATCH_CALLBACK_FAILED"),
    Some("FAST_FAIL_NTDLL_PATCH_FAILED"),
    Some("FAST_FAIL_INVALID_FLS_DATA"),
    Some("FAST_FAIL_ASAN_ERROR"),
    Some("FAST_FAIL_CLR_EXCEPTION_AOT"),
    Some("FAST_FAIL_POINTER_AUTH_INVALID_RETURN_ADDRESS"),
    Some("FAST_FAIL_INVALID_THREAD_STATE"),
    Some("FAST_FAIL_CORRUPT_WOW64_STATE"),
    Some("FAST_FAIL_INVALID_EXTENDED_STATE"),
];

/// What the fast-fail codes a program most often dies of mean.
fn fast_fail_meaning(code: u64) -> Option<&'static str> {
    Some(match code {
        0 | 2 => {
            "the stack cookie (/GS) was overwritten: a stack buffer overrun, or a smashed \
             return address"
        }
        3 => "a doubly linked list's links did not agree: heap or list corruption",
        5 => "the C runtime's invalid-parameter handler (a bad argument to a CRT function)",
        7 => "abort() or a fatal application exit",
        8 => "a range check failed (an index out of bounds)",
        10 | 64 => {
            "Control Flow Guard stopped an indirect call to what is not a function (a \
             corrupted function pointer or vtable)"
        }
        28 => "a buffer access out of its bounds was caught",
        44 => "the shadow stack's return address differed (a smashed return address)",
        50 => "the heap's metadata is corrupt (a write past a heap block, a double free)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_fail_codes_are_named_as_winnt_h_does() {
        assert_eq!(
            fast_fail_name(2),
            Some("FAST_FAIL_STACK_COOKIE_CHECK_FAILURE")
        );
        assert_eq!(fast_fail_name(5), Some("FAST_FAIL_INVALID_ARG"));
        assert_eq!(fast_fail_name(7), Some("FAST_FAIL_FATAL_APP_EXIT"));
        assert_eq!(
            fast_fail_name(10),
            Some("FAST_FAIL_GUARD_ICALL_CHECK_FAILURE")
        );
        assert_eq!(fast_fail_name(18), Some("FAST_FAIL_INVALID_JUMP_BUFFER"));
        assert_eq!(fast_fail_name(28), Some("FAST_FAIL_INVALID_BUFFER_ACCESS"));
        assert_eq!(fast_fail_name(76), Some("FAST_FAIL_INVALID_EXTENDED_STATE"));
        assert_eq!(fast_fail_name(16), None);
        assert_eq!(fast_fail_name(u64::MAX), None);
    }
}
