//! The crash signature: a short text that names the bug, so that crashes of one bug
//! group together and crashes of different bugs do not (issue 37).
//!
//! It is made from the crashed thread's frames, innermost first, each judged by the rules
//! (`signature.txt`, or the operator's `--signature-rules FILE`; `docs/grouping.md`):
//! - frames above the location the crash analysis names (a Rust panic's `panicked_in`, an
//!   abort's program caller: the assertion's function, the thrower of an exception), or
//!   above the first `sentinel` frame, are set aside;
//! - frames found by stack scanning, `irrelevant` frames (abort, raise, the panic and
//!   exception machinery) and frames not in any module are set aside;
//! - system frames (`system-module`) never enter by their function's name, which depends
//!   on whether the server has the system's files: above the program's first frame they
//!   are written as their module (`libc.so.6`), once per run, as a prefix; below it, or
//!   under a crash of an `aside-system-kind` (an abort: its system frames are the abort
//!   machinery and the allocator's checks), they are set aside;
//! - a `prefix` frame of the program's (`std::vector<…>::at`, a generic `unwrap`) is kept
//!   and the next frames are read too; the first other frame is significant, and `frames`
//!   (default 1) significant frames end the signature.
//!
//! Function names are normalized (no parameters, addresses or Rust hashes); a program frame
//! without a name is written as its module: a signature holds no addresses, offsets or
//! line numbers. [`SignatureRules::explain`] says, frame by frame, which rule decided.
//! This module does not decide which thread crashed: it reads the report the engine
//! assembled.

mod rules;

pub use rules::{Glob, RulesError, SignatureRules, DEFAULT_RULES};

use super::{Analysis, AnalysisKind, Frame, Signature, Thread};
use crate::dump::Os;
use crate::walk::Trust;

/// What the rules decided about one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Verdict {
    /// The frame names the bug: it is in the signature and counts toward `frames`.
    Significant,
    /// Not the bug alone: in the signature, with the frames below it.
    Prefix,
    /// Left out.
    Aside,
    /// Below the signature's last frame: not looked at.
    NotReached,
}

crate::names::serde_by_name!(Verdict);

impl Verdict {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One frame's verdict, and the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FrameVerdict {
    /// The frame's index in the crashed thread.
    pub index: usize,
    /// How the frame reads (its function, else its module, else its pc).
    pub frame: String,
    /// What it adds to the signature (empty when nothing).
    pub text: String,
    pub verdict: Verdict,
    /// The rule, in words.
    pub why: String,
}

/// A signature with the reasons for it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explanation {
    pub signature: Option<Signature>,
    /// The `version` of the rules.
    pub rules_version: u32,
    /// Why the analysis kind is first, when it is.
    pub kind_prefix: Option<String>,
    pub frames: Vec<FrameVerdict>,
}

impl Explanation {
    /// The explanation as text, one line per frame: what `postmortem signature
    /// --explain` prints.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let sig = self
            .signature
            .as_ref()
            .map_or("(none)", |s| s.text.as_str());
        out.push_str(&format!("signature: {sig}\n"));
        out.push_str(&format!("rules version: {}\n", self.rules_version));
        if let Some(k) = &self.kind_prefix {
            out.push_str(&format!("first: {k}\n"));
        }
        for f in &self.frames {
            out.push_str(&format!(
                "#{:<3} {:<11} {}  <- {}\n",
                f.index,
                f.verdict.as_str(),
                f.frame,
                f.why
            ));
        }
        out
    }
}

/// Between the parts of a signature (with `frames` and `max-prefix` at most 32 each, and
/// the kind, a signature has at most 65 parts).
const SEPARATOR: &str = " | ";

impl SignatureRules {
    /// The signature of a crashed thread of a dump of `os`, or `None` when it has no
    /// frames; `analysis` is the crash analysis's, for the location it names and its kind.
    pub fn signature_of(
        &self,
        os: Os,
        thread: &Thread,
        analysis: Option<&Analysis>,
    ) -> Option<Signature> {
        self.judged(os, thread, analysis, false).signature
    }

