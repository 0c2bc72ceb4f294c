//! The text tombstone debuggerd writes (`/data/tombstones/tombstone_NN`, and to logcat),
//! laid out as AOSP's `libdebuggerd` prints it (`tombstone_proto_to_text.cpp` since
//! Android 12, `tombstone.cpp` before):
//!
//! ```text
//! *** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***
//! Build fingerprint: 'google/raven/raven:13/TQ1A.230105.002/9325679:user/release-keys'
//! Revision: 'MP1.0'
//! ABI: 'arm64'
//! Timestamp: 2023-01-05 10:00:00.000000000+0000
//! pid: 4242, tid: 4242, name: crasher  >>> /system/bin/crasher <<<
//! uid: 0
//! signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000000
//! Cause: null pointer dereference
//! Abort message: 'some message'
//!     x0  0000000000000000  x1  0000007fd6e2f9a8  ...
//!     lr  00000055d5f8f6fc  sp  0000007fd6e2f960  pc  00000055d5f8f6e8  pst 0000000060000000
//!
//! backtrace:
//!       #00 pc 00000000000006e8  /system/bin/crasher (crash+8) (BuildId: 0f3e…)
//!       #01 pc 0000000000001234  /data/app/…/base.apk!libfoo.so (offset 0x8000) (foo()+20) (BuildId: …)
//!
//! memory near x1 ([stack]):
//!     …
//! --- --- --- --- --- --- --- --- --- --- --- --- --- --- --- ---
//! pid: 4242, tid: 4243, name: worker  >>> /system/bin/crasher <<<
//! …
//! memory map (123 entries):
//!     00000055d5f8e000-00000055d5f8efff r--         0      1000  /system/bin/crasher (BuildId: …)
//! --->Fault address falls at 00000000'00000000 before any mapped regions
//! ```
//!
//! A frame's number is followed by `pc`, the frame's `rel_pc` in hex (see the parent
//! module), the mapped file, then optionally `(offset 0x…)` (the ELF's offset inside the
//! file), `(function+decimal offset)` (the `+0` left out) and `(BuildId: hex)`. Function
//! names are demangled and may hold parentheses and `+`, so the suffixes are taken from
//! the right by matching parentheses. Older memory maps write 64-bit addresses with a `'`
//! between their halves. Sections this reader does not use (memory near a register, the
//! stack, open files, logs) are skipped.

use super::heap::{self, HeapStack};
use super::{
    arch_of, build_id_of, cut, too_many, Frame, SignalInfo, TombMapping, TombThread, Tombstone,
    TombstoneError, TombstoneFormat, MAX_CAUSES, MAX_FRAMES, MAX_LINES, MAX_MAPPINGS, MAX_THREADS,
    MAX_TOTAL_FRAMES,
};

/// The header line's start.
const HEADER: &str = "*** *** ***";
/// The separator before each other thread.
const SEPARATOR: &str = "--- --- ---";

/// Whether the first non-blank line of `bytes` is the tombstone header.
pub fn has_header(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(HEADER.as_bytes())
}

/// Which part of the tombstone the lines being read belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Before the first thread, and a thread's header lines and registers.
    Thread,
    Backtrace,
    /// A memory error's `deallocated by`/`allocated by` backtrace.
    HeapBacktrace,
    /// `memory near x1 ([stack]):` rows.
    MemoryNear,
    MemoryMap,
    /// Anything else (memory near a register, stack, open files, logs): skipped.
    Other,
}

/// Reads a text tombstone.
pub fn parse(bytes: &[u8]) -> Result<Tombstone, TombstoneError> {
    let text = String::from_utf8_lossy(bytes);
    let count = text.lines().count();
    if count > MAX_LINES {
        return Err(too_many("lines", count, MAX_LINES));
    }
    parse_lines(text.lines().enumerate().map(|(n, l)| (n + 1, l)))
}

