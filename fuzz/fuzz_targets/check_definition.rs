//! Contract 2.5/2.6: a capability definition's text, as the guest's
//! `check-definition` receives it. Any input: a verdict, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_policy_rules::definition::{Options, check_text};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for allow_loopback_http in [false, true] {
        let _ = check_text(
            text,
            Options {
                allow_loopback_http,
            },
        );
    }
});
