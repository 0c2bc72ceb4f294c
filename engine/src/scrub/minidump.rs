//! Where a minidump carries memory and strings a scrubber may overwrite: the bytes of
//! the memory ranges (`MemoryListStream`, `Memory64ListStream`, the threads' stacks),
//! the Linux command line and environment streams (Breakpad's `/proc/self/cmdline` and
//! `environ`), and the values of Crashpad's annotations (simple annotations, list
//! annotations and annotation objects of the process and of each module). Never the
//! header, the stream directory, a stream's own structures, contexts or module lists.
//!
//! Everything is read from untrusted bytes: each count is bounded by the bytes that
//! could hold it and each span is clamped to the file; the scrubber merges overlapping
//! spans, so a hostile dump naming the same bytes a million times has them scanned once.

use std::ops::Range;

use crate::dump::elf_core::parse::{u32_at, u64_at};

const THREAD_LIST: u32 = 3;
const MEMORY_LIST: u32 = 5;
const MEMORY64_LIST: u32 = 9;
const LINUX_CMD_LINE: u32 = 0x4767_0006;
const LINUX_ENVIRON: u32 = 0x4767_0007;
const CRASHPAD_INFO: u32 = 0x4350_0001;
/// Bytes of a `MINIDUMP_THREAD`.
const THREAD_SIZE: usize = 48;
/// Most streams, list entries and annotations followed (a hostile count costs no more).
const MAX_ENTRIES: usize = 1 << 20;

/// The file spans of `bytes`'s memory and strings; `None` when it is not a minidump.
pub(super) fn spans(bytes: &[u8]) -> Option<Vec<Range<usize>>> {
    if !bytes.starts_with(b"MDMP") {
        return None;
    }
    let count = at32(bytes, 8)?.min(MAX_ENTRIES);
    let dir = at32(bytes, 12)?;
    let mut out = Vec::new();
    for i in 0..count {
        let Some(entry) = i.checked_mul(12).and_then(|o| o.checked_add(dir)) else {
            break;
        };
        let (Some(kind), Some(size), Some(rva)) = (
            u32_at(bytes, entry),
            at32(bytes, entry + 4),
            at32(bytes, entry + 8),
        ) else {
            break;
        };
        let stream = clamp(bytes, rva, size);
        let body = bytes.get(stream.clone()).unwrap_or_default();
        match kind {
            THREAD_LIST => listed(bytes, body, THREAD_SIZE, 24, &mut out),
            MEMORY_LIST => listed(bytes, body, 16, 0, &mut out),
            MEMORY64_LIST => memory64(bytes, body, &mut out),
            LINUX_CMD_LINE | LINUX_ENVIRON => out.push(stream),
            CRASHPAD_INFO => crashpad(bytes, body, &mut out),
            _ => {}
        }
    }
    Some(out)
}

/// A u32 at `at` as an offset or count.
fn at32(b: &[u8], at: usize) -> Option<usize> {
    u32_at(b, at).and_then(|v| usize::try_from(v).ok())
}

/// `[offset, offset + size)` clamped to the file.
fn clamp(bytes: &[u8], offset: usize, size: usize) -> Range<usize> {
    let start = offset.min(bytes.len());
    start..offset.saturating_add(size).min(bytes.len())
}

/// A `count` then `count` entries of `entry` bytes (after 4 bytes of padding when the
/// stream's size says so), each holding a `MINIDUMP_MEMORY_DESCRIPTOR` at `descriptor`:
/// the memory's bytes.
fn listed(bytes: &[u8], body: &[u8], entry: usize, descriptor: usize, out: &mut Vec<Range<usize>>) {
    let Some(count) = at32(body, 0) else {
        return;
    };
    let first = if count.checked_mul(entry).and_then(|n| n.checked_add(8)) == Some(body.len()) {
        8
    } else {
        4
    };
    let count = count.min(body.len() / entry).min(MAX_ENTRIES);
    for i in 0..count {
        let at = first + i * entry + descriptor;
        if let (Some(size), Some(rva)) = (at32(body, at + 8), at32(body, at + 12)) {
            out.push(clamp(bytes, rva, size));
        }
    }
}