/// Reads a text tombstone's lines, each with the line number errors name (the file's, or
/// the log's for a tombstone taken from logcat: [`super::logcat`]). The caller bounds
/// their number.
pub fn parse_lines<'a>(
    lines: impl IntoIterator<Item = (usize, &'a str)>,
) -> Result<Tombstone, TombstoneError> {
    let mut r = Reader {
        t: Tombstone::new(TombstoneFormat::Text),
        abi: None,
        section: Section::Other,
        seen_header: false,
        total_frames: 0,
        in_memory_error: false,
    };
    for (n, line) in lines {
        r.line(line).map_err(|e| match e {
            Problem::Line(why) => TombstoneError::Line { line: n, why },
            Problem::Bound(e) => e,
        })?;
    }
    let Reader {
        mut t,
        abi,
        seen_header,
        ..
    } = r;
    if !seen_header {
        return Err(TombstoneError::NoHeader);
    }
    if t.threads.is_empty() {
        return Err(TombstoneError::NoThreads);
    }
    t.arch = arch_of(abi.as_deref().unwrap_or_default())?;
    Ok(t)
}

/// Why a line stopped the reader: a line that is not what its place says it is, or a
/// bound passed.
enum Problem {
    Line(String),
    Bound(TombstoneError),
}

impl From<String> for Problem {
    fn from(why: String) -> Self {
        Problem::Line(why)
    }
}

/// The reader's state between lines.
struct Reader {
    t: Tombstone,
    abi: Option<String>,
    section: Section,
    seen_header: bool,
    total_frames: usize,
    /// Whether the last `Cause:` line is the memory error's (its stacks follow it).
    in_memory_error: bool,
}

/// Most backtraces a memory error may give (debuggerd gives a deallocation and an
/// allocation backtrace).
const MAX_HEAP_STACKS: usize = 4;

impl Reader {
    /// One line of the tombstone.
    fn line(&mut self, line: &str) -> Result<(), Problem> {
        let trimmed = line.trim();
        if !self.seen_header {
            self.seen_header = trimmed.starts_with(HEADER);
            self.section = Section::Thread;
            return Ok(());
        }
        if trimmed.starts_with(SEPARATOR) {
            self.section = Section::Other;
            return Ok(());
        }
        if let Some(rest) = trimmed.strip_prefix("pid: ") {
            let thread = thread_header(rest, &mut self.t).ok_or("a bad pid line".to_string())?;
            if self.t.threads.len() >= MAX_THREADS {
                let count = self.t.threads.len() + 1;
                return Err(Problem::Bound(too_many("threads", count, MAX_THREADS)));
            }
            self.t.threads.push(thread);
            self.section = Section::Thread;
            return Ok(());
        }
        match self.section {
            Section::Backtrace if trimmed.starts_with('#') => return self.frame(trimmed),
            Section::HeapBacktrace if trimmed.starts_with('#') => return self.heap_frame(trimmed),
            Section::MemoryNear if line.starts_with(' ') && !trimmed.is_empty() => {
                let untag = self.abi.as_deref() == Some("arm64");
                return self.t.memory.row(trimmed, untag).map_err(Problem::Bound);
            }
            Section::MemoryMap if !trimmed.is_empty() => {
                if let Some(m) = mapping_line(trimmed) {
                    if self.t.mappings.len() >= MAX_MAPPINGS {
                        let count = self.t.mappings.len() + 1;
                        return Err(Problem::Bound(too_many("mappings", count, MAX_MAPPINGS)));
                    }
                    self.t.mappings.push(m);
                }
                return Ok(());
            }
            _ => {}
        }
        if !line.starts_with(' ') {
            if let Some(cause) = trimmed.strip_prefix("Cause:") {
                self.cause(cause.trim());
            }
            if let Some((kind, tid)) = heap::stack_header(trimmed) {
                return self.heap_stack(kind, tid);
            }
        }
        if trimmed == "backtrace:" {
            self.section = Section::Backtrace;
        } else if trimmed.starts_with("memory map") {
            self.section = Section::MemoryMap;
        } else if trimmed.starts_with("memory near ") && !line.starts_with(' ') {
            self.t.memory.section();
            self.section = Section::MemoryNear;
        } else if trimmed.is_empty() || !line.starts_with(' ') {
            if self.section != Section::Thread || !trimmed.is_empty() {
                self.section = header_line(trimmed, &mut self.t, &mut self.abi)?;
            }
        } else if self.section == Section::Thread {
            if let Some(thread) = self.t.threads.last_mut() {
                registers_line(trimmed, &mut thread.registers);
            }
        }
        Ok(())
    }

