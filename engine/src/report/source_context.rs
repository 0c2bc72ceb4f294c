//! Source context: the lines of source around each frame's `file:line`, as Sentry's
//! users know them (`pre_context`, `context_line`, `post_context`).
//!
//! The engine opens no files: the caller supplies a [`SourceProvider`] (the file at its
//! recorded path for `postmortem walk`; an uploaded source bundle for the service) and
//! [`attach`] asks it for each source file a frame names — once per file and report,
//! one file in memory at a time. What comes back is untrusted: a file over
//! [`SourceLimits::max_file_bytes`], with a NUL byte (binary) or not UTF-8 gives no
//! context, nor does a line number past its end; long lines are cut. The whole report's
//! context is bounded too (files asked, bytes added), and a cut is said in a
//! `source-context-cut` warning.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Report, Warning};

/// Lines shown before and after a frame's line (Sentry's default).
pub const CONTEXT_LINES: usize = 5;

/// What a [`SourceProvider`] is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRequest<'a> {
    /// The source file as the frame names it (the debug info's path, joined to its
    /// compilation directory where the debug info gives one).
    pub path: &'a str,
    /// The build-id of the frame's module (lower-case hex), where the dump records one:
    /// a bundle of sources is filed under it.
    pub build_id: Option<&'a str>,
    /// The most bytes wanted: a larger file gives no context, so a provider should
    /// refuse it without reading it whole.
    pub max_bytes: u64,
}

/// Where source files come from. Answers `None` for a file it does not have (or will
/// not read); the bytes it gives are checked by [`attach`], never trusted.
pub trait SourceProvider: Send + Sync {
    fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>>;

    /// The URL a person follows to read the file at its build's revision (a
    /// repository's web view: a source-link mapping's), where the provider knows one;
    /// [`attach`] adds `#L` and each frame's line. Asked once per file and report, it
    /// must not fetch anything. None by default.
    fn web_url(&self, _request: &SourceRequest<'_>) -> Option<String> {
        None
    }
}

/// A longer URL from [`SourceProvider::web_url`] is not put in the report.
pub const MAX_URL_BYTES: usize = 2048;

/// Bounds on the source context of one report.
/// `SourceLimits::default()`, then set what differs (`#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceLimits {
    /// A source file larger than this gives no context.
    pub max_file_bytes: u64,
    /// Most distinct source files asked for in one report.
    pub max_files: usize,
    /// Most bytes of context lines in one report; frames after it get none.
    pub max_context_bytes: usize,
    /// A longer line is cut at this many bytes (at a character boundary) and ends in `…`.
    pub max_line_bytes: usize,
    /// Only the crashed thread's first frame gets context: the one line the text report
    /// shows. A caller whose output shows no more reads no more (a deep thread's frames
    /// would each be given eleven lines nothing prints).
    pub crashing_frame_only: bool,
}

impl Default for SourceLimits {
    fn default() -> Self {
        SourceLimits {
            max_file_bytes: 16 << 20,
            max_files: 1000,
            max_context_bytes: 8 << 20,
            max_line_bytes: 1024,
            crashing_frame_only: false,
        }
    }
}

/// The provider and limits a report's source context comes from; no provider, no context.
/// `SourceContextOptions::default()`, then set what differs (`#[non_exhaustive]`).
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SourceContextOptions {
    /// Where source files come from; `None`: no source context.
    pub provider: Option<Arc<dyn SourceProvider>>,
    /// Bounds on the context of one report.
    pub limits: SourceLimits,
}

impl std::fmt::Debug for SourceContextOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceContextOptions")
            .field("provider", &self.provider.as_ref().map(|_| "…"))
            .field("limits", &self.limits)
            .finish()
    }
}

/// One source file's frames: (thread, frame, line) in report order.
type Wanted = Vec<(usize, usize, u32)>;

