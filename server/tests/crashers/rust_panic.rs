//! A Rust panic with `-C panic=abort`: the panic machinery ends in abort(), SIGABRT.

#[inline(never)]
fn parse_config(input: &str) -> u32 {
    let value: Option<u32> = input.parse().ok();
    validate(value)
}

#[inline(never)]
fn validate(value: Option<u32>) -> u32 {
    match value {
        Some(v) => v,
        None => panic!("configuration value missing"),
    }
}

fn main() {
    let arg = std::env::args().nth(5).unwrap_or_else(|| "not a number".to_string());
    println!("{}", parse_config(&arg));
}
