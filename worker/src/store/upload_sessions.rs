//! The `upload_sessions` and `upload_session_chunks` tables (migration 0028): resumable
//! uploads (`postmortem upload`, the server's `api::upload_sessions`) kept in the store,
//! not in a server's memory, so that a session survives the server's restart and any
//! server on the database can take its next chunk.
//!
//! Each chunk's bytes — all that arrived, a chunk cut short too — are a blob, named by a
//! chunk row at its offset; the session's `staged` count is the next chunk's offset. A
//! chunk is recorded only if the session still holds the byte count it started from (one
//! statement in one transaction with the chunk's row): two servers writing the same
//! session cannot interleave. A session past its expiry is removed with its chunk rows,
//! and their blobs deleted unless another row names them ([`discard`], [`expire`]).

use super::{now_ms, Blobs, Db, StoreError};

/// One open session.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    pub id: String,
    /// Who created it: a digest of its token ("" without tokens).
    pub owner: String,
    /// The project its file is stored in.
    pub project: String,
    pub file_name: Option<String>,
    /// The file's size and sha256, decompressed.
    pub size: i64,
    pub sha256: String,
    /// `gzip` or `zstd`.
    pub encoding: String,
    pub compressed_size: i64,
    pub compressed_sha256: String,
    /// The build-id whose source bundle this is; `None` for a binary or debug file.
    pub source_bundle: Option<String>,
    /// Bytes of its chunks: where the next one starts.
    pub staged: i64,
    /// Bytes its chunks' requests brought.
    pub received: i64,
    pub created_at: i64,
    /// Unix milliseconds.
    pub expires_at: i64,
}

const COLUMNS: &str = "id, owner, project, file_name, size, sha256, encoding, compressed_size, \
                       compressed_sha256, source_bundle, staged, received, created_at, expires_at";

/// One received chunk: its offset in the compressed file, size and blob.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChunkRow {
    pub start_offset: i64,
    pub size: i64,
    pub sha256: String,
}

/// Opens `row`'s session.
pub async fn insert(db: &Db, row: &SessionRow) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO upload_sessions ({COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    );
    crate::on_pool!(db, p => sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(&row.id)
        .bind(&row.owner)
        .bind(&row.project)
        .bind(&row.file_name)
        .bind(row.size)
        .bind(&row.sha256)
        .bind(&row.encoding)
        .bind(row.compressed_size)
        .bind(&row.compressed_sha256)
        .bind(&row.source_bundle)
        .bind(row.staged)
        .bind(row.received)
        .bind(row.created_at)
        .bind(row.expires_at)
        .execute(p)
        .await
        .map(|_| ()))?;
    Ok(())
}

/// The session `id`, unless it expired.
pub async fn get(db: &Db, id: &str) -> Result<Option<SessionRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM upload_sessions WHERE id = $1 AND expires_at > $2");
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, SessionRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(id)
        .bind(now_ms())
        .fetch_optional(p)
        .await)?,
    )
}

/// The unexpired sessions of `owner`, oldest first.
pub async fn of_owner(db: &Db, owner: &str) -> Result<Vec<SessionRow>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM upload_sessions WHERE owner = $1 AND expires_at > $2 \
         ORDER BY created_at, id"
    );
    Ok(
        crate::on_pool!(db, p => sqlx::query_as::<_, SessionRow>(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(owner)
        .bind(now_ms())
        .fetch_all(p)
        .await)?,
    )
}

/// Unexpired sessions, all owners together.
pub async fn count_open(db: &Db) -> Result<i64, StoreError> {
    let sql = "SELECT COUNT(*) FROM upload_sessions WHERE expires_at > $1";
    let (n,): (i64,) = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(now_ms())
        .fetch_one(p)
        .await)?;
    Ok(n)
}

/// Records a chunk of `size` bytes (blob `sha256`) at `start` of session `id`, and the
/// `received` bytes its request brought; `false` (nothing recorded) when the session no
/// longer holds `start` bytes (another request wrote it meanwhile) or is gone.
pub async fn add_chunk(
    db: &Db,
    id: &str,
    start: i64,
    size: i64,
    sha256: &str,
    received: i64,
) -> Result<bool, StoreError> {
    let grow = "UPDATE upload_sessions SET staged = staged + $2, received = received + $3 \
                WHERE id = $1 AND staged = $4";
    let chunk = "INSERT INTO upload_session_chunks (session_id, start_offset, size, sha256) \
                 VALUES ($1, $2, $3, $4)";
    Ok(crate::in_transaction!(db, tx => {
        let grown = sqlx::query(grow)
            .bind(id).bind(size).bind(received).bind(start)
            .execute(&mut *tx).await?.rows_affected() == 1;
        if grown {
            sqlx::query(chunk)
                .bind(id).bind(start).bind(size).bind(sha256)
                .execute(&mut *tx).await?;
        }
        grown
    }))
}

