//! Reader of Apple's legacy `.crash` text (and of what Xcode, MacSymbolicator and
//! `.ips` → text converters write in its layout): the `Key: value` header (`Process`,
//! `Path`, `Code Type`, `OS Version`, `Exception Type`, `Exception Codes`, `Termination
//! Reason`, `Crashed Thread` / `Triggered by Thread`), `Application Specific
//! Information`, the `Thread N:` / `Thread N Crashed:` frame lists (and `Last Exception
//! Backtrace:`, in frame lines or, as older iOS wrote it, one line of addresses), the crashed thread's `Thread State` registers and the `Binary Images:`
//! section with load ranges and UUIDs.
//!
//! A frame line is `N  image  0xADDRESS rest`, where `rest` is `0xLOAD + offset`,
//! `symbol + offset`, or a symbolicated `symbol (in image) (file:line)`. Image names may
//! hold spaces, so the address is found as the first `0x…` word after the number; the
//! frame's image is the Binary Images entry whose range holds the address.

use super::{
    arch_of, cut, uuid_of, AppleError, AppleException, AppleFormat, AppleReport, Frame, Image,
    ReportThread, MAX_FRAMES, MAX_IMAGES, MAX_THREADS,
};
use crate::dump::Os;

/// The hex numbers of an `Exception Codes:` value (`0x1, 0x00000001ad98ab74`); empty
/// where it is not a list of them (`KERN_INVALID_ADDRESS at 0x1`).
pub fn hex_codes(s: &str) -> Vec<u64> {
    let parsed: Option<Vec<u64>> = s
        .split(',')
        .take(16)
        .map(|c| {
            let c = c.trim();
            u64::from_str_radix(c.strip_prefix("0x").or(c.strip_prefix("0X"))?, 16).ok()
        })
        .collect();
    parsed.unwrap_or_default()
}

/// What the reader is in the middle of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Header,
    /// The frames of `threads[i]`.
    Thread(usize),
    LastException,
    /// Registers of the crashed thread.
    State,
    Images,
    ApplicationInfo,
    Other,
}

/// The report as read so far.
struct Reader {
    report: AppleReport,
    /// `Code Type`, `Path`, `OS Version`: read before the architecture is known.
    cpu: Option<String>,
    /// Frame addresses with the image name each line gave, resolved to images at the end.
    pending: Vec<(Option<usize>, usize, String)>,
    section: Section,
}

/// Reads a `.crash` text report.
pub fn parse(bytes: &[u8]) -> Result<AppleReport, AppleError> {
    let text = String::from_utf8_lossy(bytes);
    let mut r = Reader {
        report: AppleReport {
            format: AppleFormat::Crash,
            arch: crate::dump::Arch::X86_64,
            os: Os::Unknown,
            process: None,
            pid: None,
            path: None,
            os_version: None,
            time: None,
            hardware: None,
            images: Vec::new(),
            threads: Vec::new(),
            crashed: None,
            exception: None,
            termination: None,
            asi: Vec::new(),
            last_exception_backtrace: Vec::new(),
        },
        cpu: None,
        pending: Vec::new(),
        section: Section::Header,
    };
    for (n, line) in text.lines().enumerate() {
        r.line(n + 1, line.trim_end_matches('\r'))?;
    }
    r.finish()
}

