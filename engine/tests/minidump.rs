//! Minidump reader tests: a real crash recorded as a minidump and as a core (compared with
//! gdb on the core and with `object` on the real binaries), and hostile inputs built by hand.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use postmortem_engine::dump::{self, Arch, DumpError, DumpFormat, Os};
use postmortem_testsupport::{qemu, record};

/// Builds and records the crash program once per test that needs it.
fn recorded() -> (tempfile::TempDir, std::path::PathBuf, record::RecordedCrash) {
    assert!(
        record::can_record(),
        "these tests need gcc, gdb and x86_64 Linux"
    );
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("crash_threads");
    record::compile_c(
        &record::c_dir().join("crash_threads.c"),
        &program,
        &["-g", "-O1", "-pthread"],
    );
    let crash = record::record_crash(&program);
    (dir, program, crash)
}

fn build_id_of_file(path: &Path) -> Option<Vec<u8>> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

/// This process's vdso mapping `(start, end)`, from /proc/self/maps.
fn own_vdso() -> (u64, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.ends_with("[vdso]")).unwrap();
    let range = line.split(' ').next().unwrap();
    let (a, b) = range.split_once('-').unwrap();
    (
        u64::from_str_radix(a, 16).unwrap(),
        u64::from_str_radix(b, 16).unwrap(),
    )
}

fn own_vdso_len() -> u64 {
    let (a, b) = own_vdso();
    b - a
}

/// The build-id of this process's vdso, read from /proc/self/mem with `object`.
fn own_vdso_build_id() -> Option<Vec<u8>> {
    use object::Object;
    use std::io::{Read, Seek, SeekFrom};
    let (a, b) = own_vdso();
    let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
    mem.seek(SeekFrom::Start(a)).unwrap();
    let mut image = vec![0u8; (b - a) as usize];
    mem.read_exact(&mut image).unwrap();
    let file = object::File::parse(&*image).ok()?;
    file.build_id().ok()?.map(<[u8]>::to_vec)
}

fn hex_value(s: &str) -> Option<u64> {
    let h = s.trim().rsplit(' ').next()?.strip_prefix("0x")?;
    u64::from_str_radix(h, 16).ok()
}

