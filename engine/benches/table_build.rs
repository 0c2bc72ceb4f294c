//! Building the unwind table of the C library from its `.eh_frame`, and opening the bytes.
//!
//! `cargo bench -p postmortem-engine --bench table_build`

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use postmortem_engine::unwind::{build_from_elf, UnwindTable};
use std::hint::black_box;

fn bench_build(c: &mut Criterion) {
    let (_, data) = support::libc();
    let built = build_from_elf(&data, &[]).unwrap();
    let mut g = c.benchmark_group("table_build");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(built.stats.source_bytes as u64));
    g.bench_function("libc.so.6 build_from_elf", |b| {
        b.iter(|| build_from_elf(black_box(&data), &[]).unwrap())
    });
    g.throughput(Throughput::Bytes(built.bytes.len() as u64));
    g.bench_function("libc.so.6 open", |b| {
        b.iter(|| UnwindTable::open(black_box(&built.bytes)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench_build);
criterion_main!(benches);