impl Reader {
    fn line(&mut self, n: usize, line: &str) -> Result<(), AppleError> {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            if self.section != Section::Header {
                self.section = Section::Other;
            }
            return Ok(());
        }
        if let Some(section) = self.section_start(trimmed)? {
            self.section = section;
            return Ok(());
        }
        match self.section {
            Section::Thread(i) => self.frame(n, Some(i), trimmed),
            Section::LastException if trimmed.starts_with('(') => {
                self.one_line_backtrace(n, trimmed)
            }
            Section::LastException => self.frame(n, None, trimmed),
            Section::State => {
                self.registers(trimmed);
                Ok(())
            }
            Section::Images => self.image(n, trimmed),
            Section::ApplicationInfo => {
                self.report.asi.push(("".into(), cut(trimmed)));
                Ok(())
            }
            Section::Header | Section::Other => {
                self.header(trimmed);
                Ok(())
            }
        }
    }

    /// The section a line starts, if it starts one.
    fn section_start(&mut self, line: &str) -> Result<Option<Section>, AppleError> {
        if line == "Binary Images:" {
            return Ok(Some(Section::Images));
        }
        if line == "Last Exception Backtrace:" {
            return Ok(Some(Section::LastException));
        }
        if line.starts_with("Application Specific Information:") {
            return Ok(Some(Section::ApplicationInfo));
        }
        let Some(rest) = line.strip_prefix("Thread ") else {
            return Ok(None);
        };
        let (num, after) = rest.split_at(
            rest.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len()),
        );
        let Ok(index) = num.parse::<usize>() else {
            return Ok(None);
        };
        if after.contains("crashed with") && after.contains("Thread State") {
            return Ok(Some(Section::State));
        }
        // `Thread 0 name:  Dispatch queue: q`, `Thread 0 Crashed::  Dispatch queue: q`,
        // `Thread 5 name:  com.apple.uikit.eventfetch-thread`, `Thread 1:`; not `Thread 0
        // instruction stream:` and the like
        let (head, tail) = after.split_once(':').unwrap_or((after, ""));
        let head = head.trim();
        if !matches!(head, "" | "Crashed" | "name") {
            return Ok(Some(Section::Other));
        }
        if index >= MAX_THREADS {
            return Err(AppleError::TooMany {
                what: "threads",
                count: index + 1,
                max: MAX_THREADS,
            });
        }
        while self.report.threads.len() <= index {
            self.report.threads.push(ReportThread::default());
        }
        let t = &mut self.report.threads[index];
        let tail = tail.trim_start_matches(':').trim();
        if let Some(q) = tail.strip_prefix("Dispatch queue:") {
            t.queue = Some(cut(q.trim()));
        } else if head == "name" && !tail.is_empty() {
            t.name = Some(cut(tail));
        }
        if head == "Crashed" {
            self.report.crashed.get_or_insert(index);
        }
        Ok(Some(if head == "name" {
            Section::Other
        } else {
            Section::Thread(index)
        }))
    }

    /// A `Key: value` line of the header.
    fn header(&mut self, line: &str) {
        let Some((key, value)) = line.split_once(':') else {
            return;
        };
        let value = value.trim();
        let r = &mut self.report;
        match key.trim() {
            "Process" => {
                let (name, pid) = value.rsplit_once('[').unwrap_or((value, ""));
                r.process = Some(cut(name.trim()));
                r.pid = pid.trim_end_matches(']').trim().parse().ok();
            }
            "Path" => r.path = Some(cut(value)),
            "Code Type" => self.cpu = Some(cut(value)),
            "Hardware Model" => r.hardware = Some(cut(value)),
            "Date/Time" => r.time = Some(cut(value)),
            "OS Version" => r.os_version = Some(cut(value)),
            "Crashed Thread" | "Triggered by Thread" => {
                let num = value.split_whitespace().next().unwrap_or("");
                if let Ok(i) = num.parse::<usize>() {
                    r.crashed = Some(i);
                }
            }
            "Exception Type" => {
                let (t, signal) = match value.split_once('(') {
                    Some((t, s)) => (t.trim(), Some(s.trim_end_matches(')').trim())),
                    None => (value, None),
                };
                let e = r.exception.get_or_insert_with(AppleException::default);
                e.type_name = cut(t);
                e.signal = signal.map(cut);
            }
            "Exception Codes" | "Exception Subtype" => {
                let e = r.exception.get_or_insert_with(AppleException::default);
                let codes = hex_codes(value);
                if codes.is_empty() {
                    e.subtype = Some(cut(value));
                } else {
                    e.codes = codes;
                }
            }
            "Termination Reason" => r.termination = Some(cut(value)),
            _ => {}
        }
    }

    /// A frame line of thread `thread` (`None`: the last exception backtrace).
    fn frame(&mut self, n: usize, thread: Option<usize>, line: &str) -> Result<(), AppleError> {
        let bad = |why: &str| AppleError::Line {
            line: n,
            why: why.into(),
        };
        let numbered = line
            .split_once(char::is_whitespace)
            .filter(|(num, _)| num.parse::<usize>().is_ok());
        let Some((_, rest)) = numbered else {
            // a thread's list ends at a line that is no frame
            self.section = Section::Other;
            return Ok(());
        };
        let words: Vec<(usize, &str)> = word_offsets(rest);
        let (at, addr_word) = words
            .iter()
            .skip(1)
            .find(|(_, w)| hex(w).is_some())
            .copied()
            .ok_or_else(|| bad("no address in the frame line"))?;
        let address = hex(addr_word).ok_or_else(|| bad("bad address"))?;
        let image_name = rest[..at].trim().to_string();
        let tail = rest[at + addr_word.len()..].trim();
        let mut frame = symbol_of(tail);
        frame.address = address;
        self.push_frame(thread, frame, image_name)
    }

    /// Adds `frame` to thread `thread` (`None`: the last exception backtrace), its image
    /// to be matched by address, else named `image_name`, once every image is read.
    fn push_frame(
        &mut self,
        thread: Option<usize>,
        frame: Frame,
        image_name: String,
    ) -> Result<(), AppleError> {
        let frames = match thread {
            Some(i) => &mut self.report.threads[i].frames,
            None => &mut self.report.last_exception_backtrace,
        };
        if frames.len() >= MAX_FRAMES {
            return Err(AppleError::TooMany {
                what: "frames in one thread",
                count: frames.len() + 1,
                max: MAX_FRAMES,
            });
        }
        frames.push(frame);
        self.pending.push((thread, frames.len() - 1, image_name));
        Ok(())
    }

    /// The last exception backtrace as older iOS wrote it, on one line of return
    /// addresses: `(0x1850a9d8c 0x1842635ec …)`. Each is matched to an image by address.
    fn one_line_backtrace(&mut self, n: usize, line: &str) -> Result<(), AppleError> {
        let inner = line.trim_start_matches('(').trim_end_matches(')');
        for word in inner.split_whitespace() {
            let address = hex(word).ok_or_else(|| AppleError::Line {
                line: n,
                why: "a word of the one-line last exception backtrace is no address".into(),
            })?;
            let frame = Frame {
                address,
                ..Frame::default()
            };
            self.push_frame(None, frame, String::new())?;
        }
        self.section = Section::Other;
        Ok(())
    }

    /// A line of `name: 0x…` pairs of the crashed thread's state.
    fn registers(&mut self, line: &str) {
        let Some(i) = self.report.crashed else { return };
        let Some(t) = self.report.threads.get_mut(i) else {
            return;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if let (Some(name), Some(value)) = (pair[0].strip_suffix(':'), hex(pair[1])) {
                if t.registers.len() < 128 {
                    t.registers.push((cut(name), value));
                }
            }
        }
    }

    /// A `Binary Images` line: `0xSTART - 0xEND name (version) <uuid> /path`, or the older
    /// `0xSTART - 0xEND +name arch <uuid> /path`.
    fn image(&mut self, n: usize, line: &str) -> Result<(), AppleError> {
        let bad = |why: &str| AppleError::Line {
            line: n,
            why: why.into(),
        };
        let (range, rest) = line.split_at(
            line.find('<')
                .ok_or_else(|| bad("no <uuid> in the image line"))?,
        );
        let mut words = range.split_whitespace();
        let start = words
            .next()
            .and_then(hex)
            .ok_or_else(|| bad("no start address"))?;
        let dash = words.next();
        let end = words.next().and_then(hex);
        let (Some("-"), Some(end)) = (dash, end) else {
            return Err(bad("no end address"));
        };
        let described: Vec<&str> = words.collect();
        let (uuid, path) = rest[1..]
            .split_once('>')
            .ok_or_else(|| bad("no closing >"))?;
        let path = Some(path.trim()).filter(|p| !p.is_empty() && *p != "???");
        if self.report.images.len() >= MAX_IMAGES {
            return Err(AppleError::TooMany {
                what: "images",
                count: self.report.images.len() + 1,
                max: MAX_IMAGES,
            });
        }
        let (name, arch) = image_name(&described, path);
        self.report.images.push(Image {
            uuid: uuid_of(uuid.trim()),
            base: start,
            size: end.checked_sub(start).and_then(|s| s.checked_add(1)),
            name,
            path: path.map(cut),
            arch,
            version: None,
        });
        Ok(())
    }

    /// The report, once every line is read: frames matched to images by address, the
    /// architecture from `Code Type` (else the images').
    fn finish(mut self) -> Result<AppleReport, AppleError> {
        let r = &mut self.report;
        if r.images.is_empty() && r.threads.iter().all(|t| t.frames.is_empty()) {
            return Err(AppleError::NoContent);
        }
        let cpu = self
            .cpu
            .clone()
            .or_else(|| r.images.iter().find_map(|i| i.arch.clone()))
            .unwrap_or_default();
        r.arch = arch_of(&cpu)?;
        let version = r.os_version.as_deref().unwrap_or_default();
        r.os = if version.starts_with("macOS") || version.starts_with("Mac OS") {
            Os::Macos
        } else if ["iPhone OS", "iOS", "iPadOS"]
            .iter()
            .any(|p| version.starts_with(p))
        {
            Os::Ios
        } else {
            Os::Unknown
        };
        for (thread, k, name) in std::mem::take(&mut self.pending) {
            let r = &mut self.report;
            let frame = match thread {
                Some(i) => r.threads.get_mut(i).and_then(|t| t.frames.get_mut(k)),
                None => r.last_exception_backtrace.get_mut(k),
            };
            let Some(frame) = frame else { continue };
            frame.image = image_holding(&r.images, frame.address, &name);
        }
        Ok(self.report)
    }
}

