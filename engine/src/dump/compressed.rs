//! Dumps as systems store them: a core or minidump compressed with zstd (systemd-coredump's
//! default), xz or lz4 (its other choices), bzip2 (as elfutils and many bug trackers ship
//! cores) or gzip, told apart by their magic bytes and decompressed before the walk.
//!
//! The caller gives the reader and the writer: the CLI decompresses into a temporary file
//! (a core decompresses to gigabytes; the file is mapped afterwards, like any dump), so
//! this module touches no file itself. What is bounded: the decompressed size ([`Limit`]; a small hostile
//! file may claim terabytes), and so the time; the decoders' own memory (zstd's window,
//! xz's dictionary) is bounded by their crates and by that size. Not handled: archives
//! (`.tar`, `.zip`) and a compressed file inside a compressed file.

use std::io::{BufRead, BufReader, Read, Write};

/// A compression format a dump may come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Xz,
    Lz4,
    Bzip2,
    Gzip,
}

impl Compression {
    /// The format whose magic bytes `prefix` starts with, if any. A dump's own magics
    /// (`\x7fELF`, `MDMP`) are none of these.
    pub fn of(prefix: &[u8]) -> Option<Compression> {
        const MAGICS: [(&[u8], Compression); 5] = [
            (&[0x28, 0xb5, 0x2f, 0xfd], Compression::Zstd),
            (&[0xfd, b'7', b'z', b'X', b'Z', 0], Compression::Xz),
            (&[0x04, 0x22, 0x4d, 0x18], Compression::Lz4),
            (b"BZh", Compression::Bzip2),
            (&[0x1f, 0x8b], Compression::Gzip),
        ];
        MAGICS
            .iter()
            .find(|(magic, _)| prefix.starts_with(magic))
            .map(|&(_, c)| c)
    }

    /// The name users know the format by (its file extension).
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Lz4 => "lz4",
            Compression::Bzip2 => "bzip2",
            Compression::Gzip => "gzip",
        }
    }
}

/// The most bytes a compressed dump may decompress to.
#[derive(Clone, Copy, Debug)]
pub struct Limit(pub u64);

/// Why a compressed dump could not be decompressed.
#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    #[error("the {format} data decompresses to more than {limit} bytes (the limit; see --max-decompressed-size)")]
    TooLarge { format: &'static str, limit: u64 },
    #[error("the {format} data is corrupt or cut short: {message}")]
    Corrupt {
        format: &'static str,
        message: String,
    },
    #[error("writing the decompressed dump: {0}")]
    Write(std::io::Error),
}

/// Decompresses `input` (in format `format`) into `out`, at most `limit` bytes of it.
/// Returns the decompressed size.
pub fn decompress(
    format: Compression,
    input: impl Read,
    out: impl Write,
    limit: Limit,
) -> Result<u64, DecompressError> {
    let mut sink = Bounded {
        out,
        written: 0,
        limit: limit.0,
        over: false,
        failed: None,
    };
    let mut input = BufReader::new(input);
    let result = match format {
        Compression::Zstd => zstd_frames(&mut input, &mut sink),
        Compression::Xz => lzma_rs::xz_decompress(&mut input, &mut sink).map_err(|e| e.to_string()),
        Compression::Lz4 => copy(lz4_flex::frame::FrameDecoder::new(input), &mut sink),
        Compression::Bzip2 => copy(bzip2::read::MultiBzDecoder::new(input), &mut sink),
        Compression::Gzip => copy(flate2::read::MultiGzDecoder::new(input), &mut sink),
    };
    // The sink's own verdict first: a decoder reports a refused write as its own error.
    if sink.over {
        return Err(DecompressError::TooLarge {
            format: format.name(),
            limit: limit.0,
        });
    }
    if let Some(e) = sink.failed.take() {
        return Err(DecompressError::Write(e));
    }
    result.map_err(|message| DecompressError::Corrupt {
        format: format.name(),
        message,
    })?;
    sink.out.flush().map_err(DecompressError::Write)?;
    Ok(sink.written)
}

/// Every zstd frame of the input, one after another (as `zstd -d` reads concatenated
/// frames).
fn zstd_frames(input: &mut impl BufRead, out: &mut impl Write) -> Result<(), String> {
    loop {
        if input.fill_buf().map_err(|e| e.to_string())?.is_empty() {
            return Ok(());
        }
        let frame =
            ruzstd::decoding::StreamingDecoder::new(&mut *input).map_err(|e| e.to_string())?;
        copy(frame, out)?;
    }
}

