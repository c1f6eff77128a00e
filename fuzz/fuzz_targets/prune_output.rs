//! `prune-output`: an output schema's text and an endpoint result's text,
//! separated by the first NUL byte. Beyond "no panic": the one-pass pruner
//! over text gives the tree pruner's verdict and the document serde_json
//! writes for the tree pruner's value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warden_policy_rules::parse_json;
use warden_policy_rules::schema::{Dialect, compile_text};
use warden_policy_rules::validate::json_eq;

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|b| *b == 0) else {
        return;
    };
    let (Ok(schema), Ok(result)) = (
        std::str::from_utf8(&data[..split]),
        std::str::from_utf8(&data[split + 1..]),
    ) else {
        return;
    };
    let Ok(schema) = compile_text(Dialect::Output, schema) else {
        return;
    };
    let streamed = schema.prune_text(result);
    let Ok(value) = parse_json(result) else {
        assert!(streamed.is_err(), "invalid JSON accepted");
        return;
    };
    let tree = schema.prune(value);
    if duplicate_key(&streamed) {
        // The text has a member twice: the one-pass pruner refuses it on
        // purpose; the parsed value kept only the last one.
        return;
    }
    assert_eq!(
        streamed.is_ok(),
        tree.is_ok(),
        "text and tree verdicts differ: {streamed:?} / {tree:?}"
    );
    if let (Ok(text), Ok(tree)) = (streamed, tree) {
        // The same document serde_json writes for the pruned value (members
        // in the text's order, numbers spelled as serde_json spells them).
        // Compared once both are read back, not with `tree` itself:
        // serde_json's default float parsing is not round-trip exact, so a
        // number of 16+ significant digits may read back one ULP away.
        let written = serde_json::to_string(&tree).unwrap();
        let (text_value, written_value) = (parse_json(&text), parse_json(&written));
        assert!(
            matches!((&text_value, &written_value), (Ok(a), Ok(b)) if json_eq(a, b)),
            "{text} vs {written}"
        );
    }
});

fn duplicate_key<T>(verdict: &Result<T, Vec<warden_policy_rules::Violation>>) -> bool {
    verdict
        .as_ref()
        .is_err_and(|v| v.iter().any(|v| v.rule == "duplicate-key"))
}