    /// A `Cause:` line: the first that names a heap error becomes the memory error;
    /// the stacks that follow a cause are that error's if the cause is its.
    fn cause(&mut self, cause: &str) {
        if self.t.memory_error.is_none() {
            self.t.memory_error = heap::MemoryError::from_cause(cause);
        }
        self.in_memory_error = self
            .t
            .memory_error
            .as_ref()
            .is_some_and(|e| e.cause == cut(cause));
    }

    /// `deallocated by thread N:`: a memory error's backtrace starts.
    fn heap_stack(&mut self, kind: heap::HeapStackKind, tid: u32) -> Result<(), Problem> {
        self.section = Section::Other;
        let Some(e) = self
            .t
            .memory_error
            .as_mut()
            .filter(|_| self.in_memory_error)
        else {
            return Ok(()); // another cause's: skipped
        };
        if e.stacks.len() >= MAX_HEAP_STACKS {
            let count = e.stacks.len() + 1;
            return Err(Problem::Bound(too_many(
                "heap backtraces",
                count,
                MAX_HEAP_STACKS,
            )));
        }
        e.stacks.push(HeapStack {
            kind,
            tid,
            frames: Vec::new(),
        });
        self.section = Section::HeapBacktrace;
        Ok(())
    }

    /// A frame line of a memory error's backtrace.
    fn heap_frame(&mut self, line: &str) -> Result<(), Problem> {
        let frame = frame_line(line)?;
        self.count_frame()?;
        let stack = self
            .t
            .memory_error
            .as_mut()
            .and_then(|e| e.stacks.last_mut())
            .ok_or("a heap backtrace without its header".to_string())?;
        push_frame(&mut stack.frames, frame, "frames in a heap backtrace")
    }

    /// Counts a frame against the bound of all frames.
    fn count_frame(&mut self) -> Result<(), Problem> {
        self.total_frames += 1;
        if self.total_frames > MAX_TOTAL_FRAMES {
            let count = self.total_frames;
            return Err(Problem::Bound(too_many(
                "frames in all",
                count,
                MAX_TOTAL_FRAMES,
            )));
        }
        Ok(())
    }

    /// A frame line of the last thread's backtrace.
    fn frame(&mut self, line: &str) -> Result<(), Problem> {
        let frame = frame_line(line)?;
        self.count_frame()?;
        let thread = self
            .t
            .threads
            .last_mut()
            .ok_or("a backtrace before any thread".to_string())?;
        push_frame(&mut thread.frames, frame, "frames in a thread")
    }
}

/// Adds `frame` to one backtrace, at most [`MAX_FRAMES`] long (`what` names it).
fn push_frame(frames: &mut Vec<Frame>, frame: Frame, what: &'static str) -> Result<(), Problem> {
    if frames.len() >= MAX_FRAMES {
        return Err(Problem::Bound(too_many(what, frames.len() + 1, MAX_FRAMES)));
    }
    frames.push(frame);
    Ok(())
}

