//! Apple crash reports given back as Apple's tools give them: the report re-rendered
//! symbolicated (what `symbolicatecrash` or `atos` make of it), and the list of images
//! that had no dSYM.
//!
//! A `.crash` is re-rendered line for line: each frame line keeps its number, image and
//! address, and its `0xLOAD + offset` (or the device's own `symbol + offset`) becomes
//! `function (in Image) (file:line)` as `atos` prints it, where a dSYM or binary names
//! it; a frame with inlined calls gets one line per function, innermost first, with the
//! same number and address (`atos -i`). An `.ips` is rendered in the `.crash` layout
//! (header, exception, threads, binary images) with the same frame lines, as Xcode and
//! MacSymbolicator convert one.

use std::fmt::Write as _;

use super::{Frame, Module, Report, Thread, Warning};
use crate::dump::apple::{self, AppleError, AppleFormat, AppleReport};
use crate::symbols::SymbolSource;

/// Warnings `no-dsym`: one per image with frames whose symbols hold no DWARF (no dSYM
/// was found for its UUID), saying which file to provide.
pub fn missing_dsyms(modules: &[Module], threads: &[Thread]) -> Vec<Warning> {
    modules
        .iter()
        .filter(|m| !m.symbols.contains(&SymbolSource::Dwarf))
        .filter_map(|m| {
            let frames = threads
                .iter()
                .flat_map(|t| &t.frames)
                .filter(|f| f.module_index == Some(m.index))
                .count();
            (frames > 0).then(|| {
                Warning::new(
                    "no-dsym",
                    format!(
                        "no dSYM for {} (UUID {}): its {frames} frame(s) have no file and line; \
                     upload its dSYM (POST /api/v1/binaries) or give it with --symbols",
                        m.name,
                        m.build_id
                            .as_deref()
                            .map_or_else(|| "unknown".into(), crate::ids::uuid_text)
                    ),
                )
                .of_module(m.index)
            })
        })
        .collect()
}

/// The report re-rendered symbolicated (see the module documentation): `original` is the
/// report's bytes, `report` what postmortem made of them.
pub fn render(original: &[u8], report: &Report) -> Result<String, AppleError> {
    let parsed = apple::parse(original)?;
    match parsed.format {
        AppleFormat::Crash if apple::sniff(original) == Some(AppleFormat::Crash) => Ok(
            rerender_crash(&String::from_utf8_lossy(original), &parsed, report),
        ),
        _ => Ok(render_ips(&parsed, report)),
    }
}

/// The report's frames of the thread numbered `index` in the Apple report (the last
/// exception backtrace is numbered after the threads), grouped by physical frame.
fn physical_frames<'r>(
    report: &'r Report,
    parsed: &AppleReport,
    index: usize,
) -> Vec<Vec<&'r Frame>> {
    let leb = index == parsed.threads.len();
    let tid = apple::thread_id(parsed.threads.get(index).and_then(|t| t.id), index);
    let Some(thread) = report.threads.iter().find(|t| {
        t.tid == tid && (t.name.as_deref() == Some(apple::LAST_EXCEPTION_BACKTRACE)) == leb
    }) else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    let mut group = Vec::new();
    for f in &thread.frames {
        group.push(f);
        if !f.inlined {
            groups.push(std::mem::take(&mut group));
        }
    }
    groups
}

/// The lines of one physical frame: `number`, image and address kept, the tail
/// symbolicated where postmortem named it (else `original_tail`).
fn frame_lines(
    out: &mut String,
    number: &str,
    image: &str,
    addr: u64,
    group: &[&Frame],
    original_tail: &str,
) {
    let named: Vec<&&Frame> = group
        .iter()
        .filter(|f| f.function.is_some() && f.symbol_source != Some(SymbolSource::Report))
        .collect();
    if named.is_empty() {
        let _ = writeln!(out, "{number:<4}{image:<30}\t{addr:>#18x} {original_tail}");
        return;
    }
    for f in named {
        let function = f.function.as_deref().unwrap_or_default();
        let mut tail = format!("{function} (in {image})");
        match (&f.file, f.line) {
            (Some(file), Some(line)) => {
                let file = file.rsplit('/').next().unwrap_or(file);
                let _ = write!(tail, " ({file}:{line})");
            }
            _ => {
                if let Some(off) = f.function_offset.map(super::Addr::get) {
                    let _ = write!(tail, " + {off}");
                }
            }
        }
        let _ = writeln!(out, "{number:<4}{image:<30}\t{addr:>#18x} {tail}");
    }
}

