//! The crash signature: a short text that groups crashes with the same cause.
//!
//! It is made from the crashed thread's frames, innermost first, after leaving out frames
//! that are never the culprit (signal trampolines, `abort`/`raise`/`assert` machinery,
//! Rust panic and C++ terminate machinery). Function names are normalized (no parameters,
//! no addresses, no Rust hashes); a frame without a function is `module+offset`. The first
//! `frames` (default 3) remaining frames, joined with ` | `, are the text; their indices in
//! the crashed thread's `frames` are kept beside it (`docs/report-format.md`, `signature`).
//!
//! The rules live in a readable text file, `signature.txt` (built in), which a deployment
//! can replace with `--signature-rules FILE`. This module does not decide which thread
//! crashed: it reads the report the engine assembled.

use super::{AnalysisKind, Frame, Signature, Thread};

/// The built-in rules file.
pub const DEFAULT_RULES: &str = include_str!("signature.txt");

/// Frames joined into a signature unless the rules say otherwise.
const DEFAULT_FRAMES: usize = 3;

/// Parsed signature rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureRules {
    /// Globs on normalized function names of frames to leave out.
    skip: Vec<String>,
    /// Globs on module names of frames without a function to leave out.
    skip_module: Vec<String>,
    /// How many frames make the text.
    frames: usize,
    /// Globs on the crash analysis's kind (`stack-overflow`, `null-pointer`, …): a crash
    /// of a matching kind has its kind put before the frames, so that crashes of one
    /// kind group apart from others in the same functions.
    prefix_kind: Vec<String>,
}

/// A line of a rules file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signature rules line {line}: {message}")]
pub struct RulesError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl Default for SignatureRules {
    /// The built-in rules (`signature.txt`); a unit test proves the file parses.
    fn default() -> Self {
        SignatureRules::parse(DEFAULT_RULES).unwrap_or(SignatureRules {
            skip: Vec::new(),
            skip_module: Vec::new(),
            frames: DEFAULT_FRAMES,
            prefix_kind: Vec::new(),
        })
    }
}

impl SignatureRules {
    /// Parses a rules file: `skip GLOB`, `skip-module GLOB`, `frames N`, `prefix-kind
    /// GLOB`, `#` comments.
    pub fn parse(text: &str) -> Result<SignatureRules, RulesError> {
        let mut rules = SignatureRules {
            skip: Vec::new(),
            skip_module: Vec::new(),
            frames: DEFAULT_FRAMES,
            prefix_kind: Vec::new(),
        };
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |message: String| RulesError {
                line: i + 1,
                message,
            };
            let (word, arg) = match line.split_once(char::is_whitespace) {
                Some((w, a)) => (w, a.trim()),
                None => (line, ""),
            };
            if arg.is_empty() {
                return Err(err(format!("`{word}` needs an argument")));
            }
            match word {
                "skip" => rules.skip.push(arg.to_string()),
                "skip-module" => rules.skip_module.push(arg.to_string()),
                "prefix-kind" => {
                    if !AnalysisKind::all()
                        .iter()
                        .any(|k| glob_match(arg, k.as_str()))
                    {
                        return Err(err(format!(
                            "prefix-kind {arg:?} matches no analysis kind ({})",
                            AnalysisKind::all()
                                .iter()
                                .map(|k| k.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                    rules.prefix_kind.push(arg.to_string());
                }
                "frames" => {
                    rules.frames = arg
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=32).contains(n))
                        .ok_or_else(|| err(format!("frames wants 1 to 32, not {arg:?}")))?;
                }
                other => {
                    return Err(err(format!(
                        "unknown rule {other:?} (skip, skip-module, frames, prefix-kind)"
                    )))
                }
            }
        }
        Ok(rules)
    }

    /// Whether a frame is never the culprit.
    fn skips(&self, frame: &Frame) -> bool {
        match &frame.function {
            Some(f) => {
                let name = normalize_function(f);
                self.skip.iter().any(|g| glob_match(g, &name))
            }
            None => frame
                .module
                .as_deref()
                .is_some_and(|m| self.skip_module.iter().any(|g| glob_match(g, m))),
        }
    }

    /// The signature of a crashed thread, or `None` when it has no frames; `kind` is the
    /// crash analysis's, for `prefix-kind`.
    ///
    /// If every frame is skipped, the innermost frames are used after all: a crash
    /// inside `abort` itself still needs a group.
    pub fn signature_of(&self, thread: &Thread, kind: Option<AnalysisKind>) -> Option<Signature> {
        let mut picked: Vec<usize> = thread
            .frames
            .iter()
            .enumerate()
            .filter(|(_, f)| !self.skips(f))
            .map(|(i, _)| i)
            .take(self.frames)
            .collect();
        if picked.is_empty() {
            picked = (0..thread.frames.len().min(self.frames)).collect();
        }
        if picked.is_empty() {
            return None;
        }
        let prefix = kind
            .map(AnalysisKind::as_str)
            .filter(|k| self.prefix_kind.iter().any(|g| glob_match(g, k)));
        let text = prefix
            .map(str::to_string)
            .into_iter()
            .chain(
                picked
                    .iter()
                    .filter_map(|&i| thread.frames.get(i))
                    .map(frame_text),
            )
            .collect::<Vec<_>>()
            .join(" | ");
        Some(Signature {
            text,
            frames: picked,
        })
    }
}

/// A frame's part of the signature: its normalized function, else `module+offset`, else
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
        _ => f.pc.clone(),
    }
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

