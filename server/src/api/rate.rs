//! A per-token rate limit on requests that queue work for every worker (`POST
//! /api/v1/reprocess`): one admin token in a CI job must not be able to requeue the whole
//! store in a loop and make new crashes wait behind it.
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
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        let full = f64::from(self.per_minute);
        let b = buckets.entry(key).or_insert(Bucket {
            tokens: full,
            at: now,
        });
        let refilled = b.tokens + now.duration_since(b.at).as_secs_f64() * rate;
        b.tokens = refilled.min(full);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            // whole seconds until one request's worth has refilled, at least 1
            let wait = ((1.0 - b.tokens) / rate).ceil();
            Err((wait as u64).max(1))
        }
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
}
