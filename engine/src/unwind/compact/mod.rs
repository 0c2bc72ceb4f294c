//! Reader of Apple compact unwind info (`__TEXT,__unwind_info`) and decoder of its opcodes.
//!
//! [`UnwindInfo::parse`] reads the root page (version 1), the global opcode palette, the
//! personalities and the first-level index, checking every offset and count against the
//! section before reading or allocating. [`UnwindInfo::page`] reads one second-level page
//! (regular, kind 2, or compressed, kind 3, with its local opcode palette), and
//! [`UnwindInfo::entries`] turns all pages into sorted address ranges: an entry ends at the
//! next entry, at the next page's first address, or at the sentinel page's address; of two
//! entries at the same address the first (zero-length) one is discarded. Entry addresses
//! are offsets from the image base (the `__TEXT` segment's address).
//!
//! [`X86_64Opcode`] and [`Arm64Opcode`] decode a 32-bit opcode the way llvm's libunwind
//! interprets it (`CompactUnwinder.hpp`); [`crate::unwind::builders::compact_unwind`] turns
//! them into table rows and [`objdump`] prints a section as `llvm-objdump --unwind-info`
//! does, for tests. Personalities and LSDAs are read for printing only: a crash walker
//! does not run destructors. 32-bit x86 opcodes are not decoded.

mod error;
pub mod objdump;
#[cfg(test)]
mod tests;

pub use error::CompactUnwindError;

type Result<T> = std::result::Result<T, CompactUnwindError>;

/// Size of the root page header (seven u32).
pub const ROOT_HEADER_SIZE: usize = 28;
/// Size of one first-level index entry.
const INDEX_ENTRY_SIZE: usize = 12;
/// Second-level page kind: entries of (address, opcode).
pub const PAGE_REGULAR: u32 = 2;
/// Second-level page kind: entries of (opcode index << 24 | address - page base).
pub const PAGE_COMPRESSED: u32 = 3;

/// Reads a little-endian u32 at `offset`.
fn read_u32(data: &[u8], offset: u64, what: &'static str) -> Result<u32> {
    let bytes = usize::try_from(offset)
        .ok()
        .and_then(|o| data.get(o..o.checked_add(4)?))
        .ok_or(CompactUnwindError::Truncated {
            what,
            offset,
            needed: 4,
            have: data.len() as u64,
        })?;
    Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Reads a little-endian u16 at `offset`.
fn read_u16(data: &[u8], offset: u64, what: &'static str) -> Result<u16> {
    let bytes = usize::try_from(offset)
        .ok()
        .and_then(|o| data.get(o..o.checked_add(2)?))
        .ok_or(CompactUnwindError::Truncated {
            what,
            offset,
            needed: 2,
            have: data.len() as u64,
        })?;
    Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// Reads `count` u32 values at `offset`; the count is checked against the section before
/// anything is allocated.
fn read_u32_array(data: &[u8], offset: u64, count: u64, what: &'static str) -> Result<Vec<u32>> {
    let needed = count.saturating_mul(4);
    let end = offset.saturating_add(needed);
    if end > data.len() as u64 {
        return Err(CompactUnwindError::Truncated {
            what,
            offset,
            needed,
            have: data.len() as u64,
        });
    }
    (0..count)
        .map(|i| read_u32(data, offset + i * 4, what))
        .collect()
}

/// The root page's header fields, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    pub global_opcodes_offset: u32,
    pub global_opcodes_len: u32,
    pub personalities_offset: u32,
    pub personalities_len: u32,
    pub pages_offset: u32,
    pub pages_len: u32,
}

/// One first-level index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The first address the page maps (the sentinel: one past the last mapped address).
    pub first_address: u32,
    /// Offset of the second-level page in the section; 0 for the sentinel.
    pub page_offset: u32,
    /// Offset of this page's first LSDA descriptor in the section.
    pub lsda_offset: u32,
}

/// One LSDA descriptor (function address, LSDA address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LsdaEntry {
    pub function_address: u32,
    pub lsda_address: u32,
}

/// One second-level entry as stored (zero-length entries included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageEntry {
    /// The entry's first address (absolute image offset, page base already added).
    pub address: u32,
    /// The opcode (resolved through the palettes for compressed pages).
    pub opcode: u32,
    /// The palette index of a compressed entry; `None` in regular pages.
    pub opcode_index: Option<u32>,
}

/// One second-level page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// [`PAGE_REGULAR`] or [`PAGE_COMPRESSED`].
    pub kind: u32,
    pub entries: Vec<PageEntry>,
    /// The local opcode palette (compressed pages only).
    pub local_opcodes: Vec<u32>,
}

/// An address range and the opcode that describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// First address (offset from the image base).
    pub start: u32,
    /// One past the last address.
    pub end: u32,
    pub opcode: u32,
}

