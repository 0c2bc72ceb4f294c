//! What the unwind benches share: the C library's bytes (present on every Debian machine).

use std::path::PathBuf;

/// The C library of this machine.
pub fn libc() -> (PathBuf, Vec<u8>) {
    let path = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("the unwind benches need libc.so.6"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, bytes)
}
