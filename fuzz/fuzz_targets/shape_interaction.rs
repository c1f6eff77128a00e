//! `shape-interaction`: a host-interaction result's text. Any input: a
//! verdict, never a panic; a shaped result's public part is an object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_policy_rules::interaction::shape_text;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(shaped) = shape_text(text) {
        assert!(shaped.public.is_object());
        assert!(shaped.refs.is_object());
    }
});
