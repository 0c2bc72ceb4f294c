//! The cheap structural checks of an upload, the same ones the dump readers make first,
//! so that a file that cannot be a dump is refused with 422 at upload (and not stored,
//! to fail as a job later): the magic bytes; for an ELF core its type, a program header
//! table inside the file with entries of the class's size; for a minidump its version, a
//! stream directory inside the file, a plausible number of streams and a system-info
//! stream (the reader needs it to know the CPU). Only the header and the minidump's
//! directory are read, from the staged file.

use worker::store::StagedBlob;

use super::problem::ApiError;

/// `MINIDUMP_VERSION`, the low half of the header's version field.
const MINIDUMP_VERSION: u64 = 0xa793;
/// Most streams a minidump may list. Breakpad, Crashpad and minidump-writer write a few
/// dozen; a directory of a million (empty) entries is not a dump.
const MAX_STREAMS: u64 = 4096;
/// `SystemInfoStream`.
const SYSTEM_INFO_STREAM: u32 = 7;
/// Size of one minidump directory entry (type, size, rva).
const DIRECTORY_ENTRY: u64 = 12;

/// The dump format (`elf-core`, `minidump`, `apple-ips`, `apple-crash`,
/// `android-tombstone` (also taken from a logcat), `android-tombstone-proto` or a logcat's
/// Breakpad `microdump`) of a staged upload, or why it is refused.
pub async fn check(dump: &StagedBlob) -> Result<&'static str, ApiError> {
    let head = dump.read_at(0, HEAD_BYTES).await?;
    if engine::dump::android::sniff(&head).is_some() {
        return check_android(dump).await;
    }
    // a logcat is told by its first whole line, longer than the head (and starting with a
    // digit, as a threadtime line does: no Apple report's first byte)
    let magic = head.starts_with(b"\x7fELF") || head.starts_with(b"MDMP");
    if !magic && engine::dump::android::logcat::sniff(&dump.read_at(0, LOGCAT_HEAD_BYTES).await?) {
        return check_android(dump).await;
    }
    if could_be_text_report(&head) {
        return check_apple(dump).await;
    }
    let format = check_head(&head, dump.size())?;
    if format == "minidump" {
        let field = |o: usize| {
            head.get(o..o + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let (Some(count), Some(rva)) = (field(8), field(12)) else {
            return Err(malformed("the minidump header is incomplete".into()));
        };
        // Bounded by MAX_STREAMS (checked above): at most 48 KiB.
        let len = usize::try_from(u64::from(count) * DIRECTORY_ENTRY).unwrap_or(usize::MAX);
        let dir = dump.read_at(u64::from(rva), len).await?;
        check_directory(&dir, dump.size())?;
    }
    Ok(format)
}

/// Whether an upload may be an Apple crash report: text that starts (after blank lines)
/// with a JSON object or a word — never an ELF or minidump magic.
fn could_be_text_report(head: &[u8]) -> bool {
    head.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{' || b.is_ascii_alphabetic())
        && !head.starts_with(b"MDMP")
}

/// An Apple crash report (`.ips`, `.crash`) is small: it is read whole (at most
/// `engine::dump::apple::MAX_REPORT_BYTES`) and parsed, off the async threads, so that one
/// the reader refuses is refused here with the reader's reason.
async fn check_apple(dump: &StagedBlob) -> Result<&'static str, ApiError> {
    use engine::dump::apple;
    let not_a_dump = || ApiError::Unprocessable {
        code: "not-a-dump",
        detail: "not a crash dump: neither an ELF core, a minidump nor an Apple crash \
                 report (.ips, .crash)"
            .into(),
    };
    let size = usize::try_from(dump.size()).unwrap_or(usize::MAX);
    if size > apple::MAX_REPORT_BYTES {
        return Err(not_a_dump());
    }
    let bytes = dump.read_at(0, size).await?;
    let Some(format) = apple::sniff(&bytes) else {
        return Err(not_a_dump());
    };
    let parsed = tokio::task::spawn_blocking(move || apple::parse(&bytes).map(|_| ()))
        .await
        .map_err(|e| malformed(format!("the report's check failed: {e}")))?;
    parsed.map_err(|e| malformed(e.to_string()))?;
    Ok(match format {
        apple::AppleFormat::Ips => "apple-ips",
        apple::AppleFormat::Crash => "apple-crash",
    })
}

/// An Android tombstone (text or `tombstone.proto`) is read whole (at most
/// `engine::dump::android::MAX_TOMBSTONE_BYTES`) and parsed off the async threads, so that
/// one the reader refuses is refused here with the reader's reason. Bytes that merely
/// start as a proto might (no text header, no build fingerprint) and do not decode are
/// not a dump.
async fn check_android(dump: &StagedBlob) -> Result<&'static str, ApiError> {
    use engine::dump::android;
    let not_a_dump = || ApiError::Unprocessable {
        code: "not-a-dump",
        detail: "not a crash dump: neither an ELF core, a minidump, an Apple crash report \
                 nor an Android tombstone"
            .into(),
    };
    let size = usize::try_from(dump.size()).unwrap_or(usize::MAX);
    if size > android::MAX_TOMBSTONE_BYTES {
        return Err(not_a_dump());
    }
    let bytes = dump.read_at(0, size).await?;
    if !android::text::has_header(&bytes) && engine::dump::microdump::sniff(&bytes) {
        // a logcat holding a Breakpad microdump is read for it, as read_dump does
        let read =
            tokio::task::spawn_blocking(move || engine::dump::microdump::read(&bytes).map(|_| ()))
                .await
                .map_err(|e| malformed(format!("the microdump's check failed: {e}")))?;
        return read
            .map(|()| "microdump")
            .map_err(|e| malformed(e.to_string()));
    }
    let certain = android::sniff(&bytes) == Some(android::TombstoneFormat::Text)
        || android::proto::fingerprinted(&bytes);
    let parsed = tokio::task::spawn_blocking(move || android::parse(&bytes).map(|t| t.format))
        .await
        .map_err(|e| malformed(format!("the tombstone's check failed: {e}")))?;
    match parsed {
        Ok(android::TombstoneFormat::Text) => Ok("android-tombstone"),
        Ok(android::TombstoneFormat::Proto) => Ok("android-tombstone-proto"),
        Err(e) if certain => Err(malformed(e.to_string())),
        Err(_) => Err(not_a_dump()),
    }
}

