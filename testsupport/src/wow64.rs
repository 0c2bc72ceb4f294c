//! Lays out, from a 32-bit Windows minidump, the dump a 64-bit writer leaves of the same
//! 32-bit process on 64-bit Windows (WoW64).
//!
//! No WoW64 dump written by Windows is in public test data, and this machine has no
//! Windows: wine's 32-bit processes are Linux i386 processes, not WoW64 ones. What a
//! 64-bit writer records differently is documented (`winnt.h`, the WoW64 CPU area as
//! WinDbg's `!wow64exts` and Wine's `RtlWow64GetCurrentCpuArea` read it), so the test
//! takes a real 32-bit dump of a crash (wine's dbghelp, compared with winedbg) and
//! rewrites what a 64-bit writer would have written in its place:
//!
//! - the system info's CPU: `PROCESSOR_ARCHITECTURE_AMD64` (9);
//! - every thread's context: an AMD64 `CONTEXT` in WoW64's 64-bit layer (`cs` = `0x33`,
//!   `rip` in `wow64cpu.dll`, `rsp` on a 64-bit stack of its own), and its `Teb` a 64-bit
//!   TEB whose `TlsSlots[1]` (`WOW64_TLS_CPURESERVED`, offset `0x1488`) points to its CPU
//!   area: `Flags`, `Machine` = `0x014c`, then the thread's x86 `CONTEXT` as the 32-bit
//!   dump recorded it. The TEBs and CPU areas are added to the memory list, as a dump with
//!   the threads' data holds them;
//! - the exception's context: the x86 one as recorded ([`Exception::X86`]), or an AMD64
//!   context of the thread in 32-bit code (`cs` = `0x23`, the x86 registers zero-extended:
//!   [`Exception::CompatibilityMode`]);
//! - the module list: wine's 32-bit modules as recorded, and the 64-bit layer's
//!   `wow64.dll`, `wow64cpu.dll` and `wow64win.dll` above 4 GiB.
//!
//! The 64-bit stacks themselves are left out (their frames are WoW64's, which a 32-bit
//! view does not show); so are a 64-bit `ntdll.dll` and the rest of a real process's
//! 64-bit modules. The 32-bit stacks stay where the 32-bit dump had them.

/// What the rewritten dump's exception stream holds as the crashed thread's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exception {
    /// The x86 `CONTEXT` the 32-bit dump recorded (a writer handed the 32-bit exception
    /// pointers).
    X86,
    /// An AMD64 `CONTEXT` captured while the thread ran 32-bit code: `cs` = `0x23`, its
    /// registers' low halves the x86 ones.
    CompatibilityMode,
}

const STREAM_THREADS: u32 = 3;
const STREAM_MODULES: u32 = 4;
const STREAM_MEMORY: u32 = 5;
const STREAM_EXCEPTION: u32 = 6;
const STREAM_SYSTEM_INFO: u32 = 7;

const THREAD_ENTRY: usize = 48;
const MODULE_ENTRY: usize = 108;
const AMD64_CONTEXT: usize = 0x4d0;
const CONTEXT_AMD64_FULL: u32 = 0x0010_0007;

/// Where the 64-bit layer's modules, TEBs and stacks are put: above 4 GiB, clear of every
/// 32-bit address.
const WOW64_MODULES: [(&str, u64); 3] = [
    ("C:\\Windows\\System32\\wow64.dll", 0x7ffb_4000_0000),
    ("C:\\Windows\\System32\\wow64win.dll", 0x7ffb_4010_0000),
    ("C:\\Windows\\System32\\wow64cpu.dll", 0x7ffb_4020_0000),
];
const WOW64_MODULE_SIZE: u32 = 0x0008_0000;
const TEBS: u64 = 0x0000_7ff5_0000_0000;
const STACKS64: u64 = 0x0000_7ff6_0000_0000;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Appends `bytes` 8-byte aligned; returns its (rva, size).
fn append(out: &mut Vec<u8>, bytes: &[u8]) -> (u32, u32) {
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let rva = u32::try_from(out.len()).unwrap();
    out.extend_from_slice(bytes);
    (rva, u32::try_from(bytes.len()).unwrap())
}

