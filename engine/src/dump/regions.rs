//! The address ranges a process had mapped, whether or not the dump holds their bytes:
//! a core's `PT_LOAD` segments (the kernel writes one per mapping, with no bytes for
//! those its `coredump_filter` leaves out), a Linux minidump's copy of `/proc/self/maps`,
//! a Windows minidump's memory-info list (committed regions).
//!
//! The crash analysis asks it whether an address was mapped where the dump's memory
//! cannot say: a minidump holds the stacks and little else, so a pointer into the heap
//! looks unmapped to [`super::MemoryMap`]. The memory-info list is read here from its
//! raw stream (a 16-byte header, then fixed-size entries, each bounded by the stream),
//! not with the `minidump` crate's parser, as the maps are (`linux_maps`): a dump's bytes
//! must never panic the reader.

use super::linux_maps;

/// At most this many regions are kept from one dump (a process has a few thousand).
pub(super) const MAX_REGIONS: usize = 1 << 20;

/// `MEM_COMMIT`, `winnt.h`: a region backed by memory (not reserved, not free).
const MEM_COMMIT: u32 = 0x1000;
/// `PAGE_EXECUTE`, `PAGE_EXECUTE_READ`, `PAGE_EXECUTE_READWRITE`,
/// `PAGE_EXECUTE_WRITECOPY` (`winnt.h`).
const PAGE_EXECUTE_ANY: u32 = 0x10 | 0x20 | 0x40 | 0x80;

/// Sorted, disjoint `[start, end)` ranges: all the regions, and those known to be
/// executable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Regions {
    all: Vec<(u64, u64)>,
    executable: Vec<(u64, u64)>,
    /// Whether every region's permission is known (else [`Regions::executable`] says
    /// nothing).
    permissions: bool,
}

/// Whether a sorted, disjoint list holds `addr`.
fn holds(ranges: &[(u64, u64)], addr: u64) -> bool {
    let i = ranges.partition_point(|&(_, end)| end <= addr);
    ranges.get(i).is_some_and(|&(start, _)| start <= addr)
}

impl Regions {
    /// The ranges (with whether each is executable, where known), merged where they
    /// overlap or touch; empty and reversed ones dropped, at most [`MAX_REGIONS`] read.
    pub fn new(ranges: impl IntoIterator<Item = (u64, u64, Option<bool>)>) -> Regions {
        let ranges: Vec<(u64, u64, Option<bool>)> = ranges
            .into_iter()
            .filter(|(s, e, _)| s < e)
            .take(MAX_REGIONS)
            .collect();
        let merged = crate::ranges::merged;
        Regions {
            all: merged(ranges.iter().map(|&(s, e, _)| (s, e)).collect()),
            executable: merged(
                ranges
                    .iter()
                    .filter(|r| r.2 == Some(true))
                    .map(|&(s, e, _)| (s, e))
                    .collect(),
            ),
            permissions: ranges.iter().all(|r| r.2.is_some()),
        }
    }

    /// Whether a region holds `addr`.
    pub fn contains(&self, addr: u64) -> bool {
        holds(&self.all, addr)
    }

    /// Whether `addr` lies in an executable region: `None` when no region holds it or
    /// the dump does not say which regions are executable.
    pub fn executable(&self, addr: u64) -> Option<bool> {
        (self.permissions && self.contains(addr)).then(|| holds(&self.executable, addr))
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

/// The regions a minidump lists: its Linux maps stream and its memory-info list, either
/// or both (`None` for a stream it lacks).
pub(super) fn of_minidump(linux_maps: Option<&[u8]>, memory_info: Option<&[u8]>) -> Regions {
    let maps = linux_maps
        .map(linux_maps::parse)
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.start, m.end, m.executable));
    let info = memory_info.map(committed).unwrap_or_default();
    Regions::new(maps.chain(info))
}

