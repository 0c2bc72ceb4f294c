//! Symbol servers' compressed files: Microsoft's `compress.exe`/`makecab` store a file as a
//! one-file CAB archive under its name with the extension's last letter replaced by `_`
//! (`NAME.pd_`, `NAME.dl_`, `NAME.ex_`), MSZIP or LZX inside (the `cab` crate reads both).
//! A downloaded archive is a server's answer like any other: it may be cut short, hold no
//! file or several, a file of another name, or declare a size larger than any fetch may
//! be. [`extract`] takes the one file out, streamed to a temporary file beside the cache
//! (never whole in memory), refused with a [`CabError`] saying why otherwise.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// Why a compressed file gave no file.
#[derive(Debug, thiserror::Error)]
pub enum CabError {
    #[error("not a readable CAB archive: {0}")]
    Malformed(String),
    #[error("the CAB archive holds no file")]
    Empty,
    #[error("the CAB archive holds {0} files, not the one a symbol server stores")]
    Several(usize),
    #[error("the CAB archive holds {found:?}, not {asked:?}")]
    OtherName { found: String, asked: String },
    #[error("the CAB archive's file would be {size} bytes, over the {limit}-byte cap")]
    TooLarge { size: u64, limit: u64 },
    #[error("the CAB archive's file ends after {got} of its {size} bytes")]
    Truncated { got: u64, size: u64 },
    #[error("cannot decompress the CAB archive: {0}")]
    Decompress(String),
    #[error("cannot write the extracted file: {0}")]
    Disk(io::Error),
}

/// The name a symbol server stores file `name`'s compressed form under: the extension's
/// last character replaced by `_` (`a.pdb` → `a.pd_`); `None` for a name without an
/// extension, which has no compressed form.
pub fn compressed_name(name: &str) -> Option<String> {
    let (stem, ext) = name.rsplit_once('.')?;
    let mut ext: Vec<char> = ext.chars().collect();
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    ext.pop();
    ext.push('_');
    Some(format!("{stem}.{}", ext.into_iter().collect::<String>()))
}

/// The one file of the CAB archive `archive`, which must be named `name` (ASCII case
/// ignored, as Windows names are, and any directory in the archive's name too), written to
/// a new temporary file in `dir`; at most `max_bytes`, judged by the size the archive
/// declares before anything is decompressed.
pub fn extract(
    archive: &File,
    name: &str,
    dir: &Path,
    max_bytes: u64,
) -> Result<NamedTempFile, CabError> {
    // cab 0.6.0 indexes its blocks by the archive's offsets and can panic on a hostile
    // archive (a file starting past its folder's data: rust-cab issues #37 and #41, fixed
    // upstream after the release; an underflow on short blocks: #43); that is the
    // archive's fault, told as an error like any other
    extract_guarded(archive, Some(name), dir, max_bytes).map(|(file, _)| file)
}

/// The one file of the CAB archive `archive`, whatever its name (a compressed file a user
/// hands over: `NAME.pd_`, or one passed around under the plain `NAME.pdb`), written to a
/// new temporary file in `dir`, with the file's name as the archive stores it (its last
/// path component); at most `max_bytes`, as for [`extract`].
pub fn extract_single(
    archive: &File,
    dir: &Path,
    max_bytes: u64,
) -> Result<(NamedTempFile, String), CabError> {
    extract_guarded(archive, None, dir, max_bytes)
}

/// [`extract_unguarded`], with a panic of the CAB reader told as an error.
fn extract_guarded(
    archive: &File,
    name: Option<&str>,
    dir: &Path,
    max_bytes: u64,
) -> Result<(NamedTempFile, String), CabError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        extract_unguarded(archive, name, dir, max_bytes)
    }))
    .unwrap_or_else(|_| {
        Err(CabError::Decompress(
            "the CAB reader failed on this archive".into(),
        ))
    })
}