/// A line at the left margin: a fact of the header or the crash, or the start of a
/// section this reader skips. Returns the section that follows.
fn header_line(line: &str, t: &mut Tombstone, abi: &mut Option<String>) -> Result<Section, String> {
    let quoted = |v: &str| {
        let v = v.trim();
        let v = v.strip_prefix('\'').unwrap_or(v);
        cut(v.strip_suffix('\'').unwrap_or(v))
    };
    if let Some(v) = line.strip_prefix("Build fingerprint:") {
        t.build_fingerprint = Some(quoted(v));
    } else if let Some(v) = line.strip_prefix("Revision:") {
        t.revision = Some(quoted(v));
    } else if let Some(v) = line.strip_prefix("ABI:") {
        *abi = Some(quoted(v));
    } else if let Some(v) = line.strip_prefix("Timestamp:") {
        t.timestamp = Some(cut(v.trim()));
    } else if let Some(v) = line.strip_prefix("Cmdline:") {
        t.command_line = Some(cut(v.trim()));
    } else if let Some(v) = line.strip_prefix("uid:") {
        t.uid = t.uid.or_else(|| v.trim().parse().ok());
    } else if let Some(v) = line.strip_prefix("Abort message:") {
        t.abort_message = Some(quoted(v));
    } else if let Some(v) = line.strip_prefix("Cause:") {
        // with several causes, debuggerd prints each again before its details
        let v = cut(v.trim());
        if t.causes.len() < MAX_CAUSES && !t.causes.contains(&v) {
            t.causes.push(v);
        }
    } else if let Some(v) = line.strip_prefix("signal ") {
        if t.signal.is_none() {
            t.signal = Some(signal_line(v).ok_or("a bad signal line")?);
        }
    } else if line.is_empty()
        || ["tagged_addr_ctrl", "pac_", "Process uptime", "Process name"]
            .iter()
            .any(|p| line.starts_with(p))
    {
        return Ok(Section::Thread);
    } else {
        return Ok(Section::Other);
    }
    Ok(Section::Thread)
}

/// `pid: 4242, tid: 4243, name: worker  >>> /system/bin/crasher <<<` (after `pid: `):
/// a new thread; the first one is the crashed thread and names the process.
fn thread_header(rest: &str, t: &mut Tombstone) -> Option<TombThread> {
    let (pid, rest) = rest.split_once(',')?;
    let pid: u32 = pid.trim().parse().ok()?;
    let rest = rest.trim_start().strip_prefix("tid:")?;
    let (tid, rest) = rest.split_once(',').unwrap_or((rest, ""));
    let tid: u32 = tid.trim().parse().ok()?;
    let rest = rest.trim_start();
    let (name, command) = match rest.strip_prefix("name:") {
        Some(r) => match r.split_once(">>>") {
            Some((name, cmd)) => (name.trim(), cmd.split("<<<").next().map(str::trim)),
            None => (r.trim(), None),
        },
        None => ("", None),
    };
    if t.threads.is_empty() {
        t.pid = Some(pid);
        t.tid = Some(tid);
        if t.command_line.is_none() {
            t.command_line = command.filter(|c| !c.is_empty()).map(cut);
        }
    }
    Some(TombThread {
        id: tid,
        name: (!name.is_empty()).then(|| cut(name)),
        registers: Vec::new(),
        frames: Vec::new(),
    })
}

/// `11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000000` (after `signal `).
fn signal_line(v: &str) -> Option<SignalInfo> {
    let (number, rest) = v.split_once(' ').unwrap_or((v, ""));
    let number: u32 = number.trim_end_matches(',').parse().ok()?;
    let paren = |s: &str| -> Option<String> {
        let s = s.trim_start().strip_prefix('(')?;
        let end = s.find(')')?;
        let inner = s.get(..end)?;
        let word = inner.split_whitespace().next()?;
        Some(cut(word))
    };
    let name = paren(rest);
    let after_code = rest.split_once("code ").map(|(_, c)| c);
    let code = after_code.and_then(|c| c.split([' ', ',']).next()?.parse::<i32>().ok());
    let code_name = after_code.and_then(|c| paren(c.split_once(' ')?.1));
    let fault_address = rest
        .split_once("fault addr ")
        .and_then(|(_, a)| hex_u64(a.split_whitespace().next()?));
    Some(SignalInfo {
        number,
        name,
        code,
        code_name,
        fault_address,
    })
}

