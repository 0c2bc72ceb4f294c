//! `tombstone.proto`, the binary tombstone Android 12+ writes beside the text one
//! (`/data/tombstones/tombstone_NN.pb`), decoded with `prost`'s derive on the messages
//! below: only the fields this reader uses, so that everything else (logs, open files,
//! MTE tags) is skipped unread.
//!
//! The field numbers are AOSP's `system/core/debuggerd/proto/tombstone.proto` (message
//! `Tombstone` and the `Signal`, `Cause` (with `MemoryError` and `HeapObject`), `Thread`,
//! `Register`, `BacktraceFrame`, `MemoryDump` and `MemoryMapping` it holds; `Architecture` ARM32 0, ARM64 1, X86 2, X86_64 3, RISCV64 4).
//! debuggerd writes the fields in number order, so a tombstone starts with `arch` (field
//! 1, a varint: byte `0x08`) or, for ARM32 (proto3 leaves a 0 out), with
//! `build_fingerprint` (field 2, length-delimited: byte `0x12`).
//!
//! Before decoding, the message's own length prefixes are walked ([`census`]) to count the
//! threads, frames, registers, mappings and causes it holds, so that a small file cannot
//! make the decoder allocate millions of them.

use std::collections::BTreeMap;

use super::heap::{HeapErrorKind, HeapStack, HeapStackKind, MemoryError};
use super::{
    build_id_of, cut, Arch, Frame, SignalInfo, TombMapping, TombThread, Tombstone, TombstoneError,
    TombstoneFormat, MAX_CAUSES, MAX_FRAMES, MAX_MAPPINGS, MAX_THREADS, MAX_TOTAL_FRAMES,
};

/// `message Tombstone`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TombstonePb {
    /// `Architecture arch = 1`.
    #[prost(int32, tag = "1")]
    pub arch: i32,
    #[prost(string, tag = "2")]
    pub build_fingerprint: String,
    #[prost(string, tag = "3")]
    pub revision: String,
    #[prost(string, tag = "4")]
    pub timestamp: String,
    #[prost(uint32, tag = "5")]
    pub pid: u32,
    #[prost(uint32, tag = "6")]
    pub tid: u32,
    #[prost(uint32, tag = "7")]
    pub uid: u32,
    #[prost(string, tag = "8")]
    pub selinux_label: String,
    #[prost(string, repeated, tag = "9")]
    pub command_line: Vec<String>,
    #[prost(message, optional, tag = "10")]
    pub signal_info: Option<SignalPb>,
    #[prost(string, tag = "14")]
    pub abort_message: String,
    #[prost(message, repeated, tag = "15")]
    pub causes: Vec<CausePb>,
    #[prost(btree_map = "uint32, message", tag = "16")]
    pub threads: BTreeMap<u32, ThreadPb>,
    #[prost(message, repeated, tag = "17")]
    pub memory_mappings: Vec<MappingPb>,
}

/// `message Signal`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SignalPb {
    #[prost(int32, tag = "1")]
    pub number: i32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int32, tag = "3")]
    pub code: i32,
    #[prost(string, tag = "4")]
    pub code_name: String,
    #[prost(bool, tag = "8")]
    pub has_fault_address: bool,
    #[prost(uint64, tag = "9")]
    pub fault_address: u64,
}

/// `message Cause`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CausePb {
    #[prost(string, tag = "1")]
    pub human_readable: String,
    #[prost(message, optional, tag = "2")]
    pub memory_error: Option<MemoryErrorPb>,
}

/// `message MemoryError` (see [`super::heap`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemoryErrorPb {
    /// `Tool`: GWP_ASAN 0, SCUDO 1.
    #[prost(int32, tag = "1")]
    pub tool: i32,
    /// `Type`: UNKNOWN 0, USE_AFTER_FREE 1, DOUBLE_FREE 2, INVALID_FREE 3,
    /// BUFFER_OVERFLOW 4, BUFFER_UNDERFLOW 5.
    #[prost(int32, tag = "2")]
    pub r#type: i32,
    #[prost(message, optional, tag = "3")]
    pub heap: Option<HeapObjectPb>,
}

/// `message HeapObject`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeapObjectPb {
    #[prost(uint64, tag = "1")]
    pub address: u64,
    #[prost(uint64, tag = "2")]
    pub size: u64,
    #[prost(uint64, tag = "3")]
    pub allocation_tid: u64,
    #[prost(message, repeated, tag = "4")]
    pub allocation_backtrace: Vec<BacktraceFramePb>,
    #[prost(uint64, tag = "5")]
    pub deallocation_tid: u64,
    #[prost(message, repeated, tag = "6")]
    pub deallocation_backtrace: Vec<BacktraceFramePb>,
}

