//! minidump-stackwalk's `--json` document written straight from the report with serde:
//! each object is a borrowed view of the report's fields, frames are rendered one at a
//! time as the serializer asks for them, so writing a thread 8,192 frames deep builds no
//! tree of the document and its memory is the output's buffer.
//!
//! The keys of every object are declared in byte order, the order the document had when
//! it was a `serde_json::Value` tree (a sorted map): the bytes are the same as before
//! (`tree.rs`, the old rendering, is the tests' reference).
//!
//! [`write_json`]'s compact document, `--json`, has its frames written by hand instead
//! ([`FrameDoc::write_compact`]: a deep thread's frames are nearly all of it, and serde's
//! per-field calls were most of their cost), the crashed thread's once for its two
//! copies; the serde path stays for `--pretty` and for every other serializer.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde::ser::{Error as _, SerializeSeq, Serializer};
use serde::Serialize;

use super::{
    access_type, adjusted, bit_flips, cpu_name, crash_type, debug_file, gprs, main_first, os_name,
    trust_name, Address, Adjusted, BitFlip, Width, NIL_DEBUG_ID,
};
use crate::report::json_text::{write_string, write_u64, Raw};
use crate::report::{Frame, Module, Report, Thread};

/// The document, borrowing the report it renders. Serialize it with any serde
/// serializer; [`write_json`] writes it as minidump-stackwalk prints it.
pub struct Document<'r> {
    report: &'r Report,
    width: Width,
    /// The modules a frame landed in: minidump-stackwalk looks for those modules'
    /// symbols only, and says they are missing only of them.
    looked_for: BTreeSet<usize>,
    /// Frames are written by hand ([`FrameDoc::write_compact`]) and handed to the writer
    /// as [`Raw`] text: only when [`write_json`] writes the compact document.
    raw_frames: bool,
    /// Written by hand, the crashed thread's frames as `crashing_thread` has them, for its
    /// copy in `threads`.
    crashed_frames: RefCell<FrameTexts>,
}

/// The text of one thread's frames, kept as they are written by hand: the crashed thread
/// is in the document twice, with the same frames but the first (in `crashing_thread` it
/// carries the registers), and a deep one's frames are most of the document.
#[derive(Default)]
struct FrameTexts {
    /// Whose frames: the thread's address in the report (a number, which keeps the
    /// document `Send`).
    thread: Option<usize>,
    text: Vec<u8>,
    /// Where each frame's text is in `text`, by frame number (the first is never kept).
    frames: Vec<std::ops::Range<usize>>,
}

/// Where `t` is: which thread of the report it is.
fn address(t: &Thread) -> usize {
    std::ptr::from_ref(t) as usize
}

impl FrameTexts {
    /// Frame `i` of thread `t`, if kept.
    fn get(&self, t: &Thread, i: usize) -> Option<&[u8]> {
        let ours = self.thread == Some(address(t));
        let range = self.frames.get(i).filter(|_| ours)?;
        self.text.get(range.clone()).filter(|t| !t.is_empty())
    }

    /// Room for `frames` frames' text at once: grown by doubling, the buffer's fresh
    /// pages were about twice the text's (each earlier, smaller copy touched too), a
    /// thousand page faults for a deep thread; reserved, only the pages written are
    /// touched (a frame's text is nearly always under the 512 bytes taken).
    fn reserve(&mut self, frames: usize) {
        self.text.reserve(frames.saturating_mul(512));
        self.frames.reserve(frames);
    }

    /// Keeps `text` as frame `i` of thread `t`.
    fn keep(&mut self, t: &Thread, i: usize, text: &[u8]) {
        if self.thread.is_none() {
            self.thread = Some(address(t));
        }
        let start = self.text.len();
        self.text.extend_from_slice(text);
        self.frames.resize(i, 0..0);
        self.frames.push(start..self.text.len());
    }
}