    fn frame(function: Option<&str>, module: Option<&str>, offset: &str) -> Frame {
        Frame {
            index: 0,
            pc: "0x1000".into(),
            sp: None,
            trust: crate::walk::Trust::Cfi,
            unwind_source: None,
            module: module.map(str::to_string),
            module_index: None,
            module_offset: Some(offset.into()),
            function: function.map(str::to_string),
            function_offset: None,
            file: None,
            line: None,
            column: None,
            inlined: false,
            symbol_source: None,
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

    fn sig(frames: Vec<Frame>) -> Option<Signature> {
        SignatureRules::default().signature_of(&thread(frames), None)
    }

    #[test]
    fn builtin_rules_parse() {
        let r = SignatureRules::parse(DEFAULT_RULES).expect("signature.txt parses");
        assert_eq!(r.frames, 3);
        assert!(r.skip.iter().any(|g| g == "__restore_rt"));
        assert!(r.skip.iter().any(|g| g == "core::panicking::*"));
    }

    #[test]
    fn glibc_abort_is_skipped() {
        let s = sig(vec![
            frame(
                Some("__pthread_kill_implementation"),
                Some("libc.so.6"),
                "0x8aebc",
            ),
            frame(Some("raise"), Some("libc.so.6"), "0x3c042"),
            frame(Some("abort"), Some("libc.so.6"), "0x2659f"),
            frame(
                Some("__assert_fail_base.cold"),
                Some("libc.so.6"),
                "0x264c7",
            ),
            frame(Some("__assert_fail"), Some("libc.so.6"), "0x35592"),
            frame(Some("check_input(int)"), Some("prog"), "0x1149"),
            frame(Some("main"), Some("prog"), "0x1180"),
            frame(Some("__libc_start_call_main"), Some("libc.so.6"), "0x27249"),
        ])
        .expect("a signature");
        assert_eq!(s.text, "check_input | main | __libc_start_call_main");
        assert_eq!(s.frames, vec![5, 6, 7]);
    }

    #[test]
    fn signal_trampoline_and_rust_panic_are_skipped() {
        let s = sig(vec![
            frame(
                Some("std::sys::pal::unix::abort_internal"),
                Some("app"),
                "0x10",
            ),
            frame(Some("std::process::abort"), Some("app"), "0x20"),
            frame(Some("__rust_start_panic"), Some("app"), "0x28"),
            frame(Some("rust_panic"), Some("app"), "0x30"),
            frame(
                Some("std::panicking::rust_panic_with_hook::h0123456789abcdef"),
                Some("app"),
                "0x40",
            ),
            frame(Some("core::panicking::panic_fmt"), Some("app"), "0x50"),
            frame(Some("__restore_rt"), Some("libc.so.6"), "0x3c050"),
            frame(
                Some("app::parser::Parser<T>::parse::h00112233445566ff"),
                Some("app"),
                "0x60",
            ),
            frame(Some("app::main"), Some("app"), "0x70"),
        ])
        .expect("a signature");
        assert_eq!(s.text, "app::parser::Parser<T>::parse | app::main");
        assert_eq!(s.frames, vec![7, 8]);
    }

    #[test]
    fn frames_without_function_are_module_plus_offset() {
        let s = sig(vec![
            frame(None, Some("libfoo.so"), "0x1234"),
            frame(Some("caller(char const*)"), Some("prog"), "0x99"),
            frame(None, None, "0x0"),
        ])
        .expect("a signature");
        assert_eq!(s.text, "libfoo.so+0x1234 | caller | 0x1000");
        assert_eq!(s.frames, vec![0, 1, 2]);
    }

    #[test]
    fn cxx_throw_and_terminate_are_skipped_and_names_normalized() {
        let s = sig(vec![
            frame(Some("__cxa_throw"), Some("libstdc++.so.6"), "0x1"),
            frame(Some("std::terminate()"), Some("libstdc++.so.6"), "0x2"),
            frame(
                Some("(anonymous namespace)::Widget::draw(int) const"),
                Some("prog"),
                "0x3",
            ),
            frame(
                Some("std::vector<int, std::allocator<int> >::at(unsigned long) + 0x1f"),
                Some("prog"),
                "0x4",
            ),
            frame(Some("main"), Some("prog"), "0x5"),
            frame(Some("__libc_start_main"), Some("libc.so.6"), "0x6"),
        ])
        .expect("a signature");
        assert_eq!(
            s.text,
            "(anonymous namespace)::Widget::draw | std::vector<int, std::allocator<int> >::at | main"
        );
        assert_eq!(s.frames, vec![2, 3, 4]);
    }

    #[test]
    fn all_skipped_falls_back_to_innermost_and_empty_is_none() {
        let s = sig(vec![
            frame(Some("raise"), Some("libc.so.6"), "0x1"),
            frame(Some("abort"), Some("libc.so.6"), "0x2"),
        ])
        .expect("a signature");
        assert_eq!(s.text, "raise | abort");
        assert_eq!(sig(vec![]), None);
    }

    #[test]
    fn custom_rules_override() {
        let rules =
            SignatureRules::parse("frames 1\nskip main\nskip-module libfoo*\n").expect("parses");
        let t = thread(vec![
            frame(None, Some("libfoo.so.1"), "0x10"),
            frame(Some("main"), Some("prog"), "0x20"),
            frame(Some("raise"), Some("libc.so.6"), "0x30"),
            frame(Some("start"), Some("prog"), "0x40"),
        ]);
        let s = rules.signature_of(&t, None).expect("a signature");
        // `raise` is not skipped: these rules replace the built-in ones.
        assert_eq!(s.text, "raise");
        assert_eq!(s.frames, vec![2]);
    }

    #[test]
    fn prefix_kind_puts_the_analysis_kind_first() {
        let rules =
            SignatureRules::parse("frames 2\nprefix-kind stack-overflow\nprefix-kind null-*\n")
                .expect("parses");
        let t = thread(vec![
            frame(Some("descend"), Some("prog"), "0x10"),
            frame(Some("descend"), Some("prog"), "0x10"),
            frame(Some("main"), Some("prog"), "0x20"),
        ]);
        let over = rules
            .signature_of(&t, Some(AnalysisKind::StackOverflow))
            .expect("a signature");
        assert_eq!(over.text, "stack-overflow | descend | descend");
        assert_eq!(over.frames, vec![0, 1], "the indices are still the frames'");
        let null = rules.signature_of(&t, Some(AnalysisKind::NullPointer));
        assert_eq!(
            null.expect("a signature").text,
            "null-pointer | descend | descend"
        );
        // other kinds, and crashes without an analysis, are as before
        let abort = rules.signature_of(&t, Some(AnalysisKind::Abort));
        assert_eq!(abort.expect("a signature").text, "descend | descend");
        assert_eq!(
            rules.signature_of(&t, None).expect("a signature").text,
            "descend | descend"
        );
        // a glob that names no kind is a mistake said at once
        let e = SignatureRules::parse("prefix-kind stackoverflow").expect_err("no such kind");
        assert!(e.message.contains("stack-overflow"), "{e}");
    }

    #[test]
    fn bad_rules_are_errors_with_line_numbers() {
        let e = SignatureRules::parse("# ok\nskip a\nfrobnicate b\n").expect_err("bad rule");
        assert_eq!(e.line, 3);
        assert!(SignatureRules::parse("frames 0").is_err());
        assert!(SignatureRules::parse("skip").is_err());
    }

    #[test]
    fn glob() {
        assert!(glob_match(
            "__pthread_kill*",
            "__pthread_kill_implementation"
        ));
        assert!(glob_match(
            "std::sys::*abort*",
            "std::sys::pal::unix::abort_internal"
        ));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(!glob_match("raise", "raised"));
        assert!(glob_match("*", ""));
        // Hostile names stay linear-ish: many stars against a long non-matching name.
        let long = "a".repeat(5000);
        assert!(!glob_match("*a*a*a*a*a*b", &long));
    }
}