/// A parsed `__unwind_info` section: root page and first-level index; second-level
/// pages are read on demand.
#[derive(Debug, Clone)]
pub struct UnwindInfo<'a> {
    data: &'a [u8],
    pub header: Header,
    pub global_opcodes: Vec<u32>,
    pub personalities: Vec<u32>,
    /// The first-level index, sentinel included.
    pub index: Vec<IndexEntry>,
}

impl<'a> UnwindInfo<'a> {
    /// Reads the root page, palettes and first-level index.
    pub fn parse(data: &'a [u8]) -> Result<UnwindInfo<'a>> {
        let field = |i: u64| read_u32(data, i * 4, "root page header");
        let header = Header {
            version: field(0)?,
            global_opcodes_offset: field(1)?,
            global_opcodes_len: field(2)?,
            personalities_offset: field(3)?,
            personalities_len: field(4)?,
            pages_offset: field(5)?,
            pages_len: field(6)?,
        };
        if header.version != 1 {
            return Err(CompactUnwindError::UnsupportedVersion(header.version));
        }
        let global_opcodes = read_u32_array(
            data,
            u64::from(header.global_opcodes_offset),
            u64::from(header.global_opcodes_len),
            "global opcodes",
        )?;
        let personalities = read_u32_array(
            data,
            u64::from(header.personalities_offset),
            u64::from(header.personalities_len),
            "personalities",
        )?;
        let raw = read_u32_array(
            data,
            u64::from(header.pages_offset),
            u64::from(header.pages_len).saturating_mul(3),
            "first-level index",
        )?;
        let index: Vec<IndexEntry> = raw
            .chunks_exact(3)
            .map(|c| IndexEntry {
                first_address: c[0],
                page_offset: c[1],
                lsda_offset: c[2],
            })
            .collect();
        if index.is_empty() {
            return Err(CompactUnwindError::NoPages);
        }
        const _: () = assert!(INDEX_ENTRY_SIZE == 3 * 4);
        Ok(UnwindInfo {
            data,
            header,
            global_opcodes,
            personalities,
            index,
        })
    }

    /// The section's bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Indices of the pages that have a second-level page: every index entry before the
    /// sentinel, stopping (as llvm does) at the first entry without a page.
    pub fn page_count(&self) -> usize {
        let n = self.index.len().saturating_sub(1);
        self.index[..n]
            .iter()
            .position(|e| e.page_offset == 0)
            .unwrap_or(n)
    }

    /// The LSDA descriptors: from the first index entry's LSDA offset to the last's.
    pub fn lsdas(&self) -> Result<Vec<LsdaEntry>> {
        let (Some(first), Some(last)) = (self.index.first(), self.index.last()) else {
            return Ok(Vec::new());
        };
        let count = last.lsda_offset.saturating_sub(first.lsda_offset) / 8;
        let raw = read_u32_array(
            self.data,
            u64::from(first.lsda_offset),
            u64::from(count) * 2,
            "LSDA descriptors",
        )?;
        Ok(raw
            .chunks_exact(2)
            .map(|c| LsdaEntry {
                function_address: c[0],
                lsda_address: c[1],
            })
            .collect())
    }

    /// Reads second-level page `page` (an index into [`Self::index`] below
    /// [`Self::page_count`]).
    pub fn page(&self, page: usize) -> Result<Page> {
        let Some(ix) = self.index.get(page) else {
            return Err(CompactUnwindError::NoPages);
        };
        let base = u64::from(ix.page_offset);
        let kind = read_u32(self.data, base, "second-level page kind")?;
        let entries_offset = read_u16(self.data, base + 4, "second-level page header")?;
        let entries_len = read_u16(self.data, base + 6, "second-level page header")?;
        let entries_at = base + u64::from(entries_offset);
        match kind {
            PAGE_REGULAR => {
                let raw = read_u32_array(
                    self.data,
                    entries_at,
                    u64::from(entries_len) * 2,
                    "regular page entries",
                )?;
                let entries = raw
                    .chunks_exact(2)
                    .map(|c| PageEntry {
                        address: c[0],
                        opcode: c[1],
                        opcode_index: None,
                    })
                    .collect();
                Ok(Page {
                    kind,
                    entries,
                    local_opcodes: Vec::new(),
                })
            }
            PAGE_COMPRESSED => {
                let local_offset = read_u16(self.data, base + 8, "compressed page header")?;
                let local_len = read_u16(self.data, base + 10, "compressed page header")?;
                let local_opcodes = read_u32_array(
                    self.data,
                    base + u64::from(local_offset),
                    u64::from(local_len),
                    "local opcodes",
                )?;
                let raw = read_u32_array(
                    self.data,
                    entries_at,
                    u64::from(entries_len),
                    "compressed page entries",
                )?;
                let global = self.global_opcodes.len();
                let mut entries = Vec::with_capacity(raw.len());
                for (i, word) in raw.into_iter().enumerate() {
                    let index = word >> 24;
                    let ix_usize = index as usize;
                    let opcode = if ix_usize < global {
                        self.global_opcodes[ix_usize]
                    } else {
                        match local_opcodes.get(ix_usize - global) {
                            Some(&op) => op,
                            None => {
                                return Err(CompactUnwindError::OpcodeIndex {
                                    page,
                                    entry: i,
                                    index,
                                    global: global as u32,
                                    local: local_opcodes.len() as u32,
                                })
                            }
                        }
                    };
                    // the address wraps only in a corrupt page; sorting then rejects it
                    let address = ix.first_address.wrapping_add(word & 0x00ff_ffff);
                    entries.push(PageEntry {
                        address,
                        opcode,
                        opcode_index: Some(index),
                    });
                }
                Ok(Page {
                    kind,
                    entries,
                    local_opcodes,
                })
            }
            kind => Err(CompactUnwindError::UnknownPageKind { page, kind }),
        }
    }

    /// Every entry as an address range, sorted, zero-length entries dropped. Fails on
    /// unsorted pages or entries, or when the pages hold more entries than the section's
    /// size can (aliased pages), so time and memory stay proportional to the section.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let budget = self.data.len() / 4;
        let mut out: Vec<Entry> = Vec::new();
        let mut total = 0usize;
        let mut previous = 0u32;
        for p in 0..self.page_count() {
            let page_start = self.index[p].first_address;
            // page_count() < index.len(), so p + 1 is the next page or the sentinel
            let page_end = self.index.get(p + 1).map_or(u32::MAX, |e| e.first_address);
            if page_end < page_start || page_start < previous {
                return Err(CompactUnwindError::Unsorted {
                    page: p,
                    entry: 0,
                    address: page_start,
                    previous,
                    page_end,
                });
            }
            let page = self.page(p)?;
            total = total.saturating_add(page.entries.len());
            if total > budget {
                return Err(CompactUnwindError::Truncated {
                    what: "second-level entries (pages alias each other)",
                    offset: u64::from(self.index[p].page_offset),
                    needed: total as u64 * 4,
                    have: self.data.len() as u64,
                });
            }
            for (i, e) in page.entries.iter().enumerate() {
                if e.address < page_start.max(previous) || e.address > page_end {
                    return Err(CompactUnwindError::Unsorted {
                        page: p,
                        entry: i,
                        address: e.address,
                        previous,
                        page_end,
                    });
                }
                previous = e.address;
                let end = page.entries.get(i + 1).map_or(page_end, |n| n.address);
                if end > e.address {
                    out.push(Entry {
                        start: e.address,
                        end,
                        opcode: e.opcode,
                    });
                }
            }
            previous = previous.max(page_start);
        }
        Ok(out)
    }
}

