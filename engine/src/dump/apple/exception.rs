//! Mach exceptions as Apple names them, and the Linux signal each is analysed as.
//!
//! A report names the exception's type (`EXC_BAD_ACCESS`) and the BSD signal it became
//! (`SIGSEGV`); the crash is described as Apple describes it (`EXC_BAD_ACCESS (SIGSEGV)`,
//! `KERN_INVALID_ADDRESS at 0x…`) and analysed by the signal, numbered as Linux numbers
//! it (macOS numbers `SIGBUS` 10 and `SIGSYS` 12) so the crash analysis of Linux signals
//! applies unchanged. Numbers from `<mach/exception_types.h>`, `<mach/kern_return.h>` and
//! `<mach/arm/exception.h>` / `<mach/i386/exception.h>` of the macOS SDK.

use super::AppleException;
use crate::dump::{CrashInfo, ExceptionInfo};

/// `EXC_*` types by number (`<mach/exception_types.h>`).
const TYPES: &[(u64, &str)] = &[
    (1, "EXC_BAD_ACCESS"),
    (2, "EXC_BAD_INSTRUCTION"),
    (3, "EXC_ARITHMETIC"),
    (4, "EXC_EMULATION"),
    (5, "EXC_SOFTWARE"),
    (6, "EXC_BREAKPOINT"),
    (7, "EXC_SYSCALL"),
    (8, "EXC_MACH_SYSCALL"),
    (9, "EXC_RPC_ALERT"),
    (10, "EXC_CRASH"),
    (11, "EXC_RESOURCE"),
    (12, "EXC_GUARD"),
    (13, "EXC_CORPSE_NOTIFY"),
];

/// The first code of an `EXC_BAD_ACCESS`: a `kern_return_t`, or on arm64 an
/// `EXC_ARM_*` and on x86_64 an `EXC_I386_*` code.
const BAD_ACCESS_CODES: &[(u64, &str)] = &[
    (1, "KERN_INVALID_ADDRESS"),
    (2, "KERN_PROTECTION_FAILURE"),
    (9, "KERN_MEMORY_FAILURE"),
    (10, "KERN_MEMORY_ERROR"),
    (13, "EXC_I386_GPFLT"),
    (0x101, "EXC_ARM_DA_ALIGN"),
    (0x102, "EXC_ARM_DA_DEBUG"),
    (0x103, "EXC_ARM_SP_ALIGN"),
    (0x104, "EXC_ARM_SWP"),
    (0x105, "EXC_ARM_PAC_FAIL"),
];

/// Linux's numbers of the signals a report may name.
const SIGNALS: &[(&str, u32)] = &[
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGILL", 4),
    ("SIGTRAP", 5),
    ("SIGABRT", 6),
    ("SIGBUS", 7),
    ("SIGFPE", 8),
    ("SIGKILL", 9),
    ("SIGSEGV", 11),
    ("SIGPIPE", 13),
    ("SIGALRM", 14),
    ("SIGTERM", 15),
    ("SIGSYS", 31),
];

/// The number of an `EXC_*` name.
pub fn type_number(name: &str) -> Option<u64> {
    TYPES.iter().find(|(_, n)| *n == name).map(|(c, _)| *c)
}

/// The name of an `EXC_*` number.
pub fn type_name(number: u64) -> Option<&'static str> {
    TYPES.iter().find(|(c, _)| *c == number).map(|(_, n)| *n)
}

/// What Apple calls the first code of an exception (`KERN_INVALID_ADDRESS`), for the
/// exception types whose codes it names.
pub fn code_name(exception_type: u64, codes: &[u64]) -> Option<&'static str> {
    let first = *codes.first()?;
    match exception_type {
        1 => BAD_ACCESS_CODES
            .iter()
            .find(|(c, _)| *c == first)
            .map(|(_, n)| *n),
        _ => None,
    }
}