/// The archive's one file (which must be named `name`, where given) and its stored name.
fn extract_unguarded(
    archive: &File,
    name: Option<&str>,
    dir: &Path,
    max_bytes: u64,
) -> Result<(NamedTempFile, String), CabError> {
    let mut reader = archive;
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| CabError::Malformed(e.to_string()))?;
    let mut cabinet = cab::Cabinet::new(BufReader::new(reader))
        .map_err(|e| CabError::Malformed(e.to_string()))?;
    let files: Vec<(String, u64)> = cabinet
        .folder_entries()
        .flat_map(|folder| folder.file_entries())
        .map(|f| (f.name().to_string(), u64::from(f.uncompressed_size())))
        .collect();
    let (stored, size) = match files.as_slice() {
        [] => return Err(CabError::Empty),
        [one] => one.clone(),
        several => return Err(CabError::Several(several.len())),
    };
    let base = stored
        .rsplit(['\\', '/'])
        .next()
        .unwrap_or(&stored)
        .to_string();
    if let Some(name) = name {
        if !base.eq_ignore_ascii_case(name) {
            return Err(CabError::OtherName {
                found: stored,
                asked: name.to_string(),
            });
        }
    }
    if size > max_bytes {
        return Err(CabError::TooLarge {
            size,
            limit: max_bytes,
        });
    }
    let mut from = cabinet
        .read_file(&stored)
        .map_err(|e| CabError::Decompress(e.to_string()))?;
    let mut out = NamedTempFile::new_in(dir).map_err(CabError::Disk)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut got: u64 = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(CabError::Truncated { got, size })
            }
            Err(e) => return Err(CabError::Decompress(e.to_string())),
        };
        got = got.saturating_add(n as u64);
        if got > size {
            // the reader stops at the declared size; never write past it
            return Err(CabError::Decompress(
                "more data than the archive declares".into(),
            ));
        }
        out.write_all(buf.get(..n).unwrap_or_default())
            .map_err(CabError::Disk)?;
    }
    if got != size {
        return Err(CabError::Truncated { got, size });
    }
    out.as_file_mut().flush().map_err(CabError::Disk)?;
    Ok((out, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CAB archive of `files` (name, bytes), MSZIP-compressed, made with the
    /// cab crate's writer.
    fn cab_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = cab::CabinetBuilder::new();
        if !files.is_empty() {
            let folder = builder.add_folder(cab::CompressionType::MsZip);
            for (name, _) in files {
                folder.add_file(*name);
            }
        }
        let mut writer = builder
            .build(io::Cursor::new(Vec::new()))
            .expect("a CAB writer");
        let mut contents = files.iter();
        while let Some(mut w) = writer.next_file().expect("next file") {
            let (_, bytes) = contents.next().expect("one content per file");
            w.write_all(bytes).expect("write");
        }
        writer.finish().expect("finish").into_inner()
    }

    fn extract_bytes(bytes: &[u8], name: &str, max: u64) -> Result<Vec<u8>, CabError> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut archive = tempfile::tempfile().expect("temporary file");
        archive.write_all(bytes).expect("write");
        let out = extract(&archive, name, dir.path(), max)?;
        Ok(std::fs::read(out.path()).expect("read"))
    }

    fn contents() -> Vec<u8> {
        // compressible, and over one 32 KiB CAB block
        (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn compressed_names_replace_the_last_letter() {
        assert_eq!(compressed_name("a.pdb").as_deref(), Some("a.pd_"));
        assert_eq!(compressed_name("ntdll.dll").as_deref(), Some("ntdll.dl_"));
        assert_eq!(compressed_name("x.y.exe").as_deref(), Some("x.y.ex_"));
        assert_eq!(compressed_name("noext"), None);
        assert_eq!(compressed_name("trailing."), None);
        assert_eq!(compressed_name(".pdb").as_deref(), None);
    }

    #[test]
    fn the_one_file_of_any_name_comes_out_with_its_name() {
        let data = contents();
        let cab = cab_of(&[("build\\App.pdb", &data)]);
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut archive = tempfile::tempfile().expect("temporary file");
        archive.write_all(&cab).expect("write");
        let (out, name) = extract_single(&archive, dir.path(), 1 << 30).expect("extracted");
        assert_eq!(name, "App.pdb");
        assert_eq!(std::fs::read(out.path()).expect("read"), data);
        // the same limits as for a download
        assert!(matches!(
            extract_single(&archive, dir.path(), 10),
            Err(CabError::TooLarge { .. })
        ));
        let two = cab_of(&[("a.pdb", b"a"), ("b.pdb", b"b")]);
        let mut archive = tempfile::tempfile().expect("temporary file");
        archive.write_all(&two).expect("write");
        assert!(matches!(
            extract_single(&archive, dir.path(), 1 << 30),
            Err(CabError::Several(2))
        ));
    }

    #[test]
    fn the_one_file_comes_out_whole() {
        let data = contents();
        let cab = cab_of(&[("App.pdb", &data)]);
        assert!(cab.len() < data.len() / 4, "compressed: {}", cab.len());
        // case is ignored, as Windows ignores it
        let out = extract_bytes(&cab, "app.PDB", 1 << 30).expect("extracted");
        assert_eq!(out, data);
    }

    #[test]
    fn hostile_archives_are_refused_with_a_reason() {
        let data = contents();
        let good = cab_of(&[("a.pdb", &data)]);
        let err = |bytes: &[u8], max: u64| extract_bytes(bytes, "a.pdb", max).expect_err("refused");
        assert!(matches!(err(b"", 1 << 30), CabError::Malformed(_)));
        assert!(matches!(
            err(b"not a cab at all", 1 << 30),
            CabError::Malformed(_)
        ));
        assert!(matches!(err(&data, 1 << 30), CabError::Malformed(_)));
        for cut in [10, 40, good.len() / 2, good.len() - 1] {
            let e = err(good.get(..cut).expect("shorter"), 1 << 30);
            assert!(
                matches!(
                    e,
                    CabError::Malformed(_) | CabError::Truncated { .. } | CabError::Decompress(_)
                ),
                "cut at {cut}: {e}"
            );
        }
        assert!(matches!(err(&cab_of(&[]), 1 << 30), CabError::Empty));
        let two = cab_of(&[("a.pdb", b"x"), ("b.pdb", b"y")]);
        assert!(matches!(err(&two, 1 << 30), CabError::Several(2)));
        let other = cab_of(&[("evil.pdb", &data)]);
        assert!(
            matches!(err(&other, 1 << 30), CabError::OtherName { ref found, .. } if found == "evil.pdb")
        );
        let e = err(&good, 1000);
        assert!(
            matches!(e, CabError::TooLarge { size, limit: 1000 } if size == data.len() as u64),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "the CAB archive's file would be {} bytes, over the 1000-byte cap",
                data.len()
            )
        );
    }

    /// The file entry's fields (after the header, the folder entries): a declared size or
    /// offset changed after the archive was written.
    #[test]
    fn lying_file_entries_are_refused() {
        let data = contents();
        let good = cab_of(&[("a.pdb", &data)]);
        let first_file = u32::from_le_bytes(
            good.get(16..20)
                .and_then(|b| b.try_into().ok())
                .expect("coffFiles"),
        ) as usize;
        let patched = |at: usize, value: u32| {
            let mut b = good.clone();
            b.splice(at..at + 4, value.to_le_bytes());
            b
        };
        // CFFILE: cbFile (u32), uoffFolderStart (u32), …
        let huge = patched(first_file, u32::MAX);
        let e = extract_bytes(&huge, "a.pdb", 1 << 30).expect_err("refused");
        assert!(
            matches!(e, CabError::TooLarge { size, .. } if size == u64::from(u32::MAX)),
            "{e}"
        );
        let longer = patched(first_file, data.len() as u32 + 10);
        let e = extract_bytes(&longer, "a.pdb", 1 << 30).expect_err("refused");
        assert!(matches!(e, CabError::Truncated { .. }), "{e}");
        let shorter = patched(first_file, 10);
        assert_eq!(
            extract_bytes(&shorter, "a.pdb", 1 << 30).expect("the declared bytes"),
            data.get(..10).expect("ten bytes")
        );
        let past = patched(first_file + 4, data.len() as u32 * 2);
        let e = extract_bytes(&past, "a.pdb", 1 << 30).expect_err("refused");
        assert!(
            matches!(e, CabError::Decompress(_) | CabError::Truncated { .. }),
            "{e}"
        );
    }

    /// Every byte of a small archive flipped in turn, and every prefix: an error or the
    /// file, never a panic past [`extract`].
    #[test]
    fn corrupted_archives_never_panic() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 7) as u8).collect();
        let good = cab_of(&[("a.pdb", &data)]);
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = good.clone();
                if let Some(x) = b.get_mut(i) {
                    *x ^= flip;
                }
                let _ = extract_bytes(&b, "a.pdb", 1 << 20);
            }
            let _ = extract_bytes(good.get(..i).expect("prefix"), "a.pdb", 1 << 20);
        }
    }
}
