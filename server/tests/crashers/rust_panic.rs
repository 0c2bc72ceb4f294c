//! A Rust panic with `-C panic=abort`: the panic machinery ends in abort(), SIGABRT.
//!
//! `--cfg 'message="…"'` chooses how `validate` panics (all through std's panic hook,
//! which prints the message on stderr): a literal message (the default), a formatted
//! one (`formatted`), `unwrap()` on `None` (`unwrap`) or `expect` (`expect`).

#[inline(never)]
fn parse_config(input: &str) -> u32 {
    let value: Option<u32> = input.parse().ok();
    validate(value, input)
}

#[inline(never)]
#[allow(unused_variables)]
fn validate(value: Option<u32>, input: &str) -> u32 {
    match value {
        Some(v) => v,
        #[cfg(message = "formatted")]
        None => panic!("bad value {input:?} ({} bytes) for the port", input.len()),
        #[cfg(message = "unwrap")]
        None => value.unwrap(),
        #[cfg(message = "expect")]
        None => value.expect("a port number in the configuration"),
        #[cfg(not(any(message = "formatted", message = "unwrap", message = "expect")))]
        None => panic!("configuration value missing"),
    }
}

fn main() {
    let arg = std::env::args().nth(5).unwrap_or_else(|| "not a number".to_string());
    println!("{}", parse_config(&arg));
}
