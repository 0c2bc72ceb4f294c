//! A dyld shared cache as an upload (issue 38): Apple's system libraries
//! (`libsystem_kernel`, `libdispatch`, `CoreFoundation`, …) live in the cache, not as
//! files, so a team uploads the cache it extracted from a device or a restore image and
//! every image in it becomes a Breakpad `.sym` file of its names and its unwind rules
//! (`STACK CFI` records from its `__unwind_info` and `__eh_frame`), filed by the image's
//! `LC_UUID` like any other symbol file: crashes that named those images get names and
//! unwind through them, and the crashes waiting for them are processed again.
//!
//! The cache and its subcaches (`dyld_shared_cache_arm64e`, `….01`, `….symbols`) come in one
//! multipart request, each part under its file name: a subcache is told by its name (the
//! main file's name and the suffix the main file's header gives it), and a cache whose
//! header names a subcache the request lacks is refused whole (422
//! `dyld-cache-incomplete`), as is a part without a name or a cache of no image (a
//! subcache sent without its main file reads as one). A
//! cache before macOS 12 is one file. The parts are mapped, never read into memory; the
//! names are read as the command-line walk reads them ([`engine::dyld_cache`]: headers,
//! each image's symbol table and the cache's local symbols, every count and offset
//! checked) and the unwind rules as [`engine::breakpad::write_cfi::dyld_image_stack_cfi`] builds them.
//! Images with neither names nor rules give no file. The cache itself is not stored: its
//! names and rules are, in the `.sym` form every symbol file of the service already has
//! (no second kind of stored table), which is what a walk of Apple's code takes from
//! it. The work is blocking, done on the blocking pool.

use std::collections::{BTreeMap, HashSet};

use engine::dyld_cache::{self, DyldCacheError};
use worker::store::{StagedBlob, Staging, StoreError};

use super::apple_upload::{blocking, Named};
use super::problem::ApiError;
use super::state::AppState;

/// Bytes read to tell a cache from anything else.
const HEAD: usize = 16;

/// `files` with every dyld shared cache (with its subcaches) replaced by a `.sym` file per
/// image; anything else passes through unchanged.
pub(super) async fn expand(s: &AppState, files: Vec<Named>) -> Result<Vec<Named>, ApiError> {
    let mut parts = Vec::new();
    let mut out = Vec::with_capacity(files.len());
    for (name, staged) in files {
        let head = staged.read_at(0, HEAD).await?;
        if dyld_cache::is_dyld_cache(&head) {
            parts.push((name, staged));
        } else {
            out.push((name, staged));
        }
    }
    if parts.is_empty() {
        return Ok(out);
    }
    let staging = s.staging.clone();
    out.extend(blocking(move || image_syms(&staging, parts)).await??);
    Ok(out)
}

fn refused(detail: String) -> ApiError {
    ApiError::Unprocessable {
        code: "dyld-cache-incomplete",
        detail,
    }
}

fn malformed(e: DyldCacheError) -> ApiError {
    ApiError::Unprocessable {
        code: "malformed-binary",
        detail: e.to_string(),
    }
}

/// The caches' parts by name; the main files are those not named as another part's
/// subcache (its name, a dot, a suffix).
fn by_name(parts: Vec<Named>) -> Result<(BTreeMap<String, StagedBlob>, Vec<String>), ApiError> {
    let mut named = BTreeMap::new();
    for (name, blob) in parts {
        let Some(name) = name else {
            return Err(refused(
                "a dyld shared cache part was sent without its file name: send each part \
                 (the cache and its subcaches) under its own name, as multipart filenames"
                    .into(),
            ));
        };
        named.insert(name, blob);
    }
    let mains = named
        .keys()
        .filter(|n| {
            !named.keys().any(|m| {
                n.strip_prefix(m.as_str())
                    .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'))
            })
        })
        .cloned()
        .collect();
    Ok((named, mains))
}

/// A `.sym` file, in a staging file, for every image of every cache in `parts`.
fn image_syms(staging: &Staging, parts: Vec<Named>) -> Result<Vec<Named>, ApiError> {
    let (named, mains) = by_name(parts)?;
    let mut used = HashSet::new();
    let mut out = Vec::new();
    for main in &mains {
        used.insert(main.clone());
        let Some(main_blob) = named.get(main) else {
            continue;
        };
        let main_bytes = map(main_blob)?;
        let suffixes = dyld_cache::subcache_suffixes(main_bytes.as_ref()).map_err(malformed)?;
        let mut subs = Vec::with_capacity(suffixes.len());
        for suffix in &suffixes {
            let sub = format!("{main}{suffix}");
            let blob = named.get(&sub).ok_or_else(|| {
                refused(format!(
                    "the dyld shared cache {main} names the subcache {sub}, which the upload \
                     lacks: send the cache and every subcache in one multipart request"
                ))
            })?;
            subs.push(map(blob)?);
            used.insert(sub);
        }
        let sub_bytes: Vec<&[u8]> = subs.iter().map(|m| m.as_ref()).collect();
        let syms = cache_syms(staging, main_bytes.as_ref(), &sub_bytes)?;
        if syms.is_empty() {
            // a subcache holds no image: one sent without its main file reads as a
            // cache of none
            return Err(refused(format!(
                "{main} holds no image with names: a subcache sent without its main file? \
                 Send the cache and every subcache in one multipart request"
            )));
        }
        out.extend(syms);
    }
    if let Some(stray) = named.keys().find(|n| !used.contains(*n)) {
        return Err(refused(format!(
            "{stray} is a dyld shared cache part that no main file in the upload names as \
             its subcache: send it with its cache"
        )));
    }
    Ok(out)
}

/// The `.sym` files of one cache's images.
fn cache_syms(staging: &Staging, main: &[u8], subs: &[&[u8]]) -> Result<Vec<Named>, ApiError> {
    let (arch, images) = dyld_cache::index(main, subs).map_err(malformed)?;
    let mut out = Vec::with_capacity(images.len());
    for image in images {
        let symbols = dyld_cache::image_symbols(main, subs, image.index).map_err(malformed)?;
        // an image whose unwind tables cannot be built keeps its names (its frames
        // unwind by frame pointers, as before)
        let cfi = engine::breakpad::write_cfi::dyld_image_stack_cfi(main, subs, image.index)
            .map(|c| c.text)
            .unwrap_or_default();
        if symbols.names.is_empty() && cfi.is_empty() {
            continue;
        }
        let text = dyld_cache::breakpad_sym(&image.path, &image.uuid, arch, &symbols, &cfi);
        let blob = staging
            .from_reader(&mut text.as_bytes())?
            .map_err(|e| ApiError::Store(StoreError::BlobRead(e)))?;
        let file = image.path.rsplit('/').next().unwrap_or(&image.path);
        out.push((Some(format!("{file}.sym")), blob));
    }
    Ok(out)
}

fn map(blob: &StagedBlob) -> Result<mapped::Mapped, ApiError> {
    mapped::Mapped::open(blob.path()).map_err(|e| ApiError::Store(StoreError::BlobRead(e)))
}
