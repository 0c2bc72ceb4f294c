//! Prints an `__unwind_info` section the way `llvm-objdump --unwind-info` does, so tests
//! can compare the reader's view of a binary with llvm's, field for field.
//!
//! Only the section body is produced (from `Contents of __unwind_info section:` on); the
//! per-file header lines llvm-objdump prints before it are not part of the section.

use std::fmt::Write;

use super::{CompactUnwindError, UnwindInfo, PAGE_REGULAR};

/// The text `llvm-objdump --unwind-info` prints for this section.
pub fn format(info: &UnwindInfo<'_>) -> Result<String, CompactUnwindError> {
    let mut s = String::new();
    let h = &info.header;
    // writing to a String cannot fail
    let _ = write!(
        s,
        "Contents of __unwind_info section:\n\
         \x20 Version:                                   {:#x}\n\
         \x20 Common encodings array section offset:     {:#x}\n\
         \x20 Number of common encodings in array:       {:#x}\n\
         \x20 Personality function array section offset: {:#x}\n\
         \x20 Number of personality functions in array:  {:#x}\n\
         \x20 Index array section offset:                {:#x}\n\
         \x20 Number of indices in array:                {:#x}\n",
        h.version,
        h.global_opcodes_offset,
        h.global_opcodes_len,
        h.personalities_offset,
        h.personalities_len,
        h.pages_offset,
        h.pages_len
    );
    let _ = writeln!(
        s,
        "  Common encodings: (count = {})",
        info.global_opcodes.len()
    );
    for (i, op) in info.global_opcodes.iter().enumerate() {
        let _ = writeln!(s, "    encoding[{i}]: 0x{op:08x}");
    }
    let _ = writeln!(
        s,
        "  Personality functions: (count = {})",
        info.personalities.len()
    );
    for (i, p) in info.personalities.iter().enumerate() {
        let _ = writeln!(s, "    personality[{}]: 0x{p:08x}", i + 1);
    }
    let _ = writeln!(s, "  Top level indices: (count = {})", info.index.len());
    for (i, e) in info.index.iter().enumerate() {
        let _ = writeln!(
            s,
            "    [{i}]: function offset=0x{:08x}, 2nd level page offset=0x{:08x}, LSDA offset=0x{:08x}",
            e.first_address, e.page_offset, e.lsda_offset
        );
    }
    let _ = writeln!(s, "  LSDA descriptors:");
    for (i, l) in info.lsdas()?.iter().enumerate() {
        let _ = writeln!(
            s,
            "    [{i}]: function offset=0x{:08x}, LSDA offset=0x{:08x}",
            l.function_address, l.lsda_address
        );
    }
    let _ = writeln!(s, "  Second level indices:");
    for p in 0..info.page_count() {
        let ix = info.index[p];
        let _ = writeln!(
            s,
            "    Second level index[{p}]: offset in section=0x{:08x}, base function offset=0x{:08x}",
            ix.page_offset, ix.first_address
        );
        let page = info.page(p)?;
        // A compressed page's local palette continues the global one's numbering;
        // llvm-objdump lists it only when the page has one.
        if !page.local_opcodes.is_empty() {
            let _ = writeln!(
                s,
                "      Page encodings: (count = {})",
                page.local_opcodes.len()
            );
            let first = info.global_opcodes.len();
            for (i, op) in page.local_opcodes.iter().enumerate() {
                let _ = writeln!(s, "        encoding[{}]: 0x{op:08x}", first + i);
            }
        }
        for (i, e) in page.entries.iter().enumerate() {
            match (page.kind, e.opcode_index) {
                (PAGE_REGULAR, _) | (_, None) => {
                    let _ = writeln!(
                        s,
                        "      [{i}]: function offset=0x{:08x}, encoding=0x{:08x}",
                        e.address, e.opcode
                    );
                }
                (_, Some(idx)) => {
                    let _ = writeln!(
                        s,
                        "      [{i}]: function offset=0x{:08x}, encoding[{idx}]=0x{:08x}",
                        e.address, e.opcode
                    );
                }
            }
        }
    }
    Ok(s)
}
