//! The example custom guest (examples/guests/prefixed-names), built from
//! source, swapped in by path: behaviour changes as its README says, with no
//! change to the host.

mod common;

use serde_json::json;
use warden_host::{DefinitionOptions, GuestSource, Sandbox, SchemaRef, check_guest};

fn example() -> std::path::PathBuf {
    common::build_guest("../examples/guests/prefixed-names", "prefixed_names_guest")
}

#[test]
fn the_custom_guest_adds_its_house_rule() {
    let custom = Sandbox::load(GuestSource::Path(example())).expect("the example guest loads");
    let default = Sandbox::load(GuestSource::Default).unwrap();
    let opts = DefinitionOptions::default();

    // The default guest accepts an unprefixed name; the custom one does not.
    assert_eq!(
        default
            .check_definition("acct", &common::order_definition("order_status"), opts)
            .unwrap(),
        Ok(())
    );
    let v = custom
        .check_definition("acct", &common::order_definition("order_status"), opts)
        .unwrap()
        .unwrap_err();
    assert_eq!(
        (v[0].pointer.as_str(), v[0].rule.as_str()),
        ("/name", "name-prefix-required")
    );
    assert_eq!(
        custom
            .check_definition("acct", &common::order_definition("acme_order_status"), opts)
            .unwrap(),
        Ok(())
    );

    // Everything else is the default rules.
    let mut bad =
        serde_json::from_str::<serde_json::Value>(&common::order_definition("acme_x")).unwrap();
    bad["side_effect"] = json!("write");
    let v = custom
        .check_definition("acct", &bad.to_string(), opts)
        .unwrap()
        .unwrap_err();
    assert_eq!(v[0].rule, "side-effect-not-read");
    let schema = r#"{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string","maxLength":2}}}"#;
    let v = custom
        .validate_arguments(
            "acct",
            SchemaRef {
                key: "k",
                text: schema,
            },
            r#"{"q":"long"}"#,
        )
        .unwrap();
    assert_eq!(v.unwrap_err()[0].rule, "string-too-long");
}

#[test]
fn guest_check_reports_the_custom_guest_fit_with_its_stricter_acceptance() {
    let report = check_guest(&example());
    let json = serde_json::to_value(&report).unwrap();
    assert!(report.satisfies_world, "{json:#}");
    assert!(report.ok, "no required case fails: {json:#}");
    // The one informational failure is the house rule rejecting the suite's
    // unprefixed canonical definition.
    let failed: Vec<_> = report.self_test.iter().filter(|c| !c.passed).collect();
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|c| !c.required), "{failed:#?}");
    assert!(
        failed.iter().any(|c| c
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("name-prefix-required")),
        "{failed:#?}"
    );
}
