//! Apple uploads taken apart before they are identified, so that every file stored is
//! one thin Mach-O filed by its own `LC_UUID`, checked by the same first-upload-wins rule
//! as any other file:
//! - a zip of dSYM bundles (`zip -r App.dSYM.zip App.dSYM`, Xcode's `dSYMs.zip`): each
//!   `*.dSYM/Contents/Resources/DWARF/*` file streamed out to a staging file, bounded by
//!   `--max-zip-entries`, `--max-zip-files`, `--max-zip-ratio` and
//!   `--max-decompressed-mb` ([`engine::dsym_zip`]); the rest of the bundle is ignored;
//! - a universal (fat) Mach-O, binary or dSYM DWARF file: each slice copied out to a
//!   staging file of its own ([`engine::macho_fat`]).
//!
//! Anything else passes through unchanged. The work is blocking file I/O, done on the
//! blocking pool.

use engine::dsym_zip::{each_dwarf_file, is_zip, DsymZipError, ZipLimits};
use engine::macho_fat;
use worker::store::{StagedBlob, Staging, StoreError};

use super::problem::ApiError;
use super::state::AppState;

/// A staged upload file and the name it was sent under (or taken out as).
pub(super) type Named = (Option<String>, StagedBlob);

/// Bytes read to tell an archive or a universal file from anything else.
const HEAD: usize = 8;

/// The files of an upload with every zipped dSYM and universal Mach-O taken apart.
pub(super) async fn expand(s: &AppState, files: Vec<Named>) -> Result<Vec<Named>, ApiError> {
    let mut out = Vec::with_capacity(files.len());
    for (name, staged) in files {
        let head = staged.read_at(0, HEAD).await?;
        if is_zip(&head) {
            let mut limits: ZipLimits = s.config.zip_limits;
            limits.max_total_bytes = s.config.max_decompressed_bytes;
            let staging = s.staging.clone();
            let dwarf = blocking(move || unzip(&staging, &staged, limits)).await??;
            for (inner, blob) in dwarf {
                out.extend(split_if_fat(s, Some(inner), blob).await?);
            }
        } else if macho_fat::is_fat(&head) {
            out.extend(split_if_fat(s, name, staged).await?);
        } else {
            out.push((name, staged));
        }
    }
    Ok(out)
}

/// `staged` as it is, or, when it is a universal Mach-O, its slices (named as it is).
async fn split_if_fat(
    s: &AppState,
    name: Option<String>,
    staged: StagedBlob,
) -> Result<Vec<Named>, ApiError> {
    let head = staged.read_at(0, HEAD).await?;
    if !macho_fat::is_fat(&head) {
        return Ok(vec![(name, staged)]);
    }
    let staging = s.staging.clone();
    let slices = blocking(move || split(&staging, &staged)).await??;
    Ok(slices.into_iter().map(|b| (name.clone(), b)).collect())
}

/// Runs `f` on the blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ApiError::Store(StoreError::Staging {
            path: "the blocking pool".into(),
            source: std::io::Error::other(e),
        })
    })
}

/// The DWARF files of the zipped dSYM bundles `zip`, each in a staging file.
fn unzip(
    staging: &Staging,
    zip: &StagedBlob,
    limits: ZipLimits,
) -> Result<Vec<(String, StagedBlob)>, ApiError> {
    let file = std::io::BufReader::new(zip.open()?);
    let mut out = Vec::new();
    let taken = each_dwarf_file(file, limits, |name, reader| {
        // a read error here is the archive's, and each_dwarf_file says which
        let blob = staging
            .from_reader(reader)?
            .map_err(|e| StoreError::Staging {
                path: name.to_string(),
                source: e,
            })?;
        out.push((name.to_string(), blob));
        Ok::<(), StoreError>(())
    });
    match taken {
        Ok(_) => Ok(out),
        Err(DsymZipError::Store(e)) => Err(ApiError::Store(e)),
        Err(e) => Err(ApiError::Unprocessable {
            code: e.code().unwrap_or("malformed-zip"),
            detail: format!("the dSYM zip is refused: {e}"),
        }),
    }
}

/// The slices of the universal Mach-O `fat`, each in a staging file.
fn split(staging: &Staging, fat: &StagedBlob) -> Result<Vec<StagedBlob>, ApiError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = fat.open()?;
    let slices = {
        let cache = object::ReadCache::new(&mut file);
        macho_fat::slices(&cache).map_err(|e| ApiError::Unprocessable {
            code: "malformed-binary",
            detail: e.to_string(),
        })?
    };
    let mut out = Vec::with_capacity(slices.len());
    for slice in slices {
        let io = |e| {
            ApiError::Store(StoreError::Staging {
                path: fat.path().display().to_string(),
                source: e,
            })
        };
        file.seek(SeekFrom::Start(slice.offset)).map_err(io)?;
        let blob = staging
            .from_reader(&mut (&mut file).take(slice.size))?
            .map_err(io)?;
        out.push(blob);
    }
    Ok(out)
}
