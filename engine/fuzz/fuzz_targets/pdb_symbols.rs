//! Fuzz target: arbitrary bytes as a Windows PDB: its symbols and its frame data.
//!
//! The input is given the MSF 7.0 magic if it lacks it, so every input reaches the PDB
//! reader: identified (debug id, architecture), then built into a symbol table as an
//! image's only debug file, and the table opened and asked at a few addresses; then its
//! FPO and FrameData streams read (`engine::unwind::builders::pdb_frame_data`, which reads
//! only an x86 PDB's) and built into an unwind table, opened and asked likewise. Seed it
//! with the PDBs the Windows tests build (`clang --target=x86_64-w64-mingw32 -g -gcodeview
//! -fuse-ld=lld -Wl,--pdb=X.pdb`) and the x86 ones of `cli/tests/windows_x86_pdb.rs`.
//! Properties: no panic escapes the engine, no hang, tables that open, frame data records
//! whose ranges lie in the 32-bit address space.
//!
//! The pdb2 crate panics on some hostile files (slicing past a stream's end); the engine
//! holds those panics and reports the file as unreadable. libfuzzer-sys's panic hook would
//! abort on a panic even when it is caught, so this target's hook is silent: a panic that
//! escapes the engine still reaches libfuzzer-sys's own catch, which aborts. Run it with
//! `-O` (no overflow checks), as the service and the CLI are built: the crate's integer
//! arithmetic wraps there rather than panicking.
#![no_main]

use engine::symbols::{build_symbol_table, SymbolTable};
use engine::unwind::builders::pdb_frame_data;
use engine::unwind::UnwindTable;
use libfuzzer_sys::fuzz_target;

const MAGIC: &[u8] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";

fuzz_target!(|data: &[u8]| {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let owned;
    let data = if data.starts_with(MAGIC) {
        data
    } else {
        owned = [MAGIC, data].concat();
        &owned[..]
    };
    let _ = engine::identify::identify(data);
    if let Ok(built) = build_symbol_table(None, &[data]) {
        let table = SymbolTable::open(&built.bytes).expect("a built table opens");
        let mut out = Vec::new();
        for addr in [0u64, 0x1000, 0x1510, 0x2000, 0xffff_ffff] {
            out.clear();
            let _ = table.lookup(addr, &mut out);
        }
    }
    if let Ok(frames) = pdb_frame_data::read(data) {
        for r in &frames.records {
            assert!(r.size > 0 && r.rva + r.size <= 1 << 32, "{r:?}");
        }
    }
    if let Ok(built) = pdb_frame_data::build_from_pdb(data) {
        let table = UnwindTable::open(&built.bytes).expect("a built unwind table opens");
        for addr in [0u64, 0x1000, 0x1001, 0x1070, 0xffff_ffff] {
            let _ = table.find(addr);
        }
    }
});
