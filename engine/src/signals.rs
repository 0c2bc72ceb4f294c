//! Names of Linux signals and `si_code` values, for the crash line people read.

/// `SIGSEGV`, `SIGABRT`, … for a Linux signal number (x86_64 and aarch64 share them).
pub fn signal_name(sig: u32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        _ => return None,
    })
}

/// The name of `si_code` for `signal` (`SEGV_MAPERR`, `SI_TKILL`, …).
pub fn code_name(signal: u32, code: i32) -> Option<&'static str> {
    // codes shared by every signal (sent by a process)
    let generic = match code {
        0 => Some("SI_USER"),
        0x80 => Some("SI_KERNEL"),
        -1 => Some("SI_QUEUE"),
        -2 => Some("SI_TIMER"),
        -3 => Some("SI_MESGQ"),
        -4 => Some("SI_ASYNCIO"),
        -5 => Some("SI_SIGIO"),
        -6 => Some("SI_TKILL"),
        _ => None,
    };
    if code <= 0 || code == 0x80 {
        return generic;
    }
    Some(match (signal, code) {
        (11, 1) => "SEGV_MAPERR",
        (11, 2) => "SEGV_ACCERR",
        (11, 3) => "SEGV_BNDERR",
        (11, 4) => "SEGV_PKUERR",
        (11, 5) => "SEGV_ACCADI",
        (11, 6) => "SEGV_ADIDERR",
        (11, 7) => "SEGV_ADIPERR",
        (11, 8) => "SEGV_MTEAERR",
        (11, 9) => "SEGV_MTESERR",
        (7, 1) => "BUS_ADRALN",
        (7, 2) => "BUS_ADRERR",
        (7, 3) => "BUS_OBJERR",
        (7, 4) => "BUS_MCEERR_AR",
        (7, 5) => "BUS_MCEERR_AO",
        (4, 1) => "ILL_ILLOPC",
        (4, 2) => "ILL_ILLOPN",
        (4, 3) => "ILL_ILLADR",
        (4, 4) => "ILL_ILLTRP",
        (4, 5) => "ILL_PRVOPC",
        (4, 6) => "ILL_PRVREG",
        (4, 7) => "ILL_COPROC",
        (4, 8) => "ILL_BADSTK",
        (8, 1) => "FPE_INTDIV",
        (8, 2) => "FPE_INTOVF",
        (8, 3) => "FPE_FLTDIV",
        (8, 4) => "FPE_FLTOVF",
        (8, 5) => "FPE_FLTUND",
        (8, 6) => "FPE_FLTRES",
        (8, 7) => "FPE_FLTINV",
        (8, 8) => "FPE_FLTSUB",
        (5, 1) => "TRAP_BRKPT",
        (5, 2) => "TRAP_TRACE",
        (5, 3) => "TRAP_BRANCH",
        (5, 4) => "TRAP_HWBKPT",
        (17, 1) => "CLD_EXITED",
        (17, 2) => "CLD_KILLED",
        (17, 3) => "CLD_DUMPED",
        (31, 1) => "SYS_SECCOMP",
        _ => return None,
    })
}

/// Whether `si_addr` is meaningful for this signal (a fault address).
pub fn has_fault_address(signal: u32) -> bool {
    matches!(signal, 4 | 5 | 7 | 8 | 11)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(signal_name(11), Some("SIGSEGV"));
        assert_eq!(code_name(11, 1), Some("SEGV_MAPERR"));
        assert_eq!(code_name(6, -6), Some("SI_TKILL"));
        assert_eq!(code_name(11, 77), None);
        assert_eq!(signal_name(0), None);
    }
}
