// Issue 37's grouping suite, Rust part (see group_suite.c), built with panic=abort:
// `unwrap`s in two functions, an explicit panic, an index out of bounds. `--cfg moved`
// adds code before them: a rebuilt binary whose code moved.
use std::hint::black_box;

#[cfg(moved)]
#[inline(never)]
fn moved_padding(n: u64) -> u64 {
    (0..n).fold(n, |s, i| s.wrapping_mul(31).wrapping_add(i) ^ (s >> 3))
}

#[inline(never)]
fn load_config(o: Option<u32>) -> u32 {
    o.unwrap() + 1
}

#[inline(never)]
fn parse_port(s: &str) -> u16 {
    s.parse::<u16>().unwrap()
}

#[inline(never)]
fn check_budget(n: u32) {
    if n > 3 {
        panic!("over budget: {n}");
    }
}

#[inline(never)]
fn pick(v: &[u32], i: usize) -> u32 {
    v[i]
}

fn run(bug: u32) {
    match bug {
        14 => {
            black_box(load_config(black_box(None)));
        }
        15 => {
            black_box(parse_port(black_box("http")));
        }
        16 => check_budget(black_box(7)),
        17 => {
            black_box(pick(&[1, 2, 3], black_box(11)));
        }
        _ => {}
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bug: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    #[cfg(moved)]
    black_box(moved_padding(black_box(args.len() as u64)));
    if args.get(2).map(String::as_str) == Some("thread") {
        let _ = std::thread::spawn(move || run(bug)).join();
    } else {
        run(bug);
    }
}
