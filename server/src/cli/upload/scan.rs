//! What `postmortem upload` finds under its paths: every file whose first bytes are those
//! of an ELF, Mach-O (thin or fat), PE or PDB file or a Breakpad `.sym` file (dSYM bundles
//! are directories holding a Mach-O file), identified with the engine's own
//! identification (`engine::identify::identify_file`: build-id, debug-id, code id, and
//! the kind and sections the server's first-upload-wins role is made of) and hashed.
//! Everything else is passed over after reading its first bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use engine::identify::{identify_file, BinaryInfo};
use sha2::{Digest, Sha256};

/// One file to offer the server.
#[derive(Debug)]
pub struct Found {
    pub path: PathBuf,
    /// The name it is sent under (its file name): a Windows image is found by it.
    pub name: Option<String>,
    pub size: u64,
    pub sha256: String,
    pub info: BinaryInfo,
}

/// What a scan saw.
#[derive(Debug, Default)]
pub struct Scan {
    /// Identified files, one per content (the same bytes at two paths: the first).
    pub found: Vec<Found>,
    /// Files whose first bytes are no symbol or binary format.
    pub other: usize,
    /// Files that look like one but cannot be identified (an object file without a
    /// build-id, a damaged file), with why.
    pub unusable: Vec<(PathBuf, String)>,
}

/// Fat Mach-O magics; a Java class file starts with the same bytes, then a version
/// over 44 where a fat file has its few architectures.
const FAT_MAGICS: [[u8; 4]; 2] = [[0xca, 0xfe, 0xba, 0xbe], [0xca, 0xfe, 0xba, 0xbf]];

/// Whether a file starting with `head` may be a binary or symbol file.
pub fn looks_like_symbols(head: &[u8]) -> bool {
    let Some(m) = head.get(..4).and_then(|m| <[u8; 4]>::try_from(m).ok()) else {
        return false;
    };
    if FAT_MAGICS.contains(&m) {
        let archs = head
            .get(4..8)
            .and_then(|n| <[u8; 4]>::try_from(n).ok())
            .map(u32::from_be_bytes);
        return archs.is_some_and(|n| (1..20).contains(&n));
    }
    &m == b"\x7fELF"
        || engine::macho_fat::is_thin_macho(head)
        || m.starts_with(b"MZ")
        || engine::binary::is_pdb(head)
        || head.starts_with(b"MODULE ")
}

/// Scans `paths` (files, or directories walked without following symbolic links).
pub fn scan(paths: &[PathBuf], mut seen_file: impl FnMut()) -> anyhow::Result<Scan> {
    let mut scan = Scan::default();
    let mut shas = std::collections::HashSet::new();
    for root in paths {
        std::fs::symlink_metadata(root).with_context(|| format!("{}", root.display()))?;
        for entry in walkdir::WalkDir::new(root).follow_root_links(true) {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let path = e.path().map(Path::to_path_buf).unwrap_or_default();
                    scan.unusable.push((path, e.to_string()));
                    continue;
                }
            };
            if !entry.file_type().is_file() {
                continue;
            }
            seen_file();
            match examine(entry.path()) {
                Ok(Some(found)) => {
                    if shas.insert(found.sha256.clone()) {
                        scan.found.push(found);
                    }
                }
                Ok(None) => scan.other += 1,
                Err(why) => scan.unusable.push((entry.path().to_path_buf(), why)),
            }
        }
    }
    Ok(scan)
}

/// A file identified, `None` if it is no symbol or binary file, or why it cannot be used.
fn examine(path: &Path) -> Result<Option<Found>, String> {
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut head = [0u8; 32];
    let n = read_up_to(&mut file, &mut head).map_err(|e| e.to_string())?;
    if !looks_like_symbols(&head[..n]) {
        return Ok(None);
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let info = identify_file(std::io::BufReader::new(file)).map_err(|e| e.to_string())?;
    let (size, sha256) = hash(path).map_err(|e| e.to_string())?;
    Ok(Some(Found {
        path: path.to_path_buf(),
        name: path.file_name().map(|n| n.to_string_lossy().into_owned()),
        size,
        sha256,
        info,
    }))
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The file's size and sha256, read in pieces.
pub fn hash(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => {
                hasher.update(&buf[..n]);
                size += n as u64;
            }
        }
    }
    Ok((size, hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::looks_like_symbols;

    #[test]
    fn magic_bytes_tell_symbol_files_from_others() {
        assert!(looks_like_symbols(b"\x7fELF\x02\x01\x01"));
        assert!(looks_like_symbols(&[0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1]));
        assert!(looks_like_symbols(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2]));
        // a Java class file (major version 52) shares the fat magic
        assert!(!looks_like_symbols(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52]));
        assert!(looks_like_symbols(b"MODULE Linux x86_64 0123 a.out\n"));
        assert!(looks_like_symbols(
            b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"
        ));
        assert!(looks_like_symbols(b"MZ\x90\0"));
        assert!(!looks_like_symbols(b"int main() { return 0; }\n"));
        assert!(!looks_like_symbols(b"\x7fEL"));
    }
}
