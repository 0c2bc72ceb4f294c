//! The address ranges of a line program's sequences, read without building its rows.
//!
//! The on-demand symbol index ([`super::on_demand`]) needs, for every unit, the ranges of
//! its line sequences (glibc's units reach past their `.debug_aranges`). gimli's
//! `IncompleteLineProgram::sequences` answers that, but parses each header's directory and
//! file tables and builds every row: in a cold walk of a core of a C++ program that was
//! a tenth of the time. A sequence's range needs only the address register, so this
//! reader skips the header's tables (`header_length` says where the opcodes begin) and
//! runs the opcodes tracking the address, the operation index and gimli's tombstone rule.
//!
//! It reads with gimli's own primitives (LEB128, addresses, extended-opcode lengths) and
//! follows gimli 0.34's `LineRow::execute`/`next_row`/`sequences` step for step, so where
//! gimli gives sequences this gives the same ones, and where gimli fails on the opcodes
//! this fails too. It declines (`Skipped`) only `DW_LNE_define_file` (DWARF ≤ 4), whose
//! operands gimli parses as a file entry: the caller then asks gimli. A header gimli would
//! refuse for its directory or file tables may get sequences here; the index asks for a
//! unit's program only after gimli read that unit's header, so those are never used.
//! `engine/tests/on_demand_symbols.rs` compares the two on every program of libc,
//! libstdc++, ld.so and programs built at test time.

use gimli::{Reader, ReaderOffset};

use super::builders::dwarf::R;

/// What one line program gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sequences {
    /// Each sequence's (start, end) address, in program order, as gimli's
    /// `sequences()` gives them.
    Read(Vec<(u64, u64)>),
    /// gimli fails on this program's opcodes (its `sequences()` is an error).
    Unreadable,
    /// An opcode this reader leaves to gimli (`DW_LNE_define_file`).
    Skipped,
}

/// One program of `.debug_line`: its offset and where the next one begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub offset: usize,
    pub sequences: Sequences,
}

/// Every line program of `debug_line` from its start, one after the other by their unit
/// lengths, up to the first header whose fixed fields cannot be read (where gimli's
/// `DebugLine::program` fails too). `address_size` is used by headers before DWARF 5.
pub fn all_programs(debug_line: R<'_>, address_size: u8) -> Vec<Program> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    let total = debug_line.len();
    while offset < total {
        let mut input = debug_line;
        if input.skip(offset).is_err() {
            break;
        }
        let Some((next, sequences)) = program(input, address_size) else {
            break;
        };
        let Some(next) = offset.checked_add(next).filter(|&n| n > offset) else {
            break;
        };
        out.push(Program { offset, sequences });
        offset = next;
    }
    out
}

/// The fixed header fields the opcodes need.
struct Encoding<'d> {
    address_size: u8,
    minimum_instruction_length: u8,
    maximum_operations_per_instruction: u8,
    line_range: u8,
    opcode_base: u8,
    standard_opcode_lengths: R<'d>,
}

/// Reads the program at the start of `input`: the length of the whole program (with its
/// initial length) and its sequences. `None` when the header's fixed fields are
/// unreadable or invalid, as gimli's header parser finds them.
fn program(mut input: R<'_>, address_size: u8) -> Option<(usize, Sequences)> {
    let (unit_length, format) = input.read_initial_length().ok()?;
    let whole = unit_length.checked_add(usize::from(format.initial_length_size()))?;
    let mut rest = input.split(unit_length).ok()?;
    let version = rest.read_u16().ok()?;
    if !(2..=5).contains(&version) {
        return None;
    }
    let mut address_size = address_size;
    if version >= 5 {
        address_size = rest.read_address_size().ok()?;
        if rest.read_u8().ok()? != 0 {
            return None;
        }
    }
    let header_length = rest.read_length(format).ok()?;
    let mut opcodes = rest;
    opcodes.skip(header_length).ok()?;
    rest.truncate(header_length).ok()?;
    let minimum_instruction_length = rest.read_u8().ok()?;
    let maximum_operations_per_instruction = if version >= 4 {
        rest.read_u8().ok()?
    } else {
        1
    };
    let _default_is_stmt = rest.read_u8().ok()?;
    let _line_base = rest.read_i8().ok()?;
    let line_range = rest.read_u8().ok()?;
    let opcode_base = rest.read_u8().ok()?;
    if minimum_instruction_length == 0
        || maximum_operations_per_instruction == 0
        || line_range == 0
        || opcode_base == 0
    {
        return None;
    }
    let standard_opcode_lengths = rest.split(usize::from(opcode_base - 1)).ok()?;
    let encoding = Encoding {
        address_size,
        minimum_instruction_length,
        maximum_operations_per_instruction,
        line_range,
        opcode_base,
        standard_opcode_lengths,
    };
    let sequences = match run(opcodes, &encoding) {
        Ok(Some(s)) => Sequences::Read(s),
        Ok(None) => Sequences::Skipped,
        Err(_) => Sequences::Unreadable,
    };
    Some((whole, sequences))
}