/// A `.crash` text with its frame lines symbolicated, every other line as it was.
fn rerender_crash(text: &str, parsed: &AppleReport, report: &Report) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut current: Option<(Vec<Vec<&Frame>>, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(index) = thread_header(trimmed, parsed) {
            current = Some((physical_frames(report, parsed, index), 0));
        } else if trimmed.is_empty() {
            current = None;
        } else if let Some((groups, k)) = current.as_mut() {
            if let Some((number, image, addr, tail)) = split_frame_line(trimmed) {
                let group = groups.get(*k).map(Vec::as_slice).unwrap_or_default();
                frame_lines(&mut out, number, image, addr, group, tail);
                *k += 1;
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The Apple report's thread number a line starts the frames of (`Thread 3:`,
/// `Thread 0 Crashed:`, `Last Exception Backtrace:`).
fn thread_header(line: &str, parsed: &AppleReport) -> Option<usize> {
    if line == "Last Exception Backtrace:" {
        return Some(parsed.threads.len());
    }
    let rest = line.strip_prefix("Thread ")?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (num, after) = rest.split_at(end);
    let after = after.trim_start();
    let frames_follow = after.starts_with(':') || after.starts_with("Crashed:");
    frames_follow.then(|| num.parse().ok()).flatten()
}

/// A frame line's number, image, address and what follows the address.
fn split_frame_line(line: &str) -> Option<(&str, &str, u64, &str)> {
    let (number, rest) = line.split_once(char::is_whitespace)?;
    number.parse::<usize>().ok()?;
    let mut offset = 0;
    let mut seen_word = false;
    for word in rest.split_whitespace() {
        let at = rest[offset..].find(word)? + offset;
        offset = at + word.len();
        if seen_word {
            if let Some(addr) = word
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                return Some((number, rest[..at].trim(), addr, rest[offset..].trim()));
            }
        }
        seen_word = true;
    }
    None
}

/// An `.ips` report in the `.crash` layout, symbolicated.
fn render_ips(parsed: &AppleReport, report: &Report) -> String {
    let mut out = String::new();
    let field = |out: &mut String, k: &str, v: Option<&str>| {
        if let Some(v) = v {
            let _ = writeln!(out, "{:<23}{v}", format!("{k}:"));
        }
    };
    let process = parsed.process.as_deref().unwrap_or("???");
    let process_line = match parsed.pid {
        Some(pid) => format!("{process} [{pid}]"),
        None => process.to_string(),
    };
    field(&mut out, "Process", Some(process_line.as_str()));
    field(&mut out, "Path", parsed.path.as_deref());
    field(&mut out, "Hardware Model", parsed.hardware.as_deref());
    let code_type = match report.dump.arch {
        crate::dump::Arch::X86_64 => "X86-64",
        _ => "ARM-64",
    };
    field(&mut out, "Code Type", Some(code_type));
    out.push('\n');
    field(&mut out, "Date/Time", parsed.time.as_deref());
    field(&mut out, "OS Version", parsed.os_version.as_deref());
    out.push('\n');
    if let Some(i) = parsed.crashed {
        field(&mut out, "Crashed Thread", Some(i.to_string().as_str()));
        out.push('\n');
    }
    if let Some(e) = &parsed.exception {
        let t = match &e.signal {
            Some(s) => format!("{} ({s})", e.type_name),
            None => e.type_name.clone(),
        };
        field(&mut out, "Exception Type", Some(t.as_str()));
        field(&mut out, "Exception Codes", e.subtype.as_deref());
        let codes: Vec<String> = e.codes.iter().map(|c| format!("{c:#018x}")).collect();
        let codes = codes.join(", ");
        field(
            &mut out,
            "Exception Codes",
            Some(codes.as_str()).filter(|c| !c.is_empty()),
        );
        out.push('\n');
    }
    field(
        &mut out,
        "Termination Reason",
        parsed.termination.as_deref(),
    );
    if !parsed.asi.is_empty() {
        out.push_str("\nApplication Specific Information:\n");
        for (_, line) in &parsed.asi {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push('\n');
    render_ips_threads(&mut out, parsed, report);
    render_images(&mut out, parsed);
    out
}

/// The threads (and last exception backtrace) of an `.ips` in the `.crash` layout.
fn render_ips_threads(out: &mut String, parsed: &AppleReport, report: &Report) {
    let lists = parsed
        .threads
        .iter()
        .map(|t| (&t.frames, t.name.as_deref(), t.queue.as_deref()))
        .chain((!parsed.last_exception_backtrace.is_empty()).then_some((
            &parsed.last_exception_backtrace,
            None,
            None,
        )));
    for (i, (frames, name, queue)) in lists.enumerate() {
        if i == parsed.threads.len() {
            out.push_str("Last Exception Backtrace:\n");
        } else {
            match (name, queue) {
                (Some(n), _) => {
                    let _ = writeln!(out, "Thread {i} name:  {n}");
                }
                (None, Some(q)) => {
                    let _ = writeln!(out, "Thread {i} name:   Dispatch queue: {q}");
                }
                _ => {}
            }
            let crashed = if parsed.crashed == Some(i) {
                " Crashed"
            } else {
                ""
            };
            let _ = writeln!(out, "Thread {i}{crashed}:");
        }
        let groups = physical_frames(report, parsed, i);
        for (k, f) in frames.iter().enumerate() {
            let image = f.image.and_then(|x| parsed.images.get(x));
            let name = image.map_or("???", |im| im.name.as_str());
            let tail = match (&f.symbol, f.symbol_offset, image) {
                (Some(s), Some(o), _) => format!("{s} + {o}"),
                (Some(s), None, _) => s.clone(),
                (None, _, Some(im)) => {
                    format!("{:#x} + {}", im.base, f.address.wrapping_sub(im.base))
                }
                (None, _, None) => String::new(),
            };
            let group = groups.get(k).map(Vec::as_slice).unwrap_or_default();
            frame_lines(out, &k.to_string(), name, f.address, group, &tail);
        }
        out.push('\n');
    }
}

/// `Binary Images:` as the `.crash` text lists them.
fn render_images(out: &mut String, parsed: &AppleReport) {
    out.push_str("Binary Images:\n");
    for im in &parsed.images {
        let end = im
            .base
            .saturating_add(im.size.unwrap_or(1))
            .saturating_sub(1);
        let uuid = im.uuid.map_or_else(
            || "00000000-0000-0000-0000-000000000000".into(),
            |u| crate::ids::uuid_text(&crate::ids::hex(&u)),
        );
        let arch = im.arch.as_deref().unwrap_or("");
        let path = im.path.as_deref().unwrap_or("???");
        let _ = writeln!(
            out,
            "{:>#18x} - {end:>#18x} {} {arch} <{}> {path}",
            im.base,
            im.name,
            uuid.to_ascii_lowercase()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_lines_are_split_after_the_image_name() {
        let l = "1   My App Helper                 \t       0x10e311e80 0x10e30e000 + 16000";
        assert_eq!(
            split_frame_line(l),
            Some(("1", "My App Helper", 0x10e311e80, "0x10e30e000 + 16000"))
        );
        assert_eq!(split_frame_line("Thread 0:"), None);
    }
}
