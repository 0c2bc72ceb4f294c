//! Apple's symbol files under `--symbols`: Mach-O binaries and the DWARF files of dSYM
//! bundles (`X.dSYM/Contents/Resources/DWARF/X`, found by the directory walk like any
//! file), each filed by its `LC_UUID`; a universal (fat) file split into its slices, each
//! taken out to a temporary directory (as compressed symbol files are) and filed by its
//! own UUID, so a crash's module takes the slice its process loaded.
//!
//! A dyld shared cache under `--symbols` (`dyld_shared_cache_arm64e`, its subcaches
//! beside it under the names its header gives them) is indexed by its images' UUIDs;
//! the names of an image a crash names (its symbol table and the cache's local symbols)
//! and its unwind rules (its `__unwind_info` and `__eh_frame`, as `STACK CFI` records)
//! are written as a Breakpad `.sym` file to a temporary directory on first use, and
//! found like any `.sym` file ([`DyldCaches`]), so system frames unwind from Apple's own
//! tables, as the service's uploaded caches do.
//!
//! A minidump names a Mach-O module by its Breakpad debug id only (the UUID upper-case
//! and age `0`): [`uuid_of_debug_id`] turns it back into the UUID these files are filed
//! under. Mach-O files are kept apart from ELF ones ([`AppleFiles::uuids`]) so that they
//! are never matched by file name, unverified: a Mach-O module is always named by UUID.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::sync::Mutex;

use engine::dump::Arch;
use engine::ids::unhex;
use engine::{dyld_cache, macho_fat};
use mapped::Mapped;

/// What indexing the `--symbols` directories learnt of Apple files.
#[derive(Default)]
pub(crate) struct AppleFiles {
    /// The UUIDs of the Mach-O files filed by build-id.
    pub uuids: HashSet<Vec<u8>>,
}

/// Whether `head` (a file's first bytes) starts a Mach-O file, thin or universal.
pub(crate) fn is_macho(head: &[u8]) -> bool {
    engine::macho_fat::is_thin_macho(head) || macho_fat::is_fat(head)
}

impl AppleFiles {
    /// Files the Mach-O file at `path` (its first bytes `head`) under its UUID in
    /// `by_build_id`; a universal one's slices are taken out to a directory kept in
    /// `extracted`, each filed under its own. What cannot be read goes to `problems`.
    pub fn add(
        &mut self,
        path: &Path,
        head: &[u8],
        by_build_id: &mut HashMap<Vec<u8>, Vec<PathBuf>>,
        extracted: &mut Vec<tempfile::TempDir>,
        problems: &mut Vec<String>,
    ) {
        if !macho_fat::is_fat(head) {
            if let Some(uuid) = crate::files::file_build_id(path) {
                self.file(uuid, path.to_path_buf(), by_build_id);
            }
            return;
        }
        match split_fat(path) {
            Ok((dir, slices)) => {
                extracted.push(dir);
                for slice in slices {
                    match crate::files::file_build_id(&slice) {
                        Some(uuid) => self.file(uuid, slice, by_build_id),
                        None => problems.push(format!(
                            "{}: a slice of this universal Mach-O has no LC_UUID",
                            path.display()
                        )),
                    }
                }
            }
            Err(why) => problems.push(format!(
                "{}: a universal Mach-O that cannot be split: {why}",
                path.display()
            )),
        }
    }

    fn file(
        &mut self,
        uuid: Vec<u8>,
        path: PathBuf,
        by_build_id: &mut HashMap<Vec<u8>, Vec<PathBuf>>,
    ) {
        by_build_id.entry(uuid.clone()).or_default().push(path);
        self.uuids.insert(uuid);
    }
}

/// The slices of the universal file at `path`, each copied to `<tmp>/<index>-<arch>/<name>`
/// (the file's own name, which the report shows).
fn split_fat(path: &Path) -> Result<(tempfile::TempDir, Vec<PathBuf>), String> {
    let mut f = fs::File::open(path).map_err(|e| e.to_string())?;
    let slices = {
        let cache = object::ReadCache::new(&mut f);
        macho_fat::slices(&cache).map_err(|e| e.to_string())?
    };
    let name = path
        .file_name()
        .ok_or_else(|| "the file has no name".to_string())?;
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let mut out = Vec::with_capacity(slices.len());
    for (i, s) in slices.iter().enumerate() {
        let arch = s.arch.map_or("unknown", |a| a.as_str());
        let sub = dir.path().join(format!("{i}-{arch}"));
        fs::create_dir(&sub).map_err(|e| e.to_string())?;
        let target = sub.join(name);
        f.seek(SeekFrom::Start(s.offset))
            .map_err(|e| e.to_string())?;
        let mut w = fs::File::create(&target).map_err(|e| e.to_string())?;
        let copied =
            std::io::copy(&mut (&mut f).take(s.size), &mut w).map_err(|e| e.to_string())?;
        w.flush().map_err(|e| e.to_string())?;
        if copied != s.size {
            return Err(format!("slice {i} ends past the file"));
        }
        out.push(target);
    }
    Ok((dir, out))
}

