//! Tombstones taken from logcat: the text tombstone as `adb logcat` prints what debuggerd
//! logged, each line behind logcat's prefix and possibly interleaved with other tags'
//! lines, read back into the text tombstone's lines for [`super::text`].
//!
//! What debuggerd logs: libdebuggerd's `_LOG` (`debuggerd/libdebuggerd/utility.cpp` in
//! AOSP's `system/core`) writes the lines it lets into logcat with
//! `__android_log_buf_write(LOG_ID_CRASH, ANDROID_LOG_FATAL, LOG_TAG, msg)`, `LOG_TAG`
//! being `"DEBUG"`, one entry per line of the tombstone; since Android 12
//! `tombstone_proto_to_text.cpp` marks which lines are logged (`CBL`): the header, build
//! fingerprint, ABI, the crashed thread's `pid:` line, signal, causes, abort message,
//! registers and backtrace, and the GWP-ASan/MTE `deallocated by`/`allocated by`
//! backtraces; the memory map, memory dumps and other threads stay in the file only.
//! (Android 2–4's debuggerd logged at `ANDROID_LOG_INFO`: `I/DEBUG`; any priority is
//! taken.)
//!
//! How logcat prints an entry: liblog's `android_log_formatLogLine`
//! (`liblog/logprint.cpp`) writes one prefix per line of the message:
//!
//! | `-v` | prefix (its `snprintf` format) | e.g. |
//! |---|---|---|
//! | `threadtime` (adb's default) | `"%s %s%5d %5d %c %-8.*s: "` (time, uid, pid, tid, priority, tag) | `11-29 14:35:46.123  4321  4321 F DEBUG   : ` |
//! | `brief` | `"%c/%-8.*s(%s%5d): "` | `F/DEBUG   ( 4321): ` |
//! | `time` | `"%s %c/%-8.*s(%s%5d): "` | `11-29 14:35:46.123 F/DEBUG   ( 4321): ` |
//! | `tag` | `"%c/%-8.*s: "` | `F/DEBUG   : ` |
//! | `process` | `"%c(%s%5d) "`, the suffix `"  (%s)"` (the tag) | `F( 4321) ` … `  (DEBUG)` |
//! | `thread` | `"%c(%s%5d:%5d) "` (pid, tid: no tag) | `F( 4321: 4321) ` |
//! | `long` | a header line `"[ %s %s%5d:%5d %c/%-8.*s ]"`, the message on its own lines, a blank line | `[ 11-29 14:35:46.123  4321: 4321 F/DEBUG    ]` |
//!
//! (`-v color` wraps each entry in `ESC[38;5;Nm` … `ESC[0m`: the escapes are dropped before
//! reading, [`without_colors`].) `thread` prints no tag: there the lines of crash_dump's
//! pid after the header are all taken, whatever their tag.
//!
//! the time being `MM-DD HH:MM:SS.mmm`, or with `-v year` `YYYY-MM-DD …`, `-v usec`/`nsec`
//! more digits, `-v zone` a ` +0000` after it, `-v epoch`/`monotonic` seconds; `-v uid`
//! puts the uid before the pid. The message follows the prefix as logged, leading spaces
//! kept (the register and frame lines' indentation).
//!
//! Which lines: the first `DEBUG` line whose message is the `*** *** ***` header starts the
//! tombstone; it goes on with the `DEBUG` lines of the same process (the pid logcat
//! prints is crash_dump's, one per crash) up to the next header of that process. A log
//! holding several crashes gives its first. Line numbers in errors are the log's.

use super::{TombstoneError, MAX_LINES};

/// The tag debuggerd logs under (`LOG_TAG` of libdebuggerd).
const TAG: &str = "DEBUG";
/// The line `adb logcat` prints before each log buffer's first entry.
const BUFFER_MARK: &str = "--------- beginning of ";
/// The tombstone's header line's start.
const HEADER: &str = "*** *** ***";

/// One logcat line taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine<'a> {
    /// `V`, `D`, `I`, `W`, `E`, `F`, `S`.
    pub priority: char,
    /// The tag, where the format prints it (all but `thread`).
    pub tag: Option<&'a str>,
    /// The logging process, where the format prints it (all but `tag`).
    pub pid: Option<u32>,
    /// The message line, as logged.
    pub message: &'a str,
}

