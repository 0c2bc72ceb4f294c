//! The `/proc/self/maps` copy a Linux minidump carries (`LinuxMaps` stream), read for the
//! four fields the module mappings need: start, end, file offset and whether the mapping
//! is executable.
//!
//! Read here rather than with the `minidump` crate's `MinidumpLinuxMaps`: that parser
//! (procfs-core) panics on some path fields (a `/SYSV` path shorter than 13 bytes slices
//! past its end — found by the `minidump` fuzz target), and a dump's bytes must never
//! panic the reader. Nothing here indexes by a number from the text; a line that does not
//! read is skipped, and the entries are never more than the stream's lines.
//!
//! Modules take their mappings with [`within`] from the list sorted by start, out of a
//! budget shared by all modules: a dump's module list and maps both come from the file,
//! and modules that all span the address space would otherwise each copy every mapping
//! (memory and time of modules × lines).

use super::Mapping;

/// The mappings of a `/proc/<pid>/maps` text: `start-end perms offset dev inode [path]`
/// per line, hexadecimal numbers; lines that do not read (or give an empty or reversed
/// range) are left out.
pub(super) fn parse(text: &[u8]) -> Vec<Mapping> {
    text.split(|&b| b == b'\n').filter_map(line).collect()
}

/// How many mappings the modules of a dump with `lines` mappings may look at in all:
/// each mapping once per module it lies in, for modules that overlap a few times.
pub(super) fn budget(lines: usize) -> usize {
    lines.saturating_mul(4).saturating_add(64)
}

/// The mappings of `sorted` (sorted by start) that lie inside `[base, end)`, each one
/// looked at taken from `budget`: none once it is spent.
pub(super) fn within(sorted: &[Mapping], base: u64, end: u64, budget: &mut usize) -> Vec<Mapping> {
    let from = sorted.partition_point(|m| m.start < base);
    let mut out = Vec::new();
    for m in sorted.get(from..).unwrap_or(&[]).iter() {
        if m.start >= end || *budget == 0 {
            break;
        }
        *budget -= 1;
        if m.end <= end {
            out.push(m.clone());
        }
    }
    out
}

fn line(line: &[u8]) -> Option<Mapping> {
    let mut fields = line
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|f| !f.is_empty());
    let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(range.get(..dash)?)?;
    let end = hex(range.get(dash + 1..)?)?;
    if start >= end || perms.len() != 4 {
        return None;
    }
    let executable = match perms.get(2)? {
        b'x' => true,
        b'-' => false,
        _ => return None,
    };
    Some(Mapping {
        start,
        end,
        file_offset: hex(offset)?,
        executable: Some(executable),
    })
}

fn hex(digits: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_the_mappings_need() {
        let text = b"55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234   /usr/bin/prog\n\
            55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234   /usr/bin/prog\n\
            7ffd1c9f0000-7ffd1ca11000 rw-p 00000000 00:00 0                          [stack]\n";
        let maps = parse(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(
            maps[1],
            Mapping {
                start: 0x55d0_c0a0_1000,
                end: 0x55d0_c0a0_2000,
                file_offset: 0x1000,
                executable: Some(true),
            }
        );
        assert_eq!(maps[0].executable, Some(false));
        assert_eq!(maps[2].start, 0x7ffd_1c9f_0000);
    }

    #[test]
    fn modules_take_the_mappings_inside_them_within_a_budget() {
        let text = b"1000-2000 r--p 0 0:0 0\n2000-3000 r-xp 1000 0:0 0\n\
            3000-5000 r--p 2000 0:0 0\n8000-9000 r-xp 0 0:0 0\n";
        let mut maps = parse(text);
        maps.sort_unstable_by_key(|m| m.start);
        let starts = |v: Vec<Mapping>| v.iter().map(|m| m.start).collect::<Vec<_>>();
        let mut left = budget(maps.len());
        // the last mapping reaches past the module's end
        assert_eq!(
            starts(within(&maps, 0x1000, 0x4000, &mut left)),
            [0x1000, 0x2000]
        );
        assert_eq!(starts(within(&maps, 0x8000, 0x9000, &mut left)), [0x8000]);
        assert!(within(&maps, 0x5000, 0x8000, &mut left).is_empty());
        // modules spanning everything: each looks at every mapping until the budget ends
        let mut modules = 0;
        let mut left = budget(maps.len());
        while !within(&maps, 0, u64::MAX, &mut left).is_empty() {
            modules += 1;
        }
        assert_eq!(modules, (4 * 4 + 64) / 4);
        assert_eq!(left, 0);
    }

    #[test]
    fn lines_that_do_not_read_are_left_out() {
        // paths procfs-core's parser panics on, among lines that are damaged
        let text = "1000-2000 r-xp 00000000 00:00 0 /SYSV\n\
            3000-4000 r-xp 00000000 00:00 0 [stack:\u{e9}\n\
            ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 /SYSV[vsyscall]\n\
            2000-1000 r-xp 0 00:00 0\n\
            5000-5000 r-xp 0 00:00 0\n\
            x-6000 r-xp 0 00:00 0\n\
            7000-8000 rwz 0 00:00 0\n\
            9000-a000 r-xp 10000000000000000 00:00 0\n\
            b000-c000\n\
            \n\
            \u{e9}\u{e9}-\u{e9}\n";
        let maps = parse(text.as_bytes());
        let starts: Vec<u64> = maps.iter().map(|m| m.start).collect();
        assert_eq!(starts, [0x1000, 0x3000, 0xffff_ffff_ff60_0000]);
    }
}
