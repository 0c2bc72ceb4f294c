//! Prints a backtrace, then faults. To name libc's frames, std's symbolizer maps the
//! executable and libc's separate debug file (`/usr/lib/debug/.build-id/…`, from libc6-dbg)
//! into the process as data, and keeps them mapped: the core then holds an ELF mapping with
//! libc's build-id that is not libc.

#[inline(never)]
fn report() {
    let trace = std::backtrace::Backtrace::force_capture();
    eprintln!("{trace}");
}

#[inline(never)]
fn fault(depth: u32) -> u8 {
    if depth == 0 {
        // SAFETY: none; the read of an unmapped address is the point of the program.
        unsafe { std::ptr::read_volatile(16 as *const u8) }
    } else {
        fault(depth - 1).wrapping_add(1)
    }
}

fn main() {
    report();
    println!("{}", fault(3));
}