/// The chunks of session `id`, in file order.
pub async fn chunks(db: &Db, id: &str) -> Result<Vec<ChunkRow>, StoreError> {
    let sql = "SELECT start_offset, size, sha256 FROM upload_session_chunks \
               WHERE session_id = $1 ORDER BY start_offset";
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, ChunkRow>(sql)
        .bind(id)
        .fetch_all(p)
        .await)?)
}

/// Removes session `id` and its chunk rows; the chunks' blobs (distinct).
async fn remove(db: &Db, id: &str) -> Result<Vec<String>, StoreError> {
    let shas = "SELECT DISTINCT sha256 FROM upload_session_chunks WHERE session_id = $1";
    let chunks = "DELETE FROM upload_session_chunks WHERE session_id = $1";
    let session = "DELETE FROM upload_sessions WHERE id = $1";
    Ok(crate::in_transaction!(db, tx => {
        let shas: Vec<(String,)> = sqlx::query_as(shas).bind(id).fetch_all(&mut *tx).await?;
        sqlx::query(chunks).bind(id).execute(&mut *tx).await?;
        sqlx::query(session).bind(id).execute(&mut *tx).await?;
        shas.into_iter().map(|(s,)| s).collect::<Vec<_>>()
    }))
}

/// Removes session `id` with its chunks, and their blobs that no other row names.
pub async fn discard(db: &Db, blobs: &Blobs, id: &str) -> Result<(), StoreError> {
    for sha in remove(db, id).await? {
        if !super::crashes::blob_is_named(db, &sha).await? {
            blobs.delete(&sha).await?;
        }
    }
    Ok(())
}

/// Most expired sessions one [`expire`] removes (the next call takes the rest).
const EXPIRE_BATCH: i64 = 1000;

/// Removes the sessions past their expiry ([`discard`]); how many.
pub async fn expire(db: &Db, blobs: &Blobs) -> Result<u64, StoreError> {
    let sql = "SELECT id FROM upload_sessions WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2";
    let ids: Vec<(String,)> = crate::on_pool!(db, p => sqlx::query_as(sql)
        .bind(now_ms())
        .bind(EXPIRE_BATCH)
        .fetch_all(p)
        .await)?;
    for (id,) in &ids {
        discard(db, blobs, id).await?;
    }
    Ok(ids.len() as u64)
}

/// Why a session's chunks do not make its file.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    /// The chunk rows leave a gap, overlap, or end elsewhere than the declared size.
    #[error("the session's chunks do not cover bytes 0..{size}: {at}")]
    Gap { size: i64, at: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The session's chunks, in order, streamed from their blobs into one staging file: the
/// compressed file as the client sent it (its sha256 is the caller's to check).
pub async fn assemble(
    db: &Db,
    blobs: &Blobs,
    staging: &super::Staging,
    session: &SessionRow,
) -> Result<super::staged::StagedBlob, AssembleError> {
    use futures::StreamExt;
    let chunks = chunks(db, &session.id).await?;
    let mut at = 0i64;
    for c in &chunks {
        if c.start_offset != at || c.size <= 0 {
            return Err(AssembleError::Gap {
                size: session.compressed_size,
                at: format!(
                    "a chunk at {} of {} bytes after {at}",
                    c.start_offset, c.size
                ),
            });
        }
        at = at.saturating_add(c.size);
    }
    if at != session.compressed_size {
        return Err(AssembleError::Gap {
            size: session.compressed_size,
            at: format!("they end at {at}"),
        });
    }
    let mut out = staging.create()?;
    for c in &chunks {
        let mut blob = blobs.get_stream(&c.sha256).await?;
        while let Some(piece) = blob.pieces.next().await {
            out.write(&piece.map_err(StoreError::from)?).await?;
        }
    }
    Ok(out.finish().await?)
}