fn copy(mut from: impl Read, to: &mut impl Write) -> Result<(), String> {
    std::io::copy(&mut from, to)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A writer that refuses the bytes past its limit, remembering why it refused.
struct Bounded<W> {
    out: W,
    written: u64,
    limit: u64,
    over: bool,
    failed: Option<std::io::Error>,
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let len = buf.len() as u64;
        if self.written.saturating_add(len) > self.limit {
            self.over = true;
            return Err(std::io::Error::other("decompressed size limit reached"));
        }
        match self.out.write(buf) {
            Ok(n) => {
                self.written += n as u64;
                Ok(n)
            }
            Err(e) => {
                let kind = e.kind();
                self.failed = Some(e);
                Err(std::io::Error::new(kind, "writing the decompressed dump"))
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::process::Command;

    /// Compresses `data` with the system's own tool (`zstd`, `xz`, …), as systemd-coredump
    /// and users make these files; `None` when the tool is not installed.
    fn compress_with(tool: &str, data: &[u8]) -> Option<Vec<u8>> {
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("core");
        std::fs::write(&path, data).ok()?;
        let out = Command::new(tool).arg("-c").arg(&path).output().ok()?;
        out.status.success().then_some(out.stdout)
    }

    fn sample() -> Vec<u8> {
        // a core's shape: an ELF magic, then long runs and varied bytes
        let mut v = b"\x7fELF\x02\x01\x01".to_vec();
        v.extend((0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        v.extend(std::iter::repeat_n(0u8, 200_000));
        v
    }

    #[test]
    fn each_format_as_its_own_tool_writes_it_comes_back_whole() {
        let data = sample();
        for (tool, format) in [
            ("zstd", Compression::Zstd),
            ("xz", Compression::Xz),
            ("lz4", Compression::Lz4),
            ("bzip2", Compression::Bzip2),
            ("gzip", Compression::Gzip),
        ] {
            let Some(packed) = compress_with(tool, &data) else {
                eprintln!("skipped: `{tool}` is not installed");
                continue;
            };
            assert_eq!(Compression::of(&packed), Some(format), "{tool}");
            let mut out = Vec::new();
            let n = decompress(format, &packed[..], &mut out, Limit(1 << 30)).unwrap();
            assert_eq!(n, data.len() as u64, "{tool}");
            assert!(out == data, "{tool}: the bytes differ");
        }
    }

    #[test]
    fn dumps_themselves_are_not_compressed() {
        assert_eq!(Compression::of(b"\x7fELF\x02\x01"), None);
        assert_eq!(Compression::of(b"MDMP\x93\xa7"), None);
        assert_eq!(Compression::of(b""), None);
    }

    /// A bomb: 64 MiB of zeros compress to a few kilobytes; with a 1 MiB limit the
    /// decompression stops at the limit with a typed error, having written no more.
    #[test]
    fn a_bomb_stops_at_the_limit() {
        let zeros = vec![0u8; 64 << 20];
        for (tool, format) in [("zstd", Compression::Zstd), ("xz", Compression::Xz)] {
            let Some(packed) = compress_with(tool, &zeros) else {
                eprintln!("skipped: `{tool}` is not installed");
                continue;
            };
            assert!(packed.len() < 1 << 20, "{tool}: {}", packed.len());
            let mut out = Vec::new();
            let err = decompress(format, &packed[..], &mut out, Limit(1 << 20)).unwrap_err();
            assert!(
                matches!(err, DecompressError::TooLarge { limit, .. } if limit == 1 << 20),
                "{tool}: {err}"
            );
            assert!(out.len() <= 1 << 20, "{tool}: wrote {}", out.len());
        }
    }

    #[test]
    fn garbage_after_a_magic_is_a_typed_error() {
        for format in [
            Compression::Zstd,
            Compression::Xz,
            Compression::Lz4,
            Compression::Bzip2,
            Compression::Gzip,
        ] {
            let mut bytes = match format {
                Compression::Zstd => vec![0x28, 0xb5, 0x2f, 0xfd],
                Compression::Xz => vec![0xfd, b'7', b'z', b'X', b'Z', 0],
                Compression::Lz4 => vec![0x04, 0x22, 0x4d, 0x18],
                Compression::Bzip2 => b"BZh9".to_vec(),
                Compression::Gzip => vec![0x1f, 0x8b],
            };
            bytes.extend((0..5000u32).map(|i| (i * 7919 % 251) as u8));
            let mut out = Vec::new();
            let r = decompress(format, &bytes[..], &mut out, Limit(1 << 20));
            assert!(
                matches!(r, Err(DecompressError::Corrupt { .. })),
                "{format:?}: {r:?}"
            );
        }
    }
}
