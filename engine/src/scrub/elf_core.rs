//! Where an ELF core carries memory a scrubber may overwrite: the file contents of its
//! `PT_LOAD` segments. Never the ELF header, the program headers or the notes (threads'
//! registers, signal information, the mapped files).
//!
//! Keeping no heap: of the `PT_LOAD` segments, only those holding a thread's stack (the
//! segment containing its stack pointer, as the core's reader reads the registers) and
//! those inside a module's mapped file (code, read-only data, the dynamic linker's and
//! the binaries' own data, which the reader needs to find the modules and their
//! build-ids) keep their bytes; every other one (the heap, anonymous mappings, other
//! arenas) is overwritten whole. The walk reads registers, stacks and modules only, so
//! it stays the same.

use std::ops::Range;

use crate::dump::elf_core::parse::{program_headers, Header, Phdr, PT_LOAD};

/// One `PT_LOAD` segment: its bytes in the file, and its addresses.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub file: Range<usize>,
    pub vaddr: u64,
    pub memsz: u64,
}

/// The `PT_LOAD` segments of `bytes` (their file bytes clamped to the file); `None` when
/// it is not an ELF core the reader reads.
pub(super) fn segments(bytes: &[u8]) -> Option<Vec<Segment>> {
    let header = Header::parse(bytes).ok()?;
    let (phdrs, _) = program_headers(bytes, &header).ok()?;
    Some(
        phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD && p.filesz > 0)
            .map(|p: &Phdr| {
                let start = usize::try_from(p.offset)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let size = usize::try_from(p.filesz).unwrap_or(usize::MAX);
                Segment {
                    file: start..start.saturating_add(size).min(bytes.len()),
                    vaddr: p.vaddr,
                    memsz: p.memsz,
                }
            })
            .collect(),
    )
}

/// Of `segments`, the ones that are heap: not containing a thread's stack pointer, not
/// inside a module's mapping. When the core cannot be read (no threads to keep the
/// stacks of), every segment.
pub(super) fn heap(bytes: &[u8], segments: &[Segment]) -> Vec<Range<usize>> {
    let Ok(dump) = crate::dump::elf_core::read(bytes) else {
        return segments.iter().map(|s| s.file.clone()).collect();
    };
    let sps: Vec<u64> = dump
        .threads
        .iter()
        .filter_map(|t| t.registers.sp())
        .collect();
    let mappings: Vec<(u64, u64)> = dump
        .modules
        .iter()
        .flat_map(|m| m.mappings.iter().map(|mm| (mm.start, mm.end)))
        .collect();
    segments
        .iter()
        .filter(|s| {
            let end = s.vaddr.saturating_add(s.memsz);
            let stack = sps.iter().any(|&sp| sp >= s.vaddr && sp < end);
            let module = mappings
                .iter()
                .any(|&(start, stop)| s.vaddr >= start && s.vaddr < stop);
            !stack && !module
        })
        .map(|s| s.file.clone())
        .collect()
}