/// The report as minidump-stackwalk's `--json` document.
pub fn document(report: &Report) -> Document<'_> {
    let looked_for = report
        .threads
        .iter()
        .flat_map(|t| &t.frames)
        .filter_map(|f| f.module_index)
        .collect();
    Document {
        report,
        width: Width::of(report.dump.arch),
        looked_for,
        raw_frames: false,
        crashed_frames: RefCell::default(),
    }
}

/// Writes the document (compact or pretty) and a newline to `out`, as
/// `minidump-stackwalk --json` prints it. `out` should be buffered.
pub fn write_json<W: std::io::Write>(
    report: &Report,
    mut out: W,
    pretty: bool,
) -> std::io::Result<()> {
    let mut doc = document(report);
    // compact, a deep thread's frames are written by hand: most of the document
    doc.raw_frames = !pretty;
    // serde_json's bytes, written faster (`report::json_text`)
    crate::report::json_text::write(&mut out, &doc, pretty)?;
    out.write_all(b"\n")
}

/// `null`, for the fields the report has no counterpart of.
type Null = Option<()>;

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (report, width) = (self.report, self.width);
        let system = &report.dump.system;
        let crash = report.crash.as_ref();
        // the crashed thread again, its first real frame with the registers; left out
        // when that thread has no real frame to carry them
        let crashing_thread = crash.and_then(|c| {
            let t = report.threads.get(c.thread)?;
            t.frames.iter().any(|f| !f.inlined).then(|| ThreadDoc {
                thread: t,
                report,
                width,
                raw_frames: self.raw_frames,
                crashed_frames: &self.crashed_frames,
                registers: Some(gprs(t, report.dump.arch, width).into_iter().collect()),
                threads_index: Some(c.thread),
            })
        });
        Top {
            crash_info: crash.map(|_| crash_info(report, width)),
            crashing_thread,
            handles: system.handles.as_ref().map(|handles| {
                each(handles, |h| HandleDoc {
                    handle: h.handle,
                    object_name: &h.object_name,
                    type_name: &h.type_name,
                })
            }),
            linux_memory_map_count: system.memory_map_count,
            lsb_release: system.distribution.as_ref().map(|d| Lsb {
                codename: &d.codename,
                description: &d.description,
                id: &d.id,
                release: &d.release,
            }),
            mac_boot_args: None,
            mac_crash_info: None,
            main_module: (!report.modules.is_empty()).then_some(0),
            modules: each(&main_first(report), |m| self.module(m)),
            modules_contains_cert_info: false,
            pid: report.dump.pid,
            proc_limits: system.limits.as_ref().map(|limits| ProcLimits {
                limits: each(limits, |l| LimitDoc {
                    hard: LimitValue::of(&l.hard),
                    name: &l.name,
                    soft: LimitValue::of(&l.soft),
                    unit: &l.unit,
                }),
            }),
            process_uptime: system.uptime_seconds,
            soft_errors: system
                .writer_errors
                .as_deref()
                .and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok()),
            status: "OK",
            system_info: SystemInfoDoc {
                cpu_arch: cpu_name(report.dump.arch),
                cpu_count: system.cpu_count,
                cpu_info: &system.cpu_info,
                cpu_microcode_version: &system.cpu_microcode_version,
                os: os_name(report.dump.os),
                os_ver: &system.os_version,
            },
            thread_count: report.threads.len(),
            threads: each(&report.threads, |t| ThreadDoc {
                thread: t,
                report,
                width,
                raw_frames: self.raw_frames,
                crashed_frames: &self.crashed_frames,
                registers: None,
                threads_index: None,
            }),
            unloaded_modules: each(&report.unloaded_modules, |m| UnloadedDoc {
                base_addr: Hex::of(width, m.base),
                cert_subject: None,
                code_id: m.code_id.as_ref().or(m.build_id.as_ref()),
                end_addr: Hex::of(width, m.end),
                filename: m.path.as_ref().unwrap_or(&m.name),
            }),
        }
        .serialize(s)
    }
}