/// `    x0  0000000000000000  x1  0000007fd6e2f9a8`: name and value pairs.
fn registers_line(line: &str, out: &mut Vec<(String, u64)>) {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 2 || !words.len().is_multiple_of(2) || out.len() >= 256 {
        return;
    }
    let pairs: Option<Vec<(String, u64)>> = words
        .chunks_exact(2)
        .map(|p| {
            let name = p.first()?;
            let ok = name.len() <= 8
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            ok.then(|| Some((name.to_string(), hex_u64(p.get(1)?)?)))?
        })
        .collect();
    out.extend(pairs.unwrap_or_default());
}

/// A hex number with or without `0x`, with old tombstones' `'` between halves.
fn hex_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    let digits: String = s.chars().filter(|&c| c != '\'').collect();
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(&digits, 16).ok()
}

/// `#00 pc 00000000000006e8  /system/bin/crasher (offset 0x1000) (crash+8) (BuildId: …)`.
fn frame_line(line: &str) -> Result<Frame, String> {
    let rest = line.trim_start_matches('#');
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err("a frame line without a frame number".into());
    }
    let rest = rest[digits..].trim_start();
    let rest = rest
        .strip_prefix("pc")
        .ok_or("a frame line without `pc`")?
        .trim_start();
    let (pc, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let rel_pc = hex_u64(pc).ok_or_else(|| format!("a frame's pc {:?} is not hex", cut(pc)))?;
    let mut frame = Frame {
        rel_pc,
        ..Frame::default()
    };
    let mut rest = rest.trim();
    for _ in 0..3 {
        let Some((head, inner)) = last_parenthesized(rest) else {
            break;
        };
        if let Some(id) = inner.strip_prefix("BuildId: ") {
            frame.build_id = build_id_of(id);
        } else if let Some(off) = inner.strip_prefix("offset ") {
            frame.file_map_offset = hex_u64(off).ok_or("a bad `(offset …)`")?;
        } else if frame.function.is_none() {
            let (name, offset) = function_and_offset(inner);
            frame.function = Some(cut(name));
            frame.function_offset = Some(offset);
        } else {
            break;
        }
        rest = head;
    }
    let path = rest.trim();
    frame.file = (!path.is_empty()).then(|| cut(path));
    Ok(frame)
}

/// `(foo(int)+20)` → (`foo(int)`, 20); debuggerd leaves out a `+0`.
fn function_and_offset(inner: &str) -> (&str, u64) {
    if let Some((name, off)) = inner.rsplit_once('+') {
        if !off.is_empty() && off.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(o) = off.parse() {
                return (name, o);
            }
        }
    }
    (inner, 0)
}

/// The last ` (…)` group of `s`, matched by parentheses from the right: (what is before
/// it, what is inside it).
fn last_parenthesized(s: &str) -> Option<(&str, &str)> {
    let body = s.strip_suffix(')')?;
    let mut depth = 1usize;
    for (i, c) in body.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    let head = body.get(..i)?;
                    // the group stands apart from the path: a space before it
                    return head
                        .ends_with(' ')
                        .then(|| (head.trim_end(), body.get(i + 1..).unwrap_or("")));
                }
            }
            _ => {}
        }
    }
    None
}

