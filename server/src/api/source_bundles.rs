//! Source bundles on the server (issue 42): a bundle that finished its upload session is
//! checked whole and stored under its project and build-id ([`store`]); the debuginfod
//! route `GET /buildid/{id}/source/{path}` reads one file of it ([`read_file`]); a
//! server-wide admin shares a bundle with every project, or stops sharing it
//! (`POST`/`DELETE /api/v1/source-bundles/{sha256}/shared`).
//!
//! Bundles belong to projects (issue 41, `worker::store::source_bundles`): a bundle is
//! stored for the project its upload session acts in, and every read acts in the
//! caller's project, which sees its own bundles and the shared ones. Another project's
//! bundle answers exactly as a bundle never uploaded.
//!
//! A bundle is untrusted until checked: its zip directory and manifest are checked by
//! `engine::source_bundle` (no path outside the bundle, no symbolic link, at most 100,000
//! entries, at most 1 GiB) and every file it lists is inflated once, bounded (16 MiB, 100
//! times its compressed size), so that a zip bomb is refused at the upload instead of
//! waiting in the store for a report to trip on it. Its manifest must name the build-id
//! the upload declared. The staged file is mapped while checked, never read into memory.
//! First upload wins within a project: a second bundle for a build-id the project holds
//! is answered with the first's row; another project's bundle of the build-id does not
//! count. A bundle that arrives after crashes naming its build-id were processed requeues
//! the project's crashes (every project's for a shared one; those past the token's
//! allowance later, from the requeue backlog).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use engine::source_bundle::{entry_name, BundleLimits, SourceBundle, SourceBundleError};
use serde_json::{json, Value};
use worker::store::missing::Requeued;
use worker::store::requeue_backlog;
use worker::store::source_bundles::{self, BundleRow, Sees, SHARED};
use worker::store::{StagedBlob, StoreError};

use super::auth::{Admin, ServerWide};
use super::problem::ApiError;
use super::state::AppState;

/// The routes of this module (the upload is an upload session's, the read a debuginfod
/// route's).
pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/api/v1/source-bundles/{sha256}/shared",
        post(share).delete(unshare),
    )
}

/// Checks the staged bundle `file` declared for `build_id` and stores it for `project`:
/// 201 with its row, or 200 with the row of the bundle the project stored first for that
/// build-id. A new bundle requeues the project's crashes already processed that name its
/// build-id ([`announce`]).
pub async fn store(
    s: &AppState,
    headers: &HeaderMap,
    project: &str,
    build_id: &str,
    file: StagedBlob,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let path = file.path().to_path_buf();
    let declared = build_id.to_string();
    let checked = tokio::task::spawn_blocking(move || check(&path, &declared))
        .await
        .map_err(|e| joined("checking", e))?;
    let files = checked?;
    let sha256 = s.blobs.put_staged(&file).await?;
    let row = BundleRow {
        project: project.to_string(),
        build_id: build_id.to_string(),
        sha256,
        size: i64::try_from(file.size()).unwrap_or(i64::MAX),
        file_count: i64::try_from(files).unwrap_or(i64::MAX),
        uploaded_at: 0,
    };
    let (held, inserted) = source_bundles::insert(&s.db, &row).await?;
    let (status, requeued) = if inserted {
        (StatusCode::CREATED, announce(s, headers, &held).await?)
    } else {
        (StatusCode::OK, Requeued::default())
    };
    Ok((
        status,
        Json(json!({
            "source_bundle": to_json(&held),
            "requeued": requeued.requeued, "requeue_left": requeued.left,
        })),
    ))
}

/// A bundle that arrives after the crash: the crashes of its holder (every project's for
/// a shared one) already processed that name its build-id had no lines for its frames, and are queued again within the token's
/// allowance of requeued crashes (`--requeue-per-minute`, shared with new binaries); the
/// others are counted in `requeue_left` and remembered in the requeue backlog, whose
/// pass requeues them later (`worker::store::requeue_backlog`).
async fn announce(
    s: &AppState,
    headers: &HeaderMap,
    held: &BundleRow,
) -> Result<Requeued, ApiError> {
    let build_id = held.build_id.as_str();
    let allowance = s.requeue_rate.take(headers, u64::MAX);
    let without = source_bundles::Without {
        since: held.uploaded_at,
        processing: true,
    };
    let done =
        source_bundles::requeue_naming(&s.db, &held.project, build_id, without, allowance).await;
    let used = done.as_ref().map(|d| d.requeued).unwrap_or(0);
    s.requeue_rate
        .give_back(headers, allowance.saturating_sub(used));
    let done = done?;
    if done.left > 0 {
        requeue_backlog::remember(&s.db, &held.project, build_id, held.uploaded_at).await?;
    }
    if done.requeued > 0 {
        tracing::info!(
            build_id,
            requeued = done.requeued,
            left = done.left,
            "crashes requeued for a source bundle"
        );
        s.wake.notify_waiters();
    }
    Ok(done)
}

/// A blocking task that did not end (a panic, or the runtime shutting down): a 500.
fn joined(what: &str, e: tokio::task::JoinError) -> ApiError {
    ApiError::Store(StoreError::Corrupt(format!("{what} a source bundle: {e}")))
}