    /// The signature, and the verdict of every frame.
    pub fn explain(&self, os: Os, thread: &Thread, analysis: Option<&Analysis>) -> Explanation {
        self.judged(os, thread, analysis, true)
    }

    /// The signature, and the verdicts of the frames: of every frame (`whole`, with its
    /// text), else only of those up to the signature's last significant frame, past which
    /// no frame changes the signature (a crash 8,192 frames deep is judged a few frames
    /// down, not to its bottom).
    fn judged(
        &self,
        os: Os,
        thread: &Thread,
        analysis: Option<&Analysis>,
        whole: bool,
    ) -> Explanation {
        let kind = analysis.map(|a| a.kind);
        let start = self.start(os, thread, analysis);
        let aside_system = kind.and_then(|k| {
            self.aside_system_kind
                .iter()
                .find(|g| g.matches(os, k.as_str()))
        });
        let mut walk = Walk::default();
        let mut frames = Vec::with_capacity(if whole { thread.frames.len() } else { 0 });
        for (i, f) in thread.frames.iter().enumerate() {
            if !whole && walk.significant >= self.frames {
                break;
            }
            let (verdict, text, why) = match &start {
                Some((at, why)) if i < *at => (Verdict::Aside, String::new(), why.clone()),
                _ => self.judge(os, f, kind, aside_system, &mut walk),
            };
            if !text.is_empty() {
                walk.parts.push((i, text.clone()));
            }
            frames.push(FrameVerdict {
                index: i,
                frame: if whole { frame_text(f) } else { String::new() },
                text,
                verdict,
                why,
            });
        }
        let kind_prefix = kind.and_then(|k| {
            let g = self
                .prefix_kind
                .iter()
                .find(|g| g.matches(os, k.as_str()))?;
            Some((k, g.cite("prefix-kind")))
        });
        let mut parts = walk.parts;
        if let (true, Some(innermost)) = (parts.is_empty(), thread.frames.first()) {
            // nothing kept: the innermost frame stands for the crash (a crash inside abort
            // itself still needs a group)
            let text = frame_text_stable(innermost);
            if let Some(first) = frames.first_mut() {
                first.verdict = Verdict::Significant;
                first.why = format!("nothing else was kept, so the innermost frame stands for the crash; before: {}", first.why);
                first.text = text.clone();
            }
            parts.push((0, text));
        }
        let signature = (!parts.is_empty()).then(|| Signature {
            text: kind_prefix
                .as_ref()
                .map(|(k, _)| k.as_str().to_string())
                .into_iter()
                .chain(parts.iter().map(|(_, t)| t.clone()))
                .collect::<Vec<_>>()
                .join(SEPARATOR),
            frames: parts.iter().map(|(i, _)| *i).collect(),
        });
        Explanation {
            signature,
            rules_version: self.version,
            kind_prefix: kind_prefix.map(|(k, why)| format!("{} <- {why}", k.as_str())),
            frames,
        }
    }

    /// Where the signature starts: the frame the crash analysis names, else the first
    /// sentinel frame; with the reason the frames above it are set aside.
    fn start(
        &self,
        os: Os,
        thread: &Thread,
        analysis: Option<&Analysis>,
    ) -> Option<(usize, String)> {
        let named = analysis.and_then(|a| {
            let key = if a.evidence.contains_key("panicked_in") {
                "panicked_in"
            } else if a.kind == AnalysisKind::Abort {
                "caller"
            } else {
                return None;
            };
            Some((key, a.evidence.get(key)?))
        });
        if let Some((key, at)) = named {
            // a frame of the program's: a system frame names no bug
            let i = thread.frames.iter().position(|f| {
                described(f) == *at
                    && !f.module.as_deref().is_some_and(|m| {
                        let m = m.to_ascii_lowercase();
                        self.system_module.iter().any(|g| g.matches(os, &m))
                    })
            });
            if let Some(i) = i.filter(|&i| i > 0) {
                return Some((
                    i,
                    format!("above the frame the crash analysis names ({key}: {at})"),
                ));
            }
        }
        // a frame named as the one before it is no sentinel either (a deep recursion
        // repeats one name thousands of times)
        let mut before: Option<&str> = None;
        thread.frames.iter().enumerate().find_map(|(i, f)| {
            let function = f.function.as_deref()?;
            if before.replace(function) == Some(function) {
                return None;
            }
            let name = normalize_function(function);
            let g = self.sentinel.iter().find(|g| g.matches(os, &name))?;
            (i > 0).then(|| {
                (
                    i,
                    format!("above the first sentinel frame: {}", g.cite("sentinel")),
                )
            })
        })
    }

