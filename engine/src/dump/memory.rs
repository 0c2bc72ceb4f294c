//! Bounds-checked reads of the crashed process's memory, borrowed from the dump bytes (or,
//! for a crash report that writes memory as hex, such as an Android tombstone's `memory
//! near` rows, decoded by its reader and owned: [`MemoryMap::owned`]).
//!
//! Ranges are sorted by address and never overlap (a reader that finds overlaps keeps the
//! first). Every read answers `None` when any requested byte is absent from the dump, which
//! is how a truncated dump degrades: less memory, not an error.

/// The process memory a dump captured, as sorted `(address, bytes)` ranges: borrowed
/// from the dump's bytes, or (a crash report's hex dumps, decoded) owned.
#[derive(Debug, Clone, Default)]
pub struct MemoryMap<'d> {
    ranges: Vec<(u64, Chunk<'d>)>,
}

/// One range's bytes.
#[derive(Debug, Clone)]
enum Chunk<'d> {
    Borrowed(&'d [u8]),
    Owned(std::sync::Arc<[u8]>),
}

impl Chunk<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Borrowed(b) => b,
            Chunk::Owned(b) => b,
        }
    }
}

impl<'d> MemoryMap<'d> {
    /// Builds a map from ranges in any order; empty ranges are dropped and a range that
    /// overlaps an earlier-kept one is trimmed to what is new.
    pub fn new(ranges: Vec<(u64, &'d [u8])>) -> Self {
        MemoryMap {
            ranges: trim(ranges)
                .into_iter()
                .map(|(a, b)| (a, Chunk::Borrowed(b)))
                .collect(),
        }
    }

    /// The captured ranges, sorted.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.ranges.iter().map(|(a, c)| (*a, c.bytes()))
    }

    /// The range containing `addr` and the offset of `addr` in it.
    fn locate(&self, addr: u64) -> Option<(&[u8], usize)> {
        let i = self.ranges.partition_point(|(a, _)| *a <= addr);
        let (start, chunk) = self.ranges.get(i.checked_sub(1)?)?;
        let bytes = chunk.bytes();
        let off = usize::try_from(addr - start).ok()?;
        (off < bytes.len()).then_some((bytes, off))
    }

    /// `len` bytes at `addr`, when the dump holds all of them in one range.
    pub fn read_bytes(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (bytes, off) = self.locate(addr)?;
        bytes.get(off..off.checked_add(len)?)
    }

    /// The bytes from `addr` to the end of its range.
    pub fn read_to_range_end(&self, addr: u64) -> Option<&[u8]> {
        let (bytes, off) = self.locate(addr)?;
        bytes.get(off..)
    }

    /// A little-endian u64 at `addr`.
    #[inline]
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let b = self.read_bytes(addr, 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// A little-endian u32 at `addr`.
    #[inline]
    pub fn read_u32(&self, addr: u64) -> Option<u32> {
        let b = self.read_bytes(addr, 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }

    /// Whether `addr` is captured.
    pub fn contains(&self, addr: u64) -> bool {
        self.locate(addr).is_some()
    }

    /// The captured range containing `addr`, as (start, end).
    pub fn range_of(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|(a, _)| *a <= addr);
        let (start, chunk) = self.ranges.get(i.checked_sub(1)?)?;
        let end = start.checked_add(chunk.bytes().len() as u64)?;
        (addr < end).then_some((*start, end))
    }
}

impl MemoryMap<'static> {
    /// A map of bytes a reader decoded (a crash report's hex dumps), kept as
    /// [`MemoryMap::new`] keeps borrowed ones.
    pub fn owned(ranges: Vec<(u64, Vec<u8>)>) -> Self {
        let borrowed: Vec<(u64, &[u8])> = ranges.iter().map(|(a, b)| (*a, b.as_slice())).collect();
        MemoryMap {
            ranges: trim(borrowed)
                .into_iter()
                .map(|(a, b)| (a, Chunk::Owned(std::sync::Arc::from(b))))
                .collect(),
        }
    }
}

/// Ranges sorted, empty ones dropped, each overlap trimmed from the later range.
fn trim(mut ranges: Vec<(u64, &[u8])>) -> Vec<(u64, &[u8])> {
    ranges.retain(|(_, b)| !b.is_empty());
    ranges.sort_by_key(|(a, _)| *a);
    let mut out: Vec<(u64, &[u8])> = Vec::with_capacity(ranges.len());
    for (addr, bytes) in ranges {
        let (addr, bytes) = match out.last() {
            Some(&(pa, pb)) => {
                let prev_end = pa.saturating_add(pb.len() as u64);
                if addr >= prev_end {
                    (addr, bytes)
                } else {
                    let skip = prev_end - addr;
                    match usize::try_from(skip).ok().and_then(|s| bytes.get(s..)) {
                        Some(rest) if !rest.is_empty() => (prev_end, rest),
                        _ => continue,
                    }
                }
            }
            None => (addr, bytes),
        };
        out.push((addr, bytes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_outside() {
        let a = [1u8, 0, 0, 0, 0, 0, 0, 0, 2];
        let m = MemoryMap::new(vec![(0x1000, &a[..])]);
        assert_eq!(m.read_u64(0x1000), Some(1));
        assert_eq!(m.read_u64(0x1001), Some(0x0200_0000_0000_0000));
        assert_eq!(m.read_u64(0x1002), None);
        assert_eq!(m.read_u64(0xfff), None);
        assert_eq!(m.read_u64(u64::MAX), None);
    }

    #[test]
    fn overlapping_ranges_keep_first() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        let m = MemoryMap::new(vec![(0x1008, &b[..]), (0x1000, &a[..])]);
        assert_eq!(m.read_bytes(0x1000, 16), Some(&a[..]));
        assert_eq!(m.read_bytes(0x1010, 8), Some(&b[8..]));
        assert_eq!(m.ranges().count(), 2);
    }
}