/// Fills `pre_context`, `context_line` and `post_context` of every frame with a file and
/// line (inlined frames too) from `provider`, within `limits`. Files are asked for in the
/// order their first frame appears (the crashed thread comes first), so a cut leaves the
/// crashed thread's context in.
pub fn attach(report: &mut Report, provider: &dyn SourceProvider, limits: &SourceLimits) {
    let groups = wanted(report, limits);
    let mut budget = limits.max_context_bytes;
    let mut cut = 0usize;
    for (n, (key, frames)) in groups.iter().enumerate() {
        if n >= limits.max_files || budget == 0 {
            cut += frames.len();
            continue;
        }
        let request = SourceRequest {
            path: &key.1,
            build_id: key.0.as_deref(),
            max_bytes: limits.max_file_bytes,
        };
        if let Some(url) = provider.web_url(&request) {
            link(report, frames, &url, &mut budget);
        }
        let Some(bytes) = provider.source(&request) else {
            continue;
        };
        let Some(text) = source_text(&bytes, limits.max_file_bytes) else {
            continue;
        };
        let lines: Vec<&str> = text.split('\n').map(without_cr).collect();
        // one copy of each line's context, shared by its frames (a recursion's are many)
        let mut shared: HashMap<u32, Option<Shared>> = HashMap::new();
        for &(ti, fi, line) in frames {
            let Some(context) = shared.entry(line).or_insert_with(|| {
                context_of(&lines, line, limits.max_line_bytes).map(Shared::from)
            }) else {
                continue;
            };
            let size = context.bytes;
            if size > budget {
                budget = 0;
                cut += 1;
                continue;
            }
            budget -= size;
            if let Some(f) = report
                .threads
                .get_mut(ti)
                .and_then(|t| t.frames.get_mut(fi))
            {
                f.pre_context = Arc::clone(&context.pre);
                f.context_line = Some(Arc::clone(&context.line));
                f.post_context = Arc::clone(&context.post);
            }
        }
    }
    if cut > 0 {
        report.warnings.push(Warning::new(
            "source-context-cut",
            format!(
                "{cut} frames have no source context: a report takes the lines of at most \
                 {} source files and {} bytes of them (source context budget)",
                limits.max_files, limits.max_context_bytes
            ),
        ));
    }
}