/// `message Thread`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadPb {
    #[prost(int32, tag = "1")]
    pub id: i32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    pub registers: Vec<RegisterPb>,
    #[prost(message, repeated, tag = "4")]
    pub current_backtrace: Vec<BacktraceFramePb>,
    #[prost(message, repeated, tag = "5")]
    pub memory_dump: Vec<MemoryDumpPb>,
}

/// `message MemoryDump` (its MTE tags left out).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemoryDumpPb {
    #[prost(uint64, tag = "3")]
    pub begin_address: u64,
    #[prost(bytes = "vec", tag = "4")]
    pub memory: Vec<u8>,
}

/// `message Register`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterPb {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint64, tag = "2")]
    pub u64: u64,
}

/// `message BacktraceFrame`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BacktraceFramePb {
    #[prost(uint64, tag = "1")]
    pub rel_pc: u64,
    #[prost(uint64, tag = "2")]
    pub pc: u64,
    #[prost(uint64, tag = "3")]
    pub sp: u64,
    #[prost(string, tag = "4")]
    pub function_name: String,
    #[prost(uint64, tag = "5")]
    pub function_offset: u64,
    #[prost(string, tag = "6")]
    pub file_name: String,
    #[prost(uint64, tag = "7")]
    pub file_map_offset: u64,
    #[prost(string, tag = "8")]
    pub build_id: String,
}

/// `message MemoryMapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MappingPb {
    #[prost(uint64, tag = "1")]
    pub begin_address: u64,
    #[prost(uint64, tag = "2")]
    pub end_address: u64,
    #[prost(uint64, tag = "3")]
    pub offset: u64,
    #[prost(bool, tag = "6")]
    pub execute: bool,
    #[prost(string, tag = "7")]
    pub mapping_name: String,
    #[prost(string, tag = "8")]
    pub build_id: String,
}

/// Whether `bytes` may be a tombstone.proto: its first byte is the key of field 1 (a
/// varint) or field 2 (length-delimited), as debuggerd writes it.
pub fn plausible(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(0x08 | 0x12))
}

/// Whether `bytes` start as a tombstone.proto of a device does: `arch` (0 to 4, or left
/// out), then a build fingerprint (`brand/product/device:version/id/incremental:type/tags`).
/// A file that does is read as a tombstone and its faults are reported as such.
pub fn fingerprinted(bytes: &[u8]) -> bool {
    let rest = match bytes {
        [0x08, arch, rest @ ..] if *arch <= 4 => rest,
        rest => rest,
    };
    let Some((&0x12, mut rest)) = rest.split_first() else {
        return false;
    };
    let Some(len) = varint(&mut rest).and_then(|l| usize::try_from(l).ok()) else {
        return false;
    };
    rest.get(..len)
        .and_then(|f| std::str::from_utf8(f).ok())
        .is_some_and(|f| f.contains('/') && f.contains(':') && !f.chars().any(char::is_control))
}

/// Reads a tombstone.proto.
pub fn parse(bytes: &[u8]) -> Result<Tombstone, TombstoneError> {
    census(bytes)?;
    let pb = <TombstonePb as prost::Message>::decode(bytes)
        .map_err(|e| TombstoneError::Proto(e.to_string()))?;
    from_pb(pb)
}

/// The one reading of a proto's fields this reader does before decoding: `(field number,
/// payload)` of each length-delimited field of `bytes`, the others skipped.
fn delimited(bytes: &[u8]) -> impl Iterator<Item = Result<(u64, &[u8]), TombstoneError>> {
    let mut rest = bytes;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        let step = (|| {
            let key = varint(&mut rest)?;
            match key & 7 {
                0 => varint(&mut rest).map(|_| None),
                1 => skip(&mut rest, 8).map(|_| None),
                5 => skip(&mut rest, 4).map(|_| None),
                2 => {
                    let len = usize::try_from(varint(&mut rest)?).ok()?;
                    let (payload, after) = (rest.get(..len)?, rest.get(len..)?);
                    rest = after;
                    Some(Some((key >> 3, payload)))
                }
                _ => None,
            }
        })();
        match step {
            None => {
                rest = &[];
                return Some(Err(TombstoneError::Proto(
                    "a field runs past the end of its message (truncated?)".into(),
                )));
            }
            Some(Some(field)) => return Some(Ok(field)),
            Some(None) => continue,
        }
    })
}

fn varint(rest: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, after) = rest.split_first()?;
        *rest = after;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn skip(rest: &mut &[u8], n: usize) -> Option<()> {
    *rest = rest.get(n..)?;
    Some(())
}

