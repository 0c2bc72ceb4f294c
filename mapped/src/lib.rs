//! Files opened by mapping them into memory: only the pages a walk touches are read.
//!
//! A kernel core is as large as the process's memory (160 MB for a 20-thread program),
//! and a one-shot walk reads a few stacks, the notes and some code from it: reading it
//! whole cost as much as the rest of the walk (the copy's fresh pages are faulted and
//! zeroed first). Mapping it costs a system call, and the walk faults in the pages it
//! reads, from the page cache. The same holds for the binaries and debug files whose
//! sections the on-demand tables read a part of, and for the service's workers, which
//! read the dumps and binaries in their blob store where they lie (issue 16: a worker
//! used to hold a whole copy of every dump it walked).
//!
//! This crate holds the project's `unsafe` code: `memmap2::Mmap::map` is unsafe because the
//! mapped bytes change if another process writes the file while it is mapped (and reading
//! past a truncated end raises SIGBUS), which safe Rust cannot rule out. Every other
//! program that maps its inputs (ripgrep, minidump-stackwalk, gdb through BFD) accepts the
//! same: a walk is of a dump and binaries at rest. [`Mapped::release`] drops pages the
//! reader is done with (`MADV_DONTNEED`): the mapping is private and read-only, so a later
//! read faults the same bytes in again from the file. The service's blobs are
//! content-addressed and written by renaming a finished file into place, so a stored
//! blob's file never changes under its readers (a sweep that removes one unlinks it; the
//! mapping keeps the old file). Whatever cannot be mapped (a pipe, an
//! empty file, a file system without mmap) is read instead.

#![allow(unsafe_code)] // this crate is the one exception to the workspace's `deny`

pub mod arenas;

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

#[cfg(unix)]
use memmap2::UncheckedAdvice;

/// A file's bytes: mapped, or read where mapping is not possible.
pub enum Mapped {
    Map(memmap2::Mmap),
    Read(Vec<u8>),
}

impl Mapped {
    /// Maps the file at `path`, or reads it when it cannot be mapped.
    pub fn open(path: &Path) -> std::io::Result<Mapped> {
        Mapped::of_file(File::open(path)?)
    }

    /// Maps an open file (from its start to its current end), or reads it from its
    /// current position when it cannot be mapped.
    pub fn of_file(mut file: File) -> std::io::Result<Mapped> {
        let meta = file.metadata()?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: see the module documentation: the file is not expected to change
            // while the walk reads it; if it does, the walk reads the new bytes (or is
            // stopped by SIGBUS past a truncated end), never memory outside the mapping.
            if let Ok(map) = unsafe { memmap2::MmapOptions::new().map(&file) } {
                return Ok(Mapped::Map(map));
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Mapped::Read(bytes))
    }

    /// Gives back the memory of the whole pages inside `range`, which the caller will not
    /// read again soon (a compressed section once inflated): they leave the process's
    /// resident set, and a read of them later faults them in again, unchanged. Read
    /// bytes and ranges outside the file are left alone; a failure only keeps the pages.
    pub fn release(&self, range: Range<usize>) {
        let Mapped::Map(map) = self else { return };
        let page = 4096;
        let (Some(start), end) = (range.start.checked_next_multiple_of(page), range.end) else {
            return;
        };
        let end = end.min(map.len()) / page * page;
        if start >= end {
            return;
        }
        #[cfg(unix)]
        // SAFETY: the mapping is private and read-only (`Mmap`): nothing was written to
        // its pages, so after MADV_DONTNEED a read faults in the file's same bytes, and a
        // reference into them still sees what it saw (the module documentation's premise:
        // the file does not change under the walk). The range lies inside the mapping
        // (memmap2 widens it to whole pages where the page is larger than 4 KiB: those
        // pages are read back from the file just the same).
        let _ =
            unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start) };
        #[cfg(not(unix))]
        let _ = (map, start, end);
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        match self {
            Mapped::Map(m) => m,
            Mapped::Read(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_pipes_and_empty_files_read_the_same() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let m = Mapped::open(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(m, Mapped::Map(_)), "a regular file is mapped");
        assert_eq!(m.as_ref(), &bytes[..]);

        let empty = dir.path().join("e");
        std::fs::write(&empty, b"").unwrap_or_else(|e| panic!("{e}"));
        let m = Mapped::open(&empty).unwrap_or_else(|e| panic!("{e}"));
        assert!(m.as_ref().is_empty());

        // a named pipe cannot be mapped: it is read
        let fifo = dir.path().join("p");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(made.success());
        let writer = {
            let (fifo, bytes) = (fifo.clone(), bytes.clone());
            std::thread::spawn(move || std::fs::write(fifo, bytes))
        };
        let m = Mapped::open(&fifo).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(m, Mapped::Read(_)));
        assert_eq!(m.as_ref(), &bytes[..]);
        writer
            .join()
            .unwrap_or_else(|_| panic!("writer"))
            .unwrap_or_else(|e| panic!("{e}"));

        assert!(Mapped::open(&dir.path().join("missing")).is_err());
    }

    /// The resident kilobytes of the mapping that starts at `at` (smaps' `Rss:`).
    fn resident_kb(at: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let start = line.split('-').next()?;
            if usize::from_str_radix(start, 16).ok() != Some(at) {
                continue;
            }
            return lines
                .find_map(|l| l.strip_prefix("Rss:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok();
        }
        None
    }

    /// Released pages leave the process's resident set (the kernel's own count, smaps)
    /// and read back as the same bytes; a range not on page boundaries gives back only
    /// the whole pages inside it, and read bytes ignore it.
    #[cfg(target_os = "linux")]
    #[test]
    fn released_pages_leave_memory_and_read_the_same() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let m = Mapped::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let at = m.as_ref().as_ptr() as usize;
        let sum = |m: &Mapped| m.as_ref().iter().map(|&b| u64::from(b)).sum::<u64>();
        let all = sum(&m);
        let before = resident_kb(at).unwrap_or_else(|| panic!("no smaps entry"));
        assert!(before >= 4000, "all 4 MiB read: {before} kB resident");
        // 3 MiB, not page-aligned at either end
        m.release(100..(3 << 20) + 100);
        let after = resident_kb(at).unwrap_or_else(|| panic!("no smaps entry"));
        assert!(
            after <= before - 3000,
            "{before} kB resident, then {after} kB"
        );
        assert_eq!(sum(&m), all, "the same bytes read back");
        assert_eq!(m.as_ref(), &bytes[..]);

        let read = Mapped::Read(bytes.clone());
        read.release(0..bytes.len());
        assert_eq!(read.as_ref(), &bytes[..]);
    }
}
