//! A fetched file is the build asked for, or it is not used: a binary's GNU build-id note
//! must hold the id in the request, a `.sym` file's `MODULE` line the debug-id. A server
//! may be wrong, stale or hostile; a wrong libc's symbols would name every frame wrongly
//! and still look right.

use std::fs::File;

use object::Object;

/// Why a fetched file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the file is not an object file postmortem reads")]
    NotObject,
    #[error("the file has no build-id")]
    NoBuildId,
    #[error("the file has build-id {found}, not the {asked} asked for")]
    OtherBuild { found: String, asked: String },
    #[error("the file has no Breakpad MODULE line")]
    NotSym,
    #[error("the .sym file is of debug-id {found}, not the {asked} asked for")]
    OtherSym { found: String, asked: String },
    #[error("the file is not a Windows image of code id {asked} (found {found})")]
    OtherImage { found: String, asked: String },
    #[error("the file is not a PDB of debug id {asked} (found {found})")]
    OtherPdb { found: String, asked: String },
}

/// Checks that `file` (read lazily: its headers) is a PE image of code id `asked`
/// (upper-case).
pub fn same_pe(file: &File, asked: &str) -> Result<(), Refused> {
    let cache = object::read::ReadCache::new(file);
    let obj = object::File::parse(&cache).map_err(|_| Refused::NotObject)?;
    let found = engine::binary::pe_code_id(&obj).unwrap_or_else(|| "none".into());
    if found == asked {
        Ok(())
    } else {
        Err(Refused::OtherImage {
            found,
            asked: asked.to_string(),
        })
    }
}

/// Checks that `file` (only the streams that identify it are read) is a PDB of debug id
/// `asked` (upper-case).
pub fn same_pdb(file: &File, asked: &str) -> Result<(), Refused> {
    let found = match engine::identify::identify_file(file) {
        Ok(info) if info.format == "pdb" => info.debug_id.unwrap_or_default(),
        _ => "none".into(),
    };
    if found == asked {
        Ok(())
    } else {
        Err(Refused::OtherPdb {
            found,
            asked: asked.to_string(),
        })
    }
}

/// Checks that `file` is a Breakpad `.sym` file whose `MODULE` line says `asked`
/// (upper-case).
pub fn same_sym(file: &File, asked: &str) -> Result<(), Refused> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 4096];
    let mut n = 0;
    while n < head.len() {
        match file.read_at(head.get_mut(n..).unwrap_or_default(), n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Refused::NotSym),
        }
    }
    let module = engine::breakpad::parse_module_line(head.get(..n).unwrap_or_default())
        .ok_or(Refused::NotSym)?;
    if module.debug_id == asked {
        Ok(())
    } else {
        Err(Refused::OtherSym {
            found: module.debug_id,
            asked: asked.to_string(),
        })
    }
}

/// Checks that `file` (read lazily, a few pages) has build-id `asked` (lower-case hex).
pub fn same_build(file: &File, asked: &str) -> Result<(), Refused> {
    let cache = object::read::ReadCache::new(file);
    let obj = object::File::parse(&cache).map_err(|_| Refused::NotObject)?;
    let id = match obj.build_id() {
        Ok(Some(id)) => id.to_vec(),
        _ => return Err(Refused::NoBuildId),
    };
    let found: String = id.iter().map(|b| format!("{b:02x}")).collect();
    if found == asked {
        Ok(())
    } else {
        Err(Refused::OtherBuild {
            found,
            asked: asked.to_string(),
        })
    }
}
