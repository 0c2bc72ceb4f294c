//! Unit tests over synthetic cores: registers, crash info, NT_FILE modules, truncation at
//! every length, hostile counts and sizes.

use super::read;
use super::synth::{self, SCore};
use crate::dump::{Arch, DumpError, Identity};

const CORE: &str = "CORE";
const LIB_BASE: u64 = 0x7f00_0000_0000;
const EXE_BASE: u64 = 0x5555_0000_0000;
const STACK: u64 = 0x7ffc_0000_0000;
const BUILD_ID: [u8; 20] = [
    0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];
const EXE_ID: [u8; 8] = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11];

/// x86_64 registers whose value is 0x1000 + their `user_regs_struct` index.
fn x86_regs() -> [u64; 27] {
    std::array::from_fn(|i| 0x1000 + i as u64)
}

/// A crashed two-thread x86_64 process with an executable, a library, a locale archive and
/// a /dev mapping.
fn sample() -> SCore {
    let mut second = x86_regs();
    second[16] = 0xabcd; // rip
    SCore::new(62)
        .note(CORE, 1, synth::prstatus_x86_64(101, 11, &x86_regs()))
        .note(CORE, 3, synth::prpsinfo(100, "prog", "./prog --flag "))
        .note(CORE, 0x5349_4749, synth::siginfo(11, 1, 0x10))
        .note(
            CORE,
            6,
            synth::auxv(&[(3, EXE_BASE + 64), (9, EXE_BASE + 0x1100), (5, 3)]),
        )
        .note(
            CORE,
            0x4649_4c45,
            synth::nt_file(
                0x1000,
                &[
                    (EXE_BASE, EXE_BASE + 0x1000, 0, "/opt/app/prog"),
                    (EXE_BASE + 0x1000, EXE_BASE + 0x2000, 1, "/opt/app/prog"),
                    (LIB_BASE, LIB_BASE + 0x3000, 0, "/lib/libfoo.so"),
                    (LIB_BASE + 0x3000, LIB_BASE + 0x4000, 3, "/lib/libfoo.so"),
                    (
                        0x6000_0000,
                        0x6010_0000,
                        0,
                        "/usr/lib/locale/locale-archive",
                    ),
                    (0x6100_0000, 0x6100_1000, 0, "/dev/zero"),
                ],
            ),
        )
        .note(CORE, 1, synth::prstatus_x86_64(100, 11, &second))
        .load(EXE_BASE, 4, synth::elf_image(&EXE_ID, 0x2000, 0x800))
        .empty_load(EXE_BASE + 0x1000, 5, 0x1000)
        .load(LIB_BASE, 5, synth::elf_image(&BUILD_ID, 0x3000, 0x1800))
        .empty_load(LIB_BASE + 0x3000, 6, 0x1000)
        .load(0x6000_0000, 4, vec![b'L'; 0x100])
        .load(0x6100_0000, 5, vec![0; 0x100])
        .load(STACK, 6, (0..=255u8).collect())
}

#[test]
fn x86_64_threads_registers_and_crash() {
    let bytes = sample().build();
    let d = read(&bytes).expect("read");
    assert_eq!(d.arch, Arch::X86_64);
    assert_eq!(d.writer.as_deref(), Some("linux-kernel"));
    assert_eq!(d.pid, Some(100));
    assert_eq!(d.command_line.as_deref(), Some("./prog --flag"));
    assert_eq!(
        d.threads.iter().map(|t| t.tid).collect::<Vec<_>>(),
        [101, 100]
    );
    let r = &d.threads[0].registers;
    // user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax
    // rip cs eflags rsp ss fs_base gs_base ds es fs gs.
    let expect = [
        (15, 0),
        (14, 1),
        (13, 2),
        (12, 3),
        (6, 4),
        (3, 5),
        (11, 6),
        (10, 7),
        (9, 8),
        (8, 9),
        (0, 10),
        (2, 11),
        (1, 12),
        (4, 13),
        (5, 14),
        (16, 16),
        (51, 17),
        (49, 18),
        (7, 19),
        (52, 20),
        (58, 21),
        (59, 22),
        (53, 23),
        (50, 24),
        (54, 25),
        (55, 26),
    ];
    for (dwarf, index) in expect {
        assert_eq!(r.get(dwarf), Some(0x1000 + index), "DWARF {dwarf}");
    }
    assert_eq!(r.pc(), Some(0x1010));
    assert_eq!(r.sp(), Some(0x1013));
    assert_eq!(d.threads[1].registers.pc(), Some(0xabcd));
    let c = d.crash.as_ref().expect("crash");
    assert_eq!(
        (c.tid, c.signal, c.code, c.address),
        (101, Some(11), Some(1), Some(0x10))
    );
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    assert_eq!(d.memory.read_u64(STACK), Some(0x0706_0504_0302_0100));
}

