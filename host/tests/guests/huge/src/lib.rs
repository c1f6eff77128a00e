//! Returns far more than the host accepts: 8 MiB of output from prune-output,
//! 5000 violations from every other function.
include!("../../common.rs");

fn hostile(function: &str) -> Result<String, Vec<Violation>> {
    if function == "prune-output" {
        Ok(format!("\"{}\"", "x".repeat(8 << 20)))
    } else {
        Err((0..5000).map(violation).collect())
    }
}