/// The directory: (index, type, size, rva) of each stream.
fn directory(d: &[u8]) -> Vec<(usize, u32, u32, u32)> {
    assert_eq!(&d[..4], b"MDMP", "not a minidump");
    let (count, at) = (u32_at(d, 8) as usize, u32_at(d, 12) as usize);
    (0..count)
        .map(|i| {
            let e = at + i * 12;
            (i, u32_at(d, e), u32_at(d, e + 4), u32_at(d, e + 8))
        })
        .collect()
}

/// Points directory entry `index` at (rva, size).
fn repoint(out: &mut [u8], index: usize, (rva, size): (u32, u32)) {
    let e = u32_at(out, 12) as usize + index * 12;
    put_u32(out, e + 4, size);
    put_u32(out, e + 8, rva);
}

/// The stream of `kind`: (directory index, rva, size).
fn stream(dir: &[(usize, u32, u32, u32)], kind: u32) -> (usize, usize, usize) {
    let &(i, _, size, rva) = dir
        .iter()
        .find(|e| e.1 == kind)
        .unwrap_or_else(|| panic!("the 32-bit dump has no stream {kind}"));
    (i, rva as usize, size as usize)
}

/// An AMD64 `CONTEXT` with `cs`, `rsp` and `rip`, and the x86 registers of `x86` (an x86
/// `CONTEXT`) zero-extended into their 64-bit ones when `x86` is given.
fn amd64_context(cs: u16, rsp: u64, rip: u64, x86: Option<&[u8]>) -> Vec<u8> {
    let mut c = vec![0u8; AMD64_CONTEXT];
    put_u32(&mut c, 0x30, CONTEXT_AMD64_FULL);
    c[0x38..0x3a].copy_from_slice(&cs.to_le_bytes());
    c[0x42..0x44].copy_from_slice(&0x2bu16.to_le_bytes()); // ss
    put_u64(&mut c, 0x98, rsp);
    put_u64(&mut c, 0xf8, rip);
    if let Some(x) = x86 {
        // (x86 offset, AMD64 offset): eax ecx edx ebx esp ebp esi edi eip, eflags
        for (from, to) in [
            (0xb0, 0x78),
            (0xac, 0x80),
            (0xa8, 0x88),
            (0xa4, 0x90),
            (0xc4, 0x98),
            (0xb4, 0xa0),
            (0xa0, 0xa8),
            (0x9c, 0xb0),
            (0xb8, 0xf8),
        ] {
            put_u64(&mut c, to, u64::from(u32_at(x, from)));
        }
        put_u32(&mut c, 0x44, u32_at(x, 0xc0));
    }
    c
}

/// A `MINIDUMP_STRING` (byte length, UTF-16LE, NUL).
fn minidump_string(s: &str) -> Vec<u8> {
    let units: Vec<u16> = s.encode_utf16().collect();
    let mut b = u32::try_from(units.len() * 2)
        .unwrap()
        .to_le_bytes()
        .to_vec();
    for u in units.into_iter().chain([0]) {
        b.extend_from_slice(&u.to_le_bytes());
    }
    b
}

/// The WoW64 dump of the 32-bit minidump `x86_dump` (see the module's documentation).
pub fn from_x86_dump(x86_dump: &[u8], exception: Exception) -> Vec<u8> {
    let dir = directory(x86_dump);
    let mut out = x86_dump.to_vec();
    let (_, sysinfo, _) = stream(&dir, STREAM_SYSTEM_INFO);
    assert_eq!(out[sysinfo..sysinfo + 2], [0, 0], "not an x86 dump");
    out[sysinfo..sysinfo + 2].copy_from_slice(&9u16.to_le_bytes());
    let (_, at, size) = stream(&dir, STREAM_EXCEPTION);
    assert!(size >= 168, "exception stream of {size} bytes");
    let (rva, size) = (
        u32_at(&out, at + 164) as usize,
        u32_at(&out, at + 160) as usize,
    );
    let fault = out[rva..rva + size].to_vec();
    // the crashed thread ran 32-bit code: its 64-bit context has the x86 registers
    let compatibility = match exception {
        Exception::X86 => None,
        Exception::CompatibilityMode => {
            let (esp, eip) = (u32_at(&fault, 0xc4), u32_at(&fault, 0xb8));
            let context = amd64_context(0x23, esp.into(), eip.into(), Some(&fault));
            let placed = append(&mut out, &context);
            put_u32(&mut out, at + 160, placed.1);
            put_u32(&mut out, at + 164, placed.0);
            Some((u32_at(&out, at), placed))
        }
    };
    let mut memory: Vec<(u64, Vec<u8>)> = Vec::new();
    threads(&mut out, &dir, compatibility, &mut memory);
    memory_list(&mut out, &dir, &memory);
    module_list(&mut out, &dir);
    out
}

