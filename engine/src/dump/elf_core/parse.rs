//! Bounds-checked little-endian reads of ELF structures: file header, program headers,
//! notes — ELF64, and ELF32 for i386 and 32-bit arm cores.
//!
//! Every offset and count here comes from untrusted bytes, so each read is checked and
//! answers `None` (or stops an iteration) instead of panicking, and every count is checked
//! against the bytes that could hold it before anything is allocated. The layouts are written
//! out by hand (offsets from the System V ABI) rather than taken from `object`, so the reader
//! can keep going over a truncated file where a strict parser would refuse it.

use crate::dump::DumpError;

pub(super) const ET_CORE: u16 = 4;
pub(super) const EM_386: u16 = 3;
pub(super) const EM_ARM: u16 = 40;
pub(super) const EM_X86_64: u16 = 62;
pub(super) const EM_AARCH64: u16 = 183;
pub(crate) const PT_LOAD: u32 = 1;
pub(super) const PT_DYNAMIC: u32 = 2;
pub(super) const PT_INTERP: u32 = 3;
pub(super) const PT_NOTE: u32 = 4;
pub(super) const PT_PHDR: u32 = 6;
pub(super) const PF_X: u32 = 1;
/// Size of an ELF64 file header.
pub(super) const EHDR_SIZE: usize = 64;
/// Size of an ELF64 program header.
pub(super) const PHDR_SIZE: usize = 56;
/// Size of an ELF32 file header.
pub(super) const EHDR32_SIZE: usize = 52;
/// Size of an ELF32 program header.
pub(super) const PHDR32_SIZE: usize = 32;
/// `e_phnum` value meaning "the real count is in section header 0's `sh_info`".
const PN_XNUM: u16 = 0xffff;

/// A little-endian u16 at `off`.
pub(super) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}
/// A little-endian u32 at `off`.
pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}
/// A little-endian i32 at `off`.
pub(super) fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    Some(i32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}
/// A little-endian u64 at `off`.
pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The bytes of a NUL-terminated string at the start of `b` (all of `b` without a NUL).
pub(super) fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(end) => &b[..end],
        None => b,
    }
}

/// The fields of the ELF file header the reader uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub machine: u16,
    /// An ELF32 file (an i386 or arm core).
    pub elf32: bool,
    pub phoff: u64,
    pub phnum: u64,
    pub shoff: u64,
    pub shnum: u16,
}

/// A human name for an ELF machine number, for error messages.
fn machine_name(machine: u16) -> String {
    let name = match machine {
        3 => "EM_386 (x86)",
        8 => "EM_MIPS (mips)",
        20 => "EM_PPC (powerpc)",
        21 => "EM_PPC64 (powerpc64)",
        22 => "EM_S390 (s390)",
        40 => "EM_ARM (arm)",
        62 => "EM_X86_64 (x86_64)",
        183 => "EM_AARCH64 (aarch64)",
        243 => "EM_RISCV (riscv)",
        258 => "EM_LOONGARCH (loongarch)",
        _ => return format!("{machine}"),
    };
    name.to_string()
}

