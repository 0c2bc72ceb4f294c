//! A per-token rate limit on requests that queue work for every worker (`POST
//! /api/v1/reprocess`): one admin token in a CI job must not be able to requeue the whole
//! store in a loop and make new crashes wait behind it. The same buckets count other units
//! too: the crashes a token's symbol uploads queue again ([`RateLimit::take`]).
//!
//! A token bucket per token (by the SHA-256 of the token presented, so secrets are not
//! kept twice; one shared bucket when the server runs without tokens): `per_minute`
//! requests a minute, bursts of as many. Only requests that passed authorization are
//! counted, so the number of buckets is bounded by the configured tokens. The limit holds
//! per server process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};

/// Requests of one kind, per token.
#[derive(Debug)]
pub struct RateLimit {
    per_minute: u32,
    buckets: Mutex<HashMap<[u8; 32], Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimit {
    /// `per_minute` requests a minute per token; 0: no limit.
    pub fn new(per_minute: u32) -> RateLimit {
        RateLimit {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one request of the token in `headers`: `Err(seconds)` to wait when its
    /// bucket is empty.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let rate = f64::from(self.per_minute) / 60.0;
        self.with_bucket(headers, |b| {
            if b.tokens >= 1.0 {
                b.tokens -= 1.0;
                Ok(())
            } else {
                // whole seconds until one request's worth has refilled, at least 1
                let wait = ((1.0 - b.tokens) / rate).ceil();
                Err((wait as u64).max(1))
            }
        })
        .unwrap_or(Ok(()))
    }

    /// Takes up to `want` whole units of the token's allowance now (units other than
    /// requests: crashes a symbol upload queues again); returns how many. Without a
    /// limit, `want`. What is not used is given back with [`RateLimit::give_back`].
    pub fn take(&self, headers: &HeaderMap, want: u64) -> u64 {
        if self.per_minute == 0 {
            return want;
        }
        self.with_bucket(headers, |b| {
            let whole = b.tokens.max(0.0).floor();
            let n = (whole as u64).min(want);
            b.tokens -= n as f64;
            n
        })
        .unwrap_or(0)
    }

    /// Returns `n` units [`RateLimit::take`] took and did not use.
    pub fn give_back(&self, headers: &HeaderMap, n: u64) {
        if self.per_minute == 0 || n == 0 {
            return;
        }
        let full = f64::from(self.per_minute);
        self.with_bucket(headers, |b| b.tokens = (b.tokens + n as f64).min(full));
    }

    /// Runs `f` on the token's bucket, refilled to now; `None` if the lock is poisoned.
    fn with_bucket<T>(&self, headers: &HeaderMap, f: impl FnOnce(&mut Bucket) -> T) -> Option<T> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        let key: [u8; 32] = Sha256::digest(presented)
            .as_slice()
            .try_into()
            .unwrap_or([0; 32]);
        let rate = f64::from(self.per_minute) / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().ok()?;
        let full = f64::from(self.per_minute);
        let b = buckets.entry(key).or_insert(Bucket {
            tokens: full,
            at: now,
        });
        let refilled = b.tokens + now.duration_since(b.at).as_secs_f64() * rate;
        b.tokens = refilled.min(full);
        b.at = now;
        Some(f(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(token: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static(token));
        h
    }

    #[test]
    fn a_burst_then_a_wait_per_token() {
        let r = RateLimit::new(2);
        let a = with("Bearer a");
        assert_eq!(r.check(&a), Ok(()));
        assert_eq!(r.check(&a), Ok(()));
        // two a minute: the next one refills in 30 s
        assert_eq!(r.check(&a), Err(30));
        assert_eq!(r.check(&with("Bearer b")), Ok(()));
        assert_eq!(RateLimit::new(0).check(&a), Ok(()));
    }

    #[test]
    fn an_allowance_is_taken_and_given_back() {
        let r = RateLimit::new(100);
        let a = with("Bearer a");
        assert_eq!(r.take(&a, 70), 70);
        assert_eq!(r.take(&a, 70), 30);
        r.give_back(&a, 10);
        assert_eq!(r.take(&a, u64::MAX), 10);
        assert_eq!(r.take(&with("Bearer b"), 5), 5);
        assert_eq!(RateLimit::new(0).take(&a, u64::MAX), u64::MAX);
    }
}