/// The Linux number of a signal name (`SIGSEGV`), whatever follows it.
pub fn linux_signal(name: &str) -> Option<u32> {
    let name = name.split_whitespace().next()?;
    SIGNALS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The signal a Mach exception becomes when the report does not name one (bsd/uxkern's
/// `ux_exception`).
fn default_signal(exception_type: u64, codes: &[u64]) -> Option<&'static str> {
    match exception_type {
        1 if codes.first() == Some(&2) => Some("SIGBUS"),
        1 => Some("SIGSEGV"),
        2 => Some("SIGILL"),
        3 => Some("SIGFPE"),
        6 => Some("SIGTRAP"),
        _ => None,
    }
}

/// The fault address of an exception: the `at 0x…` of its description, else an
/// `EXC_BAD_ACCESS`'s second code.
fn fault_address(e: &AppleException, number: Option<u64>) -> Option<u64> {
    let from_text = e.subtype.as_deref().and_then(|s| {
        let at = s.rfind(" at 0x")?;
        let hex = s.get(at + 6..)?.split_whitespace().next()?;
        u64::from_str_radix(hex, 16).ok()
    });
    from_text.or_else(|| {
        if number == Some(1) {
            e.codes.get(1).copied()
        } else {
            None
        }
    })
}

/// Linux's `si_code` for a memory fault (`SEGV_MAPERR`, `SEGV_ACCERR`), which the
/// analysis tells apart.
fn linux_code(signal: Option<u32>, exception_type: u64, codes: &[u64]) -> Option<i32> {
    match (signal, exception_type, codes.first()) {
        (Some(11), 1, Some(1)) => Some(1),
        (Some(11), 1, Some(2)) => Some(2),
        _ => None,
    }
}

/// The crash of the thread `tid` a report's exception describes.
pub fn crash_info(e: &AppleException, tid: u32) -> CrashInfo {
    let number = type_number(&e.type_name);
    let signal_name = e
        .signal
        .as_deref()
        .or_else(|| number.and_then(|n| default_signal(n, &e.codes)));
    let signal = signal_name.and_then(linux_signal);
    let name = match signal_name {
        Some(s) => format!("{} ({s})", e.type_name),
        None => e.type_name.clone(),
    };
    CrashInfo {
        tid,
        signal,
        code: number.and_then(|n| linux_code(signal, n, &e.codes)),
        address: fault_address(e, number),
        exception: Some(ExceptionInfo {
            code: number.unwrap_or(0),
            name,
            flags: 0,
            parameters: e.codes.clone(),
        }),
        assertion: None,
    }
}

/// Whether a crash's exception is a Mach exception (`EXC_…`): its name then says the
/// crash as Apple says it, and its codes are named by [`code_name`].
pub fn is_mach(e: &ExceptionInfo) -> bool {
    e.name.starts_with("EXC_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exc(t: &str, signal: Option<&str>, codes: &[u64], subtype: Option<&str>) -> CrashInfo {
        crash_info(
            &AppleException {
                type_name: t.into(),
                signal: signal.map(Into::into),
                codes: codes.to_vec(),
                subtype: subtype.map(Into::into),
            },
            7,
        )
    }

    #[test]
    fn exceptions_are_named_as_apple_names_them() {
        let c = exc(
            "EXC_BAD_ACCESS",
            Some("SIGSEGV"),
            &[1, 1],
            Some("KERN_INVALID_ADDRESS at 0x0000000000000001"),
        );
        let e = c.exception.clone().unwrap_or_else(|| unreachable!());
        assert_eq!(e.name, "EXC_BAD_ACCESS (SIGSEGV)");
        assert_eq!(e.code, 1);
        assert_eq!(
            code_name(e.code, &e.parameters),
            Some("KERN_INVALID_ADDRESS")
        );
        assert_eq!((c.signal, c.code, c.address), (Some(11), Some(1), Some(1)));
        // SIGBUS is 10 on macOS, 7 on Linux; the analysis reads Linux's numbers
        let c = exc("EXC_BAD_ACCESS", Some("SIGBUS"), &[2, 0x1000], None);
        assert_eq!((c.signal, c.address), (Some(7), Some(0x1000)));
        // a Swift trap
        let c = exc("EXC_BREAKPOINT", Some("SIGTRAP"), &[1, 0x1ad98ab74], None);
        assert_eq!(c.signal, Some(5));
        assert_eq!(c.address, None);
        // no signal named: the one the kernel sends for the type
        let c = exc("EXC_BAD_INSTRUCTION", None, &[1, 0], None);
        assert_eq!(c.signal, Some(4));
        let c = exc("EXC_CRASH", Some("SIGABRT"), &[0, 0], None);
        assert_eq!(
            c.exception.map(|e| e.name),
            Some("EXC_CRASH (SIGABRT)".into())
        );
    }
}