fn malformed(detail: String) -> ApiError {
    ApiError::Unprocessable {
        code: "malformed-dump",
        detail: format!("not a readable crash dump: {detail}"),
    }
}

/// A minidump's directory must hold a system-info stream inside the file.
fn check_directory(dir: &[u8], len: u64) -> Result<(), ApiError> {
    let system_info = dir.chunks_exact(DIRECTORY_ENTRY as usize).find_map(|e| {
        let word = |o: usize| u32::from_le_bytes([e[o], e[o + 1], e[o + 2], e[o + 3]]);
        (word(0) == SYSTEM_INFO_STREAM).then(|| (u64::from(word(4)), u64::from(word(8))))
    });
    match system_info {
        None => Err(malformed(
            "the minidump has no system info stream, so its CPU is unknown".into(),
        )),
        Some((size, rva)) if size == 0 || rva.saturating_add(size) > len => Err(malformed(
            "the minidump's system info stream lies outside the file".into(),
        )),
        Some(_) => Ok(()),
    }
}

/// Bytes of a dump's start that [`check_head`] reads: the largest header it checks.
const HEAD_BYTES: usize = 64;
/// Bytes of an upload's start in which a logcat's first line must end (logcat's prefix
/// is under 100 bytes; a logged line under 4 KiB, liblog's `LOGGER_ENTRY_MAX_PAYLOAD`).
const LOGCAT_HEAD_BYTES: usize = 8192;

/// The dump format, from the magic bytes and header completeness: `b` is the start of
/// the dump (up to [`HEAD_BYTES`]), `len` its whole size.
fn check_head(b: &[u8], len: u64) -> Result<&'static str, ApiError> {
    let head = Head { b, len };
    if b.starts_with(b"\x7fELF") {
        head.elf_core()
    } else if b.starts_with(b"MDMP") {
        head.minidump()
    } else if len == 0 {
        Err(ApiError::Unprocessable {
            code: "not-a-dump",
            detail: "the upload is empty".into(),
        })
    } else {
        Err(ApiError::Unprocessable {
            code: "not-a-dump",
            detail: "not a crash dump: the file starts with neither an ELF nor a minidump magic"
                .into(),
        })
    }
}

/// A dump's first bytes (`b`, up to [`HEAD_BYTES`]) and its whole size.
struct Head<'a> {
    b: &'a [u8],
    len: u64,
}

