//! Breaks the error contract: prune-output answers text that is not JSON,
//! every other function an error with an empty violation list.
include!("../../common.rs");

fn hostile(function: &str) -> Result<String, Vec<Violation>> {
    if function == "prune-output" {
        Ok("this is not JSON".to_string())
    } else {
        Err(Vec::new())
    }
}