/// Counts what the decoder would allocate (threads, each thread's frames and registers,
/// mappings, causes) and refuses a tombstone with more than the bounds.
fn census(bytes: &[u8]) -> Result<(), TombstoneError> {
    let too_many = |what, count, max| TombstoneError::TooMany { what, count, max };
    let (mut threads, mut mappings, mut causes, mut frames_total) = (0usize, 0, 0, 0);
    for field in delimited(bytes) {
        let (number, payload) = field?;
        match number {
            15 => {
                causes += 1;
                frames_total += cause_census(payload)?;
            }
            16 => {
                threads += 1;
                for entry in delimited(payload) {
                    let (n, thread) = entry?;
                    if n == 2 {
                        let (frames, registers) = thread_census(thread)?;
                        if frames > MAX_FRAMES {
                            return Err(too_many("frames in a thread", frames, MAX_FRAMES));
                        }
                        if registers > MAX_REGISTERS {
                            return Err(too_many(
                                "registers in a thread",
                                registers,
                                MAX_REGISTERS,
                            ));
                        }
                        frames_total += frames;
                    }
                }
            }
            17 => mappings += 1,
            _ => {}
        }
    }
    for (what, count, max) in [
        ("threads", threads, MAX_THREADS),
        ("mappings", mappings, MAX_MAPPINGS),
        ("causes", causes, MAX_CAUSES * 16),
        ("frames in all", frames_total, MAX_TOTAL_FRAMES),
    ] {
        if count > max {
            return Err(too_many(what, count, max));
        }
    }
    Ok(())
}

/// Frames of a `Cause`'s heap object backtraces (`memory_error` 2 → `heap` 3 →
/// `allocation_backtrace` 4, `deallocation_backtrace` 6), each within the frame bound.
fn cause_census(cause: &[u8]) -> Result<usize, TombstoneError> {
    let mut total = 0;
    for field in delimited(cause) {
        let (n, error) = field?;
        if n != 2 {
            continue;
        }
        for field in delimited(error) {
            let (n, heap) = field?;
            if n != 3 {
                continue;
            }
            let (mut alloc, mut dealloc) = (0usize, 0usize);
            for field in delimited(heap) {
                match field?.0 {
                    4 => alloc += 1,
                    6 => dealloc += 1,
                    _ => {}
                }
            }
            let most = alloc.max(dealloc);
            if most > MAX_FRAMES {
                return Err(TombstoneError::TooMany {
                    what: "frames in a heap backtrace",
                    count: most,
                    max: MAX_FRAMES,
                });
            }
            total += alloc + dealloc;
        }
    }
    Ok(total)
}

/// Most registers a thread may list (aarch64 has 34, with its FP registers fewer than 100).
const MAX_REGISTERS: usize = 256;

/// (frames, registers) of one `Thread` message; its memory dumps bounded in number
/// (each decoded into a vector of its own).
fn thread_census(thread: &[u8]) -> Result<(usize, usize), TombstoneError> {
    let (mut frames, mut registers, mut dumps) = (0, 0, 0);
    for field in delimited(thread) {
        match field?.0 {
            3 => registers += 1,
            4 => frames += 1,
            5 => dumps += 1,
            _ => {}
        }
    }
    if dumps > MAX_REGISTERS {
        return Err(TombstoneError::TooMany {
            what: "memory dumps in a thread",
            count: dumps,
            max: MAX_REGISTERS,
        });
    }
    Ok((frames, registers))
}

/// The architecture of the proto's `Architecture` number.
fn arch_of(n: i32) -> Result<Arch, TombstoneError> {
    match n {
        0 => Ok(Arch::Arm),
        1 => Ok(Arch::Aarch64),
        2 => Ok(Arch::X86),
        3 => Ok(Arch::X86_64),
        4 => Err(TombstoneError::Arch("riscv64".into())),
        other => Err(TombstoneError::Arch(format!("Architecture {other}"))),
    }
}

fn text(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| cut(s))
}