#[test]
fn nt_file_modules() {
    let bytes = sample().build();
    let d = read(&bytes).expect("read");
    let names: Vec<_> = d.modules.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["prog", "libfoo.so"], "locale and /dev skipped");
    let exe = &d.modules[0];
    assert!(exe.main);
    assert_eq!(exe.path.as_deref(), Some("/opt/app/prog"));
    assert_eq!(d.executable.as_deref(), Some("/opt/app/prog"));
    assert_eq!(exe.build_id.as_deref(), Some(&EXE_ID[..]));
    assert_eq!(exe.identity, Identity::BuildId);
    // text 0x2000 + data 0x800 from the image's headers, page-rounded.
    assert_eq!(
        (exe.base, exe.end, exe.load_base),
        (EXE_BASE, EXE_BASE + 0x3000, EXE_BASE)
    );
    let lib = &d.modules[1];
    assert!(!lib.main);
    assert_eq!(
        lib.build_id_hex().as_deref(),
        Some("deadbeef0102030405060708090a0b0c0d0e0f10")
    );
    assert_eq!((lib.base, lib.end), (LIB_BASE, LIB_BASE + 0x5000));
    assert_eq!(lib.mappings.len(), 2);
    assert_eq!(
        lib.mappings[1].file_offset, 0x3000,
        "NT_FILE offsets are in pages"
    );
    assert_eq!(lib.mappings[0].executable, Some(true));
    assert_eq!(lib.mappings[1].executable, Some(false));
    assert!(lib.contains_code(LIB_BASE + 0x10));
    assert!(!lib.contains_code(LIB_BASE + 0x3010));
}

#[test]
fn a_live_process_has_no_crash() {
    let bytes = SCore::new(62)
        .note(CORE, 3, synth::prpsinfo(7, "sleep", "sleep 100"))
        .note(CORE, 1, synth::prstatus_x86_64(7, 0, &x86_regs()))
        .note(CORE, 0x5349_4749, synth::siginfo(19, 0x80, 0))
        .note("GDB", 0xff00_0000, b"<target/>".to_vec())
        .build();
    let d = read(&bytes).expect("read");
    assert!(d.crash.is_none());
    assert_eq!(d.writer.as_deref(), Some("gcore"));
}

#[test]
fn aarch64_registers_and_pac_mask() {
    let regs: [u64; 34] = std::array::from_fn(|i| 0x100 * i as u64);
    let bytes = SCore::new(183)
        .note(CORE, 1, synth::prstatus_aarch64(5, 6, &regs))
        .note(
            "LINUX",
            0x406,
            [0x7f_8000_0000_0000u64.to_le_bytes(), [0; 8]].concat(),
        )
        .note(CORE, 6, synth::auxv(&[]))
        .build();
    let d = read(&bytes).expect("read");
    assert_eq!(d.arch, Arch::Aarch64);
    let r = &d.threads[0].registers;
    assert_eq!(r.get(0), Some(0));
    assert_eq!(r.get(29), Some(0x1d00));
    assert_eq!(r.get(30), Some(0x1e00));
    assert_eq!(r.sp(), Some(0x1f00));
    assert_eq!(r.pc(), Some(0x2000));
    assert_eq!(r.get(33), Some(0x2100), "pstate");
    assert_eq!(d.pac_mask, Some(0x7f_8000_0000_0000));
    assert_eq!(d.crash.as_ref().and_then(|c| c.signal), Some(6));
    assert_eq!(d.crash.as_ref().and_then(|c| c.address), None, "no siginfo");
    assert_eq!(d.writer.as_deref(), Some("qemu-user"));
}