#[test]
fn minidump_of_a_real_crash_agrees_with_gdb_on_its_core() {
    let (_dir, program, crash) = recorded();
    let bytes = std::fs::read(&crash.minidump).unwrap();
    let d = dump::read_dump(&bytes).unwrap();

    assert_eq!(d.format, DumpFormat::Minidump);
    assert_eq!(d.arch, Arch::X86_64);
    assert_eq!(d.os, Os::Linux);
    assert_eq!(d.writer.as_deref(), Some("minidump-writer"));
    assert_eq!(d.pid, Some(crash.stop.pid as u32));
    let created = d.created.as_deref().unwrap();
    assert_eq!(created.len(), 20, "{created}");
    assert!(
        created.ends_with('Z') && &created[10..11] == "T",
        "{created}"
    );
    assert!(
        d.command_line
            .as_deref()
            .unwrap()
            .contains(program.to_str().unwrap()),
        "{:?}",
        d.command_line
    );

    // The crash, against the kernel's siginfo in the core.
    let c = d.crash.as_ref().unwrap();
    let gdb_si = record::gdb(
        &program,
        &crash.core,
        &[
            "p $_siginfo.si_signo",
            "p $_siginfo.si_code",
            "p/x $_siginfo._sifields._sigfault.si_addr",
        ],
    );
    // gdb prints `$1 = 11`; other lines (`[New LWP …]`, banners) are not values.
    let mut si = gdb_si
        .lines()
        .filter(|l| l.starts_with('$'))
        .map(|l| l.rsplit(' ').next().unwrap_or(""));
    assert_eq!(c.tid, crash.stop.tid as u32);
    assert_eq!(c.signal, Some(11));
    assert_eq!(c.signal.map(|s| s.to_string()).as_deref(), si.next());
    assert_eq!(c.code, Some(1), "SEGV_MAPERR");
    assert_eq!(c.code.map(|s| s.to_string()).as_deref(), si.next());
    assert_eq!(c.address, Some(0x10), "crash_threads.c writes to 0x10");
    assert_eq!(c.address, si.next().and_then(hex_value));

    // Threads: the same LWPs as the core, names as the program set them.
    assert_eq!(d.threads.len(), 3);
    let gdb_threads = record::gdb(
        &program,
        &crash.core,
        &["thread apply all info registers rip rsp"],
    );
    let mut gdb_tid_rip_rsp = Vec::new();
    let mut cur: Option<u32> = None;
    let mut rip = None;
    for l in gdb_threads.lines() {
        if let Some(i) = l.find("(LWP ") {
            cur = l[i + 5..].split(')').next().and_then(|t| t.parse().ok());
        } else if l.starts_with("rip") {
            rip = hex_value(l.split_whitespace().nth(1).unwrap_or(""));
        } else if l.starts_with("rsp") {
            let rsp = hex_value(l.split_whitespace().nth(1).unwrap_or(""));
            gdb_tid_rip_rsp.push((cur.unwrap(), rip.unwrap(), rsp.unwrap()));
        }
    }
    assert_eq!(gdb_tid_rip_rsp.len(), 3, "{gdb_threads}");
    for (tid, rip, rsp) in &gdb_tid_rip_rsp {
        let t = d
            .threads
            .iter()
            .find(|t| t.tid == *tid)
            .unwrap_or_else(|| panic!("thread {tid} of the core is not in the minidump"));
        // a thread in a system call may be caught just past `syscall` by the minidump
        // writer and at it in the core, after the kernel restarted the call
        let rax = t
            .registers
            .named()
            .find(|(n, _)| *n == "rax")
            .map(|(_, v)| v);
        let pc = t.registers.pc();
        let restarted = matches!((rax, pc), (Some(rax), Some(pc))
            if postmortem_testsupport::compare::restarted_syscall(rax, pc, *rip));
        if !restarted {
            assert_eq!(pc, Some(*rip), "rip of thread {tid}");
        }
        assert_eq!(t.registers.sp(), Some(*rsp), "rsp of thread {tid}");
    }
    let mut names: Vec<_> = d.threads.iter().filter_map(|t| t.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["crash_threads", "sleeper", "waiter"]);

    // Registers of the crashed thread: every general register as gdb reads the core.
    let crashed = d.threads.iter().find(|t| t.tid == c.tid).unwrap();
    let gdb_regs = record::gdb_registers(&program, &crash.core);
    let named: std::collections::BTreeMap<_, _> = crashed.registers.named().collect();
    for reg in [
        "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15", "rip", "eflags", "cs",
    ] {
        assert_eq!(
            named.get(reg),
            gdb_regs.get(reg),
            "{reg}: minidump vs gdb on the core"
        );
    }

    // Stack memory at and above sp, against the core's memory.
    let sp = crashed.registers.sp().unwrap();
    let gdb_stack = record::gdb(&program, &crash.core, &["x/4gx $sp"]);
    // Lines like `0x7ffc…b0:\t0x…\t0x…`; everything else is gdb chatter.
    let words: Vec<u64> = gdb_stack
        .lines()
        .filter(|l| l.starts_with("0x") && l.contains(":\t"))
        .flat_map(|l| l.split_whitespace().skip(1))
        .filter_map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
        .collect();
    assert_eq!(words.len(), 4, "{gdb_stack}");
    for (i, w) in words.iter().enumerate() {
        assert_eq!(
            d.memory.read_u64(sp + 8 * i as u64),
            Some(*w),
            "[sp+{}]",
            8 * i
        );
    }

    // Modules: build-ids as `object` reads them from the real files.
    let main = d.modules.iter().find(|m| m.main).unwrap();
    assert_eq!(main.path.as_deref(), program.to_str());
    assert_eq!(main.build_id, build_id_of_file(&program));
    assert!(main.build_id.is_some());
    assert_eq!(d.executable.as_deref(), program.to_str());
    let libc = d
        .modules
        .iter()
        .find(|m| m.name.starts_with("libc.so"))
        .expect("libc in the module list");
    let libc_path = libc.path.as_deref().unwrap();
    assert!(libc.build_id.is_some());
    assert_eq!(libc.build_id, build_id_of_file(Path::new(libc_path)));
    assert_eq!(libc.load_base, libc.base);
    assert!(
        libc.mappings.iter().any(|m| m.executable == Some(true)),
        "{:?}",
        libc.mappings
    );
    assert!(!libc.contains_code(crashed.registers.pc().unwrap()));
    assert!(main.contains_code(crashed.registers.pc().unwrap()));
    let mut sorted = d.modules.iter().map(|m| m.base).collect::<Vec<_>>();
    sorted.sort();
    assert_eq!(sorted, d.modules.iter().map(|m| m.base).collect::<Vec<_>>());

    // The vdso: its image is in the dump's memory, from base.
    let vdso = d
        .modules
        .iter()
        .find(|m| m.name.contains("linux-gate") || m.name.contains("vdso"))
        .expect("vdso module");
    // minidump-writer does not capture the vdso's pages, but the module covers its mapping
    // and carries its build-id, which is the kernel's: the same as this process's vdso.
    assert_eq!(vdso.end - vdso.base, own_vdso_len(), "vdso size");
    if let Some(head) = d.memory.read_bytes(vdso.base, 4) {
        assert_eq!(head, b"\x7fELF");
    }
    assert_eq!(vdso.build_id, own_vdso_build_id());
}

