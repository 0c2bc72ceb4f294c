//! Fuzz target: one thread's CPU context of every layout the minidump reader takes,
//! including the writers' quirks (Breakpad's Mac writer's flags of the CPU bit alone,
//! Breakpad's old arm64 layout with its 64-bit flags), as arbitrary bytes inside an
//! otherwise well-formed minidump, so the fuzzer spends its time in the context and its
//! registers rather than in the header. The property: no panic, no hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// CPU ids of the system info: x86, ARM, AMD64, ARM64, Breakpad's old ARM64.
const CPUS: [u16; 5] = [0, 5, 9, 12, 0x8003];
/// Platforms: Windows, macOS, Linux, Android.
const PLATFORMS: [u32; 4] = [2, 0x8101, 0x8201, 0x8203];

fn u32s(out: &mut Vec<u8>, values: &[u32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, context)) = data.split_first() else {
        return;
    };
    let cpu = CPUS[usize::from(pick) % CPUS.len()];
    let platform = PLATFORMS[usize::from(pick >> 4) % PLATFORMS.len()];
    // header, a directory of two streams, system info (56 bytes), a thread list of one
    // thread (52 bytes), then the context
    let dir = 32u32;
    let sysinfo = dir + 24;
    let threads = sysinfo + 56;
    let ctx = threads + 52;
    let mut b = Vec::new();
    u32s(&mut b, &[0x504d_444d, 0xa793, 2, dir, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes());
    u32s(&mut b, &[7, 56, sysinfo, 3, 52, threads]);
    b.extend_from_slice(&cpu.to_le_bytes());
    b.extend_from_slice(&[0; 6]);
    b.extend_from_slice(&[0; 12]);
    u32s(&mut b, &[platform, 0, 0]);
    b.extend_from_slice(&[0; 24]);
    let len = u32::try_from(context.len()).unwrap_or(u32::MAX);
    u32s(&mut b, &[1, 1, 0, 0, 0]);
    b.extend_from_slice(&0u64.to_le_bytes()); // teb
    b.extend_from_slice(&0x1000u64.to_le_bytes()); // stack at 0x1000, no bytes
    u32s(&mut b, &[0, 0, len, ctx]);
    b.extend_from_slice(context);
    if let Ok(dump) = engine::dump::minidump::read(&b) {
        for t in &dump.threads {
            let _ = (t.registers.pc(), t.registers.sp());
        }
    }
});
