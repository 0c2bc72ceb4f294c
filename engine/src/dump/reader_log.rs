//! What the minidump crate says while it reads a dump, kept for the report.
//!
//! The crate logs what it notices but tolerates (a CPU context with XSAVE state it
//! ignores, a stream of an unexpected size) through `tracing` at `WARN`: printed on a
//! CLI's stderr, lost in a service's log, and in neither case where the person reading
//! the report looks. While a dump is read, [`collect`] installs a subscriber of its own on
//! the reading thread (scoped: other threads' logs are untouched) that keeps those
//! messages — each once, at most [`MAX_MESSAGES`] of at most [`MAX_MESSAGE_LEN`] bytes — so
//! the reader turns them into warnings.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::{span, Event, Level, Metadata, Subscriber};

/// Distinct messages kept per read.
pub const MAX_MESSAGES: usize = 32;
/// Bytes kept of one message.
pub const MAX_MESSAGE_LEN: usize = 512;

/// Runs `read` with the thread's `WARN`/`ERROR` events collected; returns its result and
/// the messages, in order, each once.
pub fn collect<T>(read: impl FnOnce() -> T) -> (T, Vec<String>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let collector = Collector { kept: kept.clone() };
    let out = tracing::subscriber::with_default(collector, read);
    let messages = kept.lock().map(|m| m.clone()).unwrap_or_default();
    (out, messages)
}

struct Collector {
    kept: Arc<Mutex<Vec<String>>>,
}

/// The event's `message` field, as `Display` would print it.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_owned();
        }
    }
}

impl Subscriber for Collector {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // WARN and ERROR (tracing orders levels by verbosity: ERROR is the least)
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message::default();
        event.record(&mut message);
        let mut text = message.0;
        if text.is_empty() {
            return;
        }
        if text.len() > MAX_MESSAGE_LEN {
            let mut cut = MAX_MESSAGE_LEN;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() < MAX_MESSAGES && !kept.contains(&text) {
                kept.push(text);
            }
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_kept_once_and_bounded() {
        let ((), kept) = collect(|| {
            tracing::info!("not kept");
            tracing::warn!("context has extra state");
            tracing::warn!("context has extra state");
            tracing::error!(value = 3, "stream of {} bytes", 7);
            for i in 0..100 {
                tracing::warn!("message {i}");
            }
            tracing::warn!("{}", "x".repeat(2000));
        });
        assert_eq!(kept[0], "context has extra state");
        assert_eq!(kept[1], "stream of 7 bytes");
        assert_eq!(kept.len(), MAX_MESSAGES);
        // nothing leaks into the next read
        let ((), again) = collect(|| tracing::warn!("long {}", "y".repeat(2000)));
        assert_eq!(again.len(), 1);
        assert!(again[0].len() <= MAX_MESSAGE_LEN + '…'.len_utf8());
    }
}
