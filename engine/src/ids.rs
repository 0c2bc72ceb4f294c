//! Every identifier a module goes by, in the one spelling each comparison uses: a GNU
//! build-id or Mach-O UUID as lower-case hex ([`hex`], [`unhex`]), Breakpad's debug id
//! of an ELF build-id ([`breakpad_debug_id_from_build_id`]) and of a PDB
//! ([`pdb_debug_id`]), a code id ([`normalize_code_id`]) and a UUID as Apple prints it
//! ([`uuid_text`]).
//!
//! Readers of dumps (`dump::minidump`, `dump::apple`), binaries (`binary`, `identify`),
//! PDBs and reports all spell ids through this module, so that an id read from one
//! source matches the same id read from another.

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Even-length hex (either case) → bytes, as [`hex`] writes them; at most 64 bytes
/// (build-ids are 20 in practice).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// Breakpad's debug id for an ELF build-id: its first 16 bytes read as a little-endian
/// GUID, upper-case, followed by age 0.
pub fn breakpad_debug_id_from_build_id(build_id: &[u8]) -> String {
    let mut g = [0u8; 16];
    for (d, s) in g.iter_mut().zip(build_id) {
        *d = *s;
    }
    let order = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
    let mut s: String = order.iter().map(|&i| format!("{:02X}", g[i])).collect();
    s.push('0');
    s
}

/// Breakpad's debug id of a PDB: the CodeView GUID as its fields print (the first three
/// little-endian), upper-case, then the age in hex.
pub fn pdb_debug_id(guid: [u8; 16], age: u32) -> String {
    let d1 = u32::from_le_bytes([guid[0], guid[1], guid[2], guid[3]]);
    let d2 = u16::from_le_bytes([guid[4], guid[5]]);
    let d3 = u16::from_le_bytes([guid[6], guid[7]]);
    let mut out = format!("{d1:08X}{d2:04X}{d3:04X}");
    for b in &guid[8..] {
        out.push_str(&format!("{b:02X}"));
    }
    out.push_str(&format!("{age:X}"));
    out
}

/// A code id in the one spelling every comparison uses: upper-case. Minidump writers and
/// symbol servers differ in the case of its hex digits (`6B08D56C40000`,
/// `6b08d56c40000`).
pub fn normalize_code_id(id: &str) -> String {
    id.to_ascii_uppercase()
}

/// A UUID (or a debug id, whose first 32 hex digits are its UUID) as Apple prints it:
/// `4C4C4437-5555-3144-A14F-ACE88C39A0D2`; anything else upper-case as it is.
pub fn uuid_text(hex: &str) -> String {
    let Some(u) = hex
        .get(..32)
        .filter(|u| u.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return hex.to_ascii_uppercase();
    };
    let u = u.to_ascii_uppercase();
    format!(
        "{}-{}-{}-{}-{}",
        &u[..8],
        &u[8..12],
        &u[12..16],
        &u[16..20],
        &u[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// {12345678-9ABC-DEF0-1122-334455667788}, age 1: the GUID's first three fields are
    /// stored little-endian in a CodeView record and printed as numbers.
    #[test]
    fn pdb_debug_ids_print_the_guid_fields_then_the_age() {
        let guid = [
            0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
            0x77, 0x88,
        ];
        assert_eq!(pdb_debug_id(guid, 1), "123456789ABCDEF011223344556677881");
        assert_eq!(
            pdb_debug_id(guid, 0x2a),
            "123456789ABCDEF01122334455667788".to_owned() + "2A"
        );
        assert_eq!(normalize_code_id("6b08d56c40000"), "6B08D56C40000");
    }

    #[test]
    fn uuids_are_printed_as_apple_prints_them() {
        assert_eq!(
            uuid_text("01d2a9d51f8a35c892287c7cca13c5fc"),
            "01D2A9D5-1F8A-35C8-9228-7C7CCA13C5FC"
        );
        // a debug id: the UUID, then the age
        assert_eq!(
            uuid_text("4C4C443755553144A14FACE88C39A0D20"),
            "4C4C4437-5555-3144-A14F-ACE88C39A0D2"
        );
        assert_eq!(uuid_text("abc"), "ABC");
    }

    #[test]
    fn hex_round_trips_and_elf_build_ids_become_breakpad_debug_ids() {
        let id = [
            0xb4, 0x2a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
            0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12,
        ];
        assert_eq!(unhex(&hex(&id)), Some(id.to_vec()));
        // the first 16 bytes as a little-endian GUID (fields 1-3 byte-swapped), age 0
        assert_eq!(
            breakpad_debug_id_from_build_id(&id),
            "02012AB4 0403 0605 0708090A0B0C0D0E 0".replace(' ', "")
        );
        assert_eq!(unhex("abc"), None);
    }
}