/// The image whose range holds `addr`, else the one named `name`.
fn image_holding(images: &[Image], addr: u64, name: &str) -> Option<usize> {
    let within = |im: &Image| {
        im.uuid.is_some() && addr >= im.base && im.size.is_none_or(|s| addr - im.base < s)
    };
    images.iter().position(within).or_else(|| {
        images
            .iter()
            .position(|im| im.name == name && im.uuid.is_some())
    })
}

/// An image's name and architecture from the words between its range and its UUID: the
/// binary's file name where the path gives it (a framework's line names its bundle id).
fn image_name(described: &[&str], path: Option<&str>) -> (String, Option<String>) {
    const ARCHS: &[&str] = &[
        "x86_64", "x86_64h", "arm64", "arm64e", "arm64_32", "i386", "armv7", "armv7s", "armv7k",
    ];
    let arch = described
        .iter()
        .find(|w| ARCHS.contains(w))
        .map(|w| (*w).to_string());
    let from_path = path
        .and_then(|p| p.rsplit('/').next())
        .filter(|n| !n.is_empty());
    let name = match from_path {
        Some(n) => n.to_string(),
        None => described
            .iter()
            .take_while(|w| !w.starts_with('(') && !ARCHS.contains(w))
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_start_matches('+')
            .to_string(),
    };
    (cut(if name.is_empty() { "???" } else { &name }), arch)
}