#[test]
fn minidump_every_prefix_reads_or_fails_typed() {
    let (_dir, _program, crash) = recorded();
    let bytes = std::fs::read(&crash.minidump).unwrap();
    // Every prefix up to the end of the stream directory and first streams, then a stride
    // through the rest (whole-file every-byte would take minutes in a debug build).
    let dense = bytes.len().min(16 * 1024);
    let lengths = (0..dense).chain((dense..bytes.len()).step_by(61));
    let mut ok = 0;
    for len in lengths {
        match dump::minidump::read(&bytes[..len]) {
            Ok(d) => {
                ok += 1;
                // Whatever survived is self-consistent.
                for (addr, b) in d.memory.ranges() {
                    assert!(!b.is_empty(), "empty range at {addr:#x}");
                }
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        DumpError::Truncated(_)
                            | DumpError::Malformed(_)
                            | DumpError::NotADump
                            | DumpError::Unsupported(_)
                    ),
                    "prefix {len}: {e:?}"
                );
            }
        }
    }
    assert!(ok > 0, "no prefix read at all");
    assert!(dump::minidump::read(&bytes).is_ok());
}

// --- hand-built minidumps (no structs shared with the reader) ---------------------------

const MDMP: u32 = 0x504d_444d;
const SYSTEM_INFO: u32 = 7;
const MEMORY_LIST: u32 = 5;
const MEMORY64_LIST: u32 = 9;
const THREAD_LIST: u32 = 3;

/// A stream's bytes, or `Err((rva, size))` for a directory entry pointing anywhere.
type StreamSpec = (u32, Result<Vec<u8>, (u32, u32)>);

/// A minidump of the given streams: header, directory, then each stream's bytes.
/// A stream given as `Err((rva, size))` gets a directory entry pointing there instead.
fn synth(streams: &[StreamSpec]) -> Vec<u8> {
    let dir_rva = 32u32;
    let mut data_rva = dir_rva + 12 * streams.len() as u32;
    let mut out = Vec::new();
    for v in [
        MDMP,
        0xa793,
        streams.len() as u32,
        dir_rva,
        0,
        1_700_000_000,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&0u64.to_le_bytes());
    let mut body = Vec::new();
    for (ty, s) in streams {
        let (rva, size) = match s {
            Ok(b) => {
                let r = (data_rva, b.len() as u32);
                data_rva += b.len() as u32;
                body.extend_from_slice(b);
                r
            }
            Err(loc) => *loc,
        };
        for v in [*ty, size, rva] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out.extend_from_slice(&body);
    out
}

/// MINIDUMP_SYSTEM_INFO for `arch` (9 = AMD64, 12 = ARM64) and `platform` (0x8201 Linux).
fn system_info(arch: u16, platform: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&arch.to_le_bytes());
    b.extend_from_slice(&[0; 4]); // level, revision
    b.extend_from_slice(&[1, 0]); // processors, product type
    b.extend_from_slice(&[0; 12]); // major, minor, build
    b.extend_from_slice(&platform.to_le_bytes());
    b.extend_from_slice(&[0; 4]); // csd_version rva
    b.extend_from_slice(&[0; 4]); // suite mask, reserved
    b.extend_from_slice(&[0; 24]); // cpu info
    assert_eq!(b.len(), 56);
    b
}

#[test]
fn minidump_synthetic_header_facts() {
    let bytes = synth(&[(SYSTEM_INFO, Ok(system_info(12, 0x8201)))]);
    let d = dump::read_dump(&bytes).unwrap();
    assert_eq!(d.arch, Arch::Aarch64);
    assert_eq!(d.os, Os::Linux);
    // `date -u -d @1700000000`
    assert_eq!(d.created.as_deref(), Some("2023-11-14T22:13:20Z"));
    assert!(d.threads.is_empty() && d.crash.is_none() && d.writer.is_none());

    let windows = synth(&[(SYSTEM_INFO, Ok(system_info(9, 2)))]);
    let d = dump::read_dump(&windows).unwrap();
    assert_eq!((d.arch, d.os), (Arch::X86_64, Os::Windows));
    // Breakpad's old ARM64 id (0x8003) is aarch64 too.
    let old = synth(&[(SYSTEM_INFO, Ok(system_info(0x8003, 0x8201)))]);
    assert_eq!(dump::read_dump(&old).unwrap().arch, Arch::Aarch64);
}

