//! Heap memory errors debuggerd diagnoses: GWP-ASan's (a sampled allocation caught by its
//! guard pages) and Scudo's under MTE (a memory tag mismatch), given as a tombstone's
//! first `Cause:` with the heap object's allocation and deallocation backtraces.
//!
//! In the proto they are `Cause.memory_error` (`MemoryError`: `tool` 1, `type` 2, `heap`
//! 3; `HeapObject`: `address` 1, `size` 2, `allocation_tid` 3, `allocation_backtrace` 4,
//! `deallocation_tid` 5, `deallocation_backtrace` 6; AOSP's `tombstone.proto`). In the
//! text, libdebuggerd (`gwp_asan.cpp`, `scudo.cpp`, printed by
//! `tombstone_proto_to_text.cpp`) writes the cause as `[GWP-ASan]: Use After Free, 0
//! bytes into a 32-byte allocation at 0x7a6a2cbff0` (`[MTE]: …` for Scudo), then, after
//! the crashed thread's backtrace, `deallocated by thread 4242:` and `allocated by thread
//! 4242:`, each followed by frame lines as the backtrace's. They are logged to logcat too.
//!
//! The dump carries the backtraces as evidence stacks ([`super::super::Thread::evidence`]):
//! symbolized as threads are, shown in the crash analysis, whose kind the error names.

use super::{cut, Frame};

/// `MemoryError.Type`: what the heap object suffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapErrorKind {
    Unknown,
    UseAfterFree,
    DoubleFree,
    InvalidFree,
    BufferOverflow,
    BufferUnderflow,
}

impl HeapErrorKind {
    /// The proto's `Type` number.
    pub fn from_proto(n: i32) -> Self {
        match n {
            1 => Self::UseAfterFree,
            2 => Self::DoubleFree,
            3 => Self::InvalidFree,
            4 => Self::BufferOverflow,
            5 => Self::BufferUnderflow,
            _ => Self::Unknown,
        }
    }

    /// The error as gwp_asan's `ErrorToString` and Scudo's report print it.
    fn from_words(s: &str) -> Self {
        match s.trim() {
            "Use After Free" => Self::UseAfterFree,
            "Double Free" => Self::DoubleFree,
            "Invalid (Wild) Free" | "Invalid Free" => Self::InvalidFree,
            "Buffer Overflow" => Self::BufferOverflow,
            "Buffer Underflow" => Self::BufferUnderflow,
            _ => Self::Unknown,
        }
    }

    /// The report's analysis kind of the same name (`None` for an unknown error).
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Self::Unknown => None,
            Self::UseAfterFree => Some("use-after-free"),
            Self::DoubleFree => Some("double-free"),
            Self::InvalidFree => Some("invalid-free"),
            Self::BufferOverflow => Some("buffer-overflow"),
            Self::BufferUnderflow => Some("buffer-underflow"),
        }
    }
}

/// Whose backtrace a [`HeapStack`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapStackKind {
    Deallocation,
    Allocation,
}

/// One backtrace of the heap object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapStack {
    pub kind: HeapStackKind,
    /// The thread that (de)allocated it.
    pub tid: u32,
    pub frames: Vec<Frame>,
}

impl HeapStack {
    /// `deallocated by thread 4242`, as debuggerd heads it.
    pub fn label(&self) -> String {
        let what = match self.kind {
            HeapStackKind::Deallocation => "deallocated",
            HeapStackKind::Allocation => "allocated",
        };
        format!("{what} by thread {}", self.tid)
    }
}

/// A heap memory error: the first cause that names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryError {
    /// `GWP-ASan`, `MTE` (Scudo's report under MTE), `Scudo`.
    pub tool: String,
    pub kind: HeapErrorKind,
    /// The cause as debuggerd wrote it.
    pub cause: String,
    /// The heap object's address and size.
    pub address: Option<u64>,
    pub size: Option<u64>,
    pub stacks: Vec<HeapStack>,
}

impl MemoryError {
    /// A text cause (after `Cause: `) that names a heap error: `[TOOL]: Error Words, N
    /// bytes into a M-byte allocation at 0xADDR`.
    pub fn from_cause(cause: &str) -> Option<Self> {
        let rest = cause.trim().strip_prefix('[')?;
        let (tool, rest) = rest.split_once("]:")?;
        if tool.is_empty() || tool.len() > 32 {
            return None;
        }
        let (words, detail) = rest.split_once(',').unwrap_or((rest, ""));
        let kind = HeapErrorKind::from_words(words);
        let size = detail
            .split_once("-byte allocation")
            .and_then(|(before, _)| before.rsplit(' ').next()?.parse().ok());
        let address = detail
            .rsplit_once(" at 0x")
            .and_then(|(_, a)| u64::from_str_radix(a.split_whitespace().next()?, 16).ok());
        Some(MemoryError {
            tool: cut(tool),
            kind,
            cause: cut(cause.trim()),
            address,
            size,
            stacks: Vec::new(),
        })
    }
}

/// `deallocated by thread 4242:` / `allocated by thread 4242:` (a line at the margin).
pub fn stack_header(line: &str) -> Option<(HeapStackKind, u32)> {
    let (kind, rest) = if let Some(r) = line.strip_prefix("deallocated by thread ") {
        (HeapStackKind::Deallocation, r)
    } else {
        (
            HeapStackKind::Allocation,
            line.strip_prefix("allocated by thread ")?,
        )
    };
    Some((kind, rest.strip_suffix(':')?.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn gwp_asan_and_mte_causes_are_read() {
        let e = MemoryError::from_cause(
            "[GWP-ASan]: Use After Free, 0 bytes into a 32-byte allocation at 0x7a6a2cbff0",
        )
        .unwrap();
        assert_eq!(e.tool, "GWP-ASan");
        assert_eq!(e.kind, HeapErrorKind::UseAfterFree);
        assert_eq!((e.size, e.address), (Some(32), Some(0x7a6a2cbff0)));
        let e = MemoryError::from_cause(
            "[MTE]: Buffer Overflow, 4 bytes right of a 8-byte allocation at 0xb400007b2c9d5b50",
        )
        .unwrap();
        assert_eq!(
            (e.tool.as_str(), e.kind),
            ("MTE", HeapErrorKind::BufferOverflow)
        );
        assert_eq!(e.kind.as_str(), Some("buffer-overflow"));
        assert!(MemoryError::from_cause("null pointer dereference").is_none());
        assert_eq!(
            stack_header("deallocated by thread 4242:"),
            Some((HeapStackKind::Deallocation, 4242))
        );
        assert_eq!(
            stack_header("allocated by thread 7:"),
            Some((HeapStackKind::Allocation, 7))
        );
        assert_eq!(stack_header("allocated by thread x:"), None);
    }
}
