//! The memory a tombstone dumps near the registers (`memory near x1 ([stack]):`), read
//! into the dump's memory so that what reads a dump's memory (the crash analysis, the
//! instruction at the pc) reads it as it reads a core's.
//!
//! In the proto each is `Thread.memory_dump` (`MemoryDump`: `register_name` 1,
//! `mapping_name` 2, `begin_address` 3, `memory` 4). In the text,
//! `tombstone_proto_to_text.cpp`'s `print_thread_memory_dump` writes 16 bytes a row:
//!
//! ```text
//! memory near x1 ([anon:scudo:primary]):
//!     0000007a6a2cbfe0 0000000000000000 000000000000002a  ........*.......
//! ```
//!
//! the row's address (on arm64 with the granule's MTE tag in its top byte), then the row
//! as little-endian words of the pointer's width, then the bytes as ASCII. Older
//! tombstones (`utility.cpp`'s `dump_memory`) write `--------` for a word they could not
//! read: the bytes before it and after it are kept as separate ranges.

use super::{too_many, TombstoneError};

/// Most bytes of memory dumps one tombstone may hold (debuggerd dumps 256 bytes around
/// each register of each thread: 34 registers of 4096 threads is under 36 MiB, but real
/// tombstones hold a few KiB to a few hundred).
pub const MAX_MEMORY_BYTES: usize = 4 << 20;
/// Most separate ranges.
pub const MAX_MEMORY_RANGES: usize = 16384;

/// The memory dumps read so far: `(address, bytes)` ranges in the tombstone's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dumps {
    pub ranges: Vec<(u64, Vec<u8>)>,
    bytes: usize,
    /// Whether the next row continues the last range (within one section, unbroken).
    open: bool,
}

impl Dumps {
    /// A new section (`memory near …:`, or another proto `MemoryDump`) starts.
    pub fn section(&mut self) {
        self.open = false;
    }

    /// Adds `bytes` at `address`, to the last range if they follow it.
    pub fn add(&mut self, address: u64, bytes: &[u8]) -> Result<(), TombstoneError> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.bytes = self.bytes.saturating_add(bytes.len());
        if self.bytes > MAX_MEMORY_BYTES {
            return Err(too_many(
                "bytes of memory dumps",
                self.bytes,
                MAX_MEMORY_BYTES,
            ));
        }
        match self.ranges.last_mut() {
            Some((start, kept))
                if self.open && start.checked_add(kept.len() as u64) == Some(address) =>
            {
                kept.extend_from_slice(bytes);
            }
            _ => {
                if self.ranges.len() >= MAX_MEMORY_RANGES {
                    let count = self.ranges.len() + 1;
                    return Err(too_many("memory dump ranges", count, MAX_MEMORY_RANGES));
                }
                self.ranges.push((address, bytes.to_vec()));
            }
        }
        self.open = true;
        Ok(())
    }

    /// One text row (the line, trimmed); `untag` clears an arm64 address's top byte.
    /// A line that is not a row is skipped.
    pub fn row(&mut self, line: &str, untag: bool) -> Result<(), TombstoneError> {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            return Ok(());
        };
        let width = first.len();
        let Some(mut address) = (matches!(width, 8 | 16))
            .then(|| u64::from_str_radix(first, 16).ok())
            .flatten()
        else {
            return Ok(());
        };
        if untag && width == 16 {
            address &= (1 << 56) - 1;
        }
        let size = width / 2;
        for (i, word) in words.take(16 / size).enumerate() {
            if word.len() != width {
                break; // the ASCII column of a short row
            }
            let at = address.wrapping_add((i * size) as u64);
            match u64::from_str_radix(word, 16) {
                Ok(value) => self.add(at, value.to_le_bytes().get(..size).unwrap_or_default())?,
                // `--------`: unread; what follows is another range
                Err(_) => self.open = false,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn rows_become_ranges_in_little_endian() {
        let mut d = Dumps::default();
        d.section();
        d.row(
            "0b00007a6a2cbfe0 0000000000000001 0706050403020100  ................",
            true,
        )
        .unwrap();
        d.row(
            "0b00007a6a2cbff0 0000000000000002 0000000000000003  ................",
            true,
        )
        .unwrap();
        // a new section at an address that does not follow: another range
        d.section();
        d.row("be8c5b60 00000005 -------- 00000007 00000008  ....", false)
            .unwrap();
        assert_eq!(d.ranges.len(), 3);
        let (start, bytes) = &d.ranges[0];
        assert_eq!(*start, 0x7a6a2cbfe0);
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[8..16], &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(bytes[16], 2);
        assert_eq!(d.ranges[1], (0xbe8c5b60, vec![5, 0, 0, 0]));
        assert_eq!(d.ranges[2], (0xbe8c5b68, vec![7, 0, 0, 0, 8, 0, 0, 0]));
        // not rows
        d.row("memory near x1:", false).unwrap();
        d.row("zz", false).unwrap();
        assert_eq!(d.ranges.len(), 3);
    }
}