/// Where the `.sym` files written for a cache's images go (made on first use), and those
/// written, by image UUID.
type WrittenSyms = (Option<tempfile::TempDir>, HashMap<[u8; 16], PathBuf>);

/// The dyld shared caches under `--symbols`, their images by UUID, and the `.sym` files
/// written for the images looked up.
#[derive(Default)]
pub(crate) struct DyldCaches {
    /// Each cache's main file and its subcaches, in the order `object` takes them.
    caches: Vec<(Vec<PathBuf>, Option<Arch>)>,
    /// (cache, image index, install path) by image UUID.
    images: HashMap<[u8; 16], (usize, usize, String)>,
    /// Where the `.sym` files are written (made on first use), and those written.
    written: Mutex<WrittenSyms>,
}

impl DyldCaches {
    /// Indexes the cache whose main file is `path` (a subcache indexes as a cache of no
    /// images); what cannot be read goes to `problems`.
    pub fn add(&mut self, path: &Path, problems: &mut Vec<String>) {
        if let Err(why) = self.try_add(path) {
            problems.push(format!(
                "{}: a dyld shared cache that cannot be read: {why}",
                path.display()
            ));
        }
    }

    fn try_add(&mut self, path: &Path) -> Result<(), String> {
        let main = Mapped::open(path).map_err(|e| e.to_string())?;
        let suffixes = dyld_cache::subcache_suffixes(main.as_ref()).map_err(|e| e.to_string())?;
        let mut files = vec![path.to_path_buf()];
        for suffix in &suffixes {
            let mut name = path.as_os_str().to_os_string();
            name.push(suffix);
            files.push(PathBuf::from(name));
        }
        let subs = files[1..]
            .iter()
            .map(|p| Mapped::open(p).map_err(|e| format!("{}: {e}", p.display())))
            .collect::<Result<Vec<Mapped>, String>>()?;
        let sub_bytes: Vec<&[u8]> = subs.iter().map(|m| m.as_ref()).collect();
        let (arch, images) =
            dyld_cache::index(main.as_ref(), &sub_bytes).map_err(|e| e.to_string())?;
        if images.is_empty() {
            return Ok(());
        }
        let cache = self.caches.len();
        self.caches.push((files, arch));
        for image in images {
            self.images
                .entry(image.uuid)
                .or_insert((cache, image.index, image.path));
        }
        Ok(())
    }

    /// The `.sym` file of the cached image a minidump names by `debug_id`: written on
    /// first use. `None` when no cache holds the image or its names cannot be read.
    pub fn sym_for(&self, debug_id: &str) -> Option<PathBuf> {
        let uuid: [u8; 16] = uuid_of_debug_id(debug_id)?.try_into().ok()?;
        let (cache, index, install) = self.images.get(&uuid)?;
        let mut written = self.written.lock().ok()?;
        if let Some(p) = written.1.get(&uuid) {
            return Some(p.clone());
        }
        let (files, arch) = self.caches.get(*cache)?;
        let maps = files
            .iter()
            .map(|p| Mapped::open(p).ok())
            .collect::<Option<Vec<Mapped>>>()?;
        let (main, subs) = maps.split_first()?;
        let subs: Vec<&[u8]> = subs.iter().map(|m| m.as_ref()).collect();
        let symbols = dyld_cache::image_symbols(main.as_ref(), &subs, *index).ok()?;
        // names without unwind rules are still names: an image whose tables cannot be
        // built unwinds by frame pointers, as before
        let cfi = engine::breakpad::write_cfi::dyld_image_stack_cfi(main.as_ref(), &subs, *index)
            .map(|c| c.text)
            .unwrap_or_default();
        let text = dyld_cache::breakpad_sym(install, &uuid, *arch, &symbols, &cfi);
        if written.0.is_none() {
            written.0 = tempfile::tempdir().ok();
        }
        let dir = written.0.as_ref()?.path().join(engine::ids::hex(&uuid));
        fs::create_dir_all(&dir).ok()?;
        let name = install.rsplit('/').next().unwrap_or(install);
        let path = dir.join(format!("{name}.sym"));
        fs::write(&path, text).ok()?;
        written.1.insert(uuid, path.clone());
        Some(path)
    }
}

/// The Mach-O UUID a minidump's debug id for a Mach-O module names: 32 hex digits (the
/// UUID's bytes in order, as Breakpad's and Crashpad's Mac writers put them in the
/// CodeView record) followed by the age, `0`.
pub(crate) fn uuid_of_debug_id(debug_id: &str) -> Option<Vec<u8>> {
    let hex = debug_id.strip_suffix('0').filter(|h| h.len() == 32)?;
    unhex(&hex.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn debug_ids_name_uuids() {
        assert_eq!(
            uuid_of_debug_id(
                "4C4C44375555314 4A14FACE88C39A0D20"
                    .replace(' ', "")
                    .as_str()
            ),
            Some(unhex("4c4c443755553144a14face88c39a0d2").unwrap())
        );
        assert_eq!(uuid_of_debug_id("4C4C44375555314"), None);
        assert_eq!(uuid_of_debug_id("4C4C443755553144A14FACE88C39A0D21"), None);
    }
}