impl Document<'_> {
    fn module<'m>(&self, m: &'m Module) -> ModuleDoc<'m> {
        let loaded = !m.symbols.is_empty();
        let looked_for = self.looked_for.contains(&m.index);
        ModuleDoc {
            base_addr: Hex::of(self.width, m.base),
            cert_subject: None,
            code_id: m.code_id.as_ref().or(m.build_id.as_ref()),
            corrupt_symbols: m.status == crate::report::ModuleStatus::Corrupt,
            debug_file: debug_file(m, self.report),
            debug_id: m.debug_id.as_deref().unwrap_or(NIL_DEBUG_ID),
            end_addr: Hex::of(self.width, m.end),
            filename: &m.name,
            // as `missing_symbols`: said of the modules a frame landed in
            loaded_symbols: looked_for && loaded,
            missing_symbols: looked_for && !loaded,
            symbol_url: m
                .lookups
                .iter()
                .find(|l| l.result == crate::report::LookupResult::Fetched)
                .map(|l| l.source.as_str()),
            version: &m.version,
        }
    }
}

/// A slice serialized as the sequence of what `render` makes of each item, one at a
/// time.
struct Each<'a, T, F>(&'a [T], F);

fn each<'a, T, D, F: Fn(&'a T) -> D>(items: &'a [T], render: F) -> Each<'a, T, F> {
    Each(items, render)
}

impl<'a, T, F, D> Serialize for Each<'a, T, F>
where
    F: Fn(&'a T) -> D,
    D: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&(self.1)(item))?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct Top<'a, H, M, L, T, U> {
    crash_info: Option<CrashInfo<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    crashing_thread: Option<ThreadDoc<'a>>,
    handles: Option<H>,
    linux_memory_map_count: Option<u32>,
    lsb_release: Option<Lsb<'a>>,
    mac_boot_args: Null,
    mac_crash_info: Null,
    main_module: Option<usize>,
    modules: M,
    modules_contains_cert_info: bool,
    pid: Option<u32>,
    proc_limits: Option<ProcLimits<L>>,
    process_uptime: Option<u64>,
    soft_errors: Option<serde_json::Value>,
    status: &'static str,
    system_info: SystemInfoDoc<'a>,
    thread_count: usize,
    threads: T,
    unloaded_modules: U,
}

#[derive(Serialize)]
struct SystemInfoDoc<'a> {
    cpu_arch: &'static str,
    cpu_count: Option<u32>,
    cpu_info: &'a Option<String>,
    cpu_microcode_version: &'a Option<String>,
    os: &'static str,
    os_ver: &'a Option<String>,
}

#[derive(Serialize)]
struct Lsb<'a> {
    codename: &'a str,
    description: &'a str,
    id: &'a str,
    release: &'a str,
}

#[derive(Serialize)]
struct ProcLimits<L> {
    limits: L,
}

#[derive(Serialize)]
struct LimitDoc<'a> {
    hard: LimitValue<'a>,
    name: &'a str,
    soft: LimitValue<'a>,
    unit: &'a str,
}

/// A limit as minidump-stackwalk writes it: a number, or a word (`unlimited`).
#[derive(Serialize)]
#[serde(untagged)]
enum LimitValue<'a> {
    Number(u64),
    Word(&'a str),
}

impl<'a> LimitValue<'a> {
    fn of(v: &'a str) -> LimitValue<'a> {
        v.parse::<u64>()
            .map_or(LimitValue::Word(v), LimitValue::Number)
    }
}

#[derive(Serialize)]
struct HandleDoc<'a> {
    handle: Option<u64>,
    object_name: &'a Option<String>,
    type_name: &'a Option<String>,
}

