//! One malloc arena for a one-shot walk: glibc gives each thread that allocates an arena
//! of its own (up to eight per core), and memory freed in one is not reused by another,
//! so the walk's helper threads (two modules' tables at once, the DWARF index on two
//! threads, the report's files settled beside) left 1.5–2 MB more resident at the cold
//! walk's peak than one shared arena (issue 40; measured with `MALLOC_ARENA_MAX=1`). The
//! threads allocate little and seldom at once, so sharing costs no time that we measured.
//! Not for the service, whose workers allocate at once all the time.
//!
//! Here because `mallopt` is a foreign call, and this crate holds the project's unsafe
//! code.

/// Makes the process's allocator keep one arena from now on (glibc's `M_ARENA_MAX`, as the
/// `MALLOC_ARENA_MAX` environment variable sets it). Does nothing on other C libraries.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's settings; M_ARENA_MAX is a setting
    // glibc documents for any time in a process's life.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