/// `POST /api/v1/source-bundles/{sha256}/shared` (server-wide admin): every project's
/// crashes may use the bundles with these bytes from now on (after a project's own bundle
/// of the build-id), and the debuginfod route serves them to every project. Queues again
/// every project's crashes that name their build-ids. 404 when no bundle has the bytes.
async fn share(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
    headers: HeaderMap,
    Path(sha256): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let sha256 = stored_bytes(&s, &sha256).await?;
    let shared = source_bundles::share(&s.db, &sha256).await?;
    let mut requeued = Requeued::default();
    for row in &shared {
        let done = announce(&s, &headers, row).await?;
        requeued.requeued = requeued.requeued.saturating_add(done.requeued);
        requeued.left = requeued.left.saturating_add(done.left);
    }
    Ok(Json(json!({
        "sha256": sha256, "shared": true, "changed": !shared.is_empty(),
        "requeued": requeued.requeued, "requeue_left": requeued.left,
    })))
}

/// `DELETE /api/v1/source-bundles/{sha256}/shared` (server-wide admin): the bundles with
/// these bytes serve the projects that uploaded them only, from now on.
async fn unshare(
    State(s): State<AppState>,
    _caller: ServerWide<Admin>,
    Path(sha256): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let sha256 = stored_bytes(&s, &sha256).await?;
    let changed = source_bundles::unshare(&s.db, &sha256).await? > 0;
    Ok(Json(
        json!({ "sha256": sha256, "shared": false, "changed": changed }),
    ))
}

/// `sha256` in lower case if a project holds a bundle of those bytes; 404 otherwise.
async fn stored_bytes(s: &AppState, sha256: &str) -> Result<String, ApiError> {
    let missing = || ApiError::NotFound(format!("no source bundle with sha256 {sha256:?}"));
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(missing());
    }
    let sha256 = sha256.to_ascii_lowercase();
    match source_bundles::holders_of(&s.db, &sha256).await? {
        0 => Err(missing()),
        _ => Ok(sha256),
    }
}

/// A bundle row as the API shows it (`shared` for a bundle an admin shared).
pub fn to_json(row: &BundleRow) -> Value {
    json!({
        "shared": row.project == SHARED,
        "build_id": row.build_id, "sha256": row.sha256, "size": row.size,
        "files": row.file_count, "uploaded_at": row.uploaded_at,
    })
}

/// Opens the bundle at `path` and inflates each file it lists (bounded): the number of
/// files, or why it is refused (422 with the bundle error's code).
fn check(path: &std::path::Path, build_id: &str) -> Result<usize, ApiError> {
    let refuse = |e: SourceBundleError| ApiError::Unprocessable {
        code: e.code(),
        detail: e.to_string(),
    };
    let bytes = mapped::Mapped::open(path).map_err(|e| ApiError::Store(StoreError::BlobRead(e)))?;
    let bundle = SourceBundle::open(bytes, BundleLimits::default()).map_err(refuse)?;
    let named = &bundle.manifest().build_id;
    if !named.eq_ignore_ascii_case(build_id) {
        return Err(ApiError::Unprocessable {
            code: "bad-bundle-manifest",
            detail: format!(
                "the bundle's manifest is for build-id {named:?}, the upload declared {build_id}"
            ),
        });
    }
    for listed in &bundle.manifest().files {
        bundle.read(listed).map_err(refuse)?;
    }
    Ok(bundle.manifest().files.len())
}

/// The recorded paths a debuginfod `source/{path}` request may mean: debuginfod clients
/// send an absolute path without its leading slash (`/buildid/ID/source/usr/src/a.c`),
/// so `/` + path first, then the path as given (a bundle may list a relative path).
/// `None` for a path no bundle may hold (a `..` component, a NUL, empty).
pub fn recorded_paths(path: &str) -> Option<[String; 2]> {
    entry_name(path)?;
    let rest = path.trim_start_matches('/');
    Some([format!("/{rest}"), rest.to_string()])
}

/// The bytes of the file recorded as one of `paths` in the bundle of `build_id` that
/// `sees` sees: `None` when no such bundle or no such file; an error when the bundle is
/// refused.
pub async fn read_file(
    s: &AppState,
    sees: Sees<'_>,
    build_id: &str,
    paths: [String; 2],
) -> Result<Option<Vec<u8>>, ApiError> {
    let Some(row) = source_bundles::by_build_id(&s.db, sees, build_id).await? else {
        return Ok(None);
    };
    let bytes = s.blobs.open(&row.sha256).await?;
    let read = tokio::task::spawn_blocking(move || -> Result<_, SourceBundleError> {
        let bundle = SourceBundle::open(bytes, BundleLimits::default())?;
        for p in &paths {
            if let Some(found) = bundle.read(p)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    })
    .await
    .map_err(|e| joined("reading", e))?;
    read.map_err(|e| ApiError::Unprocessable {
        code: e.code(),
        detail: format!("the stored source bundle of build-id {build_id} is refused: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::recorded_paths;

    #[test]
    fn source_paths_are_absolute_first_and_never_escape() {
        assert_eq!(
            recorded_paths("usr/src/a.c"),
            Some(["/usr/src/a.c".to_string(), "usr/src/a.c".to_string()])
        );
        assert_eq!(
            recorded_paths("/home/ci/a.c").map(|p| p[0].clone()),
            Some("/home/ci/a.c".to_string())
        );
        for bad in [
            "",
            "/",
            "../etc/passwd",
            "src/../../etc/passwd",
            "a/..",
            "a\0b",
        ] {
            assert_eq!(recorded_paths(bad), None, "{bad:?}");
        }
    }
}