    /// One frame's verdict, the text it adds and why, at the point `walk` has reached.
    fn judge(
        &self,
        os: Os,
        f: &Frame,
        kind: Option<AnalysisKind>,
        aside_system: Option<&Glob>,
        walk: &mut Walk,
    ) -> (Verdict, String, String) {
        let aside = |why: String| (Verdict::Aside, String::new(), why);
        if walk.significant >= self.frames {
            return (
                Verdict::NotReached,
                String::new(),
                "below the signature's last significant frame".to_string(),
            );
        }
        let lower = f.module.as_deref().map(str::to_ascii_lowercase);
        let system = lower
            .as_deref()
            .and_then(|m| self.system_module.iter().find(|g| g.matches(os, m)));
        // The walk out of a system library whose files the server lacks finds the
        // program's frames only by scanning: those are kept until the first significant
        // frame (else the crash would be named after its caller's caller, and renamed when
        // the library's files arrive). Any other scanned frame is a guess.
        if f.trust == Trust::Scan
            && (system.is_some() || f.module.is_none() || walk.significant > 0)
        {
            return aside(
                "found by stack scanning: a guess, which differs from run to run".to_string(),
            );
        }
        let name = f.function.as_deref().map(normalize_function);
        if let Some(g) = name
            .as_deref()
            .and_then(|n| self.irrelevant.iter().find(|g| g.matches(os, n)))
        {
            return aside(g.cite("irrelevant"));
        }
        let Some(module) = f.module.as_deref() else {
            return aside("in no module: its address says nothing that lasts".to_string());
        };
        if let Some(g) = system {
            return self.judge_system(module, g, kind.zip(aside_system), walk);
        }
        walk.program = true;
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            walk.significant += 1;
            return (
                Verdict::Significant,
                module.to_string(),
                "a frame of the program's without a name: written as its module (never an \
                 offset, which moves when the program is rebuilt)"
                    .to_string(),
            );
        };
        if let Some(g) = self.prefix.iter().find(|g| g.matches(os, &name)) {
            if walk.prefixes < self.max_prefix {
                walk.prefixes += 1;
                return (Verdict::Prefix, name, g.cite("prefix"));
            }
            return aside(format!(
                "{}, past max-prefix {}",
                g.cite("prefix"),
                self.max_prefix
            ));
        }
        walk.significant += 1;
        (
            Verdict::Significant,
            name,
            "the program's frame: no rule sets it aside".to_string(),
        )
    }

    /// The verdict of a frame of a system module (`g`): see the module's doc. `kind` is
    /// the crash's kind with its `aside-system-kind` rule, when one matches.
    fn judge_system(
        &self,
        module: &str,
        g: &Glob,
        kind: Option<(AnalysisKind, &Glob)>,
        walk: &mut Walk,
    ) -> (Verdict, String, String) {
        let aside = |why: String| (Verdict::Aside, String::new(), why);
        if let Some((k, a)) = kind {
            return aside(format!(
                "a system frame ({}) of a crash of kind {}: {}",
                g.cite("system-module"),
                k.as_str(),
                a.cite("aside-system-kind")
            ));
        }
        if walk.program {
            return aside(format!(
                "a system frame below the program's first: {}",
                g.cite("system-module")
            ));
        }
        if walk.last_system.as_deref() == Some(module) {
            return aside(format!(
                "a system frame of the same module as the one above, which stands for \
                 both: {}",
                g.cite("system-module")
            ));
        }
        if walk.prefixes >= self.max_prefix {
            return aside(format!("past max-prefix {}", self.max_prefix));
        }
        walk.prefixes += 1;
        walk.last_system = Some(module.to_string());
        (
            Verdict::Prefix,
            module.to_string(),
            format!(
                "a system frame, written as its module whatever its name (the name \
                 depends on the system's files being at hand): {}",
                g.cite("system-module")
            ),
        )
    }
}

