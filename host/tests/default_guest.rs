//! The embedded default guest through the sandbox: the world's functions,
//! the self-test suite, account scoping and instance reuse.

use std::time::{Duration, Instant};

use warden_host::{
    DefinitionOptions, GuestSource, InteractionKind, Sandbox, SandboxConfig, SandboxError,
    SchemaRef, check_guest_with,
};

const INPUT: &str = r#"{"type":"object","additionalProperties":false,"required":["q"],
  "properties":{"q":{"type":"string","maxLength":8,"pattern":"^[a-z]+$"}}}"#;
const OUTPUT: &str = r#"{"type":"object","additionalProperties":false,
  "properties":{"name":{"type":"string","maxLength":10}}}"#;

fn sandbox() -> Sandbox {
    Sandbox::load(GuestSource::Default).expect("the default guest loads")
}

#[test]
fn the_default_guest_passes_its_self_test() {
    let report = check_guest_with(GuestSource::Default, SandboxConfig::default());
    let failed: Vec<_> = report.self_test.iter().filter(|c| !c.passed).collect();
    assert!(report.ok, "failed: {failed:#?}");
    assert!(report.satisfies_world);
    assert!(report.passed >= 20);
}

#[test]
fn validate_prune_and_shape() {
    let s = sandbox();
    let input = SchemaRef {
        key: "cap_1@1/input",
        text: INPUT,
    };
    assert_eq!(
        s.validate_arguments("acct", input, r#"{"q":"abc"}"#)
            .unwrap(),
        Ok(())
    );
    let v = s
        .validate_arguments("acct", input, r#"{"q":"ABC","z":1}"#)
        .unwrap()
        .unwrap_err();
    let rules: Vec<_> = v
        .iter()
        .map(|v| (v.pointer.as_str(), v.rule.as_str()))
        .collect();
    assert_eq!(
        rules,
        vec![("/q", "pattern-mismatch"), ("/z", "property-not-allowed")]
    );

    let output = SchemaRef {
        key: "cap_1@1/output",
        text: OUTPUT,
    };
    let pruned = s
        .prune_output("acct", output, r#"{"name":"x","secret_internal":1}"#)
        .unwrap()
        .unwrap();
    assert_eq!(pruned.unchecked_text(), r#"{"name":"x"}"#);

    let shaped = s
        .shape_interaction("acct", r#"{"type":"not_found"}"#)
        .unwrap()
        .unwrap();
    assert_eq!(shaped.kind, InteractionKind::NotFound);
    assert_eq!(
        shaped.assistant_text.as_deref(),
        Some("No hay una operación disponible para esta consulta.")
    );
}

#[test]
fn a_reused_key_with_a_new_schema_is_not_served_from_cache() {
    let s = sandbox();
    let a = SchemaRef {
        key: "same-key",
        text: INPUT,
    };
    assert!(
        s.validate_arguments("acct", a, r#"{"q":"abc"}"#)
            .unwrap()
            .is_ok()
    );
    let b = SchemaRef {
        key: "same-key",
        text: r#"{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer"}}}"#,
    };
    let v = s
        .validate_arguments("acct", b, r#"{"q":"abc"}"#)
        .unwrap()
        .unwrap_err();
    assert_eq!(v[0].rule, "property-not-allowed");
}

#[test]
fn instances_are_reused_per_account_and_never_across_accounts() {
    let s = sandbox();
    let input = SchemaRef {
        key: "k",
        text: INPUT,
    };
    s.validate_arguments("account-a", input, r#"{"q":"a"}"#)
        .unwrap()
        .unwrap();
    let a_ids = s.idle_instance_ids("account-a");
    assert_eq!(a_ids.len(), 1);
    s.validate_arguments("account-b", input, r#"{"q":"a"}"#)
        .unwrap()
        .unwrap();
    let b_ids = s.idle_instance_ids("account-b");
    assert_eq!(b_ids.len(), 1);
    assert_ne!(a_ids, b_ids, "account b must get its own instance");
    s.validate_arguments("account-a", input, r#"{"q":"a"}"#)
        .unwrap()
        .unwrap();
    assert_eq!(
        s.idle_instance_ids("account-a"),
        a_ids,
        "account a reuses its own instance"
    );
}

#[test]
fn instances_are_recycled_after_their_call_quota() {
    let config = SandboxConfig {
        max_calls_per_instance: 3,
        ..SandboxConfig::default()
    };
    let s = Sandbox::load_with(GuestSource::Default, config).unwrap();
    let input = SchemaRef {
        key: "k",
        text: INPUT,
    };
    for _ in 0..7 {
        s.validate_arguments("acct", input, r#"{"q":"a"}"#)
            .unwrap()
            .unwrap();
    }
    let stats = s.stats();
    assert_eq!(stats.recycled, 2, "{stats:?}");
}

#[test]
fn loopback_is_a_switch_of_the_host() {
    let s = sandbox();
    let def = serde_json::json!({
        "name": "n", "description": "d", "method": "POST", "url": "http://127.0.0.1:9000/x",
        "auth": {"type": "bearer", "credential_ref": "cred_abc"},
        "input_schema": {"type": "object", "additionalProperties": false},
        "output_schema": {"type": "object", "additionalProperties": false},
        "side_effect": "read"
    })
    .to_string();
    let prod = s
        .check_definition("acct", &def, DefinitionOptions::default())
        .unwrap()
        .unwrap_err();
    assert_eq!(prod[0].rule, "url-localhost");
    let dev = s
        .check_definition(
            "acct",
            &def,
            DefinitionOptions {
                allow_loopback_http: true,
            },
        )
        .unwrap();
    assert_eq!(dev, Ok(()));
}

#[test]
fn oversized_input_is_refused_before_the_guest() {
    let s = sandbox();
    let big = "x".repeat(s.config().max_schema_bytes + 1);
    let e = s
        .validate_arguments(
            "acct",
            SchemaRef {
                key: "k",
                text: INPUT,
            },
            &big,
        )
        .unwrap_err();
    assert_eq!(e.code(), "INPUT_TOO_LARGE");
    assert!(!e.is_guest_fault());
}

#[test]
fn load_time_is_reported() {
    let started = Instant::now();
    let s = sandbox();
    eprintln!(
        "default guest: {:?} (compile {:.1} ms) total {:?}",
        s.info(),
        s.info().load_ms,
        started.elapsed()
    );
    assert!(
        s.info().imports.iter().all(|i| i.starts_with("wasi:")),
        "{:?}",
        s.info().imports
    );
}

#[test]
fn a_precompiled_cache_makes_the_next_start_fast() {
    let dir = std::env::temp_dir().join(format!("warden-host-cache-test-{}", std::process::id()));
    let config = SandboxConfig {
        cache_dir: Some(dir.clone()),
        ..SandboxConfig::default()
    };
    let first = Sandbox::load_with(GuestSource::Default, config.clone()).unwrap();
    assert!(!first.info().from_cache);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let second = Sandbox::load_with(GuestSource::Default, config.clone()).unwrap();
    assert!(second.info().from_cache);
    assert!(
        second.info().load_ms < first.info().load_ms / 5.0,
        "{} vs {}",
        second.info().load_ms,
        first.info().load_ms
    );
    let input = SchemaRef {
        key: "k",
        text: INPUT,
    };
    assert_eq!(
        second
            .validate_arguments("acct", input, r#"{"q":"abc"}"#)
            .unwrap(),
        Ok(())
    );
    // A corrupt cache file is replaced, not trusted (guest_cache.rs has
    // the rest of the cache's checks).
    drop((first, second));
    let file = dir.join(&files[0]);
    std::fs::write(&file, b"garbage").unwrap();
    let third = Sandbox::load_with(GuestSource::Default, config).unwrap();
    assert!(!third.info().from_cache);
    assert_eq!(
        third
            .validate_arguments("acct", input, r#"{"q":"abc"}"#)
            .unwrap(),
        Ok(())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_calls_of_one_account_each_get_their_own_instance() {
    let s = sandbox();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let input = SchemaRef {
                        key: "k",
                        text: INPUT,
                    };
                    assert_eq!(
                        s.validate_arguments("shared", input, r#"{"q":"abc"}"#)
                            .unwrap(),
                        Ok(())
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(s.idle_instance_ids("shared").len() <= s.config().max_idle_per_account);
    assert_eq!(s.stats().discarded_after_fault, 0);
}

#[test]
fn an_instance_whose_memory_grew_is_not_kept_idle() {
    let config = SandboxConfig {
        max_idle_memory: 4 << 20,
        ..SandboxConfig::default()
    };
    let s = Sandbox::load_with(GuestSource::Default, config).unwrap();
    let output = SchemaRef {
        key: "k",
        text: OUTPUT,
    };
    s.prune_output("acct", output, r#"{"name":"x"}"#)
        .unwrap()
        .unwrap();
    assert_eq!(
        s.idle_instance_ids("acct").len(),
        1,
        "a small call keeps its instance"
    );
    // A 1.5 MiB result makes the guest's memory grow past 4 MiB.
    let big = format!(r#"{{"name":"x","junk":"{}"}}"#, "y".repeat(3 << 19));
    s.prune_output("acct", output, &big).unwrap().unwrap();
    assert!(
        s.idle_instance_ids("acct").is_empty(),
        "the grown instance was dropped"
    );
    assert_eq!(s.stats().recycled, 1);
    assert_eq!(s.stats().discarded_after_fault, 0);
}

/// An input schema whose `q` has `pattern`, as stored (not checked here).
fn patterned(pattern: &str) -> String {
    serde_json::json!({"type": "object", "additionalProperties": false,
        "properties": {"q": {"type": "string", "maxLength": 8192, "pattern": pattern},
                       "free": {"type": "string", "maxLength": 8}}})
    .to_string()
}

#[test]
fn match_pattern_names_the_matching_candidates() {
    let s = sandbox();
    let input = SchemaRef {
        key: "cap_1@1/input",
        text: INPUT,
    };
    assert_eq!(
        s.match_pattern("acct", input, "q", &["abc", "A-1", "", "xyz", "abc1"])
            .unwrap(),
        Ok(vec![0, 3])
    );
    assert_eq!(
        s.match_pattern("acct", input, "q", &[] as &[&str]).unwrap(),
        Ok(vec![])
    );
    // The same key and text as validate-arguments: one compiled schema.
    assert_eq!(
        s.validate_arguments("acct", input, r#"{"q":"abc"}"#)
            .unwrap(),
        Ok(())
    );
    let schema = patterned("^[A-Z]-[0-9]+$");
    let with_free = SchemaRef {
        key: "cap_2@1/input",
        text: &schema,
    };
    for property in ["free", "absent"] {
        let violations = s
            .match_pattern("acct", with_free, property, &["A-1"])
            .unwrap()
            .unwrap_err();
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].rule, "property-without-pattern");
        assert_eq!(violations[0].pointer, format!("/properties/{property}"));
    }
}

#[test]
fn match_pattern_inputs_are_bounded_before_the_guest() {
    let s = sandbox();
    let input = SchemaRef {
        key: "cap_1@1/input",
        text: INPUT,
    };
    let many = vec!["a"; s.config().max_candidates + 1];
    let err = s.match_pattern("acct", input, "q", &many).unwrap_err();
    assert!(matches!(err, SandboxError::InputTooLarge { .. }), "{err:?}");
    let big = vec!["a".repeat(s.config().max_schema_bytes / 2 + 1); 2];
    let err = s.match_pattern("acct", input, "q", &big).unwrap_err();
    assert_eq!(err.code(), "INPUT_TOO_LARGE");
}

#[test]
fn a_pattern_refused_at_import_does_not_run_even_if_stored() {
    // Accepted by the guard of 0.1 (and catastrophic natively), refused by
    // today's: a capability stored with it gets no match, at once.
    let s = sandbox();
    for pattern in ["^(?:aa?)+$", "^(\\w{1,16})+$", "a*a*a*a*a*a*a*a*a*a*a*a*b"] {
        let schema = patterned(pattern);
        let input = SchemaRef {
            key: "cap_3@1/input",
            text: &schema,
        };
        let word = format!("{}b", "a".repeat(40));
        let started = Instant::now();
        let violations = s
            .match_pattern("acct", input, "q", &[word.as_str()])
            .unwrap()
            .unwrap_err();
        assert_eq!(violations[0].rule, "schema-invalid", "{pattern}");
        assert!(started.elapsed() < Duration::from_secs(1), "{pattern}");
    }
}

#[test]
fn a_slow_pattern_ends_at_the_deadline_not_later() {
    // Still accepted (three adjacent stars), but cubic per start position:
    // on 600 `a`s `regress` natively (release build) needs 23 s.
    let s = sandbox();
    let schema = patterned("a*a*a*b");
    let input = SchemaRef {
        key: "cap_4@1/input",
        text: &schema,
    };
    let word = "a".repeat(600);
    let started = Instant::now();
    let err = s
        .match_pattern("acct", input, "q", &["aab", word.as_str()])
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
    assert!(took < Duration::from_secs(1), "stopped after {took:?}");
    // The instance is gone; the next call works on a fresh one.
    assert_eq!(
        s.match_pattern("acct", input, "q", &["aab", "xyz"])
            .unwrap(),
        Ok(vec![0])
    );
}