/// A `0x…` hex number.
fn hex(w: &str) -> Option<u64> {
    u64::from_str_radix(w.strip_prefix("0x")?, 16).ok()
}

/// The words of `s` with their byte offsets.
fn word_offsets(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(b)) => {
                out.push((b, &s[b..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
        if out.len() > 4096 {
            break;
        }
    }
    if let Some(b) = start {
        out.push((b, &s[b..]));
    }
    out
}

/// What follows a frame's address: `0xLOAD + 123` (no symbol), `symbol + 123`, or a
/// symbolicated `symbol (in image) (file:line)`.
fn symbol_of(tail: &str) -> Frame {
    let mut frame = Frame::default();
    let mut s = tail.trim();
    if let Some(open) = s.rfind(" (").filter(|_| s.ends_with(')')) {
        let inner = &s[open + 2..s.len() - 1];
        if let Some((file, line)) = inner.rsplit_once(':') {
            if let Ok(l) = line.trim().parse::<u32>() {
                frame.source = Some((cut(file), l));
                s = s[..open].trim_end();
            }
        }
    }
    if let Some(open) = s.rfind(" (in ").filter(|_| s.ends_with(')')) {
        s = s[..open].trim_end();
    }
    let (name, offset) = match s.rsplit_once(" + ") {
        Some((n, o)) => (n.trim(), o.trim().parse::<u64>().ok()),
        None => (s, None),
    };
    if name.is_empty() || hex(name).is_some() {
        return frame;
    }
    frame.symbol = Some(cut(name));
    frame.symbol_offset = offset;
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRASH: &str = "Process:               CrashingTest [1710]
Path:                  /Users/USER/Desktop/*/CrashingTest
Code Type:             X86-64 (Native)
OS Version:            macOS 12.4 (21F79)

Crashed Thread:        0  Dispatch queue: com.apple.main-thread

Exception Type:        EXC_BAD_ACCESS (SIGSEGV)
Exception Codes:       KERN_INVALID_ADDRESS at 0x0000000000000001
Exception Codes:       0x0000000000000001, 0x0000000000000001

Termination Reason:    Namespace SIGNAL, Code 11 Segmentation fault: 11

Thread 0 Crashed::  Dispatch queue: com.apple.main-thread
0   CrashingTest                  \t       0x10e311e45 0x10e30e000 + 15941
1   My App Helper                 \t       0x10e311e80 main (in CrashingTest) (main.m:28)
2   dyld                          \t       0x11beb451e start + 462

Thread 0 crashed with X86 Thread State (64-bit):
  rax: 0xa5ff0907b303003b  rbx: 0x000060000145c010
  rip: 0x000000010e311e45  rfl: 0x0000000000010206

Binary Images:
       0x10e30e000 -        0x10e311fff CrashingTest (*) <01d2a9d5-1f8a-35c8-9228-7c7cca13c5fc> /Users/USER/Desktop/*/CrashingTest
       0x11beaf000 -        0x11bf1afff +dyld x86_64 <b70ce1ecb902385282680 5de00bfa8d5> /usr/lib/dyld
               0x0 - 0xffffffffffffffff ??? (*) <00000000-0000-0000-0000-000000000000> ???
";

    #[test]
    fn a_crash_text_is_read_with_its_threads_images_and_exception() {
        let r = parse(CRASH.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.arch, crate::dump::Arch::X86_64);
        assert_eq!(r.os, Os::Macos);
        assert_eq!(
            (r.process.as_deref(), r.pid),
            (Some("CrashingTest"), Some(1710))
        );
        assert_eq!(r.crashed, Some(0));
        let t = &r.threads[0];
        assert_eq!(t.queue.as_deref(), Some("com.apple.main-thread"));
        assert_eq!(t.frames.len(), 3);
        assert_eq!(
            (t.frames[0].address, t.frames[0].image),
            (0x10e311e45, Some(0))
        );
        assert_eq!(t.frames[0].symbol, None);
        assert_eq!(t.frames[1].symbol.as_deref(), Some("main"));
        assert_eq!(t.frames[1].source, Some(("main.m".into(), 28)));
        assert_eq!(t.frames[2].symbol.as_deref(), Some("start"));
        assert_eq!(t.frames[2].symbol_offset, Some(462));
        assert!(t.registers.contains(&("rip".into(), 0x10e311e45)));
        let e = r.exception.clone().unwrap_or_default();
        assert_eq!(e.type_name, "EXC_BAD_ACCESS");
        assert_eq!(e.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(e.codes, vec![1, 1]);
        assert_eq!(
            e.subtype.as_deref(),
            Some("KERN_INVALID_ADDRESS at 0x0000000000000001")
        );
        assert_eq!(r.images.len(), 3);
        assert_eq!(r.images[0].size, Some(0x4000));
        // a UUID with a stray space is no UUID: the image is kept, unidentified
        assert_eq!(r.images[1].uuid, None);
        assert_eq!(r.images[1].name, "dyld");
        assert_eq!(r.images[1].arch.as_deref(), Some("x86_64"));
        assert_eq!(r.images[2].uuid, None);
    }

    #[test]
    fn hostile_text_is_refused_with_the_line() {
        assert!(matches!(
            parse(b"hello\nworld\n"),
            Err(AppleError::NoContent)
        ));
        let bad = "Code Type: X86-64\nBinary Images:\n 0x1 - <abc> /x\n";
        assert!(matches!(
            parse(bad.as_bytes()),
            Err(AppleError::Line { line: 3, .. })
        ));
        let many = format!("Code Type: X86-64\nThread {}:\n", MAX_THREADS);
        assert!(matches!(
            parse(many.as_bytes()),
            Err(AppleError::TooMany { .. })
        ));
        let ppc = "Code Type: PPC\nThread 0:\n0 a 0x1 0x0 + 1\n";
        assert!(matches!(parse(ppc.as_bytes()), Err(AppleError::Arch(_))));
    }

    #[test]
    fn a_one_line_last_exception_backtrace_is_read_by_address() {
        let text = CRASH.replace(
            "Thread 0 Crashed::",
            "Last Exception Backtrace:\n(0x10e311e45 0x10e311e80 0x7)\n\nThread 0 Crashed::",
        );
        let r = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let b = &r.last_exception_backtrace;
        let got: Vec<(u64, Option<usize>)> = b.iter().map(|f| (f.address, f.image)).collect();
        assert_eq!(
            got,
            [(0x10e311e45, Some(0)), (0x10e311e80, Some(0)), (0x7, None)]
        );
        assert_eq!(
            r.threads[0].frames.len(),
            3,
            "the thread after it is read as before"
        );
        let bad = CRASH.replace(
            "Thread 0 Crashed::",
            "Last Exception Backtrace:\n(0x10e311e45 zz)\n\nThread 0 Crashed::",
        );
        assert!(parse(bad.as_bytes()).is_err());
    }
}