#[test]
fn minidump_garbage_and_missing_system_info_are_typed_errors() {
    assert_eq!(
        dump::read_dump(b"not a dump at all").unwrap_err(),
        DumpError::NotADump
    );
    assert!(matches!(
        dump::minidump::read(b"MDMP\x93\xa7"),
        Err(DumpError::Truncated(_))
    ));
    assert!(matches!(
        dump::minidump::read(&[0xffu8; 64]),
        Err(DumpError::NotADump)
    ));
    // A directory that claims more entries than the file holds.
    let mut bytes = synth(&[(SYSTEM_INFO, Ok(system_info(9, 0x8201)))]);
    bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(dump::minidump::read(&bytes).is_err());
    // No system info: the CPU is unknown.
    let bytes = synth(&[(MEMORY_LIST, Ok(0u32.to_le_bytes().to_vec()))]);
    assert!(matches!(
        dump::minidump::read(&bytes),
        Err(DumpError::Malformed(_))
    ));
    // A CPU we do not walk.
    let bytes = synth(&[(SYSTEM_INFO, Ok(system_info(3, 0x8201)))]);
    assert!(matches!(
        dump::minidump::read(&bytes),
        Err(DumpError::UnsupportedArch(_))
    ));
}

#[test]
fn minidump_streams_pointing_outside_the_file_are_ignored() {
    let bytes = synth(&[
        (SYSTEM_INFO, Ok(system_info(9, 0x8201))),
        (THREAD_LIST, Err((0xffff_fff0, 0x100))),
        (MEMORY_LIST, Err((0x7fff_0000, 0xffff_ffff))),
        (4, Err((u32::MAX, u32::MAX))), // module list
    ]);
    let d = dump::minidump::read(&bytes).unwrap();
    assert!(d.threads.is_empty());
    assert!(d.memory.ranges().next().is_none());
    assert!(d.modules.is_empty());
    assert!(d.warnings.iter().any(|w| w.code == "truncated-dump"));
}

/// A `/proc/self/maps` copy with path fields the `minidump` crate's parser panicked on
/// (found by the `minidump` fuzz target): the dump reads.
#[test]
fn minidump_maps_with_damaged_paths_read() {
    const LINUX_MAPS: u32 = 0x4767_0009;
    for maps in [
        "1000-2000 r-xp 00000000 00:00 0 /SYSV\n",
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 /SYSV[vsyscall]\n",
        "3000-4000 r-xp 00000000 00:00 0 [stack:\u{e9}\n",
    ] {
        let bytes = synth(&[
            (SYSTEM_INFO, Ok(system_info(9, 0x8201))),
            (LINUX_MAPS, Ok(maps.as_bytes().to_vec())),
        ]);
        assert!(dump::minidump::read(&bytes).is_ok(), "{maps}");
    }
}

#[test]
fn minidump_huge_memory_counts_allocate_nothing() {
    // Memory64 list claiming 2^40 ranges, with one real descriptor.
    let mut m64 = Vec::new();
    m64.extend_from_slice(&(1u64 << 40).to_le_bytes());
    m64.extend_from_slice(&0u64.to_le_bytes()); // base rva: patched below
    m64.extend_from_slice(&0x1000u64.to_le_bytes());
    m64.extend_from_slice(&8u64.to_le_bytes());
    // Memory list claiming u32::MAX ranges, with one real descriptor.
    let mut ml = Vec::new();
    ml.extend_from_slice(&u32::MAX.to_le_bytes());
    ml.extend_from_slice(&0x2000u64.to_le_bytes());
    ml.extend_from_slice(&4u32.to_le_bytes());
    ml.extend_from_slice(&0u32.to_le_bytes()); // rva: patched below
    let payload = *b"ABCDEFGH";
    let mut bytes = synth(&[
        (SYSTEM_INFO, Ok(system_info(9, 0x8201))),
        (MEMORY64_LIST, Ok(m64)),
        (MEMORY_LIST, Ok(ml)),
        (0xffff, Ok(payload.to_vec())), // an unknown stream carrying the bytes
    ]);
    let payload_rva = (bytes.len() - payload.len()) as u32;
    // Stream data follows the 32-byte header and four 12-byte directory entries.
    let m64_at = 32 + 48 + 56;
    bytes[m64_at + 8..m64_at + 16].copy_from_slice(&u64::from(payload_rva).to_le_bytes());
    let ml_at = m64_at + 32;
    bytes[ml_at + 16..ml_at + 20].copy_from_slice(&payload_rva.to_le_bytes());

    let d = dump::minidump::read(&bytes).unwrap();
    assert_eq!(d.memory.read_bytes(0x1000, 8), Some(&payload[..]));
    assert_eq!(d.memory.read_bytes(0x2000, 4), Some(&payload[..4]));
    assert_eq!(d.memory.ranges().count(), 2);
    assert!(d.warnings.iter().any(|w| w.code == "truncated-dump"));
}