/// The committed regions of a `MINIDUMP_MEMORY_INFO_LIST` stream: `SizeOfHeader`,
/// `SizeOfEntry` (u32 each), `NumberOfEntries` (u64), then the entries from
/// `SizeOfHeader` on, each `BaseAddress` (u64 at 0), `RegionSize` (u64 at 24) and `State`
/// (u32 at 32) and `Protect` (u32 at 36) of a `MINIDUMP_MEMORY_INFO`. Entries past the
/// stream's end are not read.
fn committed(stream: &[u8]) -> Vec<(u64, u64, Option<bool>)> {
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            b.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let u64_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(at..at.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let (Some(header), Some(entry), Some(count)) =
        (u32_at(stream, 0), u32_at(stream, 4), u64_at(stream, 8))
    else {
        return Vec::new();
    };
    let (Ok(header), Ok(entry)) = (usize::try_from(header), usize::try_from(entry)) else {
        return Vec::new();
    };
    if header < 16 || entry < 40 {
        return Vec::new();
    }
    let Some(entries) = stream.get(header..) else {
        return Vec::new();
    };
    let count = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(MAX_REGIONS);
    entries
        .chunks_exact(entry)
        .take(count)
        .filter(|e| u32_at(e, 32) == Some(MEM_COMMIT))
        .filter_map(|e| {
            let base = u64_at(e, 0)?;
            let executable = u32_at(e, 36)? & PAGE_EXECUTE_ANY != 0;
            Some((base, base.checked_add(u64_at(e, 24)?)?, Some(executable)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(base: u64, size: u64, state: u32) -> Vec<u8> {
        protected(base, size, state, 4)
    }

    fn protected(base: u64, size: u64, state: u32, protect: u32) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend(base.to_le_bytes());
        e.extend(base.to_le_bytes()); // allocation base
        e.extend(4u32.to_le_bytes()); // allocation protect
        e.extend(0u32.to_le_bytes());
        e.extend(size.to_le_bytes());
        e.extend(state.to_le_bytes());
        e.extend(protect.to_le_bytes());
        e.extend(0x20000u32.to_le_bytes()); // type
        e.extend(0u32.to_le_bytes());
        e
    }

    fn list(entries: &[Vec<u8>], claimed: u64) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend(16u32.to_le_bytes());
        s.extend(48u32.to_le_bytes());
        s.extend(claimed.to_le_bytes());
        for e in entries {
            s.extend(e);
        }
        s
    }

    #[test]
    fn committed_regions_of_a_memory_info_list() {
        let entries = [
            info(0x1000, 0x1000, MEM_COMMIT),
            info(0x2000, 0x3000, MEM_COMMIT),
            info(0x10000, 0x1000, 0x2000),           // reserved
            info(u64::MAX - 10, 0x1000, MEM_COMMIT), // wraps: left out
        ];
        let r = of_minidump(None, Some(&list(&entries, 4)));
        assert_eq!(r.all, vec![(0x1000, 0x5000)]);
        assert!(r.contains(0x1000) && r.contains(0x4fff));
        assert!(!r.contains(0x5000) && !r.contains(0x10000) && !r.contains(0xfff));
        // a count past the stream reads what is there; a short header or entry nothing
        assert_eq!(
            of_minidump(None, Some(&list(&entries[..1], u64::MAX)))
                .all
                .len(),
            1
        );
        assert!(of_minidump(None, Some(&list(&entries, 4)[..12])).is_empty());
        let mut small = list(&entries, 4);
        small[4] = 8;
        assert!(of_minidump(None, Some(&small)).is_empty());
    }

    #[test]
    fn linux_maps_and_memory_info_together() {
        let maps = b"7f0000000000-7f0000001000 r--p 00000000 00:00 0 \n\
                     55d000000000-55d000021000 rw-p 00000000 00:00 0 [heap]\n\
                     garbage line\n";
        let r = of_minidump(
            Some(maps),
            Some(&list(&[info(0x1000, 0x1000, MEM_COMMIT)], 1)),
        );
        assert!(r.contains(0x55d000000010) && r.contains(0x7f0000000fff) && r.contains(0x1800));
        assert!(!r.contains(0x55d000021000));
        // the maps give permissions, the memory-info list too: both known
        assert_eq!(r.executable(0x55d000000010), Some(false));
        assert_eq!(r.executable(0x1800), Some(false));
        assert_eq!(r.executable(0x9000), None);
    }

    #[test]
    fn executable_regions_where_the_dump_says() {
        let code = protected(0x1000, 0x1000, MEM_COMMIT, 0x20); // PAGE_EXECUTE_READ
        let data = protected(0x2000, 0x1000, MEM_COMMIT, 0x04); // PAGE_READWRITE
        let r = of_minidump(None, Some(&list(&[code, data], 2)));
        assert_eq!(r.executable(0x1800), Some(true));
        assert_eq!(r.executable(0x2800), Some(false));
        // a region of unknown permission: nothing is said of any
        let r = Regions::new([(0x1000, 0x2000, Some(true)), (0x3000, 0x4000, None)]);
        assert_eq!(r.executable(0x1800), None);
        assert!(r.contains(0x3800));
    }
}
