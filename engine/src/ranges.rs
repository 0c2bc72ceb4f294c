//! Address ranges merged where they overlap or touch: one sweep shared by the dump's
//! memory regions, the PE unwind builder and the symbol builders, so none of them reaches
//! into another's module for it.

/// `ranges` (start, end) sorted and merged where they overlap or touch.
pub fn merged<T: Ord + Copy>(mut ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (b, e) in ranges {
        match out.last_mut() {
            Some(last) if b <= last.1 => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    out
}