#[test]
fn minidump_truncated_memory_range_keeps_its_prefix() {
    let mut ml = Vec::new();
    ml.extend_from_slice(&1u32.to_le_bytes());
    ml.extend_from_slice(&0x5000u64.to_le_bytes());
    ml.extend_from_slice(&64u32.to_le_bytes()); // claims 64 bytes
    ml.extend_from_slice(&0u32.to_le_bytes());
    let mut bytes = synth(&[
        (SYSTEM_INFO, Ok(system_info(9, 0x8201))),
        (MEMORY_LIST, Ok(ml)),
        (0xffff, Ok(vec![7u8; 16])), // only 16 are in the file
    ]);
    let rva = (bytes.len() - 16) as u32;
    let ml_at = 32 + 36 + 56;
    bytes[ml_at + 16..ml_at + 20].copy_from_slice(&rva.to_le_bytes());
    let d = dump::minidump::read(&bytes).unwrap();
    assert_eq!(d.memory.read_bytes(0x5000, 16), Some(&[7u8; 16][..]));
    assert_eq!(d.memory.read_u64(0x5010), None);
}

/// gdb-multiarch's `info registers` of every thread of an aarch64 core: LWP → name → value.
fn gdb_multiarch_registers(
    program: &Path,
    core: &Path,
) -> std::collections::BTreeMap<u32, std::collections::BTreeMap<String, u64>> {
    let out = std::process::Command::new(qemu::GDB)
        .args(["-batch", "-nx", "-q"])
        .args(["-ex", &format!("set sysroot {}", qemu::SYSROOT)])
        .args(["-ex", "set architecture aarch64"])
        .args(["-ex", "thread apply all info registers"])
        .arg(program)
        .arg(core)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut threads = std::collections::BTreeMap::new();
    let mut cur: Option<u32> = None;
    for l in text.lines() {
        if let Some(i) = l.find("(LWP ") {
            cur = l[i + 5..].split(')').next().and_then(|t| t.parse().ok());
            continue;
        }
        let (Some(tid), mut words) = (cur, l.split_whitespace()) else {
            continue;
        };
        let (Some(name), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        if let Some(v) = value
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        {
            threads
                .entry(tid)
                .or_insert_with(std::collections::BTreeMap::new)
                .insert(name.to_owned(), v);
        }
    }
    threads
}

/// An aarch64 crash under QEMU, its core converted into a minidump by the test tooling in
/// both arm64 context layouts: our reader gives every thread the registers gdb-multiarch
/// reads from the core (x0–x30, sp, pc, cpsr), the crashed thread's exception context,
/// stack bytes equal to the core's, and the modules' build-ids from their files.
#[test]
fn minidump_aarch64_from_qemu_core_agrees_with_gdb_multiarch() {
    use postmortem_testsupport::core_to_minidump::{core_to_minidump, Layout};
    if !qemu::tools_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("crash_threads");
    let out = std::process::Command::new(qemu::CC)
        .args(["-g", "-O1", "-pthread", "-no-pie", "-o"])
        .arg(&program)
        .arg(record::c_dir().join("crash_threads.c"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let core = qemu::crash(dir.path(), &program);
    let gdb = gdb_multiarch_registers(&program, &core);
    assert_eq!(gdb.len(), 3, "gdb-multiarch sees three threads");
    let selected = std::process::Command::new(qemu::GDB)
        .args(["-batch", "-nx", "-q"])
        .args(["-ex", &format!("set sysroot {}", qemu::SYSROOT)])
        .args(["-ex", "set architecture aarch64"])
        .args(["-ex", "p/x $pc"])
        .arg(&program)
        .arg(&core)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let selected = String::from_utf8_lossy(&selected.stdout);
    let selected_pc = selected
        .lines()
        .find(|l| l.starts_with("$1 = "))
        .and_then(hex_value)
        .unwrap_or_else(|| panic!("gdb printed no pc: {selected}"));
    let core_bytes = std::fs::read(&core).unwrap();

    for layout in [Layout::Current, Layout::BreakpadOld] {
        let converted = core_to_minidump(&core_bytes, layout, |path| {
            qemu::module_file(dir.path(), path)
        });
        let d = dump::read_dump(&converted.bytes).unwrap();
        assert_eq!(d.format, DumpFormat::Minidump);
        assert_eq!(d.arch, Arch::Aarch64);
        assert_eq!(d.os, Os::Linux);
        assert_eq!(d.threads.len(), 3, "{layout:?}");
        for t in &d.threads {
            let want = gdb
                .get(&t.tid)
                .unwrap_or_else(|| panic!("thread {} is not in the core", t.tid));
            let have: std::collections::BTreeMap<_, _> = t.registers.named().collect();
            for (ours, theirs) in (0..=30).map(|n| (format!("x{n}"), format!("x{n}"))).chain([
                ("sp".to_owned(), "sp".to_owned()),
                ("pc".to_owned(), "pc".to_owned()),
                ("pstate".to_owned(), "cpsr".to_owned()),
            ]) {
                assert_eq!(
                    have.get(ours.as_str()),
                    want.get(&theirs),
                    "{layout:?} thread {}: {ours}",
                    t.tid
                );
            }
            // The stack from sp is the core's.
            let sp = t.registers.sp().unwrap();
            let stack = d.memory.read_to_range_end(sp).unwrap();
            assert!(stack.len() >= 16, "{layout:?}: thread {} stack", t.tid);
        }
        let crash = d.crash.as_ref().unwrap();
        assert_eq!(crash.signal, Some(11), "SIGSEGV");
        let crashed = d.threads.iter().find(|t| t.tid == crash.tid).unwrap();
        // gdb selects the thread that took the signal.
        assert_eq!(
            crashed.registers.pc(),
            Some(selected_pc),
            "{layout:?}: the exception thread is gdb's selected thread"
        );

        let main = d.modules.iter().find(|m| m.main).unwrap();
        assert_eq!(main.build_id, build_id_of_file(&program), "{layout:?}");
        let libc = d
            .modules
            .iter()
            .find(|m| m.name == "libc.so.6")
            .expect("libc in the module list");
        assert_eq!(
            libc.build_id,
            build_id_of_file(&Path::new(qemu::SYSROOT).join("lib/libc.so.6")),
            "{layout:?}"
        );
        assert!(libc.build_id.is_some());
    }
}

/// A dump listing many vdso modules over one image (only a hostile dump does: a process
/// has one vdso) gets the tables of a few of them built from its memory, not of each.
#[test]
fn only_a_few_vdso_images_are_built_from_dump_memory() {
    use std::io::{Read, Seek, SeekFrom};
    let (a, b) = own_vdso();
    let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
    mem.seek(SeekFrom::Start(a)).unwrap();
    let mut image = vec![0u8; (b - a) as usize];
    mem.read_exact(&mut image).unwrap();
    let vdso = dump::Module {
        name: "linux-vdso.so.1".into(),
        base: a,
        end: b,
        load_base: a,
        ..dump::Module::default()
    };
    let built = |copies: usize| {
        let d = dump::Dump {
            format: DumpFormat::Minidump,
            arch: Arch::X86_64,
            os: Os::Linux,
            writer: None,
            pid: None,
            executable: None,
            command_line: None,
            created: None,
            threads: vec![],
            modules: vec![vdso.clone(); copies],
            unloaded_modules: vec![],
            regions: Default::default(),
            memory: dump::MemoryMap::new(vec![(a, &image[..])]),
            crash: None,
            annotations: Default::default(),
            warnings: vec![],
            pac_mask: None,
            system: Default::default(),
        };
        let options = postmortem_engine::process::ProcessOptions::default();
        let report = postmortem_engine::process::process(
            &d,
            &image,
            &postmortem_engine::process::NoTables,
            &options,
        );
        report
            .modules
            .iter()
            .filter(|m| m.unwind == [postmortem_engine::report::ModuleUnwind::DumpMemory])
            .count()
    };
    assert_eq!(built(1), 1, "the vdso's tables come from the dump");
    assert_eq!(built(50), 4);
}

/// A thread list whose stream is longer than its count says, as wine's dbghelp writes it
/// when a callback leaves threads out (the stream keeps every thread's room): the threads
/// counted are read, with a warning, instead of none.
#[test]
fn minidump_thread_list_longer_than_its_count_reads_the_threads_counted() {
    let path = postmortem_testsupport::workspace_root().join("fixtures/reports/dumps/x86_64.dmp");
    let original = std::fs::read(&path).unwrap();
    let whole = dump::read_dump(&original).unwrap();
    let tids: Vec<u32> = whole.threads.iter().map(|t| t.tid).collect();
    assert!(tids.len() >= 2, "the fixture has several threads: {tids:?}");

    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let streams = u32_at(&original, 8) as usize;
    let dir = u32_at(&original, 12) as usize;
    let list = (0..streams)
        .map(|i| dir + 12 * i)
        .find(|&e| u32_at(&original, e) == THREAD_LIST)
        .map(|e| u32_at(&original, e + 8) as usize)
        .unwrap();
    let mut bytes = original.clone();
    let fewer = u32::try_from(tids.len() - 1).unwrap();
    bytes[list..list + 4].copy_from_slice(&fewer.to_le_bytes());

    let d = dump::read_dump(&bytes).unwrap();
    let read: Vec<u32> = d.threads.iter().map(|t| t.tid).collect();
    assert_eq!(
        read,
        tids[..tids.len() - 1],
        "the threads counted, in order"
    );
    assert!(
        d.warnings
            .iter()
            .any(|w| w.code == "minidump-reader"
                && w.message.contains("thread list is 48 bytes longer")),
        "{:?}",
        d.warnings
    );
}

/// A minidump of one thread (tid 7) whose context is `context` and whose stack is
/// `stack` at `stack_at`, on CPU `cpu` (9 AMD64, 0x8003 Breakpad's old ARM64) and OS
/// `platform`, with `extra` streams after it. Laid out by hand, sharing nothing with the
/// reader: header, directory, system info, thread list, then the context and stack bytes
/// in an unknown stream the reader skips.
fn one_thread(cpu: u16, platform: u32, context: &[u8], stack_at: u64, stack: &[u8]) -> Vec<u8> {
    const BLOB: u32 = 0xffff;
    let streams = 3u32;
    let data = 32 + 12 * streams;
    let blob_rva = data + 56 + 52;
    let mut threads = Vec::new();
    threads.extend_from_slice(&1u32.to_le_bytes());
    for v in [7u32, 0, 0, 0] {
        threads.extend_from_slice(&v.to_le_bytes()); // tid, suspend, class, priority
    }
    threads.extend_from_slice(&0u64.to_le_bytes()); // teb
    threads.extend_from_slice(&stack_at.to_le_bytes());
    threads.extend_from_slice(&(stack.len() as u32).to_le_bytes());
    threads.extend_from_slice(&(blob_rva + context.len() as u32).to_le_bytes());
    threads.extend_from_slice(&(context.len() as u32).to_le_bytes());
    threads.extend_from_slice(&blob_rva.to_le_bytes());
    assert_eq!(threads.len(), 52);
    let mut blob = context.to_vec();
    blob.extend_from_slice(stack);
    let bytes = synth(&[
        (SYSTEM_INFO, Ok(system_info(cpu, platform))),
        (THREAD_LIST, Ok(threads)),
        (BLOB, Ok(blob)),
    ]);
    assert_eq!(&bytes[blob_rva as usize..][..context.len()], context);
    bytes
}

/// An AMD64 `CONTEXT` (1232 bytes) with these flags, rip, rsp and rbp (offsets of
/// `winnt.h`'s `CONTEXT`: flags at 0x30, rsp 0x98, rbp 0xa0, rip 0xf8).
fn amd64_context(flags: u32, rip: u64, rsp: u64, rbp: u64) -> Vec<u8> {
    let mut c = vec![0u8; 1232];
    c[0x30..0x34].copy_from_slice(&flags.to_le_bytes());
    c[0x98..0xa0].copy_from_slice(&rsp.to_le_bytes());
    c[0xa0..0xa8].copy_from_slice(&rbp.to_le_bytes());
    c[0xf8..0x100].copy_from_slice(&rip.to_le_bytes());
    c
}

/// Issue 35 item 1: Breakpad's Mac writer sets `context_flags` to the CPU bit alone
/// (`0x0010_0000`, as in rust-minidump's `pipeline-inlines-macos-segv.dmp`); its
/// registers are all there, and rust-minidump and Breakpad read them. A context that
/// names its groups keeps only those (a Windows `CONTEXT_CONTROL` one has no rax).
#[test]
fn mac_writer_context_with_the_cpu_bit_alone_has_its_registers() {
    use postmortem_engine::arch::x86_64::Reg;
    let ctx = amd64_context(0x0010_0000, 0x1000_2000, 0x7ff0_0000, 0x7ff0_0040);
    let bytes = one_thread(9, 0x8101, &ctx, 0x7ff0_0000, &[0u8; 64]);
    let d = dump::read_dump(&bytes).unwrap();
    assert_eq!(d.os, Os::Macos);
    let r = &d.threads[0].registers;
    assert_eq!(r.get(Reg::Rip), Some(0x1000_2000));
    assert_eq!(r.get(Reg::Rsp), Some(0x7ff0_0000));
    assert_eq!(r.get(Reg::Rbp), Some(0x7ff0_0040));

    // CONTEXT_AMD64 | CONTEXT_CONTROL: rip and rsp, but not the integer group's rbp
    let control = amd64_context(0x0010_0001, 0x1000_2000, 0x7ff0_0000, 0x7ff0_0040);
    let bytes = one_thread(9, 2, &control, 0x7ff0_0000, &[0u8; 64]);
    let d = dump::read_dump(&bytes).unwrap();
    let r = &d.threads[0].registers;
    assert_eq!(r.get(Reg::Rip), Some(0x1000_2000));
    assert_eq!(r.get(Reg::Rbp), None);
}

/// Issue 35 item 3: Breakpad's Android arm64 writer uses the old context layout
/// (`MDRawContextARM64_Old`, 796 bytes) with flags `0x8000_0006` (integer and floating
/// point; that layout's writer sets no control bit): pc, sp, fp and lr are in its
/// register array all the same, as minidump-stackwalk reads them.
#[test]
fn breakpad_old_arm64_context_without_a_control_bit_has_pc_and_sp() {
    use postmortem_engine::arch::aarch64::Reg;
    // flags u64, x0..x30, sp, pc, cpsr, fpsr, fpcr, d0..d31 (Breakpad's header)
    let mut c = Vec::new();
    c.extend_from_slice(&0x8000_0006u64.to_le_bytes());
    for i in 0..31u64 {
        c.extend_from_slice(&(0x100 + i).to_le_bytes());
    }
    c.extend_from_slice(&0x7fff_f000u64.to_le_bytes()); // sp
    c.extend_from_slice(&0x5555_1234u64.to_le_bytes()); // pc
    c.extend_from_slice(&[0u8; 12]);
    c.extend_from_slice(&[0u8; 512]);
    assert_eq!(c.len(), 796);
    let bytes = one_thread(0x8003, 0x8203, &c, 0x7fff_f000, &[0u8; 64]);
    let d = dump::read_dump(&bytes).unwrap();
    assert_eq!(d.arch, Arch::Aarch64);
    let r = &d.threads[0].registers;
    assert_eq!(r.get(Reg::Pc), Some(0x5555_1234));
    assert_eq!(r.get(Reg::Sp), Some(0x7fff_f000));
    assert_eq!(r.get(Reg::X29), Some(0x100 + 29));
    assert_eq!(r.get(Reg::X30), Some(0x100 + 30));
    assert_eq!(r.get(Reg::X0), Some(0x100));
}

/// Issue 35 item 2: Breakpad's Mac writer puts 4 bytes of padding after a memory list's
/// count, which the stream's size shows (8 + 16 × count). The descriptors are read after
/// it (as rust-minidump and Breakpad read them): the range is there, and the dump is not
/// called truncated.
#[test]
fn padded_memory_list_of_the_mac_writer_reads_its_ranges() {
    let payload = *b"0123456789abcdef";
    let mut ml = Vec::new();
    ml.extend_from_slice(&1u32.to_le_bytes());
    ml.extend_from_slice(&0u32.to_le_bytes()); // padding
    ml.extend_from_slice(&0x7000u64.to_le_bytes());
    ml.extend_from_slice(&16u32.to_le_bytes());
    ml.extend_from_slice(&0u32.to_le_bytes()); // rva: patched below
    assert_eq!(ml.len(), 8 + 16);
    let mut bytes = synth(&[
        (SYSTEM_INFO, Ok(system_info(9, 0x8101))),
        (MEMORY_LIST, Ok(ml)),
        (0xffff, Ok(payload.to_vec())),
    ]);
    let rva = (bytes.len() - payload.len()) as u32;
    let ml_at = 32 + 36 + 56;
    bytes[ml_at + 20..ml_at + 24].copy_from_slice(&rva.to_le_bytes());
    let d = dump::minidump::read(&bytes).unwrap();
    assert_eq!(d.memory.read_bytes(0x7000, 16), Some(&payload[..]));
    assert_eq!(d.memory.ranges().count(), 1);
    // (this dump has no thread list, which is warned of; its memory is whole)
    assert!(
        !d.warnings
            .iter()
            .any(|w| w.code == "truncated-dump" && w.message.contains("memory it lists")),
        "{:?}",
        d.warnings
    );
}

/// Issue 39: an Android/Linux arm minidump (Breakpad's and Crashpad's `MDRawContextARM`,
/// 368 bytes: flags `MD_CONTEXT_ARM | INTEGER`, r0–r15, cpsr, the VFP area; CPU id 5)
/// gives r0–r15 by their DWARF numbers and cpsr, whose T bit says Thumb.
#[test]
fn arm_context_gives_r0_to_r15_and_cpsr() {
    use postmortem_engine::arch::arm::{Reg, CPSR_SLOT, CPSR_THUMB};
    let mut c = Vec::new();
    c.extend_from_slice(&0x4000_0002u32.to_le_bytes());
    for i in 0..16u32 {
        c.extend_from_slice(&(0x100 + i).to_le_bytes());
    }
    c.extend_from_slice(&0x6000_0030u32.to_le_bytes()); // cpsr: Thumb
    c.extend_from_slice(&[0u8; 296]);
    assert_eq!(c.len(), 368);
    let bytes = one_thread(5, 0x8201, &c, 0x10d, &[0u8; 64]);
    let d = dump::read_dump(&bytes).unwrap();
    assert_eq!(d.arch, Arch::Arm);
    let r = &d.threads[0].registers;
    assert_eq!(r.get(Reg::R0), Some(0x100));
    assert_eq!(r.get(Reg::R7), Some(0x107));
    assert_eq!(r.get(Reg::R13), Some(0x10d));
    assert_eq!(r.get(Reg::R14), Some(0x10e));
    assert_eq!(r.get(Reg::R15), Some(0x10f));
    assert_eq!(r.get(CPSR_SLOT).map(|c| c & CPSR_THUMB), Some(CPSR_THUMB));
}