/// Whether `bytes` (the start of a file is enough) are a logcat: the first non-blank line
/// is `adb logcat`'s buffer mark or a line with logcat's prefix. A line cut by the end of
/// `bytes` is not judged: only whole lines count.
pub fn sniff(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let text = without_colors(&text);
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() && !bytes.ends_with(b"\n") {
            return false; // cut short
        }
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        return line.starts_with(BUFFER_MARK)
            || split(line).is_some()
            || long_header(line).is_some();
    }
    false
}

/// Takes a logcat line apart; `None` for a line not in one of the formats above.
pub fn split(line: &str) -> Option<LogLine<'_>> {
    let rest = skip_time(line);
    let rest = rest.trim_start();
    let mut chars = rest.chars();
    let first = chars.next()?;
    match chars.next() {
        Some('/') => slash_form(first, rest.get(2..)?),
        Some('(') => paren_form(first, rest.get(2..)?),
        _ => threadtime(rest),
    }
}

/// `text` without `-v color`'s escapes (`ESC[` … `m`); borrowed when it has none.
pub fn without_colors(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\x1b') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(rest.get(..at).unwrap_or_default());
        let after = rest.get(at + 2..).unwrap_or_default();
        let end = after.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        match end {
            Some(e) if after.get(e..e + 1) == Some("m") => {
                rest = after.get(e + 1..).unwrap_or_default()
            }
            // not a colour: kept as it is
            _ => {
                out.push_str(rest.get(at..at + 2).unwrap_or_default());
                rest = after;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `process` and `thread`, after `P(`: `[uid:] pid) msg  (TAG)` or `[uid:] pid: tid) msg`.
/// Told apart by `process`'s suffix: a message ending in `  (TAG)`.
fn paren_form(priority: char, rest: &str) -> Option<LogLine<'_>> {
    if !is_priority(priority) {
        return None;
    }
    let (inside, message) = rest.split_once(')')?;
    // the prefix ends in exactly one space, after which the message keeps its own
    let message = message
        .strip_prefix(' ')
        .or_else(|| message.is_empty().then_some(""))?;
    let numbers: Vec<&str> = inside.split(':').map(str::trim).collect();
    let number = |k: usize| -> Option<u32> { numbers.get(k)?.parse().ok() };
    let last = numbers.len().checked_sub(1)?;
    let process = message
        .strip_suffix(')')
        .and_then(|m| m.rsplit_once("  ("))
        .filter(|(_, tag)| !tag.is_empty() && !tag.contains(['(', ')']));
    if let Some((message, tag)) = process {
        return Some(LogLine {
            priority,
            tag: Some(tag.trim_end()),
            pid: Some(number(last)?),
            message,
        });
    }
    number(last)?; // the tid
    Some(LogLine {
        priority,
        tag: None,
        pid: Some(number(last.checked_sub(1)?)?),
        message,
    })
}

/// `long`'s header line: `[ TIME [uid:] pid: tid P/TAG     ]`, as (priority, tag, pid).
fn long_header(line: &str) -> Option<(char, &str, Option<u32>)> {
    let inside = line
        .strip_prefix("[ ")?
        .trim_end()
        .strip_suffix(']')?
        .trim_end();
    // the last ` P/`: the priority and the tag after it
    let slash = inside.rfind('/')?;
    let before = inside.get(..slash)?;
    let (ids, priority) = before.rsplit_once(' ')?;
    let mut p = priority.chars();
    let (Some(priority), None) = (p.next(), p.next()) else {
        return None;
    };
    if !is_priority(priority) {
        return None;
    }
    let tag = inside.get(slash + 1..)?.trim_end();
    let mut parts = ids.rsplit(':');
    parts.next()?.trim().parse::<u32>().ok()?; // the tid
    let pid_word = parts.next()?.trim();
    // the pid is the last word before the tid's colon (the time, a uid, before it)
    let pid = pid_word.rsplit(' ').next()?.parse().ok()?;
    Some((priority, tag, Some(pid)))
}

/// The line after its time stamp (date and time, or seconds, and a zone), or all of it.
fn skip_time(line: &str) -> &str {
    let is_time = |w: &str, extra: &[char]| {
        !w.is_empty()
            && w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars().all(|c| c.is_ascii_digit() || extra.contains(&c))
    };
    let mut rest = line.trim_start();
    let (word, after) = rest.split_once(' ').unwrap_or((rest, ""));
    if is_time(word, &['-']) && word.contains('-') {
        // a date: the time follows
        let after = after.trim_start();
        let (time, after) = after.split_once(' ').unwrap_or((after, ""));
        if !is_time(time, &[':', '.']) || !time.contains(':') {
            return line;
        }
        rest = after;
    } else if is_time(word, &['.']) && word.contains('.') {
        rest = after; // -v epoch / monotonic
    } else {
        return line;
    }
    let trimmed = rest.trim_start();
    let (zone, after) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
    let is_zone = zone.len() == 5
        && zone.starts_with(['+', '-'])
        && zone
            .get(1..)
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()));
    if is_zone {
        after
    } else {
        rest
    }
}

