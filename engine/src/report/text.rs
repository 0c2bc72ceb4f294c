//! The text view: a gdb-like rendering of a report for a terminal.
//!
//! It renders only what the JSON document holds, so the two can never disagree. As gdb
//! does where a program stops, the crashed frame is followed by its source line
//! (`LINE<tab>TEXT`) where the report has it.

use std::fmt::Write;

use super::Report;

/// Renders `report` for people: the crash line, every thread's frames, modules, warnings.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    header(&mut out, report);
    for t in &report.threads {
        thread(&mut out, t);
    }
    let stacks = report
        .crash
        .iter()
        .flat_map(|c| &c.analysis)
        .flat_map(|a| &a.stacks);
    for s in stacks {
        let _ = writeln!(
            out,
            "\nAnalysis stack {}: {}:",
            s.index,
            s.name.as_deref().unwrap_or("a stack")
        );
        frames(&mut out, s);
    }
    modules(&mut out, &report.modules);
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings:");
        for w in &report.warnings {
            let _ = writeln!(out, "  [{}] {}", w.code, w.message);
        }
    }
    out
}

/// The dump's line, the crash with its analysis and instruction, and the signature.
fn header(out: &mut String, report: &Report) {
    let d = &report.dump;
    let _ = writeln!(
        out,
        "{} {} dump ({}, {} bytes){}",
        d.os,
        d.arch,
        d.format,
        d.size,
        d.executable
            .as_deref()
            .map(|e| format!(" of {e}"))
            .unwrap_or_default()
    );
    match &report.crash {
        Some(c) => {
            let _ = writeln!(
                out,
                "Crash: {} in thread {} (tid {})",
                c.reason, c.thread, c.tid
            );
            if let Some(a) = &c.analysis {
                let _ = writeln!(out, "Analysis: [{}] {}", a.kind, a.summary);
            }
            if let Some(i) = &c.instruction {
                let _ = writeln!(out, "Instruction: {}", i.describe());
            }
        }
        None => {
            let _ = writeln!(out, "No crash: a dump of a live process");
        }
    }
    if let Some(sig) = &report.signature {
        let _ = writeln!(out, "Signature: {}", sig.text);
    }
}

/// One thread: its line, its frames (the crashed frame's source line after it, as gdb
/// prints it where it stops) and why its walk ended, unless at the outermost frame.
fn thread(out: &mut String, t: &super::Thread) {
    let _ = writeln!(
        out,
        "\nThread {} (tid {}{}){}:",
        t.index,
        t.tid,
        t.name
            .as_deref()
            .map(|n| format!(", \"{n}\""))
            .unwrap_or_default(),
        if t.crashed { " crashed" } else { "" }
    );
    frames(out, t);
}

/// A thread's (or an analysis stack's) frames and why its walk ended, unless at the
/// outermost frame.
fn frames(out: &mut String, t: &super::Thread) {
    for f in &t.frames {
        let what = match (&f.function, &f.module, &f.module_offset) {
            (Some(func), _, _) => format!("{func} ()"),
            (None, Some(m), Some(off)) => format!("{m}+{off}"),
            _ => "??".to_string(),
        };
        let at = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!(" at {file}:{line}"),
            (Some(file), None) => format!(" at {file}"),
            _ => match (&f.module, &f.function) {
                (Some(m), Some(_)) => format!(" from {m}"),
                _ => String::new(),
            },
        };
        if f.inlined {
            let _ = writeln!(out, "#{:<3} [inlined] {what}{at}", f.index);
        } else {
            let _ = writeln!(out, "#{:<3} {} in {what}{at}  [{}]", f.index, f.pc, f.trust);
        }
        // the crashed frame's line, as gdb prints it where it stops: `LINE\tTEXT`
        if let (true, 0, Some(line), Some(text)) = (t.crashed, f.index, f.line, &f.context_line) {
            let _ = writeln!(out, "{line}\t{text}");
        }
    }
    if t.end != crate::walk::EndReason::Outermost {
        let _ = writeln!(
            out,
            "     (walk ended: {}{})",
            t.end,
            t.end_detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
}

/// The module list, each with the lookups of its files.
fn modules(out: &mut String, modules: &[super::Module]) {
    let _ = writeln!(out, "\nModules:");
    for m in modules {
        let _ = writeln!(
            out,
            "  {:>18}-{:<18} {:<28} {:<10} {}",
            m.base,
            m.end,
            m.name,
            m.status,
            m.build_id.as_deref().unwrap_or("-")
        );
        for l in &m.lookups {
            let _ = writeln!(
                out,
                "      {:<10} {:<9} {}{}",
                l.file,
                l.result,
                l.source,
                lookup_note(l)
            );
        }
    }
}

/// What follows a lookup's source: its message, and when a remembered miss expires, in
/// one pair of parentheses (the text report and the crash page both say it so).
pub fn lookup_note(l: &super::Lookup) -> String {
    match (&l.message, &l.until) {
        (Some(m), Some(u)) => format!(" ({m}; asked again after {u})"),
        (Some(m), None) => format!(" ({m})"),
        (None, Some(u)) => format!(" (asked again after {u})"),
        (None, None) => String::new(),
    }
}