/// `Memory64ListStream`: a count, the offset of the first range's bytes, then
/// (address, size) pairs whose bytes follow one another from that offset.
fn memory64(bytes: &[u8], body: &[u8], out: &mut Vec<Range<usize>>) {
    let (Some(count), Some(base)) = (u64_at(body, 0), u64_at(body, 8)) else {
        return;
    };
    let count = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .min(body.len() / 16);
    let mut at = usize::try_from(base).unwrap_or(usize::MAX);
    for i in 0..count {
        let Some(size) = u64_at(body, 16 + i * 16 + 8) else {
            break;
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        out.push(clamp(bytes, at, size));
        at = at.saturating_add(size);
        if at >= bytes.len() {
            break;
        }
    }
}

/// `MinidumpCrashpadInfo`: the values of its simple annotations, and for each module
/// (`MinidumpModuleCrashpadInfoList`) its list annotations, simple annotations and the
/// values of its annotation objects.
fn crashpad(bytes: &[u8], body: &[u8], out: &mut Vec<Range<usize>>) {
    if let Some(rva) = at32(body, 40) {
        dictionary(bytes, rva, out);
    }
    let Some(list) = at32(body, 48).filter(|&l| l != 0) else {
        return;
    };
    let count = bounded_count(bytes, list, 12);
    for i in 0..count {
        // MinidumpModuleCrashpadInfoLink: module index, then a location descriptor.
        let Some(module) = at32(bytes, list + 4 + i * 12 + 8) else {
            break;
        };
        if let Some(rva) = at32(bytes, module + 8) {
            rva_list(bytes, rva, out);
        }
        if let Some(rva) = at32(bytes, module + 16) {
            dictionary(bytes, rva, out);
        }
        if let Some(rva) = at32(bytes, module + 24) {
            annotation_objects(bytes, rva, out);
        }
    }
}

/// The count at `rva` of a list of `size`-byte entries after it, bounded by the entries
/// the file's bytes could hold; 0 at RVA 0 (no list).
fn bounded_count(bytes: &[u8], rva: usize, size: usize) -> usize {
    if rva == 0 {
        return 0;
    }
    let room = bytes.len().saturating_sub(rva.saturating_add(4)) / size;
    at32(bytes, rva).unwrap_or(0).min(room).min(MAX_ENTRIES)
}

/// The bytes of the length-prefixed string (`MinidumpUTF8String`, `MinidumpByteArray`)
/// at `rva`.
fn string(bytes: &[u8], rva: usize, out: &mut Vec<Range<usize>>) {
    if let Some(len) = at32(bytes, rva).filter(|_| rva != 0) {
        out.push(clamp(bytes, rva.saturating_add(4), len));
    }
}

/// `count` entries of `size` bytes from `rva + 4`, the u32 at `field` of each an RVA of
/// a string.
fn strings_at(bytes: &[u8], rva: usize, size: usize, field: usize, out: &mut Vec<Range<usize>>) {
    let count = bounded_count(bytes, rva, size);
    for i in 0..count {
        match at32(bytes, rva.saturating_add(4 + i * size + field)) {
            Some(s) => string(bytes, s, out),
            None => break,
        }
    }
}

/// `MinidumpSimpleStringDictionary`: (key, value) RVA pairs; the values.
fn dictionary(bytes: &[u8], rva: usize, out: &mut Vec<Range<usize>>) {
    strings_at(bytes, rva, 8, 4, out);
}

/// `MinidumpRVAList` of strings.
fn rva_list(bytes: &[u8], rva: usize, out: &mut Vec<Range<usize>>) {
    strings_at(bytes, rva, 4, 0, out);
}

/// `MinidumpAnnotationList`: (name RVA, type, reserved, value RVA); the values.
fn annotation_objects(bytes: &[u8], rva: usize, out: &mut Vec<Range<usize>>) {
    strings_at(bytes, rva, 12, 8, out);
}