/// The decoded messages as the reader's [`Tombstone`]: the crashed thread (`tid`) first.
fn from_pb(pb: TombstonePb) -> Result<Tombstone, TombstoneError> {
    let arch = arch_of(pb.arch)?;
    if pb.threads.is_empty() {
        return Err(TombstoneError::NoThreads);
    }
    let crashed = pb.threads.get(&pb.tid).map(thread);
    let others = pb
        .threads
        .iter()
        .filter(|(k, _)| **k != pb.tid)
        .map(|(_, t)| thread(t));
    let threads: Vec<TombThread> = crashed.into_iter().chain(others).collect();
    let mut memory = super::memory::Dumps::default();
    for m in pb.threads.values().flat_map(|t| &t.memory_dump) {
        memory.section();
        memory.add(m.begin_address, &m.memory)?;
    }
    let command_line = pb
        .command_line
        .iter()
        .map(|w| cut(w))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Tombstone {
        format: TombstoneFormat::Proto,
        arch,
        build_fingerprint: text(&pb.build_fingerprint),
        revision: text(&pb.revision),
        timestamp: text(&pb.timestamp),
        pid: Some(pb.pid),
        tid: Some(pb.tid),
        uid: Some(pb.uid),
        selinux_label: text(&pb.selinux_label),
        command_line: text(&command_line),
        signal: pb.signal_info.as_ref().map(|s| SignalInfo {
            number: u32::try_from(s.number).unwrap_or(0),
            name: text(&s.name),
            code: Some(s.code),
            code_name: text(&s.code_name),
            fault_address: s.has_fault_address.then_some(s.fault_address),
        }),
        abort_message: text(&pb.abort_message),
        causes: pb
            .causes
            .iter()
            .filter_map(|c| text(&c.human_readable))
            .take(MAX_CAUSES)
            .collect(),
        threads,
        mappings: pb
            .memory_mappings
            .iter()
            .map(|m| TombMapping {
                start: m.begin_address,
                end: m.end_address,
                offset: m.offset,
                execute: m.execute,
                name: text(&m.mapping_name),
                build_id: build_id_of(&m.build_id),
            })
            .collect(),
        from_logcat: false,
        memory_error: pb.causes.iter().find_map(memory_error),
        memory,
    })
}

/// A cause's heap memory error, its stacks deallocation first (as debuggerd prints them).
fn memory_error(c: &CausePb) -> Option<MemoryError> {
    let e = c.memory_error.as_ref()?;
    let from_text = MemoryError::from_cause(&c.human_readable);
    let heap = e.heap.clone().unwrap_or_default();
    let stack = |kind, tid: u64, frames: &[BacktraceFramePb]| {
        (!frames.is_empty()).then(|| HeapStack {
            kind,
            tid: u32::try_from(tid).unwrap_or(0),
            frames: frames.iter().map(frame).collect(),
        })
    };
    let stacks = [
        stack(
            HeapStackKind::Deallocation,
            heap.deallocation_tid,
            &heap.deallocation_backtrace,
        ),
        stack(
            HeapStackKind::Allocation,
            heap.allocation_tid,
            &heap.allocation_backtrace,
        ),
    ];
    Some(MemoryError {
        // the text's tool names MTE where the proto says Scudo
        tool: from_text.map(|t| t.tool).unwrap_or_else(|| {
            match e.tool {
                0 => "GWP-ASan",
                _ => "Scudo",
            }
            .to_string()
        }),
        kind: HeapErrorKind::from_proto(e.r#type),
        cause: cut(&c.human_readable),
        address: e.heap.as_ref().map(|h| h.address),
        size: e.heap.as_ref().map(|h| h.size),
        stacks: stacks.into_iter().flatten().collect(),
    })
}

fn thread(t: &ThreadPb) -> TombThread {
    TombThread {
        id: u32::try_from(t.id).unwrap_or(0),
        name: text(&t.name),
        registers: t.registers.iter().map(|r| (cut(&r.name), r.u64)).collect(),
        frames: t.current_backtrace.iter().map(frame).collect(),
    }
}

fn frame(f: &BacktraceFramePb) -> Frame {
    Frame {
        rel_pc: f.rel_pc,
        pc: Some(f.pc),
        sp: Some(f.sp),
        file: text(&f.file_name),
        file_map_offset: f.file_map_offset,
        function: text(&f.function_name),
        function_offset: (!f.function_name.is_empty()).then_some(f.function_offset),
        build_id: build_id_of(&f.build_id),
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use prost::Message;

    #[test]
    fn the_census_refuses_more_threads_than_allowed() {
        // field 16, an empty map entry, many times over: tiny, but past the bound
        let bytes: Vec<u8> = std::iter::repeat_n([0x82, 0x01, 0x00], MAX_THREADS + 1)
            .flatten()
            .collect();
        let mut full = vec![0x08, 0x01];
        full.extend(bytes);
        assert!(matches!(
            parse(&full),
            Err(TombstoneError::TooMany {
                what: "threads",
                ..
            })
        ));
    }

    #[test]
    fn truncated_protos_are_refused() {
        let mut pb = TombstonePb {
            arch: 1,
            tid: 7,
            ..TombstonePb::default()
        };
        pb.threads.insert(
            7,
            ThreadPb {
                id: 7,
                current_backtrace: vec![BacktraceFramePb {
                    rel_pc: 0x10,
                    file_name: "/system/lib64/libc.so".into(),
                    ..BacktraceFramePb::default()
                }],
                ..ThreadPb::default()
            },
        );
        let bytes = pb.encode_to_vec();
        let t = parse(&bytes).unwrap();
        assert_eq!(t.threads[0].frames[0].rel_pc, 0x10);
        for cut in 1..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