#[derive(Serialize)]
struct ModuleDoc<'a> {
    base_addr: Hex,
    cert_subject: Null,
    code_id: Option<&'a String>,
    corrupt_symbols: bool,
    debug_file: &'a str,
    debug_id: &'a str,
    end_addr: Hex,
    filename: &'a str,
    loaded_symbols: bool,
    missing_symbols: bool,
    symbol_url: Option<&'a str>,
    version: &'a Option<String>,
}

#[derive(Serialize)]
struct UnloadedDoc<'a> {
    base_addr: Hex,
    cert_subject: Null,
    code_id: Option<&'a String>,
    end_addr: Hex,
    filename: &'a str,
}

/// A thread: its frames are rendered as they are written.
struct ThreadDoc<'a> {
    thread: &'a Thread,
    report: &'a Report,
    width: Width,
    /// The document's [`Document::raw_frames`].
    raw_frames: bool,
    /// The document's [`Document::crashed_frames`].
    crashed_frames: &'a RefCell<FrameTexts>,
    /// The crashed thread's copy: its registers, on its first frame.
    registers: Option<BTreeMap<&'static str, String>>,
    threads_index: Option<usize>,
}

impl Serialize for ThreadDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Fields<'a> {
            frame_count: usize,
            frames: &'a Frames<'a>,
            last_error_value: Null,
            thread_id: u32,
            thread_name: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            threads_index: Option<usize>,
        }
        let t = self.thread;
        Fields {
            frame_count: t.frames.iter().filter(|f| !f.inlined).count(),
            frames: &Frames(self),
            last_error_value: None,
            thread_id: t.tid,
            thread_name: &t.name,
            threads_index: self.threads_index,
        }
        .serialize(s)
    }
}

/// A thread's real frames, each with the inlined functions listed before it in the
/// report (minidump-stackwalk nests them in the frame).
struct Frames<'a>(&'a ThreadDoc<'a>);

impl Serialize for Frames<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let doc = self.0;
        let frames = &doc.thread.frames;
        let arch = doc.report.dump.arch;
        let count = frames.iter().filter(|f| !f.inlined).count();
        let mut seq = s.serialize_seq(Some(count))?;
        let mut start = 0;
        let mut i = 0;
        // one frame's text at a time, when written by hand
        let mut text = Vec::new();
        // the crashed thread's copy with the registers keeps its frames' text, for the
        // other copy to reuse
        let keeping = doc.raw_frames && doc.registers.is_some();
        let kept = doc.crashed_frames;
        if keeping {
            kept.borrow_mut().reserve(count);
        }
        for (p, f) in frames.iter().enumerate() {
            if f.inlined {
                continue;
            }
            let inlines = frames.get(start..p).unwrap_or_default();
            start = p + 1;
            if let Some(t) = kept.borrow().get(doc.thread, i).filter(|_| doc.raw_frames) {
                seq.serialize_element(&Raw(t))?;
                i += 1;
                continue;
            }
            let at = Address::of(f, i, arch);
            let hex = |v: u64| Hex(v, doc.width);
            let frame = FrameDoc {
                file: &f.file,
                frame: i,
                function: &f.function,
                function_offset: at.function_offset.map(hex),
                inlines: (!inlines.is_empty()).then_some(Inlines(inlines)),
                line: f.line,
                missing_symbols: f.function.is_none(),
                module: &f.module,
                module_offset: at.module_offset.map(hex),
                offset: hex(at.offset),
                registers: if i == 0 { doc.registers.as_ref() } else { None },
                trust: trust_name(f.trust),
                unloaded_modules: None,
            };
            if doc.raw_frames && frame.registers.is_none() {
                text.clear();
                frame.write_compact(&mut text).map_err(S::Error::custom)?;
                if keeping {
                    kept.borrow_mut().keep(doc.thread, i, &text);
                }
                seq.serialize_element(&Raw(&text))?;
            } else {
                seq.serialize_element(&frame)?;
            }
            i += 1;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct FrameDoc<'a> {
    file: &'a Option<String>,
    frame: usize,
    function: &'a Option<String>,
    function_offset: Option<Hex>,
    inlines: Option<Inlines<'a>>,
    line: Option<u32>,
    missing_symbols: bool,
    module: &'a Option<String>,
    module_offset: Option<Hex>,
    offset: Hex,
    #[serde(skip_serializing_if = "Option::is_none")]
    registers: Option<&'a BTreeMap<&'static str, String>>,
    trust: &'static str,
    unloaded_modules: Null,
}

