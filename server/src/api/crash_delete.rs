//! `DELETE /api/v1/crashes/{id}` (issue 41): a crash deleted with everything that names
//! it (`worker::store::delete`), its dump's blob too when no other crash, binary or
//! source bundle names the same bytes, and an audit entry saying who did it.
//!
//! It takes the `admin` scope: a project's admin token deletes its own project's crashes
//! (another project's crash is answered as a missing one, and stays), a server-wide admin
//! token any crash. The `ingest` scope does not delete: its tokens ship inside clients.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use worker::store::audit::{self, Entry};
use worker::store::{crashes, delete};

use super::auth::{Admin, Caller};
use super::problem::ApiError;
use super::state::AppState;

/// The route as the audit log names it.
const ROUTE: &str = "DELETE /api/v1/crashes/{id}";

/// Deletes the crash: `204` once it is gone, `404` when there is none (of the caller's).
pub async fn delete(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Admin>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let entry = audit::entry(&who.token, who.filter(), "delete-crash", ROUTE, Some(&id));
    if !delete_one(&s, &id, who.filter(), &entry).await? {
        return Err(super::crashes::not_found(&id));
    }
    tracing::info!(crash_id = %id, token = %who.token, "crash deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes crash `id` if it is `project`'s (none: any project's), recording `entry`, and
/// its dump's blob when nothing else names the bytes: whether there was such a crash.
/// The deletion by filter (`api::crash_delete_filter`) deletes each crash with it too.
pub(super) async fn delete_one(
    s: &AppState,
    id: &str,
    project: Option<&str>,
    entry: &Entry,
) -> Result<bool, ApiError> {
    let Some(sha256) = delete::crash(&s.db, id, project, entry).await? else {
        return Ok(false);
    };
    // A blob is shared by content: another crash (of any project), a binary or a bundle
    // may name the same bytes.
    if !crashes::blob_is_named(&s.db, &sha256).await? {
        s.blobs.delete(&sha256).await?;
    }
    Ok(true)
}
