//! The name an uploaded symbol file is sent under (`X-File-Name`, or a multipart part's
//! filename): decoded and checked once, here. A Windows image is matched to a crash by
//! this name, so it must be a plain file name: UTF-8 (RFC 8187 `UTF-8''percent%20encoded`
//! or raw UTF-8 bytes), at most [`MAX_NAME_BYTES`] bytes, without a path separator, `..`,
//! NUL or other control characters.

use super::problem::ApiError;

/// Longest file name accepted, in bytes (the limit of common file systems).
pub const MAX_NAME_BYTES: usize = 255;

/// Decodes an `X-File-Name` value: RFC 8187's `UTF-8''…` (percent-encoded UTF-8), else
/// the header's bytes as UTF-8. The result is checked by [`check`].
pub fn from_header(value: &[u8]) -> Result<String, ApiError> {
    let prefix = b"utf-8''";
    let decoded: Vec<u8> = match value.get(..prefix.len()) {
        Some(p) if p.eq_ignore_ascii_case(prefix) => {
            let rest = value.get(prefix.len()..).unwrap_or_default();
            percent_encoding::percent_decode(rest).collect()
        }
        _ => value.to_vec(),
    };
    let name = String::from_utf8(decoded).map_err(|_| bad("X-File-Name is not UTF-8".into()))?;
    check(&name)?;
    Ok(name)
}

/// Checks a file name: not empty, at most [`MAX_NAME_BYTES`] bytes, no `/`, `\`, `..`,
/// NUL or control characters.
pub fn check(name: &str) -> Result<(), ApiError> {
    let shown: String = name.chars().take(80).collect();
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(bad(format!(
            "the file name must be 1 to {MAX_NAME_BYTES} bytes, not {} ({shown:?}…)",
            name.len()
        )));
    }
    if name.contains(['/', '\\']) || name.contains("..") || name.chars().any(char::is_control) {
        return Err(bad(format!(
            "the file name {shown:?} must be a plain file name: no path separator, `..` or \
             control character"
        )));
    }
    Ok(())
}

fn bad(detail: String) -> ApiError {
    ApiError::BadRequest {
        code: "bad-file-name",
        detail,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn code(r: Result<String, ApiError>) -> Result<String, String> {
        r.map_err(|e| match e {
            ApiError::BadRequest { code, .. } => code.to_string(),
            other => other.to_string(),
        })
    }

    /// Issue 34, finding 4: names as RFC 8187 and raw UTF-8 are accepted; path names,
    /// `..`, NUL, over-long names and bytes that are not UTF-8 are refused.
    #[test]
    fn names_are_decoded_and_checked() {
        assert_eq!(code(from_header(b"hello.exe")), Ok("hello.exe".into()));
        assert_eq!(
            code(from_header("h\u{e9}llo.exe".as_bytes())),
            Ok("h\u{e9}llo.exe".into())
        );
        assert_eq!(
            code(from_header(b"UTF-8''h%C3%A9llo%20w.exe")),
            Ok("h\u{e9}llo w.exe".into())
        );
        for bad in [
            b"../../etc/passwd".as_slice(),
            b"a/b.exe",
            b"a\\b.exe",
            b"..",
            b"UTF-8''..%2Fx.exe",
            b"a\0b",
            b"UTF-8''a%00b",
            b"\xff\xfe.exe",
            b"",
        ] {
            assert_eq!(
                code(from_header(bad)),
                Err("bad-file-name".into()),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(
            code(from_header(long.as_bytes())),
            Err("bad-file-name".into())
        );
        let longest = "\u{e9}".repeat(MAX_NAME_BYTES / 2);
        assert!(from_header(longest.as_bytes()).is_ok());
    }
}