#[test]
fn refuses_what_is_not_a_supported_core() {
    assert_eq!(read(b"hello").err(), Some(DumpError::NotADump));
    let mut exec = sample();
    exec.e_type = 2;
    assert!(matches!(read(&exec.build()), Err(DumpError::NotACore(_))));
    let x86 = SCore::new(3).build();
    match read(&x86) {
        Err(DumpError::UnsupportedArch(m)) => assert!(m.contains("EM_386 (x86)"), "{m}"),
        other => panic!("{other:?}"),
    }
    let mut class32 = SCore::new(62).build();
    class32[4] = 1;
    assert!(matches!(read(&class32), Err(DumpError::UnsupportedArch(_))));
    // No thread at all.
    assert!(matches!(
        read(&SCore::new(62).build()),
        Err(DumpError::Malformed(_))
    ));
}

#[test]
fn truncated_at_every_length() {
    let bytes = sample().build();
    let full = read(&bytes).expect("read");
    for n in 0..bytes.len() {
        match read(&bytes[..n]) {
            Ok(d) => {
                assert!(
                    d.warnings.iter().any(|w| w.code == "truncated-dump"),
                    "length {n}: no truncation warning"
                );
                assert!(!d.threads.is_empty());
                assert!(d.threads.len() <= full.threads.len());
            }
            Err(e) => assert!(
                matches!(e, DumpError::Truncated(_) | DumpError::NotADump),
                "length {n}: {e:?}"
            ),
        }
    }
}

/// Rewrites the u32 at `off`.
fn poke32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn hostile_sizes_and_counts() {
    let base = sample().build();
    let notes_off = 64 + 56 * 8;
    // A first note claiming a 4 GiB descriptor.
    let mut b = base.clone();
    poke32(&mut b, notes_off + 4, u32::MAX);
    assert!(read(&b).is_err() || read(&b).is_ok_and(|d| !d.warnings.is_empty()));
    // A note name size of 4 GiB.
    let mut b = base.clone();
    poke32(&mut b, notes_off, u32::MAX);
    let _ = read(&b);
    // 65535 program headers (more than the file holds).
    let mut b = base.clone();
    b[56..58].copy_from_slice(&0xfffeu16.to_le_bytes());
    let d = read(&b).expect("still readable");
    assert!(d.warnings.iter().any(|w| w.code == "truncated-dump"));
    // PN_XNUM with section header 0 claiming 2^32 - 1 program headers.
    let mut b = base.clone();
    b[56..58].copy_from_slice(&0xffffu16.to_le_bytes());
    let shoff = b.len() as u64;
    b[40..48].copy_from_slice(&shoff.to_le_bytes());
    b.extend(vec![0u8; 64]);
    let sh_info = b.len() - 64 + 44;
    poke32(&mut b, sh_info, u32::MAX);
    let d = read(&b).expect("still readable");
    assert!(d.warnings.iter().any(|w| w.code == "truncated-dump"));
    // Program headers far past the end.
    let mut b = base.clone();
    b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(read(&b), Err(DumpError::Truncated(_))));
    // NT_FILE claiming u64::MAX entries, and a page size that overflows offsets.
    let files = synth::nt_file(u64::MAX, &[(0x1000, 0x2000, 2, "/x")]);
    let mut files_huge = files.clone();
    files_huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    for desc in [files, files_huge] {
        let b = SCore::new(62)
            .note(CORE, 1, synth::prstatus_x86_64(1, 0, &x86_regs()))
            .note(CORE, 0x4649_4c45, desc)
            .build();
        let d = read(&b).expect("read");
        assert!(d.modules.is_empty());
    }
    // A segment at the very top of the address space.
    let b = SCore::new(62)
        .note(CORE, 1, synth::prstatus_x86_64(1, 0, &x86_regs()))
        .load(u64::MAX - 3, 5, vec![1; 16])
        .build();
    let d = read(&b).expect("read");
    assert_eq!(d.memory.read_u64(u64::MAX - 3), None);
}

