//! Rust panics: the frame that panicked, and the message, read from the dump's memory
//! the way std's own panic hook reads it.
//!
//! std's `panic_with_hook` (the frame under `rust_panic` and the abort, which never
//! returns) hands the panic hook a `PanicHookInfo` by reference, so the struct lies in
//! that frame's memory. Its `payload` is a `&dyn Any`: the payload's address beside the
//! vtable of its type. The default hook prints the message when the payload downcasts to
//! `&'static str` (a literal message: `panic!("…")`, `unwrap()` on `None`) or to `String`
//! (a formatted one: `panic!("{}", x)`, `expect(msg)`; std formats it on the heap for the
//! hook); a downcast compares the vtable's `type_id` method. So the stack between the
//! abort and the frame that panicked is searched for a pointer pair whose second is a
//! vtable with `<&str as Any>::type_id` or `<String as Any>::type_id` as its method, found
//! by name in the symbol table of the module holding std's panic frames (a core holds
//! the vtable as the loader relocated it; for a minidump, which does not, the file's
//! relocations say which words become that address); the first points to the `&str` or
//! the `String`. Every other payload (`panic_any` of another type) has no message, as
//! for the default hook. The hook info's `location` (a `&Location`: file, line, column)
//! lies beside the payload: where std says the panic was, debug information or not.
//!
//! Nothing is guessed: a vtable is recognised by the address of its `type_id` only, and
//! two different messages found are none. What the dump does not hold (a minidump does
//! not hold the heap, where a formatted message is) is said to be missing.

use crate::dump::Dump;
use crate::report;

use super::in_runtime;
use crate::tables::{read_image, Loaded};

/// Longest message read; a longer one is cut there.
const MAX_MESSAGE: usize = 4096;
/// Longest source file name of a panic's location.
const MAX_FILE: u64 = 1024;
/// Most stack bytes searched for the hook's payload.
const PAYLOAD_SEARCH: u64 = 64 << 10;
/// `type_id` of the payload types the default hook prints, as the symbol tables name
/// them (demangled), and the size of each type (the vtable's second word).
const STR_TYPE_ID: &str = "<&str as core::any::Any>::type_id";
const STRING_TYPE_ID: &str = "<alloc::string::String as core::any::Any>::type_id";
const STR_SIZE: u64 = 16;
const STRING_SIZE: u64 = 24;
/// Offset of the first method in a Rust vtable (after `drop_in_place`, size and
/// alignment): `Any::type_id`.
const TYPE_ID_SLOT: u64 = 24;

/// The frame a Rust panic began in: on a stack through `std::panicking`, the first frame
/// outside Rust's standard library and the C runtime.
pub(super) fn site(thread: &report::Thread) -> Option<&report::Frame> {
    const STD: [&str; 9] = [
        "std::",
        "core::",
        "alloc::",
        "panic_abort::",
        "panic_unwind::",
        "__rust",
        "rust_begin_unwind",
        "<std::",
        "<core::",
    ];
    let in_std = |n: &str| STD.iter().any(|p| n.starts_with(p));
    panicking_frame(thread)?;
    thread
        .frames
        .iter()
        .find(|f| !in_runtime(f) && f.function.as_deref().is_some_and(|n| !in_std(n)))
}

/// A frame of std's or core's panic machinery, if the thread is panicking.
fn panicking_frame(thread: &report::Thread) -> Option<&report::Frame> {
    thread.frames.iter().find(|f| {
        f.function.as_deref().is_some_and(|n| {
            n.starts_with("std::panicking::") || n.starts_with("core::panicking::")
        })
    })
}

/// Why the message is not told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NoMessage {
    /// The module with std's panic frames has no symbols for the payload types'
    /// `type_id` (stripped, or not at hand).
    NoTypeIds,
    /// No stack memory between the abort and the panicking frame.
    NoStack,
    /// No `&dyn Any` of a `&str` or a `String` in it.
    NotFound,
    /// The payload was found, but not the text it points to (a formatted message is on
    /// the heap, which a minidump does not hold).
    TextMissing,
    /// Different messages were found.
    Ambiguous,
}

