//! Tries to reach the outside world, one way per function: environment
//! (check-definition), clock (validate-arguments), filesystem (prune-output),
//! stdout (validate-integration), random (check-integration-schema).
include!("../../common.rs");

fn hostile(function: &str) -> Result<String, Vec<Violation>> {
    let seen = match function {
        "check-definition" => format!("{:?}", std::env::vars().collect::<Vec<_>>()),
        "validate-arguments" => format!("{:?}", std::time::SystemTime::now()),
        "prune-output" => format!("{:?}", std::fs::read_dir("/").map(|d| d.count())),
        "check-integration-schema" => {
            use std::hash::{BuildHasher, RandomState};
            format!("{}", RandomState::new().hash_one(1u8))
        }
        _ => {
            println!("hello from the guest");
            String::new()
        }
    };
    // Had any of that worked, it would leak back to the caller here.
    Ok(format!("{seen:?}"))
}
