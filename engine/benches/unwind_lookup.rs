//! Looking up the rule of an address in the C library's unwind table, and, for scale,
//! what the same answer costs through gimli directly (`.eh_frame_hdr` binary search, then
//! evaluating the FDE's CFI program up to the address).
//!
//! `cargo bench -p postmortem-engine --bench unwind_lookup`

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gimli::{BaseAddresses, EhFrame, EhFrameHdr, LittleEndian, UnwindContext, UnwindSection};
use object::{Object, ObjectSection};
use postmortem_engine::unwind::{build_from_elf, UnwindTable};
use std::hint::black_box;

/// 4096 addresses spread over the table's rows (fixed seed, so runs compare).
fn addresses(table: &UnwindTable<'_>) -> Vec<u64> {
    let starts: Vec<u64> = table.rows().map(|(s, _)| s).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % starts.len() as u64) as usize;
            let next = starts.get(i + 1).copied().unwrap_or(starts[i] + 16);
            starts[i] + (x >> 32) % (next - starts[i]).max(1)
        })
        .collect()
}

fn bench_lookup(c: &mut Criterion) {
    let (_, data) = support::libc();
    let built = build_from_elf(&data, &[]).unwrap();
    let table = UnwindTable::open(&built.bytes).unwrap();
    let addrs = addresses(&table);

    let file = object::File::parse(&*data).unwrap();
    let link_base = postmortem_engine::binary::link_base(&file);
    let eh_sec = file.section_by_name(".eh_frame").unwrap();
    let hdr_sec = file.section_by_name(".eh_frame_hdr").unwrap();
    let bases = BaseAddresses::default()
        .set_eh_frame(eh_sec.address())
        .set_eh_frame_hdr(hdr_sec.address());
    let mut eh = EhFrame::new(eh_sec.data().unwrap(), LittleEndian);
    eh.set_address_size(8);
    let hdr = EhFrameHdr::new(hdr_sec.data().unwrap(), LittleEndian)
        .parse(&bases, 8)
        .unwrap();
    let hdr_table = hdr.table().unwrap();
    let mut ctx = Box::new(UnwindContext::new());

    let mut g = c.benchmark_group("unwind_lookup");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("libc.so.6 UnwindTable::find x4096", |b| {
        b.iter(|| {
            let mut found = 0usize;
            for &a in &addrs {
                found += usize::from(table.find(black_box(a)).is_some());
            }
            found
        })
    });
    g.bench_function("libc.so.6 gimli eh_frame_hdr + CFI x4096", |b| {
        b.iter(|| {
            let mut found = 0usize;
            for &a in &addrs {
                let r = hdr_table.unwind_info_for_address(
                    &eh,
                    &bases,
                    &mut ctx,
                    black_box(a + link_base),
                    EhFrame::cie_from_offset,
                );
                found += usize::from(r.is_ok());
            }
            found
        })
    });
    g.finish();
}

criterion_group!(benches, bench_lookup);
criterion_main!(benches);