impl Header {
    /// Checks the identification, type and machine: only 64-bit little-endian x86_64 and
    /// aarch64 cores and 32-bit little-endian i386 and arm cores are read.
    pub fn parse(bytes: &[u8]) -> Result<Header, DumpError> {
        if !bytes.starts_with(b"\x7fELF") {
            return Err(DumpError::NotADump);
        }
        let ident = bytes
            .get(..20)
            .ok_or_else(|| DumpError::Truncated("the ELF header is cut short".into()))?;
        let (class, data) = (ident[4], ident[5]);
        let big_endian = data == 2;
        let half = |off: usize| -> Option<u16> {
            let b: [u8; 2] = bytes.get(off..off + 2)?.try_into().ok()?;
            Some(if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            })
        };
        let e_type = half(16).unwrap_or(0);
        let machine = half(18).unwrap_or(0);
        if e_type != ET_CORE {
            let kind = match e_type {
                1 => "ET_REL (relocatable object)".to_string(),
                2 => "ET_EXEC (executable)".to_string(),
                3 => "ET_DYN (shared object or PIE executable)".to_string(),
                t => format!("{t}"),
            };
            return Err(DumpError::NotACore(kind));
        }
        let supported = data == 1
            && ((class == 2 && matches!(machine, EM_X86_64 | EM_AARCH64))
                || (class == 1 && matches!(machine, EM_386 | EM_ARM)));
        if !supported {
            let layout = match (class, data) {
                (2, 1) => String::new(),
                (1, _) => " (32-bit core)".to_string(),
                (_, 2) => " (big-endian core)".to_string(),
                _ => " (unknown ELF class or byte order)".to_string(),
            };
            return Err(DumpError::UnsupportedArch(format!(
                "ELF machine {}{layout} is not supported",
                machine_name(machine)
            )));
        }
        if class == 1 {
            return Self::parse32(bytes, machine);
        }
        let short = || DumpError::Truncated("the ELF header is cut short".into());
        let phoff = u64_at(bytes, 32).ok_or_else(short)?;
        let shoff = u64_at(bytes, 40).ok_or_else(short)?;
        let phentsize = u16_at(bytes, 54).ok_or_else(short)?;
        let phnum16 = u16_at(bytes, 56).ok_or_else(short)?;
        let shnum = u16_at(bytes, 60).ok_or_else(short)?;
        if phentsize as usize != PHDR_SIZE && phnum16 != 0 {
            return Err(DumpError::Malformed(format!(
                "program header entries of {phentsize} bytes (ELF64 uses {PHDR_SIZE})"
            )));
        }
        // Section header 0's sh_info (offset 44) holds the real count past PN_XNUM.
        let phnum = phnum(bytes, phnum16, shoff, 44)?;
        Ok(Header {
            machine,
            elf32: false,
            phoff,
            phnum,
            shoff,
            shnum,
        })
    }
}

impl Header {
    /// The ELF32 header of an i386 or arm core (class and machine already checked).
    fn parse32(bytes: &[u8], machine: u16) -> Result<Header, DumpError> {
        let short = || DumpError::Truncated("the ELF header is cut short".into());
        let phoff = u64::from(u32_at(bytes, 28).ok_or_else(short)?);
        let shoff = u64::from(u32_at(bytes, 32).ok_or_else(short)?);
        let phentsize = u16_at(bytes, 42).ok_or_else(short)?;
        let phnum16 = u16_at(bytes, 44).ok_or_else(short)?;
        let shnum = u16_at(bytes, 48).ok_or_else(short)?;
        if phentsize as usize != PHDR32_SIZE && phnum16 != 0 {
            return Err(DumpError::Malformed(format!(
                "program header entries of {phentsize} bytes (ELF32 uses {PHDR32_SIZE})"
            )));
        }
        // an ELF32 section header's sh_info is at offset 28
        let phnum = phnum(bytes, phnum16, shoff, 28)?;
        Ok(Header {
            machine,
            elf32: true,
            phoff,
            phnum,
            shoff,
            shnum,
        })
    }
}

/// The program header count: `e_phnum`, or past `PN_XNUM` section header 0's `sh_info`
/// (at `info_at` in that header).
fn phnum(bytes: &[u8], phnum16: u16, shoff: u64, info_at: usize) -> Result<u64, DumpError> {
    if phnum16 != PN_XNUM {
        return Ok(u64::from(phnum16));
    }
    usize::try_from(shoff)
        .ok()
        .and_then(|off| u32_at(bytes, off.checked_add(info_at)?))
        .map(u64::from)
        .ok_or_else(|| {
            DumpError::Malformed("e_phnum is PN_XNUM but section header 0 is not present".into())
        })
}

/// One program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Phdr {
    pub p_type: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub align: u64,
}

impl Phdr {
    /// Decodes one 32-byte ELF32 program header.
    pub fn parse32(b: &[u8]) -> Option<Phdr> {
        let w = |off: usize| u32_at(b, off).map(u64::from);
        Some(Phdr {
            p_type: u32_at(b, 0)?,
            offset: w(4)?,
            vaddr: w(8)?,
            filesz: w(16)?,
            memsz: w(20)?,
            flags: u32_at(b, 24)?,
            align: w(28)?,
        })
    }

    /// Decodes one 56-byte ELF64 program header.
    pub fn parse(b: &[u8]) -> Option<Phdr> {
        Some(Phdr {
            p_type: u32_at(b, 0)?,
            flags: u32_at(b, 4)?,
            offset: u64_at(b, 8)?,
            vaddr: u64_at(b, 16)?,
            filesz: u64_at(b, 32)?,
            memsz: u64_at(b, 40)?,
            align: u64_at(b, 48)?,
        })
    }
}