fn is_priority(c: char) -> bool {
    matches!(c, 'V' | 'D' | 'I' | 'W' | 'E' | 'F' | 'S' | 'A')
}

/// `brief`, `time` and `tag`, after `P/`: `TAG     ( 4321): msg` or `TAG     : msg`.
fn slash_form(priority: char, rest: &str) -> Option<LogLine<'_>> {
    if !is_priority(priority) {
        return None;
    }
    let colon = rest.find(": ");
    let paren = rest.find('(').filter(|&p| colon.is_none_or(|c| p < c));
    if let Some(p) = paren {
        let tag = rest.get(..p)?.trim_end();
        let after = rest.get(p + 1..)?;
        let (inside, message) = after.split_once("): ").or_else(|| {
            // an empty message: the line ends after the prefix's `): `, trimmed
            after.strip_suffix("):").map(|i| (i, ""))
        })?;
        // `-v uid`: `uid:  pid`
        let pid = inside.rsplit(':').next()?.trim().parse().ok()?;
        return Some(LogLine {
            priority,
            tag: Some(tag),
            pid: Some(pid),
            message,
        });
    }
    let (tag, message) = rest.split_once(": ")?;
    Some(LogLine {
        priority,
        tag: Some(tag.trim_end()),
        pid: None,
        message,
    })
}

/// `threadtime`, after the time: `[uid] pid tid P TAG     : msg`.
fn threadtime(rest: &str) -> Option<LogLine<'_>> {
    let mut numbers: Vec<u32> = Vec::with_capacity(3);
    let mut cursor = rest;
    for _ in 0..4 {
        let trimmed = cursor.trim_start();
        let (word, after) = trimmed.split_once(' ')?;
        let mut chars = word.chars();
        if let (Some(p), None) = (chars.next(), chars.next()) {
            if is_priority(p) && numbers.len() >= 2 {
                let (tag, message) = after.split_once(": ").or_else(|| {
                    let t = after.trim_end();
                    t.strip_suffix(':').map(|tag| (tag, ""))
                })?;
                return Some(LogLine {
                    priority: p,
                    tag: Some(tag.trim()),
                    pid: numbers.get(numbers.len() - 2).copied(),
                    message,
                });
            }
        }
        match word.parse() {
            Ok(n) => numbers.push(n),
            // `-v uid` may print the user's name
            Err(_) if numbers.is_empty() => {}
            Err(_) => return None,
        }
        cursor = after;
    }
    None
}

/// The lines of the first tombstone debuggerd logged in `text`, each with its line number
/// in the log (from 1).
/// `text` must be [`without_colors`].
pub fn tombstone_lines(text: &str) -> Result<Vec<(usize, &str)>, TombstoneError> {
    let mut out = Vec::new();
    // the pid the tombstone's lines are logged by, once its header is seen
    let mut writer: Option<Option<u32>> = None;
    for (n, l) in entries(text)? {
        if l.tag.is_some_and(|t| t != TAG) {
            continue;
        }
        let header = l.message.trim_start().starts_with(HEADER);
        match writer {
            // `thread` prints no tag: only a header starts a tombstone there
            None if header => writer = Some(l.pid),
            None => continue,
            Some(pid) if pid != l.pid => continue,
            Some(_) if header => break, // the same process's next crash
            Some(_) => {}
        }
        out.push((n, l.message));
    }
    if writer.is_none() {
        return Err(TombstoneError::NotInLog);
    }
    Ok(out)
}