impl FrameDoc<'_> {
    /// The frame as serde_json writes it compact, written by hand: through serde, each
    /// of its thirteen fields was a key to check for escapes and a call per piece, and a
    /// deep thread's frames were most of the document's writing. The registers (the
    /// crashed frame's) are left to serde. `streamed_document_is_the_tree_byte_for_byte`
    /// holds both to the tree rendering.
    fn write_compact(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::io::Write;
        out.write_all(b"{\"file\":")?;
        opt_string(out, self.file.as_deref())?;
        out.write_all(b",\"frame\":")?;
        write_u64(out, self.frame as u64)?;
        out.write_all(b",\"function\":")?;
        opt_string(out, self.function.as_deref())?;
        out.write_all(b",\"function_offset\":")?;
        opt_hex(out, self.function_offset)?;
        out.write_all(b",\"inlines\":")?;
        match &self.inlines {
            Some(Inlines(inlines)) => {
                out.write_all(b"[")?;
                for (n, f) in inlines.iter().enumerate() {
                    out.write_all(if n == 0 {
                        b"{\"file\":"
                    } else {
                        b",{\"file\":"
                    })?;
                    opt_string(out, f.file.as_deref())?;
                    out.write_all(b",\"function\":")?;
                    opt_string(out, f.function.as_deref())?;
                    out.write_all(b",\"line\":")?;
                    opt_u32(out, f.line)?;
                    out.write_all(b"}")?;
                }
                out.write_all(b"]")?;
            }
            None => out.write_all(b"null")?,
        }
        out.write_all(b",\"line\":")?;
        opt_u32(out, self.line)?;
        out.write_all(if self.missing_symbols {
            b",\"missing_symbols\":true,\"module\":"
        } else {
            b",\"missing_symbols\":false,\"module\":"
        })?;
        opt_string(out, self.module.as_deref())?;
        out.write_all(b",\"module_offset\":")?;
        opt_hex(out, self.module_offset)?;
        out.write_all(b",\"offset\":")?;
        self.offset.write(out)?;
        out.write_all(b",\"trust\":")?;
        write_string(out, self.trust)?;
        out.write_all(b",\"unloaded_modules\":null}")
    }
}

/// A string or `null`.
fn opt_string(out: &mut Vec<u8>, s: Option<&str>) -> std::io::Result<()> {
    match s {
        Some(s) => write_string(out, s),
        None => std::io::Write::write_all(out, b"null"),
    }
}

/// A number or `null`.
fn opt_u32(out: &mut Vec<u8>, v: Option<u32>) -> std::io::Result<()> {
    match v {
        Some(v) => write_u64(out, u64::from(v)),
        None => std::io::Write::write_all(out, b"null"),
    }
}

/// A padded address or `null`.
fn opt_hex(out: &mut Vec<u8>, v: Option<Hex>) -> std::io::Result<()> {
    match v {
        Some(h) => h.write(out),
        None => std::io::Write::write_all(out, b"null"),
    }
}

/// The inlined functions of a frame, innermost first.
struct Inlines<'a>(&'a [Frame]);

impl Serialize for Inlines<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Inline<'a> {
            file: &'a Option<String>,
            function: &'a Option<String>,
            line: Option<u32>,
        }
        s.collect_seq(self.0.iter().map(|f| Inline {
            file: &f.file,
            function: &f.function,
            line: f.line,
        }))
    }
}