/// The program headers of the core. A table that runs past the end of the file yields the
/// entries present, and `true` for "truncated".
pub(crate) fn program_headers(bytes: &[u8], h: &Header) -> Result<(Vec<Phdr>, bool), DumpError> {
    let start = usize::try_from(h.phoff)
        .ok()
        .filter(|&s| s <= bytes.len())
        .ok_or_else(|| {
            DumpError::Truncated(format!(
                "the program headers start at {:#x}, past the end of the {}-byte file",
                h.phoff,
                bytes.len()
            ))
        })?;
    type ParsePhdr = fn(&[u8]) -> Option<Phdr>;
    let (size, parse): (usize, ParsePhdr) = if h.elf32 {
        (PHDR32_SIZE, Phdr::parse32)
    } else {
        (PHDR_SIZE, Phdr::parse)
    };
    let avail = (bytes.len() - start) / size;
    // The count comes from the file: only as many entries as the bytes can hold are read.
    let count = usize::try_from(h.phnum).unwrap_or(usize::MAX).min(avail);
    let truncated = (count as u64) < h.phnum;
    let phdrs = bytes[start..]
        .chunks_exact(size)
        .take(count)
        .filter_map(parse)
        .collect();
    Ok((phdrs, truncated))
}

/// The bytes of `[offset, offset + size)` present in `bytes`, and whether they were clamped.
pub(super) fn clamp(bytes: &[u8], offset: u64, size: u64) -> (&[u8], bool) {
    let Some(start) = usize::try_from(offset).ok().filter(|&s| s <= bytes.len()) else {
        return (&[], size > 0);
    };
    let rest = &bytes[start..];
    match usize::try_from(size) {
        Ok(n) if n <= rest.len() => (&rest[..n], false),
        _ => (rest, true),
    }
}

/// One ELF note: owner name (without the NUL), type, descriptor.
#[derive(Debug, Clone, Copy)]
pub(super) struct Note<'a> {
    pub name: &'a [u8],
    pub n_type: u32,
    pub desc: &'a [u8],
}

/// Iterates over the notes of a PT_NOTE segment. Stops at the first note that does not fit;
/// [`NoteIter::cut_short`] then tells so.
pub(super) struct NoteIter<'a> {
    rest: &'a [u8],
    align: usize,
    cut_short: bool,
}

impl<'a> NoteIter<'a> {
    /// Notes padded to `align` bytes (4 for cores; 4 or 8 for PT_NOTE of binaries).
    pub fn new(bytes: &'a [u8], align: u64) -> Self {
        NoteIter {
            rest: bytes,
            align: if align == 8 { 8 } else { 4 },
            cut_short: false,
        }
    }
    /// Whether the iteration stopped at a note running past the segment.
    pub fn cut_short(&self) -> bool {
        self.cut_short
    }
    fn pad(&self, n: usize) -> Option<usize> {
        let a = self.align;
        Some(n.checked_add(a - 1)? & !(a - 1))
    }
    fn next_note(&mut self) -> Option<Note<'a>> {
        let b = self.rest;
        let namesz = usize::try_from(u32_at(b, 0)?).ok()?;
        let descsz = usize::try_from(u32_at(b, 4)?).ok()?;
        let n_type = u32_at(b, 8)?;
        let name_end = 12usize.checked_add(namesz)?;
        let desc_start = self.pad(name_end)?;
        let desc_end = desc_start.checked_add(descsz)?;
        let name = b.get(12..name_end)?;
        let desc = b.get(desc_start..desc_end)?;
        let next = self.pad(desc_end)?.min(b.len());
        self.rest = &b[next..];
        Some(Note {
            name: c_str(name),
            n_type,
            desc,
        })
    }
}

impl<'a> Iterator for NoteIter<'a> {
    type Item = Note<'a>;
    fn next(&mut self) -> Option<Note<'a>> {
        if self.rest.len() < 12 {
            // A few bytes of padding at the end are not a truncation.
            self.cut_short |= self.rest.iter().any(|&b| b != 0);
            self.rest = &[];
            return None;
        }
        let note = self.next_note();
        if note.is_none() {
            self.cut_short = true;
            self.rest = &[];
        }
        note
    }
}
