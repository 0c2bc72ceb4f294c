//! Fuzz target: arbitrary bytes as an ELF binary unwound FDE by FDE
//! (`engine::unwind::OnDemandUnwind`, `postmortem walk`'s on-demand tables).
//!
//! Property: declining or reading the headers, the first lookup's layout check and the
//! per-FDE builds never panic or hang, whatever the `.eh_frame_hdr` and `.eh_frame`
//! hold. Not differential: a CFI program advancing past its FDE's end answers
//! differently, as the module documents (the integration test `unwind_on_demand`
//! compares real binaries with the whole table); where it fell back to the whole table
//! the answers must be that table's.
#![no_main]

use engine::binary::FileBytes;
use engine::unwind::{build_from_elf, OnDemandUnwind, UnwindTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = FileBytes::new(data.to_vec());
    let Ok(od) = OnDemandUnwind::new(bytes, &[]) else {
        return;
    };
    let probes = [
        0u64,
        1,
        0x10,
        0x1000,
        0x1008,
        0x1234,
        0x40_0000,
        0xffff_ffff,
        u64::MAX,
    ];
    for a in probes {
        if let Some(r) = od.find_rule(a) {
            let _ = r.expression(r.record.cfa);
            let _ = r.expression(r.record.ra);
        }
    }
    let _ = od.sources();
    let inputs = od.inputs();
    if !od.per_fde() {
        let whole = build_from_elf(data, &[]).expect("an accepted binary builds");
        assert_eq!(inputs, whole.inputs);
        let t = UnwindTable::open(&whole.bytes).expect("a built table opens");
        for a in probes {
            assert_eq!(
                t.find(a).map(|r| r.record),
                od.find_rule(a).map(|r| r.record),
                "rule at {a:#x}"
            );
        }
    }
});
