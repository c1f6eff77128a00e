//! Never returns: an infinite loop with no side effect.
include!("../../common.rs");

fn hostile(_function: &str) -> Result<String, Vec<Violation>> {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}
