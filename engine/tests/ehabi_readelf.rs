//! The EHABI index reader against binutils: every entry of the armhf libc's and
//! libstdc++'s `.ARM.exidx` as `arm-linux-gnueabihf-readelf -u` decodes it — each
//! function's start, `EXIDX_CANTUNWIND`, the compact model's personality index and every
//! opcode byte (inline or from `.ARM.extab`), the generic model's personality routine.
//!
//! Skipped, with the reason printed, without the cross binutils and libc (`test.sh`
//! installs `gcc-arm-linux-gnueabihf`).

use std::path::Path;
use std::process::Command;

use object::{Object, ObjectSection};
use postmortem_engine::unwind::builders::ehabi::{read_index, EntryKind, Section};

const READELF: &str = "arm-linux-gnueabihf-readelf";
const LIBS: [&str; 2] = [
    "/usr/arm-linux-gnueabihf/lib/libc.so.6",
    "/usr/arm-linux-gnueabihf/lib/libstdc++.so.6",
];

/// One entry as readelf prints it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Printed {
    start: u64,
    cant_unwind: bool,
    compact_index: Option<u8>,
    personality: Option<u64>,
    opcodes: Vec<u8>,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// Parses `readelf -u`: an entry line `0xSTART [<sym>]: VALUE`, then its indented lines.
fn parse(text: &str) -> Vec<Printed> {
    let mut out: Vec<Printed> = Vec::new();
    for line in text.lines() {
        if line.starts_with("0x") {
            let (head, value) = line.split_once(": ").expect("an entry line");
            let start = hex(head.split(' ').next().unwrap_or("")).expect("a start");
            out.push(Printed {
                start,
                cant_unwind: value.contains("[cantunwind]"),
                ..Printed::default()
            });
            continue;
        }
        let Some(entry) = out.last_mut() else {
            continue;
        };
        let line = line.trim();
        if let Some(n) = line.strip_prefix("Compact model index: ") {
            entry.compact_index = n.parse().ok();
        } else if let Some(p) = line.strip_prefix("Personality routine: ") {
            entry.personality = hex(p.split(' ').next().unwrap_or(""));
        } else {
            // opcode lines: their bytes first (`0x84 0x00 pop {r14}`)
            for token in line.split_whitespace() {
                match hex(token).filter(|_| token.len() == 4) {
                    Some(b) => entry.opcodes.push(b as u8),
                    None => break,
                }
            }
        }
    }
    out
}

fn readelf_u(lib: &str) -> Option<String> {
    let out = Command::new(READELF).args(["-u", lib]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn exidx_entries_equal_readelf_s() {
    for lib in LIBS {
        if !Path::new(lib).is_file() {
            eprintln!("skipped: {lib} is not installed (test.sh installs the armhf cross tools)");
            return;
        }
        let Some(text) = readelf_u(lib) else {
            eprintln!("skipped: {READELF} cannot run");
            return;
        };
        let printed = parse(&text);
        assert!(
            printed.len() > 100,
            "{lib}: readelf printed {}",
            printed.len()
        );
        let bytes = std::fs::read(lib).expect("read the library");
        let file = object::File::parse(&*bytes).expect("an ELF file");
        let section = |name: &str| {
            let s = file.section_by_name(name).expect(name);
            Section {
                bytes: s.data().expect("section data"),
                address: s.address(),
            }
        };
        let ours = read_index(section(".ARM.exidx"), section(".ARM.extab"));
        assert_eq!(ours.len(), printed.len(), "{lib}: entries");
        let (mut compact, mut generic) = (0, 0);
        for (o, p) in ours.iter().zip(&printed) {
            assert_eq!(o.start, p.start, "{lib}: start");
            match o.kind.as_ref().expect("readable") {
                EntryKind::CantUnwind => assert!(p.cant_unwind, "{lib}: {p:?}"),
                EntryKind::Compact {
                    personality,
                    opcodes,
                    ..
                } => {
                    compact += 1;
                    assert_eq!(Some(*personality), p.compact_index, "{lib}: {p:?}");
                    assert_eq!(opcodes, &p.opcodes, "{lib}: {:#x}", p.start);
                }
                EntryKind::Generic { personality, .. } => {
                    generic += 1;
                    assert_eq!(Some(*personality), p.personality, "{lib}: {p:?}");
                }
            }
        }
        assert!(
            compact > 100 && generic > 0,
            "{lib}: {compact} compact, {generic} generic"
        );
    }
}
