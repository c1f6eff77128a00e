//! `validate-arguments` (and `validate-integration`): a schema's text and a
//! value's text, separated by the first NUL byte. Beyond "no panic": the
//! one-pass validator over text agrees with the tree validator over the
//! parsed value, and accepts only JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_policy_rules::parse_json;
use warden_policy_rules::schema::{Dialect, compile_text};

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|b| *b == 0) else {
        return;
    };
    let (Ok(schema), Ok(arguments)) = (
        std::str::from_utf8(&data[..split]),
        std::str::from_utf8(&data[split + 1..]),
    ) else {
        return;
    };
    for dialect in [Dialect::Input, Dialect::Integration] {
        let Ok(schema) = compile_text(dialect, schema) else {
            continue;
        };
        let streamed = schema.validate_text(arguments);
        if duplicate_key(&streamed) {
            // The text has a member twice: the one-pass validator refuses
            // it on purpose; the parsed value kept only the last one.
            continue;
        }
        match parse_json(arguments) {
            Ok(value) => assert_eq!(
                streamed.is_ok(),
                schema.validate(&value).is_ok(),
                "text and tree verdicts differ: {streamed:?}"
            ),
            Err(_) => assert!(streamed.is_err(), "invalid JSON accepted"),
        }
    }
});

fn duplicate_key<T>(verdict: &Result<T, Vec<warden_policy_rules::Violation>>) -> bool {
    verdict
        .as_ref()
        .is_err_and(|v| v.iter().any(|v| v.rule == "duplicate-key"))
}