#[derive(Serialize)]
struct CrashInfo<'a> {
    address: Option<Hex>,
    adjusted_address: Option<AdjustedDoc>,
    assertion: &'a Option<String>,
    crash_inconsistencies: [(); 0],
    crashing_thread: usize,
    instruction: Option<&'a String>,
    instruction_pointer_update: Option<AddressDoc>,
    memory_accesses: Option<Vec<AccessDoc>>,
    possible_bit_flips: Option<Vec<FlipDoc>>,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum AdjustedDoc {
    NullPointer { kind: &'static str, offset: Hex },
    NonCanonical { address: Hex, kind: &'static str },
}

#[derive(Serialize)]
struct AddressDoc {
    address: Hex,
}

#[derive(Serialize)]
struct AccessDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    access_type: Option<String>,
    address: Hex,
    size: Option<u32>,
}

#[derive(Serialize)]
struct FlipDoc {
    address: Hex,
    /// As a double: the tree rendering widened rust-minidump's `f32` to one.
    confidence: f64,
    details: FlipDetails,
    source_register: Null,
}

#[derive(Serialize)]
struct FlipDetails {
    is_null: bool,
    nearby_registers: u32,
    poison_registers: bool,
    was_low: bool,
    was_non_canonical: bool,
}

/// `crash_info` of a report with a crash.
fn crash_info(report: &Report, width: Width) -> CrashInfo<'_> {
    let c = report.crash.as_ref();
    let instruction = c.and_then(|c| c.instruction.as_ref());
    let flips: Vec<FlipDoc> = bit_flips(report, width)
        .iter()
        .map(|f: &BitFlip| FlipDoc {
            address: Hex(f.address, width),
            confidence: f64::from(f.confidence()),
            details: FlipDetails {
                is_null: f.is_null,
                nearby_registers: f.nearby_registers,
                poison_registers: f.poison_registers,
                was_low: f.was_low,
                was_non_canonical: false,
            },
            source_register: None,
        })
        .collect();
    CrashInfo {
        address: c.and_then(|c| c.address).map(|a| Hex::of(width, a)),
        adjusted_address: adjusted(report).map(|a| match a {
            Adjusted::NullPointer(offset) => AdjustedDoc::NullPointer {
                kind: "null-pointer",
                offset: Hex(offset, width),
            },
            Adjusted::NonCanonical(address) => AdjustedDoc::NonCanonical {
                address: Hex(address, width),
                kind: "non-canonical",
            },
        }),
        assertion: match c {
            Some(c) => &c.assertion,
            None => &None,
        },
        crash_inconsistencies: [],
        crashing_thread: c.map_or(0, |c| c.thread),
        instruction: instruction.map(|i| &i.text),
        instruction_pointer_update: instruction.and_then(|i| i.jump).map(|a| AddressDoc {
            address: Hex::of(width, a),
        }),
        memory_accesses: instruction.map(|i| {
            i.accesses
                .iter()
                .map(|a| AccessDoc {
                    access_type: a.access.map(|k| access_type(k).to_lowercase()),
                    address: Hex::of(width, a.address),
                    size: a.size,
                })
                .collect()
        }),
        possible_bit_flips: (!flips.is_empty()).then_some(flips),
        kind: crash_type(report),
    }
}

/// An address padded to the pointer width (`0x00007f5140aca4c0`), written without an
/// intermediate string.
#[derive(Clone, Copy)]
struct Hex(u64, Width);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(crate::report::addr::Hex::new(self.0, (self.1).0).as_str())
    }
}

impl Hex {
    /// The address as a JSON string (its spelling needs no escape).
    fn write(self, out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::io::Write;
        out.write_all(b"\"")?;
        out.write_all(crate::report::addr::Hex::new(self.0, (self.1).0).as_bytes())?;
        out.write_all(b"\"")
    }

    /// A report address, padded.
    fn of(width: Width, a: crate::report::Addr) -> Hex {
        Hex(a.get(), width)
    }
}