/// The frames that want context, grouped by source file (its module's build-id and its
/// path), the files in the order their first frame appears.
fn wanted(report: &Report, limits: &SourceLimits) -> Vec<((Option<String>, String), Wanted)> {
    type Key<'r> = (Option<&'r str>, &'r str);
    let mut index: HashMap<Key<'_>, usize> = HashMap::new();
    let mut groups: Vec<(Key<'_>, Wanted)> = Vec::new();
    // the previous frame's file: a deep thread names one file thousands of times over
    let mut last: Option<(Key<'_>, usize)> = None;
    for (ti, t) in report.threads.iter().enumerate() {
        if limits.crashing_frame_only && !t.crashed {
            continue;
        }
        for (fi, f) in t.frames.iter().enumerate() {
            let (Some(file), Some(line)) = (&f.file, f.line) else {
                continue;
            };
            if limits.crashing_frame_only && f.index != 0 {
                continue;
            }
            let build_id = f
                .module_index
                .and_then(|m| report.modules.get(m))
                .and_then(|m| m.build_id.as_deref());
            let key = (build_id, file.as_str());
            let g = match last {
                Some((k, g)) if k == key => g,
                _ => *index.entry(key).or_insert_with(|| {
                    groups.push((key, Vec::new()));
                    groups.len() - 1
                }),
            };
            last = Some((key, g));
            if let Some((_, frames)) = groups.get_mut(g) {
                frames.push((ti, fi, line));
            }
        }
    }
    groups
        .into_iter()
        .map(|((build_id, path), frames)| ((build_id.map(str::to_owned), path.to_owned()), frames))
        .collect()
}

/// Sets each of `frames`' `source_url` to `url` at its line, each link's bytes taken
/// from `budget` (the report's context budget); none for a URL over [`MAX_URL_BYTES`].
fn link(report: &mut Report, frames: &[(usize, usize, u32)], url: &str, budget: &mut usize) {
    if url.len() > MAX_URL_BYTES {
        return;
    }
    for &(ti, fi, line) in frames {
        let at = format!("{url}#L{line}");
        let Some(left) = budget.checked_sub(at.len()) else {
            return;
        };
        if let Some(f) = report
            .threads
            .get_mut(ti)
            .and_then(|t| t.frames.get_mut(fi))
        {
            *budget = left;
            f.source_url = Some(at);
        }
    }
}

/// The file's text, if it may give context: at most `max_bytes`, no NUL byte, UTF-8.
fn source_text(bytes: &[u8], max_bytes: u64) -> Option<&str> {
    if u64::try_from(bytes.len()).map_or(true, |n| n > max_bytes) || bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn without_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// One frame's lines.
#[derive(Debug, PartialEq, Eq)]
pub struct Context {
    pub pre: Vec<String>,
    pub line: String,
    pub post: Vec<String>,
}

/// The lines around 1-based `line` of one source file's bytes, as [`attach`] gives a
/// frame: None for a file it refuses or a line not in it.
pub fn lines_around(bytes: &[u8], line: u32, limits: &SourceLimits) -> Option<Context> {
    let text = source_text(bytes, limits.max_file_bytes)?;
    let lines: Vec<&str> = text.split('\n').map(without_cr).collect();
    context_of(&lines, line, limits.max_line_bytes)
}

/// One line's context as frames hold it, and its size against the report's budget (each
/// frame that holds it counts it: the output carries it once per frame).
struct Shared {
    pre: Arc<[String]>,
    line: Arc<str>,
    post: Arc<[String]>,
    bytes: usize,
}

impl From<Context> for Shared {
    fn from(c: Context) -> Shared {
        Shared {
            bytes: c.bytes(),
            pre: c.pre.into(),
            line: c.line.into(),
            post: c.post.into(),
        }
    }
}

impl Context {
    fn bytes(&self) -> usize {
        self.pre
            .iter()
            .chain(&self.post)
            .map(String::len)
            .sum::<usize>()
            + self.line.len()
    }
}

/// The lines around 1-based `line` of `lines`, or None when it is not in the file. A
/// file ending in a newline has an empty last piece, which is not a line.
fn context_of(lines: &[&str], line: u32, max_line_bytes: usize) -> Option<Context> {
    let count = match lines.last() {
        Some(&"") => lines.len() - 1,
        _ => lines.len(),
    };
    let at = usize::try_from(line).ok()?.checked_sub(1)?;
    if at >= count {
        return None;
    }
    let cut = |l: &&str| cut_line(l, max_line_bytes);
    Some(Context {
        pre: lines[at.saturating_sub(CONTEXT_LINES)..at]
            .iter()
            .map(cut)
            .collect(),
        line: cut(&lines[at]),
        post: lines[at + 1..count.min(at + 1 + CONTEXT_LINES)]
            .iter()
            .map(cut)
            .collect(),
    })
}

/// `line`, or its first `max` bytes (at a character boundary) and `…`.
fn cut_line(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

    fn lines(text: &str) -> Vec<&str> {
        text.split('\n').map(without_cr).collect()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn five_lines_either_side_clipped_at_the_file_ends() {
        let l = lines(TEN);
        let c = context_of(&l, 7, 100).unwrap();
        assert_eq!(c.pre, strings(&["l2", "l3", "l4", "l5", "l6"]));
        assert_eq!(c.line, "l7");
        assert_eq!(c.post, strings(&["l8", "l9", "l10"]));
        let first = context_of(&l, 1, 100).unwrap();
        assert!(first.pre.is_empty());
        assert_eq!(first.post.len(), 5);
        assert_eq!(context_of(&l, 10, 100).unwrap().post, Vec::<String>::new());
    }

    #[test]
    fn a_line_past_the_end_or_zero_gives_none() {
        let l = lines(TEN);
        assert_eq!(context_of(&l, 11, 100), None);
        assert_eq!(context_of(&l, 0, 100), None);
        assert_eq!(context_of(&l, u32::MAX, 100), None);
        assert_eq!(context_of(&lines(""), 1, 100), None);
        // no final newline: the last line still counts
        assert_eq!(context_of(&lines("a\nb"), 2, 100).unwrap().line, "b");
    }

    #[test]
    fn crlf_is_dropped_and_long_lines_cut_at_a_character() {
        let l = lines("x\r\néééé\r\n");
        assert_eq!(context_of(&l, 1, 100).unwrap().line, "x");
        assert_eq!(context_of(&l, 2, 3).unwrap().line, "é…");
    }

    /// A provider that answers every file with 40 lines `line N` and counts the asks.
    struct Counting(std::sync::Mutex<Vec<String>>);

    impl SourceProvider for Counting {
        fn source(&self, request: &SourceRequest<'_>) -> Option<Vec<u8>> {
            self.0.lock().unwrap().push(request.path.to_owned());
            Some(
                (1..=40)
                    .map(|n| format!("line {n}\n"))
                    .collect::<String>()
                    .into_bytes(),
            )
        }
    }

    /// A committed report whose frames name one file (`fixtures/reports/`).
    fn report() -> Report {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/reports/expected/x86_64-core.json");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    fn with_lines(r: &Report) -> Vec<(u32, Option<String>)> {
        r.threads
            .iter()
            .flat_map(|t| &t.frames)
            .filter_map(|f| {
                f.line
                    .map(|l| (l, f.context_line.as_deref().map(str::to_owned)))
            })
            .collect()
    }

    #[test]
    fn each_file_is_asked_once_and_every_frame_with_a_line_gets_it() {
        let mut r = report();
        let provider = Counting(Default::default());
        attach(&mut r, &provider, &SourceLimits::default());
        assert_eq!(provider.0.lock().unwrap().len(), 1, "one file, asked once");
        let lines = with_lines(&r);
        assert!(lines.len() >= 4, "{lines:?}");
        for (line, text) in lines {
            assert_eq!(text, Some(format!("line {line}")));
        }
        assert!(r.warnings.iter().all(|w| w.code != "source-context-cut"));
    }

    /// Frames at one line of one file (a recursion's) hold one copy of its lines, and
    /// the budget counts it for each of them, as the output carries it for each.
    #[test]
    fn frames_at_one_line_share_one_copy_and_each_counts_against_the_budget() {
        // the report with its first frame that has a line repeated right after it
        let repeated = || {
            let mut r = report();
            let first = r.threads[0]
                .frames
                .iter()
                .position(|f| f.line.is_some())
                .unwrap();
            let copy = r.threads[0].frames[first].clone();
            r.threads[0].frames.insert(first + 1, copy);
            (r, first)
        };
        let (mut r, first) = repeated();
        attach(
            &mut r,
            &Counting(Default::default()),
            &SourceLimits::default(),
        );
        let (a, b) = (&r.threads[0].frames[first], &r.threads[0].frames[first + 1]);
        assert!(a.context_line.is_some());
        assert!(Arc::ptr_eq(&a.pre_context, &b.pre_context));
        assert!(Arc::ptr_eq(&a.post_context, &b.post_context));
        let (Some(x), Some(y)) = (&a.context_line, &b.context_line) else {
            unreachable!()
        };
        assert!(Arc::ptr_eq(x, y));
        // a budget of exactly one copy: the second frame is cut, not given it free
        let one = a
            .pre_context
            .iter()
            .chain(a.post_context.iter())
            .map(String::len)
            .sum::<usize>()
            + x.len();
        let (mut r2, _) = repeated();
        let limits = SourceLimits {
            max_context_bytes: one,
            ..SourceLimits::default()
        };
        attach(&mut r2, &Counting(Default::default()), &limits);
        assert!(r2.threads[0].frames[first].context_line.is_some());
        assert!(r2.threads[0].frames[first + 1].context_line.is_none());
        assert!(r2.warnings.iter().any(|w| w.code == "source-context-cut"));
    }

    #[test]
    fn past_the_budget_frames_get_none_and_a_warning_says_so() {
        for limits in [
            SourceLimits {
                max_files: 0,
                ..SourceLimits::default()
            },
            SourceLimits {
                max_context_bytes: 10,
                ..SourceLimits::default()
            },
        ] {
            let mut r = report();
            attach(&mut r, &Counting(Default::default()), &limits);
            assert!(
                with_lines(&r).iter().all(|(_, t)| t.is_none()),
                "{limits:?}"
            );
            let cut = r.warnings.iter().find(|w| w.code == "source-context-cut");
            assert!(cut.is_some(), "{limits:?}: {:?}", r.warnings);
        }
    }

    /// A provider that knows no file's bytes, only where a person reads it.
    struct Linked(String);

    impl SourceProvider for Linked {
        fn source(&self, _: &SourceRequest<'_>) -> Option<Vec<u8>> {
            None
        }

        fn web_url(&self, request: &SourceRequest<'_>) -> Option<String> {
            Some(format!("{}{}", self.0, request.path))
        }
    }

    #[test]
    fn every_frame_with_a_line_links_to_it_where_the_provider_maps_its_file() {
        let mut r = report();
        attach(
            &mut r,
            &Linked("https://git.example/blob/c1".into()),
            &SourceLimits::default(),
        );
        let frames: Vec<_> = r.threads.iter().flat_map(|t| &t.frames).collect();
        let mut linked = 0;
        for f in &frames {
            match (&f.file, f.line) {
                (Some(file), Some(line)) => {
                    let want = format!("https://git.example/blob/c1{file}#L{line}");
                    assert_eq!(f.source_url.as_deref(), Some(want.as_str()));
                    linked += 1;
                }
                _ => assert_eq!(f.source_url, None, "{f:?}"),
            }
        }
        assert!(linked >= 4, "{linked}");
        // a URL too long for a report, or past the context budget: none
        let mut r = report();
        attach(
            &mut r,
            &Linked("x".repeat(MAX_URL_BYTES)),
            &SourceLimits::default(),
        );
        assert!(frames_linked(&r) == 0);
        let mut r = report();
        let tight = SourceLimits {
            max_context_bytes: 10,
            ..SourceLimits::default()
        };
        attach(&mut r, &Linked("https://git.example/".into()), &tight);
        assert!(frames_linked(&r) == 0);
    }

    fn frames_linked(r: &Report) -> usize {
        r.threads
            .iter()
            .flat_map(|t| &t.frames)
            .filter(|f| f.source_url.is_some())
            .count()
    }

    #[test]
    fn binary_non_utf8_and_oversize_files_are_refused() {
        assert_eq!(source_text(b"int x;\n", 100), Some("int x;\n"));
        assert_eq!(source_text(b"int\0x;\n", 100), None);
        assert_eq!(source_text(b"\xff\xfe\n", 100), None);
        assert_eq!(source_text(b"int x;\n", 3), None);
    }
}
