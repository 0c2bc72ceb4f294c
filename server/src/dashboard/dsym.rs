//! Apple images on the missing-symbols and crash pages: a module a Mac or iOS dump names
//! by UUID (its key the Breakpad debug id, the UUID and age `0`) is shown with its UUID
//! as Apple prints it, and the command that uploads its dSYM (zipped, as
//! `POST /api/v1/binaries` takes it) rather than the binary's.

/// Windows file names, whose debug ids (a PDB's GUID and age) look like a UUID's.
const WINDOWS_SUFFIXES: &[&str] = &[".dll", ".exe", ".sys", ".pdb", ".ocx", ".drv"];

/// The UUID (`4C4C4437-5555-3144-A14F-ACE88C39A0D2`) of a module missing under `key`
/// (its debug id) and named `name`, if it is an Apple image.
pub(super) fn apple_uuid(key: &str, name: &str) -> Option<String> {
    let hex = key.strip_suffix('0').filter(|h| h.len() == 32)?;
    if !hex
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase())
    {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    if WINDOWS_SUFFIXES.iter().any(|s| lower.ends_with(s)) {
        return None;
    }
    let part = |a: usize, b: usize| hex.get(a..b).unwrap_or_default();
    Some(format!(
        "{}-{}-{}-{}-{}",
        part(0, 8),
        part(8, 12),
        part(12, 16),
        part(16, 20),
        part(20, 32)
    ))
}

/// The command that zips module `name`'s dSYM bundle and uploads it.
/// `url` is the binaries route, with the project.
pub(super) fn upload_command(url: &str, name: &str, with_token: bool) -> String {
    let auth = if with_token {
        "-H \"Authorization: Bearer $TOKEN\" "
    } else {
        ""
    };
    // shell-quoted for the copy-paste, escaped by maud for HTML
    let bundle = format!("'{}.dSYM'", name.replace('\'', "'\\''"));
    let zip = format!("'{}.dSYM.zip'", name.replace('\'', "'\\''"));
    format!("zip -r {zip} {bundle} && curl {auth}--data-binary @{zip} {url}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apple_images_are_told_from_windows_ones() {
        assert_eq!(
            apple_uuid("4C4C443755553144A14FACE88C39A0D20", "crash_arm64").as_deref(),
            Some("4C4C4437-5555-3144-A14F-ACE88C39A0D2")
        );
        assert_eq!(
            apple_uuid("4C4C443755553144A14FACE88C39A0D20", "app.dll"),
            None
        );
        assert_eq!(apple_uuid("4c4c443755553144a14face88c39a0d2", "x"), None);
        assert_eq!(
            upload_command("http://h:1/api/v1/binaries", "My App", false),
            "zip -r 'My App.dSYM.zip' 'My App.dSYM' && curl --data-binary @'My App.dSYM.zip' http://h:1/api/v1/binaries"
        );
    }
}
