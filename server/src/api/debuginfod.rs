//! A debuginfod server over the uploaded binaries (issue 19, part 4): `GET
//! /buildid/{id}/executable` and `GET /buildid/{id}/debuginfo`, as elfutils' `debuginfod`
//! answers them, so gdb, eu-stack, `debuginfod-find` or another postmortem with
//! `DEBUGINFOD_URLS` pointed at this server get the files teams uploaded here.
//!
//! - `executable`: an uploaded ELF file with that build-id that is not a separate debug
//!   file (the oldest upload first; a `.sym` file is not an ELF file and never answers);
//! - `debuginfo`: an uploaded separate debug file (`kind` `debug`) with that build-id,
//!   else an uploaded executable that carries `.debug_info` itself, as debuginfod serves
//!   an unstripped file for both;
//! - `source/{path}`: the file recorded as `/path` in the source bundle uploaded for
//!   that build-id (`postmortem upload --include-sources`; `source_bundles`), 404 when
//!   there is none, 400 for a path with a `..` component.
//!
//! Reading binaries is the `symbols` scope, as `GET /api/v1/binaries` (clients send the
//! token with `DEBUGINFOD_HEADERS_FILE`). A project token gets the files its project sees
//! (its own and the shared ones, `binaries::visible`): another project's file is a 404 as
//! an unknown build-id is. `source/` reads the bundle the project sees in the same way (its
//! own, else the shared one: `source_bundles::read_file`). Files are streamed from the blob store, never
//! held whole. An unknown build-id is a 404, which debuginfod clients take as "not here".

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use worker::store::binaries::{self, BinaryRow};

use super::auth::{Caller, Symbols};
use super::binaries::check_build_id;
use super::problem::ApiError;
use super::source_bundles;
use super::state::AppState;

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/buildid/{build_id}/executable",
            get(|s, c, p| file(s, c, p, Wanted::Executable)),
        )
        .route(
            "/buildid/{build_id}/debuginfo",
            get(|s, c, p| file(s, c, p, Wanted::Debuginfo)),
        )
        .route("/buildid/{build_id}/source/{*path}", get(source))
}

/// Which uploaded file answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Executable,
    Debuginfo,
}

/// The file that answers `wanted` among the uploads with one build-id (oldest first).
fn answer(rows: &[BinaryRow], wanted: Wanted) -> Option<&BinaryRow> {
    let elf = |r: &&BinaryRow| r.format == "elf" && !r.is_breakpad();
    let debug = |r: &&BinaryRow| r.kind == "debug";
    match wanted {
        Wanted::Executable => rows.iter().filter(elf).find(|r| !debug(r)),
        Wanted::Debuginfo => rows.iter().filter(elf).find(debug).or_else(|| {
            rows.iter()
                .filter(elf)
                .find(|r| r.section_list().contains(&"debug_info"))
        }),
    }
}

/// The handler of both file routes, told which file its route serves.
async fn file(
    State(s): State<AppState>,
    caller: Caller<Symbols>,
    Path(build_id): Path<String>,
    wanted: Wanted,
) -> Result<Response, ApiError> {
    let id = check_build_id(&build_id)?;
    let rows = binaries::by_build_id(&s.db, &id).await?;
    let rows = binaries::visible(&s.db, caller.who.sees(), rows).await?;
    let what = match wanted {
        Wanted::Executable => "executable",
        Wanted::Debuginfo => "debuginfo",
    };
    let row = answer(&rows, wanted)
        .ok_or_else(|| ApiError::NotFound(format!("no {what} uploaded for build-id {id}")))?;
    let blob = s.blobs.get_stream(&row.sha256).await?;
    // The name the client may show: the uploaded file's, kept to plain characters.
    let name: String = row
        .file_name
        .as_deref()
        .unwrap_or(what)
        .rsplit('/')
        .next()
        .unwrap_or(what)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
        .collect();
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, blob.size.to_string()),
            // what elfutils' server sends beside the file
            (
                header::HeaderName::from_static("x-debuginfod-size"),
                blob.size.to_string(),
            ),
            (header::HeaderName::from_static("x-debuginfod-file"), name),
        ],
        Body::from_stream(blob.pieces),
    )
        .into_response())
}

/// `GET /buildid/{id}/source/{path}`: the file recorded as `/path` (or `path`) in the
/// source bundle of the build-id the caller's project sees (another project's is none); 404 without a bundle or without that file,
/// 400 for a path with a `..` component.
async fn source(
    State(s): State<AppState>,
    Caller { who, .. }: Caller<Symbols>,
    Path((build_id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = check_build_id(&build_id)?;
    let paths = source_bundles::recorded_paths(&path).ok_or_else(|| ApiError::BadRequest {
        code: "bad-source-path",
        detail: format!("{path:?} is no source path a bundle may hold (`..`, empty)"),
    })?;
    let bytes = source_bundles::read_file(&s, who.sees(), &id, paths)
        .await?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no source file /{} in a source bundle of build-id {id}",
                path.trim_start_matches('/')
            ))
        })?;
    let size = bytes.len().to_string();
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::HeaderName::from_static("x-debuginfod-size"), size),
        ],
        bytes,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sha: &str, kind: &str, format: &str, sections: &str) -> BinaryRow {
        BinaryRow {
            sha256: sha.into(),
            build_id: "ab".into(),
            arch: Some("x86_64".into()),
            kind: kind.into(),
            file_name: None,
            size: 1,
            sections: sections.into(),
            uploaded_at: 0,
            debug_id: None,
            format: format.into(),
            source: None,
            code_id: None,
            code_file: None,
        }
    }

    #[test]
    fn the_right_file_answers() {
        let stripped = row("1", "executable", "elf", "text,eh_frame");
        let debug = row("2", "debug", "elf", "debug_info,debug_line");
        let full = row("3", "shared-library", "elf", "text,debug_info");
        let sym = row("4", engine::identify::KIND_BREAKPAD, "breakpad", "");
        let sha = |r: Option<&BinaryRow>| r.map(|r| r.sha256.clone());

        let all = [sym.clone(), stripped.clone(), debug.clone(), full.clone()];
        assert_eq!(sha(answer(&all, Wanted::Executable)), Some("1".into()));
        assert_eq!(sha(answer(&all, Wanted::Debuginfo)), Some("2".into()));
        // an unstripped file answers both
        let one = [full];
        assert_eq!(sha(answer(&one, Wanted::Executable)), Some("3".into()));
        assert_eq!(sha(answer(&one, Wanted::Debuginfo)), Some("3".into()));
        // a stripped file alone has no debuginfo; a debug file alone is no executable
        assert_eq!(sha(answer(&[stripped], Wanted::Debuginfo)), None);
        assert_eq!(sha(answer(&[debug], Wanted::Executable)), None);
        // a .sym file answers nothing
        assert_eq!(
            sha(answer(std::slice::from_ref(&sym), Wanted::Executable)),
            None
        );
        assert_eq!(sha(answer(&[sym], Wanted::Debuginfo)), None);
    }

    #[test]
    fn build_ids_are_hex() {
        assert_eq!(check_build_id("ABcd01").ok(), Some("abcd01".into()));
        for bad in ["", "a", "xyz", "../etc", &"a".repeat(129)] {
            assert!(check_build_id(bad).is_err(), "{bad:?}");
        }
    }
}