/// Gives every thread its 64-bit TEB, CPU area and context (the areas and TEBs into
/// `memory`): in WoW64's 64-bit layer, but for the thread `compatibility` names (its id,
/// the (rva, size) of its context), which ran 32-bit code: that context is its own, and
/// its CPU area holds what its last system call left, which no dump of this crash tells:
/// zeros here, an x86 context whose every register is 0.
fn threads(
    out: &mut Vec<u8>,
    dir: &[(usize, u32, u32, u32)],
    compatibility: Option<(u32, (u32, u32))>,
    memory: &mut Vec<(u64, Vec<u8>)>,
) {
    let (_, list, _) = stream(dir, STREAM_THREADS);
    let count = u32_at(out, list) as usize;
    let wow64cpu = WOW64_MODULES[2].1;
    for i in 0..count {
        let entry = list + 4 + i * THREAD_ENTRY;
        let context = (
            u32_at(out, entry + 44) as usize,
            u32_at(out, entry + 40) as usize,
        );
        let mut x86 = out[context.0..context.0 + context.1].to_vec();
        let teb = TEBS + i as u64 * 0x2000;
        let stack_top = STACKS64 + (i as u64 + 1) * 0x1_0000;
        let area = stack_top - 0x300;
        let placed = match compatibility {
            Some((tid, placed)) if tid == u32_at(out, entry) => {
                x86[4..].fill(0);
                placed
            }
            // waiting in wow64cpu's system-call return path, on the 64-bit stack
            _ => append(
                out,
                &amd64_context(0x33, area - 0x200, wow64cpu + 0x1d0f, None),
            ),
        };
        let mut teb_bytes = vec![0u8; 0x1490];
        put_u64(&mut teb_bytes, 0x1488, area);
        let mut area_bytes = vec![0u8, 0, 0x4c, 0x01];
        area_bytes.extend_from_slice(&x86);
        memory.push((teb, teb_bytes));
        memory.push((area, area_bytes));
        put_u64(out, entry + 16, teb);
        put_u32(out, entry + 40, placed.1);
        put_u32(out, entry + 44, placed.0);
    }
}

/// A new memory list: the 32-bit dump's ranges and `added`.
fn memory_list(out: &mut Vec<u8>, dir: &[(usize, u32, u32, u32)], added: &[(u64, Vec<u8>)]) {
    let (index, at, _) = stream(dir, STREAM_MEMORY);
    let count = u32_at(out, at) as usize;
    let mut list = Vec::with_capacity(4 + (count + added.len()) * 16);
    list.extend_from_slice(&u32::try_from(count + added.len()).unwrap().to_le_bytes());
    list.extend_from_slice(&out[at + 4..at + 4 + count * 16]);
    for (start, bytes) in added {
        let (rva, size) = append(out, bytes);
        list.extend_from_slice(&start.to_le_bytes());
        list.extend_from_slice(&size.to_le_bytes());
        list.extend_from_slice(&rva.to_le_bytes());
    }
    let placed = append(out, &list);
    repoint(out, index, placed);
}

/// A new module list: the 32-bit dump's modules and WoW64's 64-bit layer.
fn module_list(out: &mut Vec<u8>, dir: &[(usize, u32, u32, u32)]) {
    let (index, at, _) = stream(dir, STREAM_MODULES);
    let count = u32_at(out, at) as usize;
    let mut list = u32::try_from(count + WOW64_MODULES.len())
        .unwrap()
        .to_le_bytes()
        .to_vec();
    list.extend_from_slice(&out[at + 4..at + 4 + count * MODULE_ENTRY]);
    for (path, base) in WOW64_MODULES {
        let (name, _) = append(out, &minidump_string(path));
        let mut entry = vec![0u8; MODULE_ENTRY];
        put_u64(&mut entry, 0, base);
        put_u32(&mut entry, 8, WOW64_MODULE_SIZE);
        put_u32(&mut entry, 20, name);
        list.extend_from_slice(&entry);
    }
    let placed = append(out, &list);
    repoint(out, index, placed);
}
