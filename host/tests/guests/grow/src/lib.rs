//! Allocates without bound.
include!("../../common.rs");

fn hostile(_function: &str) -> Result<String, Vec<Violation>> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![7u8; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}
