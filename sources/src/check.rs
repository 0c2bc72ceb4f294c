//! A fetched file is the build asked for, or it is not used: its GNU build-id note must
//! hold the id in the request. A server may be wrong, stale or hostile; a wrong libc's
//! symbols would name every frame wrongly and still look right.

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