/// How far the walk over the frames has got.
#[derive(Default)]
struct Walk {
    /// (frame index, text) of the signature's parts so far.
    parts: Vec<(usize, String)>,
    significant: usize,
    prefixes: usize,
    /// A frame of the program's was kept.
    program: bool,
    /// The module of the system frame kept last.
    last_system: Option<String>,
}

/// `function` of a frame, or `module+offset`: as the crash analysis's evidence names it.
fn described(f: &Frame) -> String {
    match (&f.function, &f.module, &f.module_offset) {
        (Some(func), _, _) => func.clone(),
        (None, Some(m), Some(off)) => format!("{m}+{off}"),
        _ => f.pc.to_string(),
    }
}

/// A frame as `--explain` shows it: its normalized function, else `module+offset`, else
/// its pc.
fn frame_text(f: &Frame) -> String {
    if let Some(name) = &f.function {
        let n = normalize_function(name);
        if !n.is_empty() {
            return n;
        }
    }
    match (&f.module, &f.module_offset) {
        (Some(m), Some(off)) => format!("{m}+{off}"),
        (Some(m), None) => m.clone(),
        _ => f.pc.to_string(),
    }
}

/// A frame as a signature may hold it: its normalized function, else its module, else `?`.
fn frame_text_stable(f: &Frame) -> String {
    if let Some(name) = &f.function {
        let n = normalize_function(name);
        if !n.is_empty() {
            return n;
        }
    }
    f.module.clone().unwrap_or_else(|| "?".to_string())
}

/// A function name without parameters, addresses or Rust hashes:
/// `ns::f(int, char*) const` → `ns::f`, `f + 0x12` → `f`, `a::b::h0123456789abcdef` →
/// `a::b`. `(anonymous namespace)` and generic arguments `<…>` are kept.
pub fn normalize_function(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut angle = 0usize;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if c == '(' && angle == 0 {
            if let Some(after) = rest.strip_prefix("(anonymous namespace)") {
                out.push_str("(anonymous namespace)");
                rest = after;
                continue;
            }
            break; // the parameter list: everything after it goes too
        }
        match c {
            '<' => angle += 1,
            '>' => angle = angle.saturating_sub(1),
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    let mut s = out.trim().to_string();
    // ` + 0x1f`, `+0x1f`, ` [0x7f…]`: offsets and addresses.
    for sep in [" + 0x", "+0x", " [0x", " @ 0x"] {
        if let Some(pos) = s.find(sep) {
            s.truncate(pos);
        }
    }
    // Rust legacy mangling hash: `::h` + 16 hex digits at the end.
    if let Some(pos) = s.rfind("::h") {
        let hash = &s[pos + 3..];
        if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            s.truncate(pos);
        }
    }
    s.trim().to_string()
}