/// The registers a sequence's range needs.
struct Row {
    address: u64,
    op_index: u64,
    tombstone: bool,
    end_sequence: bool,
}

impl Row {
    const NEW: Row = Row {
        address: 0,
        op_index: 0,
        tombstone: false,
        end_sequence: false,
    };

    fn advance(&mut self, operation_advance: u64, e: &Encoding<'_>) -> gimli::Result<()> {
        if self.tombstone {
            return Ok(());
        }
        let min = u64::from(e.minimum_instruction_length);
        let max_ops = u64::from(e.maximum_operations_per_instruction);
        let address_advance = if max_ops == 1 {
            self.op_index = 0;
            min.wrapping_mul(operation_advance)
        } else {
            let with_advance = self.op_index.wrapping_add(operation_advance);
            self.op_index = with_advance % max_ops;
            min.wrapping_mul(with_advance / max_ops)
        };
        self.address = add_sized(self.address, address_advance, e.address_size)?;
        Ok(())
    }
}

/// gimli's `ReaderAddress::add_sized` for `u64`.
fn add_sized(address: u64, length: u64, size: u8) -> gimli::Result<u64> {
    let sum = address
        .checked_add(length)
        .ok_or(gimli::Error::AddressOverflow)?;
    if sum & !ones(size) != 0 {
        return Err(gimli::Error::AddressOverflow);
    }
    Ok(sum)
}

/// All ones in an address of `size` bytes (1, 2, 4 or 8, as the header parser allows).
fn ones(size: u8) -> u64 {
    match size {
        1..=7 => (1u64 << (u32::from(size) * 8)) - 1,
        _ => u64::MAX,
    }
}

/// Runs the opcodes as gimli's `sequences()` does. `Ok(None)`: an opcode left to gimli.
fn run(mut input: R<'_>, e: &Encoding<'_>) -> gimli::Result<Option<Vec<(u64, u64)>>> {
    let mut sequences = Vec::new();
    let mut start: Option<u64> = None;
    let mut row = Row::NEW;
    let min_tombstone = ones(e.address_size).wrapping_sub(1);
    while !input.is_empty() {
        // `next_row`'s reset: only an end of sequence clears the registers tracked here
        if row.end_sequence {
            row = Row::NEW;
        }
        let opcode = input.read_u8()?;
        let emits = if opcode == 0 {
            let length = input.read_uleb128().and_then(usize::from_u64)?;
            let mut rest = input.split(length)?;
            match rest.read_u8()? {
                1 => {
                    row.end_sequence = true;
                    true
                }
                2 => {
                    let address = rest.read_address(e.address_size)?;
                    row.tombstone = address < row.address || address >= min_tombstone;
                    if !row.tombstone {
                        row.address = address;
                        row.op_index = 0;
                    }
                    false
                }
                3 => return Ok(None),
                4 => {
                    rest.read_uleb128()?;
                    false
                }
                _ => false,
            }
        } else if opcode >= e.opcode_base {
            let adjusted = opcode - e.opcode_base;
            row.advance(u64::from(adjusted / e.line_range), e)?;
            true
        } else {
            match opcode {
                1 => true,
                2 => {
                    let advance = input.read_uleb128()?;
                    row.advance(advance, e)?;
                    false
                }
                3 => {
                    input.read_sleb128()?;
                    false
                }
                4 | 5 | 12 => {
                    input.read_uleb128()?;
                    false
                }
                6 | 7 | 10 | 11 => false,
                8 => {
                    let adjusted = 255 - e.opcode_base;
                    row.advance(u64::from(adjusted / e.line_range), e)?;
                    false
                }
                9 => {
                    let advance = input.read_u16()?;
                    if !row.tombstone {
                        row.address = add_sized(row.address, u64::from(advance), e.address_size)?;
                        row.op_index = 0;
                    }
                    false
                }
                other => {
                    let mut lengths = e.standard_opcode_lengths;
                    lengths.skip(usize::from(other - 1))?;
                    for _ in 0..lengths.read_u8()? {
                        input.read_uleb128()?;
                    }
                    false
                }
            }
        };
        if !emits {
            continue;
        }
        if row.tombstone {
            // gimli skips a tombstone row and resets at once
            if row.end_sequence {
                row = Row::NEW;
            }
            continue;
        }
        if row.end_sequence {
            sequences.push((start.unwrap_or(0), row.address));
            start = None;
        } else if start.is_none() {
            start = Some(row.address);
        }
    }
    Ok(Some(sequences))
}