/// `00000055d5f8e000-00000055d5f8efff r-x      1000      2000  /system/bin/crasher
/// (BuildId: …) (load bias 0x…)`, with the fault marker `--->` taken off.
fn mapping_line(line: &str) -> Option<TombMapping> {
    let line = line.strip_prefix("--->").unwrap_or(line).trim_start();
    let mut words = line
        .splitn(4, char::is_whitespace)
        .filter(|w| !w.is_empty());
    let (start, last) = words.next()?.split_once('-')?;
    let (start, last) = (hex_u64(start)?, hex_u64(last)?);
    let perms = words.next()?;
    let rest = line.split_once(perms)?.1.trim_start();
    let (offset, rest) = rest.split_once(char::is_whitespace)?;
    let offset = hex_u64(offset)?;
    let rest = rest.trim_start();
    let rest = rest
        .split_once(char::is_whitespace)
        .map_or("", |(_size, r)| r)
        .trim();
    let mut name = rest;
    let mut build_id = None;
    for _ in 0..2 {
        let Some((head, inner)) = last_parenthesized(name) else {
            break;
        };
        if let Some(id) = inner.strip_prefix("BuildId: ") {
            build_id = build_id_of(id);
        } else if !inner.starts_with("load bias") {
            break;
        }
        name = head;
    }
    Some(TombMapping {
        start,
        end: last.checked_add(1)?,
        offset,
        execute: perms.contains('x'),
        name: (!name.is_empty()).then(|| cut(name)),
        build_id,
    })
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn frame_lines_are_read_from_the_right() {
        let f = frame_line(
            "#00 pc 000000000004e8f4  /apex/com.android.runtime/lib64/bionic/libc.so \
             (abort+164) (BuildId: 0f3e8a)",
        )
        .unwrap();
        assert_eq!(f.rel_pc, 0x4e8f4);
        assert_eq!(
            f.file.as_deref(),
            Some("/apex/com.android.runtime/lib64/bionic/libc.so")
        );
        assert_eq!(f.function.as_deref(), Some("abort"));
        assert_eq!(f.function_offset, Some(164));
        assert_eq!(f.build_id, Some(vec![0x0f, 0x3e, 0x8a]));

        let f = frame_line(
            "#01 pc 00001234  /data/app/x/base.apk!libfoo.so (offset 0x8000) \
             (foo(int, char const*)+20)",
        )
        .unwrap();
        assert_eq!(f.function.as_deref(), Some("foo(int, char const*)"));
        assert_eq!(f.file_map_offset, 0x8000);
        assert_eq!(f.file.as_deref(), Some("/data/app/x/base.apk!libfoo.so"));

        let f = frame_line("#02 pc 0000000000001000  <unknown>").unwrap();
        assert_eq!(f.function, None);
        assert_eq!(f.file.as_deref(), Some("<unknown>"));
        let f = frame_line("#03 pc 10  /system/bin/x (main)").unwrap();
        assert_eq!(
            (f.function.as_deref(), f.function_offset),
            (Some("main"), Some(0))
        );

        assert!(frame_line("#04 p").is_err());
        assert!(frame_line("#05 pc zz  /x").is_err());
        assert!(frame_line("#06 pc 11111111111111111  /x").is_err());
    }

    #[test]
    fn signal_lines_give_number_code_and_address() {
        let s = signal_line("11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000010")
            .unwrap();
        assert_eq!(s.number, 11);
        assert_eq!(s.name.as_deref(), Some("SIGSEGV"));
        assert_eq!(s.code, Some(1));
        assert_eq!(s.code_name.as_deref(), Some("SEGV_MAPERR"));
        assert_eq!(s.fault_address, Some(0x10));
        let s =
            signal_line("6 (SIGABRT), code -1 (SI_QUEUE from pid 1, uid 0), fault addr --------")
                .unwrap();
        assert_eq!((s.number, s.code, s.fault_address), (6, Some(-1), None));
        assert_eq!(s.code_name.as_deref(), Some("SI_QUEUE"));
    }

    #[test]
    fn mapping_lines_old_and_new() {
        let m = mapping_line(
            "0000007f'8a1b2000-0000007f'8a1b3fff r-x      1000      2000  /system/lib64/libfoo.so \
             (BuildId: abcd) (load bias 0x1000)",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.end, m.offset),
            (0x7f8a1b2000, 0x7f8a1b4000, 0x1000)
        );
        assert_eq!(m.name.as_deref(), Some("/system/lib64/libfoo.so"));
        assert_eq!(m.build_id, Some(vec![0xab, 0xcd]));
        assert!(m.execute);
        let m = mapping_line("--->00000055d5f8e000-00000055d5f8efff rw-  0  1000").unwrap();
        assert_eq!(m.name, None);
    }
}