/// Shell-style glob: `*` any run of characters (also empty), `?` exactly one; the rest
/// literal. Iterative with one backtrack point, so time is bounded by
/// `pattern.len() * text.len()` whatever the (attacker-controlled) name.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Addr;
    use std::collections::BTreeMap;

    fn frame(function: Option<&str>, module: Option<&str>, offset: &str) -> Frame {
        Frame {
            index: 0,
            pc: Addr(0x1000),
            sp: None,
            trust: Trust::Cfi,
            unwind_source: None,
            module: module.map(str::to_string),
            module_index: None,
            module_offset: Addr::parse(offset),
            function: function.map(str::to_string),
            function_offset: None,
            file: None,
            line: None,
            column: None,
            inlined: false,
            symbol_source: None,
            pre_context: Default::default(),
            context_line: None,
            post_context: Default::default(),
            source_url: None,
        }
    }

    fn thread(frames: Vec<Frame>) -> Thread {
        Thread {
            index: 0,
            tid: 1,
            name: None,
            crashed: true,
            registers: Default::default(),
            frames: frames
                .into_iter()
                .enumerate()
                .map(|(i, mut f)| {
                    f.index = i;
                    f
                })
                .collect(),
            end: crate::walk::EndReason::Outermost,
            end_detail: None,
        }
    }

    fn analysis(kind: AnalysisKind, evidence: &[(&str, &str)]) -> Analysis {
        Analysis {
            stacks: Vec::new(),
            kind,
            summary: String::new(),
            evidence: evidence
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn sig_with(frames: Vec<Frame>, a: Option<&Analysis>) -> String {
        SignatureRules::default()
            .signature_of(Os::Linux, &thread(frames), a)
            .expect("a signature")
            .text
    }

    fn sig(frames: Vec<Frame>) -> String {
        sig_with(frames, None)
    }

    /// An assert's stack as gdb shows it: with libc's names, and without (offsets only).
    fn assert_stack(named: bool, site: &str) -> Vec<Frame> {
        let libc = |name: &str, off: &str| frame(named.then_some(name), Some("libc.so.6"), off);
        vec![
            libc("__pthread_kill_implementation", "0x8aeec"),
            libc("raise", "0x3bfb2"),
            libc("abort", "0x26472"),
            libc("__assert_fail_base.cold", "0x2639a"),
            libc("__assert_fail", "0x34bb2"),
            frame(Some(site), Some("prog"), "0x1149"),
            frame(Some("main"), Some("prog"), "0x1180"),
            libc("__libc_start_call_main", "0x27249"),
        ]
    }

    /// The signature alone (judged down to the last significant frame only) is the
    /// signature of the whole explanation, whatever the stack's shape: deep, all set
    /// aside, nameless, system frames only, and with more frames asked for.
    #[test]
    fn the_signature_alone_is_the_explained_signature() {
        let deep: Vec<Frame> = (0..3000)
            .map(|i| frame(Some(&format!("f{}", i % 7)), Some("prog"), "0x10"))
            .collect();
        let mut shapes = vec![
            deep,
            assert_stack(true, "check_input(int)"),
            assert_stack(false, "check_input(int)"),
            vec![frame(Some("__restore_rt"), Some("libc.so.6"), "0x1"); 50],
            vec![
                frame(None, Some(""), "0x1"),
                frame(Some("main"), Some("prog"), "0x2"),
            ],
            vec![frame(None, None, "0x1"); 3],
            vec![frame(Some("raise"), Some("libc.so.6"), "0x1"); 40],
            vec![],
        ];
        shapes.push(
            std::iter::repeat_with(|| frame(Some("f"), Some("libc.so.6"), "0x1"))
                .take(5)
                .chain(std::iter::once(frame(Some("main"), Some("prog"), "0x2")))
                .collect(),
        );
        let abort = analysis(AnalysisKind::Abort, &[]);
        for n in [0, 1, 3, 40] {
            let rules = SignatureRules {
                frames: n,
                ..SignatureRules::default()
            };
            for (i, frames) in shapes.iter().enumerate() {
                let t = thread(frames.clone());
                for a in [None, Some(&abort)] {
                    let whole = rules.explain(Os::Linux, &t, a).signature;
                    let alone = rules.signature_of(Os::Linux, &t, a);
                    assert_eq!(
                        alone,
                        whole,
                        "shape {i}, frames {n}, analysis {}",
                        a.is_some()
                    );
                }
            }
        }
    }

    #[test]
    fn builtin_rules_parse() {
        let r = SignatureRules::default();
        assert_eq!(r.version, 2);
        assert_eq!(r.frames, 1);
        assert!(r.irrelevant.iter().any(|g| g.pattern == "__restore_rt"));
        assert!(r.system_module.iter().any(|g| g.pattern == "libc.so*"));
        assert!(r.irrelevant.iter().all(|g| g.builtin));
    }

    #[test]
    fn an_abort_is_named_by_the_programs_frame_with_or_without_libcs_names() {
        let abort = analysis(AnalysisKind::Abort, &[]);
        for named in [true, false] {
            let a = sig_with(assert_stack(named, "check_input(int)"), Some(&abort));
            assert_eq!(a, "check_input", "libc named: {named}");
        }
        // two sites are two signatures
        let b = sig_with(
            assert_stack(false, "parse_header(char const*)"),
            Some(&abort),
        );
        assert_eq!(b, "parse_header");
    }

    #[test]
    fn the_analysis_location_decides() {
        // a panic's site, under std frames that are not in any list
        let frames = vec![
            frame(
                Some("std::sys::pal::unix::abort_internal"),
                Some("app"),
                "0x10",
            ),
            frame(Some("std::some_new_runtime_helper"), Some("app"), "0x18"),
            frame(Some("app::parse::h0123456789abcdef"), Some("app"), "0x60"),
            frame(Some("app::main"), Some("app"), "0x70"),
        ];
        let a = analysis(
            AnalysisKind::Abort,
            &[("panicked_in", "app::parse::h0123456789abcdef")],
        );
        let e = SignatureRules::default().explain(Os::Linux, &thread(frames), Some(&a));
        assert_eq!(e.signature.expect("a signature").text, "app::parse");
        assert_eq!(e.frames[1].verdict, Verdict::Aside);
        assert!(
            e.frames[1].why.contains("panicked_in"),
            "{}",
            e.frames[1].why
        );
    }

    #[test]
    fn the_rust_panic_runtime_and_unwrap_are_set_aside() {
        let panic = |site: &str| {
            vec![
                frame(
                    Some("std::sys::pal::unix::abort_internal"),
                    Some("app"),
                    "0x10",
                ),
                frame(Some("std::process::abort"), Some("app"), "0x20"),
                frame(Some("std::rt::__rust_abort"), Some("app"), "0x24"),
                frame(
                    Some("panic_abort::__rust_start_panic::abort"),
                    Some("app"),
                    "0x26",
                ),
                frame(Some("__rust_start_panic"), Some("app"), "0x28"),
                frame(Some("rust_panic"), Some("app"), "0x30"),
                frame(
                    Some("std::panicking::rust_panic_with_hook::h0123456789abcdef"),
                    Some("app"),
                    "0x40",
                ),
                frame(Some("core::panicking::panic_fmt"), Some("app"), "0x50"),
                frame(Some("core::result::unwrap_failed"), Some("app"), "0x54"),
                frame(
                    Some("core::result::Result<T,E>::unwrap"),
                    Some("app"),
                    "0x58",
                ),
                frame(Some(site), Some("app"), "0x60"),
                frame(Some("app::main"), Some("app"), "0x70"),
            ]
        };
        assert_eq!(sig(panic("app::load_config")), "app::load_config");
        assert_eq!(sig(panic("app::open_db")), "app::open_db");
    }

    #[test]
    fn a_cxx_exception_is_named_by_its_thrower_past_the_prefix() {
        let abort = analysis(AnalysisKind::Abort, &[]);
        let thrown = |named: bool, site: &str| {
            let lib = |m: &str, name: &str, off: &str| frame(named.then_some(name), Some(m), off);
            vec![
                lib("libc.so.6", "__pthread_kill_implementation", "0x8aeec"),
                lib("libc.so.6", "raise", "0x3bfb2"),
                lib("libc.so.6", "abort", "0x26472"),
                lib("libstdc++.so.6", "__gnu_cxx::__verbose_terminate_handler()", "0xa1a"),
                lib("libstdc++.so.6", "__cxxabiv1::__terminate(void (*)())", "0xad0"),
                lib("libstdc++.so.6", "std::terminate()", "0xad1"),
                lib("libstdc++.so.6", "__cxa_throw", "0xad2"),
                lib("libstdc++.so.6", "std::__throw_out_of_range_fmt(char const*, ...)", "0x9a"),
                frame(
                    Some("std::vector<int, std::allocator<int> >::_M_range_check(unsigned long) const"),
                    Some("prog"),
                    "0x40",
                ),
                frame(
                    Some("std::vector<int, std::allocator<int> >::at(unsigned long)"),
                    Some("prog"),
                    "0x50",
                ),
                frame(Some(site), Some("prog"), "0x60"),
                frame(Some("main"), Some("prog"), "0x70"),
            ]
        };
        let want = "std::vector<int, std::allocator<int> >::_M_range_check | \
                    std::vector<int, std::allocator<int> >::at | lookup_user";
        for named in [true, false] {
            assert_eq!(
                sig_with(thrown(named, "lookup_user(int)"), Some(&abort)),
                want
            );
        }
        assert_ne!(
            sig_with(thrown(false, "lookup_order(int)"), Some(&abort)),
            want,
            "two throwers are two bugs"
        );
    }

    #[test]
    fn a_crash_inside_libc_is_its_module_and_the_callers_frame() {
        for named in [true, false] {
            let s = sig(vec![
                frame(named.then_some("__strlen_avx2"), Some("libc.so.6"), "0x1a0"),
                frame(named.then_some("printf"), Some("libc.so.6"), "0x5000"),
                frame(Some("report_name(char const*)"), Some("prog"), "0x40"),
                frame(Some("main"), Some("prog"), "0x50"),
            ]);
            assert_eq!(s, "libc.so.6 | report_name", "named {named}");
        }
    }

    #[test]
    fn system_frames_below_the_program_and_scanned_frames_are_set_aside() {
        let scanned = |name: &str, module: &str| {
            let mut f = frame(Some(name), Some(module), "0x10");
            f.trust = Trust::Scan;
            f
        };
        let e = SignatureRules::default().explain(
            Os::Linux,
            &thread(vec![
                scanned("std::io::write_fmt", "prog"),
                scanned("bogus_in_libc", "libc.so.6"),
                scanned("stale_function", "prog"),
                frame(Some("compare_items"), Some("prog"), "0x20"),
                frame(Some("msort_with_tmp"), Some("libc.so.6"), "0x30"),
                frame(Some("main"), Some("prog"), "0x40"),
            ]),
            None,
        );
        // a scanned program frame may name the crash (the walk out of a library without
        // its files finds no other); a scanned system frame is a guess
        let s = e.signature.expect("a signature");
        assert_eq!(s.text, "std::io::write_fmt | stale_function");
        assert_eq!(e.frames[1].verdict, Verdict::Aside);
        assert!(e.frames[1].why.contains("scanning"), "{}", e.frames[1].why);
        assert_eq!(e.frames[3].verdict, Verdict::NotReached);
    }

    #[test]
    fn program_frames_without_a_name_are_their_module_never_an_offset() {
        let a = sig(vec![
            frame(None, Some("prog"), "0x1234"),
            frame(Some("main"), Some("prog"), "0x99"),
        ]);
        assert_eq!(a, "prog");
        // a frame in no module is set aside
        assert_eq!(
            sig(vec![
                frame(None, None, "0x0"),
                frame(Some("f"), Some("prog"), "0x1")
            ]),
            "f"
        );
    }

    #[test]
    fn all_set_aside_falls_back_to_the_innermost_and_empty_is_none() {
        let s = sig(vec![
            frame(Some("raise"), Some("libc.so.6"), "0x1"),
            frame(Some("abort"), Some("libc.so.6"), "0x2"),
        ]);
        assert_eq!(s, "raise");
        assert_eq!(
            SignatureRules::default().signature_of(Os::Linux, &thread(vec![]), None),
            None
        );
    }

    #[test]
    fn sentinel_starts_the_signature() {
        let rules = SignatureRules::parse("sentinel handle_fatal\nframes 2\n").expect("parses");
        let t = thread(vec![
            frame(Some("log_it"), Some("prog"), "0x1"),
            frame(Some("handle_fatal"), Some("prog"), "0x2"),
            frame(Some("caller"), Some("prog"), "0x3"),
        ]);
        let s = rules
            .signature_of(Os::Linux, &t, None)
            .expect("a signature");
        assert_eq!(s.text, "handle_fatal | caller");
        assert_eq!(s.frames, vec![1, 2]);
    }

    #[test]
    fn prefix_kind_puts_the_analysis_kind_first() {
        let t = thread(vec![
            frame(Some("descend"), Some("prog"), "0x10"),
            frame(Some("descend"), Some("prog"), "0x10"),
        ]);
        let over = analysis(AnalysisKind::StackOverflow, &[]);
        let s = SignatureRules::default()
            .signature_of(Os::Linux, &t, Some(&over))
            .expect("a signature");
        assert_eq!(s.text, "stack-overflow | descend");
        assert_eq!(s.frames, vec![0], "the indices are still the frames'");
        let e = SignatureRules::parse("prefix-kind stackoverflow").expect_err("no such kind");
        assert!(e.message.contains("stack-overflow"), "{e}");
    }

    #[test]
    fn platform_rules_apply_to_their_platform_only() {
        let rules =
            SignatureRules::parse("platform windows\nirrelevant RaiseIt\n").expect("parses");
        let t = thread(vec![
            frame(Some("RaiseIt"), Some("prog"), "0x1"),
            frame(Some("caller"), Some("prog"), "0x2"),
        ]);
        let on = |os| rules.signature_of(os, &t, None).expect("a signature").text;
        assert_eq!(on(Os::Windows), "caller");
        assert_eq!(on(Os::Linux), "RaiseIt");
        // module names of the system match whatever their case
        let w = thread(vec![
            frame(None, Some("KERNELBASE.dll"), "0x1"),
            frame(Some("caller"), Some("prog.exe"), "0x2"),
        ]);
        let s = SignatureRules::default().signature_of(Os::Windows, &w, None);
        assert_eq!(s.expect("a signature").text, "KERNELBASE.dll | caller");
    }

    #[test]
    fn an_operators_file_replaces_or_extends() {
        let t = thread(vec![
            frame(Some("raise"), Some("prog"), "0x1"),
            frame(Some("my_fatal"), Some("prog"), "0x2"),
            frame(Some("caller"), Some("prog"), "0x3"),
        ]);
        let replace = SignatureRules::parse("irrelevant my_fatal\n").expect("parses");
        assert_eq!(
            replace.signature_of(Os::Linux, &t, None).expect("sig").text,
            "raise",
            "the built-in `irrelevant raise` is gone"
        );
        let extend = SignatureRules::parse("# mine\nextends builtin\nirrelevant my_fatal\n")
            .expect("parses");
        assert_eq!(
            extend.signature_of(Os::Linux, &t, None).expect("sig").text,
            "caller"
        );
        let e = extend.explain(Os::Linux, &t, None);
        assert!(
            e.frames[0].why.contains("built-in line"),
            "{}",
            e.frames[0].why
        );
        assert!(
            e.frames[1].why.contains("rules file line 3"),
            "{}",
            e.frames[1].why
        );
        assert!(SignatureRules::parse("irrelevant a\nextends builtin\n").is_err());
    }

    #[test]
    fn explain_text_has_a_line_per_frame() {
        let e = SignatureRules::default().explain(
            Os::Linux,
            &thread(assert_stack(true, "check_input(int)")),
            Some(&analysis(AnalysisKind::Abort, &[])),
        );
        let text = e.to_text();
        assert!(text.starts_with("signature: check_input\n"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with('#')).count(),
            8,
            "{text}"
        );
        assert!(text.contains("#5   significant check_input"), "{text}");
        assert!(text.contains("irrelevant raise (built-in line"), "{text}");
    }

    #[test]
    fn bad_rules_are_errors_with_line_numbers() {
        let e = SignatureRules::parse("# ok\nirrelevant a\nfrobnicate b\n").expect_err("bad");
        assert_eq!(e.line, 3);
        assert!(SignatureRules::parse("frames 0").is_err());
        assert!(SignatureRules::parse("prefix").is_err());
        assert!(SignatureRules::parse("platform beos").is_err());
        let huge = "irrelevant a\n".repeat(200_000);
        assert!(SignatureRules::parse(&huge).is_err());
    }

    #[test]
    fn glob() {
        assert!(glob_match(
            "__pthread_kill*",
            "__pthread_kill_implementation"
        ));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(!glob_match("raise", "raised"));
        assert!(glob_match("*", ""));
        let long = "a".repeat(5000);
        assert!(!glob_match("*a*a*a*a*a*b", &long));
    }
}