#[test]
fn link_map_loop_is_bounded() {
    // Executable phdrs at EXE_BASE+64 (PT_PHDR, PT_LOAD, PT_DYNAMIC); its dynamic section
    // holds DT_DEBUG -> r_debug whose r_map is a link_map entry pointing to itself.
    let dyn_at = EXE_BASE + 0x800;
    let r_debug = EXE_BASE + 0x900;
    let lm = EXE_BASE + 0xa00;
    let mut page = synth::ehdr(3, 62, 64, 3, 0);
    page.extend(synth::phdr(6, 4, 64, 64, 3 * 56, 3 * 56));
    page.extend(synth::phdr(1, 5, 0, 0, 0x1000, 0x1000));
    page.extend(synth::phdr(2, 6, 0x800, 0x800, 32, 32));
    page.resize(0x1000, 0);
    let put = |page: &mut Vec<u8>, at: u64, v: u64| {
        let o = (at - EXE_BASE) as usize;
        page[o..o + 8].copy_from_slice(&v.to_le_bytes());
    };
    put(&mut page, dyn_at, 21);
    put(&mut page, dyn_at + 8, r_debug);
    put(&mut page, r_debug + 8, lm);
    put(&mut page, lm, 0); // l_addr
    put(&mut page, lm + 8, lm + 0x100); // l_name
    put(&mut page, lm + 24, lm); // l_next: itself
    page[0xb00..0xb0c].copy_from_slice(b"/lib/loop.so");
    let b = SCore::new(62)
        .note(CORE, 1, synth::prstatus_x86_64(1, 11, &x86_regs()))
        .note(CORE, 6, synth::auxv(&[(3, EXE_BASE + 64), (5, 3)]))
        .load(EXE_BASE, 5, page)
        .build();
    let d = read(&b).expect("read");
    assert!(
        d.warnings.iter().any(|w| w.code == "link-map-loop"),
        "{:?}",
        d.warnings
    );
    assert_eq!(d.modules.len(), 1);
    assert!(d.modules[0].main);
    assert_eq!(d.modules[0].base, EXE_BASE);
}

#[test]
fn mutated_cores_never_panic() {
    let base = sample().build();
    // Headers and notes end before the first segment's data; most mutations land there.
    let meta_end = 64 + 56 * 8 + 1600;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut b = base.clone();
        for _ in 0..1 + next() % 8 {
            let range = if next() % 5 == 0 { b.len() } else { meta_end };
            let i = (next() % range as u64) as usize;
            b[i] = next() as u8;
        }
        if let Ok(d) = read(&b) {
            assert!(!d.threads.is_empty());
            for t in &d.threads {
                if let Some(sp) = t.registers.sp() {
                    let _ = d.memory.read_u64(sp);
                }
            }
        }
    }
}