/// x86_64 compact-unwind register numbers 1..=6 → DWARF register numbers
/// (rbx, r12, r13, r14, r15, rbp).
pub const X86_64_REGS: [u16; 6] = {
    use crate::arch::x86_64::Reg::*;
    [
        Rbx.dwarf(),
        R12.dwarf(),
        R13.dwarf(),
        R14.dwarf(),
        R15.dwarf(),
        Rbp.dwarf(),
    ]
};

/// Mode bits of an opcode (bits 24..28).
pub fn mode(opcode: u32) -> u32 {
    (opcode >> 24) & 0xf
}

/// An x86_64 opcode, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum X86_64Opcode {
    /// No unwind information (opcode mode 0).
    Null,
    /// `rbp`-based frame: `CFA = rbp + 16`; `regs[i]` (compact register numbers, 0 =
    /// none) saved at `rbp - 8 * stack_offset_by_8 + 8 * i`.
    Frame {
        stack_offset_by_8: u8,
        regs: [u8; 5],
    },
    /// Frameless with the frame size in the opcode: `CFA = rsp + 8 * stack_size_by_8`.
    FramelessImmediate {
        stack_size_by_8: u8,
        regs: SavedRegs,
    },
    /// Frameless with the frame size in the `sub $imm32, %rsp` whose immediate lies
    /// `sub_imm_offset` bytes into the function; `CFA = rsp + imm32 + 8 * stack_adjust_by_8`.
    FramelessIndirect {
        sub_imm_offset: u8,
        stack_adjust_by_8: u8,
        regs: SavedRegs,
    },
    /// Use the `__eh_frame` FDE at this offset.
    Dwarf { fde_offset: u32 },
    /// A mode this decoder does not know, or a register encoding libunwind rejects.
    Invalid { mode: u32 },
}

