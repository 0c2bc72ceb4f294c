//! Times the whole symbol table of libc (with its libc6-dbg debug file) against an
//! on-demand table for 30 offsets spread across libc's text:
//! `cargo run --release -p postmortem-engine --example on_demand_timing [libc] [debug file]`.

use std::time::Instant;

use postmortem_engine::binary::FileBytes;
use postmortem_engine::symbols::{build_symbol_table, OnDemandSymbols, SymbolTable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let libc = args
        .next()
        .unwrap_or_else(|| "/lib/x86_64-linux-gnu/libc.so.6".into());
    let lb = std::fs::read(&libc)?;
    let debug = match args.next() {
        Some(d) => d,
        None => {
            use object::Object;
            let file = object::File::parse(&*lb)?;
            let id = file.build_id()?.ok_or("libc has no build-id")?;
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let (dir, rest) = hex.split_at(2);
            format!("/usr/lib/debug/.build-id/{dir}/{rest}.debug")
        }
    };
    let db = std::fs::read(&debug)?;
    for round in 0..3 {
        let t = Instant::now();
        let whole = build_symbol_table(Some(&lb), &[&db])?;
        let whole_time = t.elapsed();
        let table = SymbolTable::open(&whole.bytes)?;
        let (lo, hi) = table
            .functions()
            .fold((u64::MAX, 0), |(l, h), f| (l.min(f.0), h.max(f.1)));
        let rels: Vec<u64> = (0..30u64).map(|i| lo + (hi - lo) / 30 * i + 17).collect();
        let (l, d): (FileBytes, FileBytes) =
            (FileBytes::new(lb.clone()), FileBytes::new(db.clone()));
        let t = Instant::now();
        let od = OnDemandSymbols::new(Some(l), &[d]).map_err(|d| d.0)?;
        let new_time = t.elapsed();
        let built = od.symbols_for(&rels)?;
        let total = t.elapsed();
        let t = Instant::now();
        od.symbols_for(&rels[..1])?;
        let again = t.elapsed();
        println!(
            "round {round}: whole build {whole_time:?}; on demand: new {new_time:?}, new + \
             symbols_for(30 offsets) {total:?} ({} of {} line rows); then symbols_for(1) {again:?}",
            built.line_rows, whole.line_rows
        );
    }
    Ok(())
}