/// Files mapped as data are not modules, even ELF files with a module's build-id (a
/// separate debug file a symbolizer mapped); a file mapped twice is two loads, and only the
/// executable one is a module; `(deleted)` is not part of a path.
#[test]
fn data_mappings_are_not_modules() {
    const DEBUG_AT: u64 = 0x7e00_0000_0000;
    const EXE_DATA_AT: u64 = 0x7d00_0000_0000;
    let bytes = SCore::new(62)
        .note(CORE, 1, synth::prstatus_x86_64(101, 11, &x86_regs()))
        .note(CORE, 6, synth::auxv(&[(3, EXE_BASE + 64), (5, 3)]))
        .note(
            CORE,
            0x4649_4c45,
            synth::nt_file(
                0x1000,
                &[
                    (EXE_BASE, EXE_BASE + 0x1000, 0, "/opt/app/prog"),
                    (EXE_BASE + 0x1000, EXE_BASE + 0x2000, 1, "/opt/app/prog"),
                    (LIB_BASE, LIB_BASE + 0x3000, 0, "/lib/libfoo.so (deleted)"),
                    (
                        LIB_BASE + 0x3000,
                        LIB_BASE + 0x4000,
                        3,
                        "/lib/libfoo.so (deleted)",
                    ),
                    // libfoo's debug file, mapped whole as data: same build-id
                    (
                        DEBUG_AT,
                        DEBUG_AT + 0x5000,
                        0,
                        "/usr/lib/debug/.build-id/de/ad.debug",
                    ),
                    // the program's own binary read back, from its header and from a page on
                    (EXE_DATA_AT, EXE_DATA_AT + 0x3000, 0, "/opt/app/prog"),
                    (
                        EXE_DATA_AT + 0x8000,
                        EXE_DATA_AT + 0x9000,
                        1,
                        "/opt/app/prog",
                    ),
                ],
            ),
        )
        .load(EXE_BASE, 5, synth::elf_image(&EXE_ID, 0x2000, 0x800))
        .empty_load(EXE_BASE + 0x1000, 5, 0x1000)
        .load(LIB_BASE, 5, synth::elf_image(&BUILD_ID, 0x3000, 0x1800))
        .empty_load(LIB_BASE + 0x3000, 6, 0x1000)
        .load(DEBUG_AT, 4, synth::elf_image(&BUILD_ID, 0x3000, 0x1800))
        .empty_load(DEBUG_AT + 0x1000, 4, 0x4000)
        .load(EXE_DATA_AT, 4, synth::elf_image(&EXE_ID, 0x2000, 0x800))
        .empty_load(EXE_DATA_AT + 0x8000, 4, 0x1000)
        .build();
    let d = read(&bytes).expect("read");
    let modules: Vec<_> = d
        .modules
        .iter()
        .map(|m| (m.name.as_str(), m.path.as_deref(), m.base, m.end))
        .collect();
    assert_eq!(
        modules,
        [
            ("prog", Some("/opt/app/prog"), EXE_BASE, EXE_BASE + 0x3000),
            (
                "libfoo.so",
                Some("/lib/libfoo.so"),
                LIB_BASE,
                LIB_BASE + 0x5000
            ),
        ]
    );
    assert!(d.modules[0].main);
    assert_eq!(d.modules[1].build_id.as_deref(), Some(&BUILD_ID[..]));
}

/// Issue 35 item 8: cores other systems' kernels write (NetBSD's `NetBSD-CORE` notes,
/// FreeBSD's `FreeBSD` ones; gdb and lldb read both) are named as unsupported, never
/// called malformed.
#[test]
fn other_systems_cores_are_named_unsupported_not_malformed() {
    for (owner, system) in [
        ("NetBSD-CORE", "NetBSD"),
        ("NetBSD-CORE@1", "NetBSD"),
        ("FreeBSD", "FreeBSD"),
        ("OpenBSD", "OpenBSD"),
    ] {
        // NT_NETBSDCORE_PROCINFO / FreeBSD's NT_PRSTATUS are both type 1
        let core = SCore::new(62)
            .note(owner, 1, vec![0u8; 160])
            .load(STACK, 6, vec![0u8; 0x100])
            .build();
        match read(&core) {
            Err(DumpError::Unsupported(m)) => {
                assert!(
                    m.contains(&format!("a {system} core: not supported")),
                    "{m}"
                );
            }
            Err(e) => panic!("{owner}: {e}"),
            Ok(_) => panic!("{owner}: read as a Linux core"),
        }
    }
}

/// Issue 35 item 6: a 3.x kernel's vdso is a two-page mapping whose one PT_LOAD covers the
/// first page only (its section headers are in the second). The module is the whole
/// mapping the core holds, so its image is read with its section headers.
#[test]
fn vdso_spans_the_whole_mapping_the_core_holds() {
    const VDSO: u64 = 0x7fff_f7ff_e000;
    let mut image = synth::elf_image(&BUILD_ID, 0x800, 0);
    assert_eq!(image.len(), 0x1000);
    image.resize(0x2000, 0xcc); // the second page: section headers and the rest
    let core = SCore::new(62)
        .note(CORE, 1, synth::prstatus_x86_64(1, 11, &x86_regs()))
        .note(CORE, 6, synth::auxv(&[(33, VDSO)]))
        .load(VDSO, 5, image)
        .build();
    let d = read(&core).expect("read");
    let v = d.modules.iter().find(|m| m.base == VDSO).expect("the vdso");
    assert_eq!((v.base, v.end), (VDSO, VDSO + 0x2000));
    assert_eq!(v.build_id.as_deref(), Some(&BUILD_ID[..]));
}