impl Head<'_> {
    fn truncated(&self, what: &str) -> ApiError {
        ApiError::Unprocessable {
            code: "truncated-dump",
            detail: format!(
                "the dump is truncated: {what} (received {} bytes)",
                self.len
            ),
        }
    }

    /// The `N`-byte unsigned integer at `o`, little- or big-endian.
    fn uint<const N: usize>(&self, o: usize, le: bool) -> Option<u64> {
        let s: [u8; N] = self.b.get(o..o.checked_add(N)?)?.try_into().ok()?;
        let mut bytes = [0u8; 8];
        if le {
            bytes[..N].copy_from_slice(&s);
            Some(u64::from_le_bytes(bytes))
        } else {
            bytes[8 - N..].copy_from_slice(&s);
            Some(u64::from_be_bytes(bytes))
        }
    }

    fn u16_at(&self, o: usize, le: bool) -> Option<u64> {
        self.uint::<2>(o, le)
    }

    fn u32_at(&self, o: usize, le: bool) -> Option<u64> {
        self.uint::<4>(o, le)
    }

    fn u64_at(&self, o: usize, le: bool) -> Option<u64> {
        self.uint::<8>(o, le)
    }

    /// An ELF core's header and program header table: complete, and of a core.
    fn elf_core(&self) -> Result<&'static str, ApiError> {
        let (b, len) = (self.b, self.len);
        let is64 = match b.get(4) {
            Some(2) => true,
            Some(1) => false,
            Some(_) => {
                return Err(ApiError::Unprocessable {
                    code: "not-a-dump",
                    detail: "not a crash dump: unknown ELF class".into(),
                })
            }
            None => return Err(self.truncated("the ELF header is incomplete")),
        };
        let le = b.get(5) != Some(&2);
        let header_len = if is64 { 64 } else { 52 };
        if len < header_len {
            return Err(self.truncated("the ELF header is incomplete"));
        }
        let e_type = self
            .u16_at(16, le)
            .ok_or_else(|| self.truncated("the ELF header is incomplete"))?;
        if e_type != 4 {
            return Err(ApiError::Unprocessable {
            code: "not-a-core",
            detail: format!("this ELF file is not a core dump (e_type {e_type}: an executable or library?); binaries go to /api/v1/binaries"),
        });
        }
        let (phoff, entsize, num) = if is64 {
            (
                self.u64_at(32, le),
                self.u16_at(54, le),
                self.u16_at(56, le),
            )
        } else {
            (
                self.u32_at(28, le),
                self.u16_at(42, le),
                self.u16_at(44, le),
            )
        };
        let end = match (phoff, entsize, num) {
            (Some(o), Some(e), Some(n)) => e.checked_mul(n).and_then(|x| x.checked_add(o)),
            _ => None,
        };
        if end.is_none_or(|end| end > len) || num == Some(0) {
            return Err(self.truncated("the program headers run past the end of the file"));
        }
        // The reader's first check: entries of another size cannot be program headers.
        let want = if is64 { 56 } else { 32 };
        if entsize != Some(want) {
            return Err(malformed(format!(
                "program header entries of {} bytes (this ELF class uses {want})",
                entsize.unwrap_or(0)
            )));
        }
        Ok("elf-core")
    }

    /// A minidump's header and stream directory: a known version, a sane stream count,
    /// the directory within the file.
    fn minidump(&self) -> Result<&'static str, ApiError> {
        let len = self.len;
        let (Some(version), Some(count), Some(rva)) = (
            self.u32_at(4, true),
            self.u32_at(8, true),
            self.u32_at(12, true),
        ) else {
            return Err(self.truncated("the minidump header is incomplete"));
        };
        if version & 0xffff != MINIDUMP_VERSION {
            return Err(malformed(format!(
                "unknown minidump version {:#x}",
                version & 0xffff
            )));
        }
        if count == 0 {
            return Err(malformed("the minidump has no streams".into()));
        }
        if count > MAX_STREAMS {
            return Err(malformed(format!(
                "the minidump lists {count} streams (writers list a few dozen; at most \
             {MAX_STREAMS} are accepted)"
            )));
        }
        if count
            .checked_mul(12)
            .and_then(|x| x.checked_add(rva))
            .is_none_or(|end| end > len)
        {
            return Err(self.truncated("the stream directory runs past the end of the file"));
        }
        Ok("minidump")
    }
}
