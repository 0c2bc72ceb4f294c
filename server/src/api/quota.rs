//! Per-project upload quotas (`--quota PROJECT:CRASHES_PER_MINUTE:BYTES_PER_DAY`, issue
//! 41): over either limit a crash upload is answered `429` with the `Retry-After` after
//! which it would be taken, never dropped silently, and counted per project for
//! `/metrics`.
//!
//! Crashes a minute are a token bucket per project (bursts of a minute's worth): the
//! wait is the time until one crash's worth has refilled, rounded up to whole seconds.
//! Bytes a day are the dump bytes accepted since the start of the UTC day: the wait is
//! the time until the next UTC midnight (a dump larger than the whole day's quota is
//! refused with that wait too, so that a client backs off rather than loops). The
//! counts hold per server process, as `api::rate`'s do.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use super::state::Quota;

/// Why an upload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Crashes a minute (`throttled` in `/metrics`).
    CrashesPerMinute,
    /// Bytes a day (`refused` in `/metrics`).
    BytesPerDay,
}

/// A refusal: which limit, and the seconds to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub over: Over,
    pub retry_after_secs: u64,
}

/// What one project used and was refused.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub throttled: u64,
    pub refused: u64,
}

#[derive(Debug)]
struct Use {
    tokens: f64,
    at: Instant,
    day: i64,
    bytes_today: u64,
}

/// The quotas of every project, and what each used.
#[derive(Debug, Default)]
pub struct Quotas {
    limits: HashMap<String, Quota>,
    used: Mutex<HashMap<String, Use>>,
    counts: Mutex<BTreeMap<String, Counts>>,
}

const DAY_MS: i64 = 86_400_000;

impl Quotas {
    /// The configured quotas (a project named twice: the last one).
    pub fn new(quotas: &[Quota]) -> Quotas {
        Quotas {
            limits: quotas
                .iter()
                .map(|q| (q.project.clone(), q.clone()))
                .collect(),
            ..Quotas::default()
        }
    }

    /// Takes one crash of `project`'s minute, before its body is read.
    pub fn take_crash(&self, project: &str) -> Result<(), Refusal> {
        let Some(q) = self
            .limits
            .get(project)
            .filter(|q| q.crashes_per_minute > 0)
        else {
            return Ok(());
        };
        let per_minute = f64::from(q.crashes_per_minute);
        let rate = per_minute / 60.0;
        let result = self.with_use(project, per_minute, |u| {
            let now = Instant::now();
            let elapsed = now.duration_since(u.at).as_secs_f64();
            u.tokens = (u.tokens + elapsed * rate).min(per_minute);
            u.at = now;
            if u.tokens >= 1.0 {
                u.tokens -= 1.0;
                Ok(())
            } else {
                let wait = ((1.0 - u.tokens) / rate).ceil();
                Err((wait as u64).max(1))
            }
        });
        result.map_err(|secs| self.refuse(project, Over::CrashesPerMinute, secs))
    }

    /// Gives back the crash [`Quotas::take_crash`] took for an upload that was not stored.
    pub fn give_back_crash(&self, project: &str) {
        let Some(q) = self
            .limits
            .get(project)
            .filter(|q| q.crashes_per_minute > 0)
        else {
            return;
        };
        let cap = f64::from(q.crashes_per_minute);
        self.with_use(project, cap, |u| u.tokens = (u.tokens + 1.0).min(cap));
    }

    /// Takes `bytes` of `project`'s day, `now_ms` being the time (Unix ms).
    pub fn take_bytes(&self, project: &str, bytes: u64, now_ms: i64) -> Result<(), Refusal> {
        let Some(q) = self.limits.get(project).filter(|q| q.bytes_per_day > 0) else {
            return Ok(());
        };
        let cap = f64::from(q.crashes_per_minute);
        let day = now_ms.div_euclid(DAY_MS);
        let result = self.with_use(project, cap, |u| {
            if u.day != day {
                u.day = day;
                u.bytes_today = 0;
            }
            match u.bytes_today.checked_add(bytes) {
                Some(total) if total <= q.bytes_per_day => {
                    u.bytes_today = total;
                    Ok(())
                }
                _ => {
                    let left_ms = (day + 1) * DAY_MS - now_ms;
                    Err(u64::try_from((left_ms + 999) / 1000).unwrap_or(1).max(1))
                }
            }
        });
        result.map_err(|secs| self.refuse(project, Over::BytesPerDay, secs))
    }

    /// The refusals per project so far.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn refuse(&self, project: &str, over: Over, secs: u64) -> Refusal {
        if let Ok(mut counts) = self.counts.lock() {
            let c = counts.entry(project.to_string()).or_default();
            match over {
                Over::CrashesPerMinute => c.throttled += 1,
                Over::BytesPerDay => c.refused += 1,
            }
        }
        Refusal {
            over,
            retry_after_secs: secs,
        }
    }

    /// Runs `f` on `project`'s use (a full bucket of `cap` at first). A poisoned lock
    /// (a panic elsewhere) is taken over: the counts are plain numbers.
    fn with_use<T>(&self, project: &str, cap: f64, f: impl FnOnce(&mut Use) -> T) -> T {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let u = used.entry(project.to_string()).or_insert_with(|| Use {
            tokens: cap,
            at: Instant::now(),
            day: 0,
            bytes_today: 0,
        });
        f(u)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn quotas(per_minute: u32, bytes: u64) -> Quotas {
        Quotas::new(&[Quota {
            project: "a".into(),
            crashes_per_minute: per_minute,
            bytes_per_day: bytes,
        }])
    }

    #[test]
    fn a_minute_of_crashes_then_the_wait_for_one() {
        let q = quotas(6, 0);
        for _ in 0..6 {
            assert_eq!(q.take_crash("a"), Ok(()));
        }
        let r = q.take_crash("a").unwrap_err();
        assert_eq!(r.over, Over::CrashesPerMinute);
        assert_eq!(r.retry_after_secs, 10);
        assert_eq!(q.take_crash("b"), Ok(()), "no quota for b");
        assert_eq!(q.counts()["a"].throttled, 1);
        q.give_back_crash("a");
        assert_eq!(q.take_crash("a"), Ok(()));
    }

    #[test]
    fn bytes_until_midnight() {
        let q = quotas(0, 100);
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        assert_eq!(q.take_bytes("a", 60, noon), Ok(()));
        let r = q.take_bytes("a", 41, noon).unwrap_err();
        assert_eq!((r.over, r.retry_after_secs), (Over::BytesPerDay, 43_200));
        assert_eq!(q.take_bytes("a", 40, noon), Ok(()));
        assert_eq!(
            q.take_bytes("a", 100, noon + DAY_MS / 2),
            Ok(()),
            "a new day"
        );
        assert_eq!(q.counts()["a"].refused, 1);
    }
}