impl NoMessage {
    pub(super) fn as_str(&self) -> &'static str {
        match self {
            NoMessage::NoTypeIds => {
                "the module with std's panic code has no symbols for the payload's type"
            }
            NoMessage::NoStack => "the dump holds no stack of the panicking frames",
            NoMessage::NotFound => {
                "no string payload in the panicking frames' memory the dump holds"
            }
            NoMessage::TextMissing => {
                "the payload points to text the dump does not hold (a formatted message is \
                 on the heap)"
            }
            NoMessage::Ambiguous => "several different payloads on the stack",
        }
    }
}

/// What the panic hook was given: the message, and where std says the panic was.
pub(super) struct Hooked {
    pub message: Result<String, NoMessage>,
    /// The `Location` beside the payload in the hook's `PanicHookInfo`, as std prints it
    /// (`src/main.rs:12:5`): known without debug information.
    pub location: Option<String>,
}

/// The panic's message: the payload the hook was given, a `&str` or a `String`; an
/// error when std's panic frames cannot be read at all.
pub(super) fn message(
    dump: &Dump<'_>,
    loaded: &[Loaded],
    thread: &report::Thread,
    site: &report::Frame,
) -> Result<Hooked, NoMessage> {
    let std_frame = panicking_frame(thread).ok_or(NoMessage::NoTypeIds)?;
    let module = std_frame.module_index.ok_or(NoMessage::NoTypeIds)?;
    let m = dump.modules.get(module).ok_or(NoMessage::NoTypeIds)?;
    let (base, std_range) = (m.load_base, m.base..m.end);
    let code = loaded
        .get(module)
        .and_then(|l| l.tables.as_ref()?.code.as_ref())
        .ok_or(NoMessage::NoTypeIds)?;
    let ids = code.demangled_symbol_offsets(&[STR_TYPE_ID, STRING_TYPE_ID]);
    if ids.iter().all(Option::is_none) {
        return Err(NoMessage::NoTypeIds);
    }
    // where the dump does not hold them (a minidump), the words the loader relocates
    // (a vtable's methods, a Location's file) are known from the file's relocations
    // (read once, and only then: a core holds the relocated words)
    let relocated = std::cell::OnceCell::new();
    let words = stack_words(dump, thread, site)?;
    let word = |addr: u64| {
        let loaded_word = || {
            let rel = addr
                .checked_sub(base)
                .filter(|_| std_range.contains(&addr))?;
            relocated
                .get_or_init(|| code.relative_relocations())
                .get(&rel)?
                .checked_add(base)
        };
        dump.memory.read_u64(addr).or_else(loaded_word).or_else(|| {
            read_image(dump, loaded, addr, 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
        })
    };
    let type_id = |i: usize| ids.get(i).copied().flatten()?.checked_add(base);
    let (str_id, string_id) = (type_id(0), type_id(1));
    let mut messages: Vec<Option<String>> = Vec::new();
    let mut location = None;
    for (i, pair) in words.windows(2).enumerate() {
        let &[data, vtable] = pair else { continue };
        if dump.module_index_for(vtable).is_none() {
            continue;
        }
        let ids = (str_id, string_id);
        let Some(text) = payload_text(dump, loaded, &word, data, vtable, ids) else {
            continue;
        };
        if location.is_none() {
            // `PanicHookInfo { payload, location, … }`: the `&Location` is next to the
            // payload's fat pointer, after it as rustc lays the struct out now
            location = [i.checked_add(2), i.checked_sub(1)]
                .into_iter()
                .flatten()
                .filter_map(|j| words.get(j))
                .find_map(|&l| location_at(dump, loaded, &word, l));
        }
        if !messages.contains(&text) {
            messages.push(text);
        }
    }
    let texts: Vec<&String> = messages.iter().flatten().collect();
    let message = match (texts.as_slice(), messages.is_empty()) {
        ([one], _) => Ok((*one).clone()),
        ([], true) => Err(NoMessage::NotFound),
        ([], false) => Err(NoMessage::TextMissing),
        _ => Err(NoMessage::Ambiguous),
    };
    Ok(Hooked { message, location })
}

/// The words of the crashed thread's stack from its innermost frame up to the panicking
/// frame `site` (at most [`PAYLOAD_SEARCH`] bytes), where the hook's payload lies.
fn stack_words(
    dump: &Dump<'_>,
    thread: &report::Thread,
    site: &report::Frame,
) -> Result<Vec<u64>, NoMessage> {
    let sp = |f: &report::Frame| f.sp.map(report::Addr::get);
    let low = thread
        .frames
        .first()
        .and_then(sp)
        .ok_or(NoMessage::NoStack)?;
    let high = sp(site)
        .filter(|&h| h > low)
        .ok_or(NoMessage::NoStack)?
        .min(low.saturating_add(PAYLOAD_SEARCH));
    let len = usize::try_from(high - low).map_err(|_| NoMessage::NoStack)?;
    let stack = dump
        .memory
        .read_bytes(low, len)
        .or_else(|| dump.memory.read_to_range_end(low))
        .ok_or(NoMessage::NoStack)?;
    Ok(stack
        .chunks_exact(8)
        .filter_map(|w| Some(u64::from_le_bytes(w.try_into().ok()?)))
        .collect())
}

/// The text of a panic payload whose fat pointer is (`data`, `vtable`): `None` when the
/// pair is no `&str` or `String` payload (by the vtable's type id method, `ids`: those of
/// `&str` and `String`), `Some(None)` when it is one whose text the dump does not hold.
fn payload_text(
    dump: &Dump<'_>,
    loaded: &[Loaded],
    word: &dyn Fn(u64) -> Option<u64>,
    data: u64,
    vtable: u64,
    (str_id, string_id): (Option<u64>, Option<u64>),
) -> Option<Option<String>> {
    let method = vtable.checked_add(TYPE_ID_SLOT).and_then(word);
    let size = vtable.checked_add(8).and_then(word);
    let text = if size == Some(STR_SIZE) && method.is_some() && method == str_id {
        // &str: (pointer, length)
        match (word(data), data.checked_add(8).and_then(word)) {
            (Some(p), Some(n)) => Some(text_at(dump, loaded, p, n)),
            _ => return None,
        }
    } else if size == Some(STRING_SIZE) && method.is_some() && method == string_id {
        // String (a Vec<u8>): its capacity, pointer and length, in the order rustc
        // chose; the pointer is the word that points to memory, the length the
        // smaller of the others (never above the capacity)
        let fields: Vec<u64> = (0..3u64)
            .filter_map(|i| data.checked_add(8 * i).and_then(word))
            .collect();
        let &[a, b, c] = fields.as_slice() else {
            return None;
        };
        let readable = |p: u64| p >= 0x1000 && read_image(dump, loaded, p, 1).is_some();
        // none readable: the heap the String points to is not in the dump
        [(a, b, c), (b, a, c), (c, a, b)]
            .into_iter()
            .find(|&(p, _, _)| readable(p))
            .map(|(p, x, y)| text_at(dump, loaded, p, x.min(y)))
    } else {
        return None;
    };
    Some(text.flatten())
}

/// `core::panic::Location` at `addr` (its file as a `&str`, then line and column, read
/// by `word`), as std prints it: `file:line:col`; None unless it looks like one.
fn location_at(
    dump: &Dump<'_>,
    loaded: &[Loaded],
    word: &dyn Fn(u64) -> Option<u64>,
    addr: u64,
) -> Option<String> {
    let file = word(addr)?;
    let len = word(addr.checked_add(8)?)?;
    let line_col = word(addr.checked_add(16)?)?;
    let (line, col) = (line_col & 0xffff_ffff, line_col >> 32);
    if !(1..=MAX_FILE).contains(&len) || line == 0 || col == 0 {
        return None;
    }
    let file = text_at(dump, loaded, file, len)?;
    if file.chars().any(char::is_control) || file.len() != usize::try_from(len).ok()? {
        return None;
    }
    Some(format!("{file}:{line}:{col}"))
}

/// The UTF-8 text of `len` bytes at `addr` (cut at [`MAX_MESSAGE`]), from the dump's
/// memory or the module's file (a literal is in its read-only data); None if the bytes
/// are not there or not text.
fn text_at(dump: &Dump<'_>, loaded: &[Loaded], addr: u64, len: u64) -> Option<String> {
    let want = usize::try_from(len).ok()?.min(MAX_MESSAGE);
    if want == 0 {
        return Some(String::new());
    }
    let bytes = read_image(dump, loaded, addr, want)?;
    if bytes.len() < want {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t.to_string()),
        // cut inside a character: what is whole
        Err(e) if want < usize::try_from(len).ok()? && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(bytes.get(..e.valid_up_to())?).into_owned())
        }
        Err(_) => None,
    }
}
