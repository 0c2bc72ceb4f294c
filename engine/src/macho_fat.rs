//! The slices of a universal (fat) Mach-O file: each architecture's thin Mach-O, by its
//! place in the file, so that callers file each one under its own `LC_UUID` (a crash
//! names the one slice its process loaded, by that UUID).
//!
//! Read with `object`'s fat reader; every slice's range is checked against the file, and
//! the number of slices is bounded ([`MAX_SLICES`]), so a hostile header costs nothing.
//! A dSYM of a universal build is itself universal: its DWARF file splits the same way.

use object::read::macho::{FatArch, MachOFatFile32, MachOFatFile64};
use object::ReadRef;

use crate::dump::Arch;

/// Most slices read from one file: real ones hold two or three (x86_64, arm64, arm64e).
pub const MAX_SLICES: usize = 16;

/// The two universal magics (32-bit and 64-bit offsets), big-endian as they are stored.
const FAT_MAGIC: [u8; 4] = [0xca, 0xfe, 0xba, 0xbe];
const FAT_MAGIC_64: [u8; 4] = [0xca, 0xfe, 0xba, 0xbf];

/// One architecture's thin Mach-O inside a universal file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// The slice's architecture, `None` for one the engine does not know.
    pub arch: Option<Arch>,
    /// Where the slice starts in the file, and its length.
    pub offset: u64,
    pub size: u64,
}

/// Why a universal file's slices cannot be listed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FatError {
    #[error("the universal Mach-O header cannot be read: {0}")]
    Header(String),
    #[error("the universal Mach-O lists {0} architectures (at most {MAX_SLICES} are read)")]
    TooManySlices(usize),
    #[error("the universal Mach-O's slice {index} lies outside the file (offset {offset}, {size} bytes, file of {file} bytes)")]
    SliceOutside {
        index: usize,
        offset: u64,
        size: u64,
        file: u64,
    },
    #[error("the universal Mach-O's slice {0} does not start with a Mach-O header")]
    NotMachO(usize),
}

/// Mach-O magics (32/64-bit, either byte order).
pub const MACHO_MAGICS: &[[u8; 4]] = &[
    [0xce, 0xfa, 0xed, 0xfe],
    [0xcf, 0xfa, 0xed, 0xfe],
    [0xfe, 0xed, 0xfa, 0xce],
    [0xfe, 0xed, 0xfa, 0xcf],
];
/// Whether `head` (a file's first bytes) starts a thin (one-architecture) Mach-O file.
pub fn is_thin_macho(head: &[u8]) -> bool {
    head.get(..4)
        .and_then(|m| <[u8; 4]>::try_from(m).ok())
        .is_some_and(|m| MACHO_MAGICS.contains(&m))
}

/// Whether `head` (a file's first bytes) is a universal Mach-O's.
pub fn is_fat(head: &[u8]) -> bool {
    head.starts_with(&FAT_MAGIC) || head.starts_with(&FAT_MAGIC_64)
}

/// The slices of the universal Mach-O `data` (any `object` reader: bytes, or a file read
/// through a cache), each checked to lie in the file and to start like a thin Mach-O.
pub fn slices<'data, R: ReadRef<'data>>(data: R) -> Result<Vec<Slice>, FatError> {
    let len = data
        .len()
        .map_err(|()| FatError::Header("the file's length is unknown".into()))?;
    let head = data
        .read_bytes_at(0, 8)
        .map_err(|()| FatError::Header("shorter than its header".into()))?;
    let count = head
        .get(4..8)
        .and_then(|c| <[u8; 4]>::try_from(c).ok())
        .map_or(0, u32::from_be_bytes) as usize;
    if count > MAX_SLICES {
        return Err(FatError::TooManySlices(count));
    }
    let bad = |e: object::Error| FatError::Header(e.to_string());
    let ranges: Vec<(object::macho::CpuType, u64, u64)> = if head.starts_with(&FAT_MAGIC_64) {
        let fat = MachOFatFile64::parse(data).map_err(bad)?;
        fat.arches().iter().map(raw).collect()
    } else {
        let fat = MachOFatFile32::parse(data).map_err(bad)?;
        fat.arches().iter().map(raw).collect()
    };
    let mut out = Vec::with_capacity(ranges.len());
    for (index, (cputype, offset, size)) in ranges.into_iter().enumerate() {
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(FatError::SliceOutside {
                index,
                offset,
                size,
                file: len,
            });
        }
        let magic = data
            .read_bytes_at(offset, 4)
            .map_err(|()| FatError::NotMachO(index))?;
        if !is_thin_macho(magic) {
            return Err(FatError::NotMachO(index));
        }
        out.push(Slice {
            arch: arch_of_cputype(cputype),
            offset,
            size,
        });
    }
    Ok(out)
}

/// A fat arch record's CPU type, offset and size.
fn raw<A: FatArch>(a: &A) -> (object::macho::CpuType, u64, u64) {
    let (offset, size) = a.file_range();
    (a.cputype(), offset, size)
}

/// The engine's architecture of a Mach-O CPU type.
pub fn arch_of_cputype(cputype: object::macho::CpuType) -> Option<Arch> {
    use object::macho;
    match cputype {
        macho::CPU_TYPE_X86_64 => Some(Arch::X86_64),
        macho::CPU_TYPE_ARM64 => Some(Arch::Aarch64),
        macho::CPU_TYPE_X86 => Some(Arch::X86),
        macho::CPU_TYPE_ARM => Some(Arch::Arm),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A universal header of `arches` (cputype, offset, size) over a file of `len` bytes
    /// with a thin Mach-O magic at each offset.
    fn fat(arches: &[(u32, u32, u32)], len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(&FAT_MAGIC);
        b[4..8].copy_from_slice(&(arches.len() as u32).to_be_bytes());
        for (i, (cpu, off, size)) in arches.iter().enumerate() {
            let at = 8 + i * 20;
            b[at..at + 4].copy_from_slice(&cpu.to_be_bytes());
            b[at + 8..at + 12].copy_from_slice(&off.to_be_bytes());
            b[at + 12..at + 16].copy_from_slice(&size.to_be_bytes());
            if let Some(m) = b.get_mut(*off as usize..*off as usize + 4) {
                m.copy_from_slice(&[0xcf, 0xfa, 0xed, 0xfe]);
            }
        }
        b
    }

    #[test]
    fn lists_slices_and_refuses_bad_ranges() {
        let b = fat(&[(0x0100_0007, 64, 16), (0x0100_000c, 128, 32)], 160);
        let s = slices(b.as_slice()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].arch, Some(Arch::X86_64));
        assert_eq!((s[1].offset, s[1].size), (128, 32));
        let b = fat(&[(0x0100_000c, 128, 64)], 160);
        assert!(matches!(
            slices(b.as_slice()),
            Err(FatError::SliceOutside { .. })
        ));
        let mut b = fat(&[(0x0100_000c, 128, 32)], 160);
        b[4..8].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(slices(b.as_slice()), Err(FatError::TooManySlices(1000)));
        let mut b = fat(&[(0x0100_000c, 128, 32)], 160);
        b[128] = 0;
        assert_eq!(slices(b.as_slice()), Err(FatError::NotMachO(0)));
        assert!(slices(&b[..6]).is_err());
    }
}