/// Where [`all_programs`] and gimli disagree on `debug_line`: a program gimli reads that
/// this reader has not, or gives other sequences (or fails where gimli does not, or the
/// reverse). Empty when they agree. For the tests and the differential fuzz target.
#[doc(hidden)]
pub fn differences_from_gimli(
    debug_line: &[u8],
    big_endian: bool,
    address_size: u8,
) -> Vec<String> {
    let endian = if big_endian {
        gimli::RunTimeEndian::Big
    } else {
        gimli::RunTimeEndian::Little
    };
    let section = gimli::EndianSlice::new(debug_line, endian);
    let ours = all_programs(section, address_size);
    let mut out = Vec::new();
    let lines = gimli::DebugLine::from(section);
    let mut offset = 0usize;
    while let Ok(program) = lines.program(gimli::DebugLineOffset(offset), address_size, None, None)
    {
        let header = program.header();
        let next = header
            .unit_length()
            .checked_add(usize::from(header.format().initial_length_size()))
            .and_then(|len| offset.checked_add(len));
        let theirs = program
            .sequences()
            .ok()
            .map(|(_, s)| s.iter().map(|s| (s.start, s.end)).collect::<Vec<_>>());
        match (
            ours.iter()
                .find(|p| p.offset == offset)
                .map(|p| &p.sequences),
            theirs,
        ) {
            (Some(Sequences::Skipped), _) => {}
            (Some(Sequences::Read(a)), Some(b)) if *a == b => {}
            (Some(Sequences::Unreadable), None) => {}
            (mine, theirs) => out.push(format!(
                "program at {offset:#x}: ours {mine:?}, gimli's {theirs:?}"
            )),
        }
        match next {
            Some(n) if n > offset => offset = n,
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use object::{Object, ObjectSection};

    /// `file`'s `.debug_line`, inflated, and whether it must agree.
    fn check(path: &std::path::Path) -> usize {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = object::File::parse(&*bytes).unwrap();
        let section = file.section_by_name(".debug_line").unwrap();
        let data = section.uncompressed_data().unwrap();
        let size = if file.is_64() { 8 } else { 4 };
        let diffs = differences_from_gimli(&data, !file.is_little_endian(), size);
        assert!(diffs.is_empty(), "{}: {diffs:#?}", path.display());
        let programs = all_programs(
            gimli::EndianSlice::new(&data, gimli::RunTimeEndian::Little),
            size,
        );
        let read = programs
            .iter()
            .filter(|p| matches!(p.sequences, Sequences::Read(_)))
            .count();
        assert!(read > 0, "{}: no program read", path.display());
        read
    }

    /// A library's libc6-dbg debug file, by its build-id (CI installs libc6-dbg).
    fn debug_file_of(path: &str) -> std::path::PathBuf {
        let bytes = std::fs::read(path).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let id = file.build_id().unwrap().unwrap();
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let (dir, rest) = hex.split_at(2);
        std::path::PathBuf::from(format!("/usr/lib/debug/.build-id/{dir}/{rest}.debug"))
    }

    #[test]
    fn every_program_of_libc_and_ld_so_agrees_with_gimli() {
        let libc = check(&debug_file_of("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(libc > 1000, "libc: {libc} programs");
        check(&debug_file_of("/lib64/ld-linux-x86-64.so.2"));
    }

    #[test]
    fn programs_of_every_dwarf_version_agree_with_gimli() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("p.c");
        std::fs::write(
            &source,
            "static inline int sq(int x) { return x * x; }\n\
             __attribute__((noinline)) int f(int x) { return sq(x) + 1; }\n\
             int main(int argc, char **argv) { (void)argv; return f(argc); }\n",
        )
        .unwrap();
        for (compiler, flags) in [
            ("gcc", &["-O2", "-gdwarf-2"][..]),
            ("gcc", &["-O2", "-gdwarf-4"][..]),
            ("gcc", &["-O0", "-gdwarf-5"][..]),
            ("clang", &["-O2", "-gdwarf-5"][..]),
            ("clang", &["-O1", "-gdwarf-4", "-gz=zlib"][..]),
        ] {
            let out = dir.path().join(format!("{compiler}{}", flags.join("")));
            let status = std::process::Command::new(compiler)
                .args(flags)
                .arg("-o")
                .arg(&out)
                .arg(&source)
                .status()
                .unwrap_or_else(|e| panic!("{compiler}: {e}"));
            assert!(status.success(), "{compiler} {flags:?}");
            check(&out);
        }
    }

    #[test]
    fn hand_made_programs_agree_with_gimli() {
        // header: DWARF 4, min_inst 1, max_ops 1, line_base -5, line_range 14, opcode_base 13
        fn with_opcodes(version: u16, max_ops: u8, opcodes: &[u8]) -> Vec<u8> {
            let mut h = vec![1u8];
            if version >= 4 {
                h.push(max_ops);
            }
            h.extend([1, 0xfb, 14, 13]);
            h.extend([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
            h.extend([0, 0]); // no directories, no files (DWARF 2-4)
            let mut body = version.to_le_bytes().to_vec();
            body.extend((h.len() as u32).to_le_bytes());
            body.extend(h);
            body.extend(opcodes);
            let mut out = (body.len() as u32).to_le_bytes().to_vec();
            out.extend(body);
            out
        }
        let set = |a: u64| {
            let mut v = vec![0, 9, 2];
            v.extend(a.to_le_bytes());
            v
        };
        let end = [0u8, 1, 1];
        let cases: Vec<Vec<u8>> = vec![
            // a plain sequence
            [set(0x1000), vec![0x20, 2, 0x10, 1, 0x40], end.to_vec()].concat(),
            // end_sequence as the first row: start 0
            end.to_vec(),
            // a tombstone (lower address) in the middle of a sequence, then its end
            [
                set(0x2000),
                vec![1],
                set(0x10),
                vec![0x30],
                end.to_vec(),
                set(0x3000),
                vec![1],
                end.to_vec(),
            ]
            .concat(),
            // -1 and -2 tombstones
            [set(u64::MAX), vec![1], end.to_vec()].concat(),
            [set(0x10), vec![1], set(u64::MAX - 1), vec![1], end.to_vec()].concat(),
            // fixed_advance_pc and const_add_pc
            [set(0x10), vec![9, 0x34, 0x12, 8, 1], end.to_vec()].concat(),
            // an address overflow: gimli fails
            [set(u64::MAX - 8), vec![2, 0x20, 1], end.to_vec()].concat(),
            // truncated LEB128 and extended opcode lengths past the end
            vec![2, 0x80],
            vec![0, 0x20, 2],
            // an unknown extended opcode, a discriminator
            [set(0x40), vec![0, 2, 0x80, 7, 0, 2, 4, 3, 1], end.to_vec()].concat(),
        ];
        for (version, max_ops) in [(3u16, 1u8), (4, 1), (4, 4)] {
            for (i, opcodes) in cases.iter().enumerate() {
                let section = [
                    with_opcodes(version, max_ops, opcodes),
                    with_opcodes(version, max_ops, &[1]),
                ]
                .concat();
                let diffs = differences_from_gimli(&section, false, 8);
                assert!(
                    diffs.is_empty(),
                    "case {i}, DWARF {version}, max_ops {max_ops}: {diffs:#?}"
                );
                let ours = all_programs(
                    gimli::EndianSlice::new(&section, gimli::RunTimeEndian::Little),
                    8,
                );
                assert_eq!(ours.len(), 2, "case {i}: both programs read");
            }
        }
    }
}
