//! What the workers of one database share about remote symbol sources: the misses (a
//! source said it lacks a file; not asked again until the miss expires) and the claims on
//! files being fetched (one worker downloads a file; the others wait for it). Both expire:
//! a miss after the miss TTL, a claim after its lease unless its holder renews it, so a
//! crashed worker's claim lapses. Expired rows are swept ([`sweep_expired`]).

use super::{now_ms, Db, StoreError};

/// Milliseconds of a duration, saturating.
fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// When the miss expires (`expires_at`, ms since the epoch), if `source` said it lacks
/// file `id` of `kind` and that has not expired.
pub async fn miss_remembered(
    db: &Db,
    source: &str,
    kind: &str,
    id: &str,
) -> Result<Option<i64>, StoreError> {
    let sql = "SELECT expires_at FROM source_misses \
               WHERE source = $1 AND kind = $2 AND id = $3 AND expires_at > $4";
    let expires: Option<i64> = crate::on_pool!(db, p => sqlx::query_scalar(sql)
        .bind(source)
        .bind(kind)
        .bind(id)
        .bind(now_ms())
        .fetch_optional(p)
        .await)?;
    Ok(expires)
}

/// Remembers that `source` lacks file `id` of `kind`, for `ttl` from now; returns when
/// that expires (`expires_at`, ms since the epoch), as [`miss_remembered`] will say it.
pub async fn remember_miss(
    db: &Db,
    source: &str,
    kind: &str,
    id: &str,
    ttl: std::time::Duration,
) -> Result<i64, StoreError> {
    let sql = "INSERT INTO source_misses (source, kind, id, expires_at) VALUES ($1, $2, $3, $4) \
               ON CONFLICT (source, kind, id) DO UPDATE SET expires_at = excluded.expires_at";
    let expires = now_ms().saturating_add(ms(ttl));
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(source)
        .bind(kind)
        .bind(id)
        .bind(expires)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(expires)
}

/// The time `expires_at` (ms since the epoch) names.
pub fn system_time(ms: i64) -> std::time::SystemTime {
    let after = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    std::time::UNIX_EPOCH + after
}

/// Claims file `id` for `holder` for `lease`: whether it won, that is whether no other
/// holder's claim on it is unexpired. One INSERT, so of workers racing one wins.
pub async fn try_claim(
    db: &Db,
    id: &str,
    holder: &str,
    lease: std::time::Duration,
) -> Result<bool, StoreError> {
    let now = now_ms();
    let sql = "INSERT INTO fetch_claims (id, holder, expires_at) VALUES ($1, $2, $3) \
               ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, \
               expires_at = excluded.expires_at WHERE fetch_claims.expires_at <= $4";
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(id)
        .bind(holder)
        .bind(now.saturating_add(ms(lease)))
        .bind(now)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n > 0)
}

/// Extends `holder`'s claim on `id` to `lease` from now; whether it still held it.
pub async fn renew_claim(
    db: &Db,
    id: &str,
    holder: &str,
    lease: std::time::Duration,
) -> Result<bool, StoreError> {
    let sql = "UPDATE fetch_claims SET expires_at = $1 WHERE id = $2 AND holder = $3";
    let n = crate::on_pool!(db, p => sqlx::query(sql)
        .bind(now_ms().saturating_add(ms(lease)))
        .bind(id)
        .bind(holder)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n > 0)
}

/// Gives up `holder`'s claim on `id`.
pub async fn release_claim(db: &Db, id: &str, holder: &str) -> Result<(), StoreError> {
    let sql = "DELETE FROM fetch_claims WHERE id = $1 AND holder = $2";
    crate::on_pool!(db, p => sqlx::query(sql)
        .bind(id)
        .bind(holder)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// Removes expired misses and claims; returns how many rows.
pub async fn sweep_expired(db: &Db) -> Result<u64, StoreError> {
    let now = now_ms();
    let mut n = 0;
    for sql in [
        "DELETE FROM source_misses WHERE expires_at <= $1",
        "DELETE FROM fetch_claims WHERE expires_at <= $1",
    ] {
        n += crate::on_pool!(db, p => sqlx::query(sql)
            .bind(now)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let db = Db::connect(&url).await.expect("connect");
        db.migrate().await.expect("migrate");
        (dir, db)
    }

    #[tokio::test]
    async fn one_claim_wins_until_released_or_lapsed() {
        let (_dir, db) = db().await;
        let lease = Duration::from_secs(60);
        assert!(try_claim(&db, "f", "a", lease).await.expect("claim"));
        assert!(!try_claim(&db, "f", "b", lease).await.expect("claim"));
        assert!(try_claim(&db, "g", "b", lease).await.expect("claim"));
        assert!(renew_claim(&db, "f", "a", lease).await.expect("renew"));
        assert!(!renew_claim(&db, "f", "b", lease).await.expect("renew"));
        release_claim(&db, "f", "b").await.expect("release");
        assert!(!try_claim(&db, "f", "b", lease).await.expect("claim"));
        release_claim(&db, "f", "a").await.expect("release");
        assert!(try_claim(&db, "f", "b", lease).await.expect("claim"));
        // a claim whose lease ran out is taken over
        assert!(try_claim(&db, "h", "a", Duration::ZERO)
            .await
            .expect("claim"));
        assert!(try_claim(&db, "h", "b", lease).await.expect("claim"));
        assert!(!renew_claim(&db, "h", "a", lease).await.expect("renew"));
    }

    #[tokio::test]
    async fn misses_expire_and_are_swept() {
        let (_dir, db) = db().await;
        let hour = Duration::from_secs(3600);
        assert!(miss_remembered(&db, "s", "debuginfo", "ab")
            .await
            .expect("read")
            .is_none());
        let expires = remember_miss(&db, "s", "debuginfo", "ab", hour)
            .await
            .expect("write");
        assert_eq!(
            miss_remembered(&db, "s", "debuginfo", "ab")
                .await
                .expect("read"),
            Some(expires)
        );
        assert!(miss_remembered(&db, "t", "debuginfo", "ab")
            .await
            .expect("read")
            .is_none());
        assert!(miss_remembered(&db, "s", "executable", "ab")
            .await
            .expect("read")
            .is_none());
        remember_miss(&db, "s", "executable", "ab", Duration::ZERO)
            .await
            .expect("write");
        assert!(miss_remembered(&db, "s", "executable", "ab")
            .await
            .expect("read")
            .is_none());
        try_claim(&db, "f", "a", Duration::ZERO)
            .await
            .expect("claim");
        assert_eq!(sweep_expired(&db).await.expect("sweep"), 2);
        assert_eq!(
            miss_remembered(&db, "s", "debuginfo", "ab")
                .await
                .expect("read"),
            Some(expires)
        );
    }
}
