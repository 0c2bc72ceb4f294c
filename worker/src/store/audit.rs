//! The audit log (migration 0024): who deleted which crash, and which token was used on
//! which route of which project, and when. A token is named by its label (a prefix of
//! the SHA-256 of its secret, `api::state::Token::label`), never by its secret. A deletion
//! by filter (`super::delete_filter`) records the filter beside each crash it deleted
//! (`detail`, migration 0030), so a privacy request's deletions can be told apart.

use serde::Serialize;

use super::{now_ms, Db, StoreError};

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Entry {
    pub at: i64,
    /// The token's label, `none` on a server without tokens.
    pub token: String,
    /// The project acted in (none: every project, a server-wide caller).
    pub project: Option<String>,
    /// `delete-crash` or `token-use`.
    pub action: String,
    /// The method and route, e.g. `DELETE /api/v1/crashes/{id}`.
    pub route: String,
    /// What was acted on (a crash id), if one thing.
    pub target: Option<String>,
    /// Why: the filter (its JSON text) of a deletion by filter.
    pub detail: Option<String>,
}

/// The statement that inserts one entry, its values bound in [`Entry`]'s field order.
pub(crate) const INSERT: &str = "INSERT INTO audit_log (at, token, project, action, route, \
    target, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// An entry stamped now.
pub fn entry(
    token: &str,
    project: Option<&str>,
    action: &str,
    route: &str,
    target: Option<&str>,
) -> Entry {
    Entry {
        at: now_ms(),
        token: token.to_string(),
        project: project.map(str::to_string),
        action: action.to_string(),
        route: super::text::clean(route).into_owned(),
        target: target.map(|t| super::text::clean(t).into_owned()),
        detail: None,
    }
}

impl Entry {
    /// This entry with `detail` (cleaned as all stored input text).
    pub fn with_detail(mut self, detail: &str) -> Entry {
        self.detail = Some(super::text::clean(detail).into_owned());
        self
    }

    /// This entry about `target` instead.
    pub fn for_target(&self, target: &str) -> Entry {
        Entry {
            target: Some(super::text::clean(target).into_owned()),
            ..self.clone()
        }
    }
}

/// Appends `e` to the log.
pub async fn record(db: &Db, e: &Entry) -> Result<(), StoreError> {
    // every upload's token use is an entry: it queues for SQLite's writer as the upload's
    // crash row does
    let _turn = db.write_turn().await;
    crate::on_pool!(db, p => sqlx::query(INSERT)
        .bind(e.at).bind(&e.token).bind(&e.project).bind(&e.action).bind(&e.route)
        .bind(&e.target).bind(&e.detail).execute(p).await.map(|_| ()))?;
    Ok(())
}

/// The newest `limit` entries, newest first.
pub async fn newest(db: &Db, limit: i64) -> Result<Vec<Entry>, StoreError> {
    let sql = "SELECT at, token, project, action, route, target, detail FROM audit_log \
               ORDER BY at DESC, id DESC LIMIT $1";
    Ok(crate::on_pool!(db, p => sqlx::query_as::<_, Entry>(sql)
        .bind(limit).fetch_all(p).await)?)
}