/// Every log entry's lines in `text`, each with its line number (from 1): one a line in
/// the one-line formats; in `long`'s, each line between a header and the blank line
/// before the next header (or the end).
fn entries(text: &str) -> Result<Vec<(usize, LogLine<'_>)>, TombstoneError> {
    let mut out = Vec::new();
    // the last `long` header, and a blank line after it not yet known to be a message
    let mut long: Option<(char, &str, Option<u32>)> = None;
    let mut blank: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        if n >= MAX_LINES {
            return Err(TombstoneError::TooMany {
                what: "lines",
                count: text.lines().count(),
                max: MAX_LINES,
            });
        }
        let line = line.trim_end_matches('\r');
        if line.starts_with(BUFFER_MARK) {
            continue;
        }
        if let Some(header) = long_header(line) {
            (long, blank) = (Some(header), None);
            continue;
        }
        let Some((priority, tag, pid)) = long else {
            out.extend(split(line).map(|l| (n + 1, l)));
            continue;
        };
        let entry = |message| LogLine {
            priority,
            tag: Some(tag),
            pid,
            message,
        };
        // a blank line ends each entry; one before it is the message's
        if let Some(b) = blank.take() {
            out.push((b + 1, entry("")));
        }
        if line.is_empty() {
            blank = Some(n);
        } else {
            out.push((n + 1, entry(line)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_prefix_form_is_taken_apart() {
        let cases = [
            (
                "11-29 14:35:46.123  4321  4322 F DEBUG   :     x0  0000000000000000",
                ('F', "DEBUG", Some(4321), "    x0  0000000000000000"),
            ),
            (
                "2026-11-29 14:35:46.123456 +0000  root  4321  4321 F DEBUG   : backtrace:",
                ('F', "DEBUG", Some(4321), "backtrace:"),
            ),
            (
                "1764426946.123  4321  4321 F DEBUG   : *** ***",
                ('F', "DEBUG", Some(4321), "*** ***"),
            ),
            (
                "F/DEBUG   ( 4321): pid: 1, tid: 1",
                ('F', "DEBUG", Some(4321), "pid: 1, tid: 1"),
            ),
            (
                "11-29 14:35:46.123 I/DEBUG   (  123):       #00 pc 00001234  /x",
                ('I', "DEBUG", Some(123), "      #00 pc 00001234  /x"),
            ),
            (
                "F/DEBUG   (10123:  4321): Cause: x",
                ('F', "DEBUG", Some(4321), "Cause: x"),
            ),
            ("F/DEBUG   : ABI: 'arm'", ('F', "DEBUG", None, "ABI: 'arm'")),
            (
                "F( 4321)     x0  0000000000000000  (DEBUG)",
                ('F', "DEBUG", Some(4321), "    x0  0000000000000000"),
            ),
            (
                "F( root: 4321) Cause: null pointer (x)  (DEBUG)",
                ('F', "DEBUG", Some(4321), "Cause: null pointer (x)"),
            ),
            ("F( 4321)   (DEBUG)", ('F', "DEBUG", Some(4321), "")),
            (
                "F( 4321: 4322)       #00 pc 00001234  /x (f+4)",
                ('F', "", Some(4321), "      #00 pc 00001234  /x (f+4)"),
            ),
            (
                "F(10123: 4321: 4322) backtrace:",
                ('F', "", Some(4321), "backtrace:"),
            ),
            (
                "11-29 14:35:46.123  1000  1000 I ActivityManager: Start proc 4321:com.x/u0a1",
                (
                    'I',
                    "ActivityManager",
                    Some(1000),
                    "Start proc 4321:com.x/u0a1",
                ),
            ),
        ];
        for (line, (p, tag, pid, msg)) in cases {
            let l = split(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(
                (l.priority, l.tag.unwrap_or(""), l.pid, l.message),
                (p, tag, pid, msg),
                "{line}"
            );
        }
        for not in [
            "*** *** *** *** ***",
            "    x0  0000000000000000",
            "pid: 1, tid: 1, name: x",
            "11-29 garbage",
            "",
        ] {
            assert_eq!(split(not), None, "{not}");
        }
    }

    #[test]
    fn long_entries_are_the_lines_under_their_header() {
        // liblog's `-v long`: header, message, blank line; `-v color` around it
        let log = "--------- beginning of crash
[ 11-29 14:35:46.100  4000: 4000 F/libc     ]
Fatal signal 11 (SIGSEGV), code 1

\x1b[38;5;196m[ 11-29 14:35:46.200  4321: 4321 F/DEBUG    ]
*** *** *** *** ***\x1b[0m

[ 2026-11-29 14:35:46.201000 +0000  1000: 1000: 1200 I/ActivityManager ]
Process x

[ 11-29 14:35:46.202  4321: 4321 F/DEBUG    ]


[ 11-29 14:35:46.203  4321: 4321 F/DEBUG    ]
      #00 pc 0000000000001000  /x

";
        assert!(sniff(log.as_bytes()));
        let log = without_colors(log);
        let lines = tombstone_lines(&log).unwrap();
        assert_eq!(
            lines,
            [
                (6, "*** *** *** *** ***"),
                (12, ""),
                (15, "      #00 pc 0000000000001000  /x")
            ]
        );
        assert_eq!(
            long_header("[ 1764426946.123 root: 4321: 4322 W/DEBUG    ]"),
            Some(('W', "DEBUG", Some(4321)))
        );
        assert_eq!(long_header("[ 11-29 garbage ]"), None);
        assert_eq!(without_colors("a\x1b[1;2mb\x1b[0m\x1b[x"), "ab\x1b[x");
    }

    #[test]
    fn thread_lines_of_the_dumper_are_taken_after_its_header() {
        let log = "F( 4000: 4000) Fatal signal 11 (SIGSEGV)
F( 4321: 4321) *** *** *** *** ***
I( 1000: 1200) Process x has died
F( 4321: 4321) ABI: 'arm64'
";
        assert!(sniff(log.as_bytes()));
        let lines = tombstone_lines(log).unwrap();
        assert_eq!(lines, [(2, "*** *** *** *** ***"), (4, "ABI: 'arm64'")]);
    }

    #[test]
    fn the_first_tombstone_of_its_process_is_kept() {
        let log = "--------- beginning of crash
11-29 14:35:46.100  4000  4000 F libc    : Fatal signal 11 (SIGSEGV), code 1
11-29 14:35:46.200  4321  4321 F DEBUG   : *** *** *** *** ***
11-29 14:35:46.201  1000  1200 I ActivityManager: something else
11-29 14:35:46.202  4321  4321 F DEBUG   : ABI: 'arm64'
11-29 14:35:46.202  5555  5555 F DEBUG   : ABI: 'x86'
11-29 14:35:46.203  4321  4321 F DEBUG   :       #00 pc 0000000000001000  /x
11-29 14:35:47.000  4321  4321 F DEBUG   : *** *** *** *** ***
11-29 14:35:47.001  4321  4321 F DEBUG   : ABI: 'arm'
";
        assert!(sniff(log.as_bytes()));
        let lines = tombstone_lines(log).unwrap();
        let msgs: Vec<&str> = lines.iter().map(|(_, m)| *m).collect();
        assert_eq!(
            msgs,
            [
                "*** *** *** *** ***",
                "ABI: 'arm64'",
                "      #00 pc 0000000000001000  /x"
            ]
        );
        assert_eq!(lines[0].0, 3);
        assert_eq!(lines[2].0, 7);
        assert_eq!(
            tombstone_lines("F/libc    ( 1): x\n"),
            Err(TombstoneError::NotInLog)
        );
        // a cut first line is not judged; a tombstone's own text is no logcat
        assert!(!sniff(b"11-29 14:35:46.200  4321  4321 F DEB"));
        assert!(!sniff(b"*** *** *** *** ***\nABI: 'arm64'\n"));
    }
}
