//! Recurses without end: each frame keeps a little live data, so the call
//! exhausts the wasm stack (a trap) rather than being optimised into a loop.
include!("../../common.rs");

fn hostile(function: &str) -> Result<String, Vec<Violation>> {
    Ok(format!("{}", depth(function.len() as u64)))
}

#[inline(never)]
#[allow(unconditional_recursion)] // the point of this guest
fn depth(n: u64) -> u64 {
    let frame = std::hint::black_box([n; 8]);
    let below = depth(std::hint::black_box(n + 1));
    frame.iter().sum::<u64>().wrapping_add(below)
}
