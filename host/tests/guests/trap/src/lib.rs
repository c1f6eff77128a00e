//! Panics (an `unreachable` trap once the panic runtime is done).
include!("../../common.rs");

fn hostile(_function: &str) -> Result<String, Vec<Violation>> {
    panic!("hostile guest panics on purpose")
}