/// Registers a frameless function saved, in libunwind's decode order: `regs[i]` is stored
/// at `CFA - 8 - 8 * count + 8 * i` (the last one right below the return address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedRegs {
    /// Compact register numbers (1..=6), `count` of them valid.
    pub regs: [u8; 6],
    pub count: u8,
}

impl SavedRegs {
    pub fn as_slice(&self) -> &[u8] {
        &self.regs[..usize::from(self.count.min(6))]
    }
}

/// Decodes the register permutation of a frameless opcode as libunwind does: a Lehmer
/// code in a mixed-radix number, each digit an index into the registers not used yet.
/// `None` when a digit names no remaining register (libunwind leaves such a register
/// unset; we treat the opcode as unusable).
pub fn decode_permutation(count: u32, permutation: u32) -> Option<SavedRegs> {
    let count = count.min(6);
    let mut p = permutation;
    let mut digits = [0u32; 6];
    // radixes per count, from libunwind's CompactUnwinder
    let radixes: &[u32] = match count {
        6 | 5 => &[120, 24, 6, 2, 1],
        4 => &[60, 12, 3, 1],
        3 => &[20, 4, 1],
        2 => &[5, 1],
        1 => &[1],
        _ => &[],
    };
    for (i, &r) in radixes.iter().enumerate() {
        digits[i] = p / r;
        p -= digits[i] * r;
    }
    // count 6: the sixth digit is 0 (the only register left)
    let mut used = [false; 7];
    let mut regs = [0u8; 6];
    for i in 0..count as usize {
        let mut renum = 0;
        let mut found = None;
        for (u, used_u) in used.iter_mut().enumerate().skip(1) {
            if !*used_u {
                if renum == digits[i] {
                    *used_u = true;
                    found = Some(u as u8);
                    break;
                }
                renum += 1;
            }
        }
        regs[i] = found?;
    }
    Some(SavedRegs {
        regs,
        count: count as u8,
    })
}

impl X86_64Opcode {
    pub fn decode(opcode: u32) -> X86_64Opcode {
        let m = mode(opcode);
        match m {
            0 => X86_64Opcode::Null,
            1 => {
                let mut regs = [0u8; 5];
                let bits = opcode & 0x7fff;
                for (i, r) in regs.iter_mut().enumerate() {
                    *r = ((bits >> (3 * i)) & 7) as u8;
                    // libunwind: rbp (6) and 7 are not valid in an rbp frame
                    if *r > 5 {
                        return X86_64Opcode::Invalid { mode: m };
                    }
                }
                X86_64Opcode::Frame {
                    stack_offset_by_8: ((opcode >> 16) & 0xff) as u8,
                    regs,
                }
            }
            2 | 3 => {
                let count = (opcode >> 10) & 7;
                let Some(regs) = decode_permutation(count, opcode & 0x3ff) else {
                    return X86_64Opcode::Invalid { mode: m };
                };
                let high = ((opcode >> 16) & 0xff) as u8;
                if m == 2 {
                    X86_64Opcode::FramelessImmediate {
                        stack_size_by_8: high,
                        regs,
                    }
                } else {
                    X86_64Opcode::FramelessIndirect {
                        sub_imm_offset: high,
                        stack_adjust_by_8: ((opcode >> 13) & 7) as u8,
                        regs,
                    }
                }
            }
            4 => X86_64Opcode::Dwarf {
                fde_offset: opcode & 0x00ff_ffff,
            },
            m => X86_64Opcode::Invalid { mode: m },
        }
    }
}

/// An arm64 opcode, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm64Opcode {
    Null,
    /// Leaf without a frame record: `CFA = sp + 16 * stack_size_by_16`, return address in
    /// x30.
    Frameless {
        stack_size_by_16: u16,
    },
    /// Use the `__eh_frame` FDE at this offset.
    Dwarf {
        fde_offset: u32,
    },
    /// Frame record at x29: `CFA = x29 + 16`; `pairs` bit k set means x(19+2k), x(20+2k)
    /// were saved, pairs laid out downwards from `x29 - 8`; bits 5..9 are d8..d15 pairs.
    Frame {
        pairs: u16,
    },
    Invalid {
        mode: u32,
    },
}

impl Arm64Opcode {
    pub fn decode(opcode: u32) -> Arm64Opcode {
        match mode(opcode) {
            0 => Arm64Opcode::Null,
            2 => Arm64Opcode::Frameless {
                stack_size_by_16: ((opcode >> 12) & 0xfff) as u16,
            },
            3 => Arm64Opcode::Dwarf {
                fde_offset: opcode & 0x00ff_ffff,
            },
            4 => Arm64Opcode::Frame {
                pairs: (opcode & 0x1ff) as u16,
            },
            m => Arm64Opcode::Invalid { mode: m },
        }
    }
}
