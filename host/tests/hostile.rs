//! Hostile guests, built from source: each call ends with a typed error in
//! bounded time, the process survives, a healthy guest keeps working, and a
//! faulted instance is never reused.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use warden_host::{
    GuestSource, IntegrationSchemaKind, LoadError, Sandbox, SandboxConfig, SandboxError, SchemaRef,
};

const SCHEMA: SchemaRef<'static> = SchemaRef {
    key: "k",
    text: r#"{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string","maxLength":3}}}"#,
};

fn healthy() -> &'static Sandbox {
    static S: OnceLock<Sandbox> = OnceLock::new();
    S.get_or_init(|| Sandbox::load(GuestSource::Default).unwrap())
}

fn load(name: &str) -> Sandbox {
    Sandbox::load(GuestSource::Path(common::hostile(name)))
        .unwrap_or_else(|e| panic!("{name} loads: {e}"))
}

/// For the tests of a size cap: writing tens of MiB can outlast the 50 ms
/// deadline on a loaded machine, and time is not what should stop them.
fn load_without_deadline_pressure(name: &str) -> Sandbox {
    let config = SandboxConfig {
        deadline: Duration::from_secs(5),
        ..SandboxConfig::default()
    };
    Sandbox::load_with(GuestSource::Path(common::hostile(name)), config)
        .unwrap_or_else(|e| panic!("{name} loads: {e}"))
}

/// The healthy guest still answers, in this same process.
fn healthy_still_works() {
    let v = healthy()
        .validate_arguments("acct-healthy", SCHEMA, r#"{"q":"abc"}"#)
        .unwrap();
    assert_eq!(v, Ok(()));
}

/// The faulted instance was dropped, and the next call gets a new one.
fn faulted_instance_not_reused(s: &Sandbox, account: &str, faults_so_far: u64) {
    let stats = s.stats();
    assert_eq!(stats.discarded_after_fault, faults_so_far, "{stats:?}");
    assert!(
        s.idle_instance_ids(account).is_empty(),
        "a faulted instance is back in the pool"
    );
}

#[test]
fn an_infinite_loop_is_stopped_at_the_deadline() {
    let s = load("spin");
    for round in 1..=3u64 {
        let started = Instant::now();
        let err = s.validate_arguments("acct", SCHEMA, "{}").unwrap_err();
        let took = started.elapsed();
        assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
        assert_eq!(err.code(), "GUEST_DEADLINE");
        // Stopped by the deadline (not before it) and not left running; how
        // close to the deadline it stops is a figure of `make bench`, not a
        // timed assertion that a loaded machine would break.
        assert!(took < Duration::from_secs(5), "stopped after {took:?}");
        assert!(
            took >= s.config().deadline - s.config().epoch_tick,
            "stopped too early: {took:?}"
        );
        faulted_instance_not_reused(&s, "acct", round);
        assert_eq!(
            s.stats().instantiated,
            round + 1,
            "each call needs a fresh instance (plus the load probe)"
        );
    }
    healthy_still_works();
}

#[test]
fn a_budgeted_handle_stops_at_its_budget_not_the_deadline() {
    // A 5 s deadline, so that stopping at the budget is told from stopping
    // at the deadline by a bound no loaded machine comes near.
    let s = load_without_deadline_pressure("spin");
    let budget = Duration::from_millis(2);
    let quick = s.within(budget);
    let started = Instant::now();
    let err = quick.validate_arguments("acct", SCHEMA, "{}").unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err, SandboxError::OverBudget(b) if b == budget),
        "{err:?}"
    );
    assert_eq!(err.code(), "GUEST_OVER_BUDGET");
    assert!(took >= budget, "stopped before its budget: {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "ran on to the deadline: {took:?}"
    );
    // The overrunning instance is dropped like any interrupted one.
    faulted_instance_not_reused(&s, "acct", 1);
    // A short call on a healthy guest is answered within the budget.
    let healthy = healthy().within(budget);
    assert!(
        healthy
            .validate_arguments("acct", SCHEMA, r#"{"q":"ab"}"#)
            .unwrap()
            .is_ok()
    );
    healthy_still_works();
}

#[test]
fn match_pattern_is_stopped_at_the_deadline_too() {
    let s = load("spin");
    let started = Instant::now();
    let err = s
        .match_pattern("acct", SCHEMA, "q", &["aaaa", "b"])
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
    // Generous: the point is "about the deadline", not "until it returns".
    assert!(took < Duration::from_secs(1), "stopped after {took:?}");
    faulted_instance_not_reused(&s, "acct", 1);
    healthy_still_works();
}

#[test]
fn unbounded_memory_growth_hits_the_limit() {
    let s = load_without_deadline_pressure("grow");
    let started = Instant::now();
    let err = s.prune_output("acct", SCHEMA, "{}").unwrap_err();
    assert!(
        matches!(err, SandboxError::MemoryLimit { limit } if limit == 64 << 20),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    faulted_instance_not_reused(&s, "acct", 1);
    // Again: the pool slot was reclaimed, the next instance starts clean.
    let err = s.prune_output("acct", SCHEMA, "{}").unwrap_err();
    assert_eq!(err.code(), "GUEST_MEMORY_LIMIT");
    faulted_instance_not_reused(&s, "acct", 2);
    healthy_still_works();
}

/// With a bounded reservation (`WARDEN_GUEST_MEMORY_RESERVATION_MIB`) the
/// guest's code checks bounds itself: the memory limit still holds, the
/// faulted instance is dropped, and the default guest answers.
#[test]
fn a_small_memory_reservation_keeps_every_limit() {
    let config = SandboxConfig {
        deadline: Duration::from_secs(5),
        memory_reservation: Some(64 << 20),
        ..SandboxConfig::default()
    };
    let s = Sandbox::load_with(GuestSource::Path(common::hostile("grow")), config.clone())
        .expect("grow loads with a 64 MiB reservation");
    let err = s.prune_output("acct", SCHEMA, "{}").unwrap_err();
    assert!(
        matches!(err, SandboxError::MemoryLimit { limit } if limit == 64 << 20),
        "{err:?}"
    );
    faulted_instance_not_reused(&s, "acct", 1);
    let default = Sandbox::load_with(GuestSource::Default, config).unwrap();
    let verdict = default
        .validate_arguments("acct", SCHEMA, r#"{"q":"abc"}"#)
        .unwrap();
    assert_eq!(verdict, Ok(()));
}

#[test]
fn a_panic_is_a_trap() {
    let s = load("trap");
    let started = Instant::now();
    let err = s
        .check_definition("acct", "{}", Default::default())
        .unwrap_err();
    assert!(matches!(err, SandboxError::Trap(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a trap ends the call at once"
    );
    faulted_instance_not_reused(&s, "acct", 1);
    healthy_still_works();
}

/// Short guest calls run inline on the server's runtime threads (4 MiB
/// stacks), below the request's own frames. A guest that recurses without
/// end must meet the sandbox's 1 MiB wasm stack limit as a trap, not the
/// thread's native stack as a crash: shown here on a thread of half the
/// runtime's stack, inline under a budget and on the full deadline.
#[test]
fn endless_recursion_is_a_trap_on_a_runtime_sized_thread() {
    const HALF_A_RUNTIME_THREAD: usize = 2 << 20;
    let s = load("recurse");
    let outcomes = std::thread::Builder::new()
        .stack_size(HALF_A_RUNTIME_THREAD)
        .spawn(move || {
            let inline = s
                .within(Duration::from_millis(50))
                .validate_arguments("acct", SCHEMA, "{}");
            let pooled = s.prune_output("acct", SCHEMA, "{}");
            let stats = s.stats();
            (inline, pooled, stats)
        })
        .unwrap()
        .join()
        .expect("the calling thread survives the guest's recursion");
    let (inline, pooled, stats) = outcomes;
    let inline = inline.unwrap_err();
    assert!(matches!(inline, SandboxError::Trap(_)), "{inline:?}");
    let pooled = pooled.unwrap_err();
    assert!(matches!(pooled, SandboxError::Trap(_)), "{pooled:?}");
    assert_eq!(stats.discarded_after_fault, 2, "{stats:?}");
    healthy_still_works();
}

#[test]
fn a_huge_answer_is_refused() {
    let s = load_without_deadline_pressure("huge");
    let err = s.prune_output("acct", SCHEMA, "{}").unwrap_err();
    assert!(
        matches!(err, SandboxError::OutputTooLarge { size, .. } if size > 8 << 20),
        "{err:?}"
    );
    faulted_instance_not_reused(&s, "acct", 1);
    let err = s.validate_arguments("acct", SCHEMA, "{}").unwrap_err();
    assert!(
        matches!(err, SandboxError::Contract(_)),
        "5000 violations: {err:?}"
    );
    faulted_instance_not_reused(&s, "acct", 2);
    healthy_still_works();
}

#[test]
fn breaking_the_error_contract_is_a_fault() {
    let s = load("no-violations");
    // Non-JSON output is caught where it is read: the only reader of a
    // guest's JSON is a parse, so it can never pass for data.
    let text = s.prune_output("acct", SCHEMA, "{}").unwrap().unwrap();
    let err = text
        .parse::<serde_json::Value>("the pruned result")
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Contract(m) if m.contains("not the expected JSON")),
        "{err:?}"
    );
    assert_eq!(err.code(), "GUEST_CONTRACT");

    let err = s.validate_arguments("acct", SCHEMA, "{}").unwrap_err();
    assert!(
        matches!(&err, SandboxError::Contract(m) if m.contains("no violation")),
        "{err:?}"
    );
    faulted_instance_not_reused(&s, "acct", 1);
}

#[test]
fn the_guest_cannot_reach_environment_clock_filesystem_stdout_or_randomness() {
    let s = load("snoop");
    let results = [
        (
            "environment",
            s.check_definition("acct", "{}", Default::default())
                .map(|_| ()),
        ),
        (
            "clock",
            s.validate_arguments("acct", SCHEMA, "{}").map(|_| ()),
        ),
        (
            "filesystem",
            s.prune_output("acct", SCHEMA, "{}").map(|_| ()),
        ),
        (
            "randomness",
            s.check_integration_schema("acct", IntegrationSchemaKind::Input, "{}")
                .map(|_| ()),
        ),
        (
            "stdout",
            s.validate_integration("acct", SCHEMA, "{}").map(|_| ()),
        ),
    ];
    for (what, r) in results {
        let err = r.expect_err(what);
        assert_eq!(err.code(), "GUEST_TRAP", "{what}: {err:?}");
    }
    faulted_instance_not_reused(&s, "acct", 5);
    healthy_still_works();
}

#[test]
fn a_component_of_another_world_is_refused_naming_what_is_missing() {
    let err = Sandbox::load(GuestSource::Path(common::hostile("wrong-world")))
        .err()
        .expect("refused");
    let LoadError::WorldMismatch { missing, .. } = &err else {
        panic!("{err:?}")
    };
    let text = err.to_string();
    assert!(
        text.contains("missing export `warden:policy/validator@0.2.0`"),
        "{text}"
    );
    assert!(
        text.contains("acme:greeter/hello@1.0.0"),
        "names what it does export: {text}"
    );
    assert_eq!(missing.len(), 1);
}

#[test]
fn a_component_missing_functions_is_refused_naming_each() {
    let err = Sandbox::load(GuestSource::Path(common::hostile("partial-world")))
        .err()
        .expect("refused");
    let text = err.to_string();
    for f in [
        "validate-arguments",
        "prune-output",
        "shape-interaction",
        "check-integration-schema",
        "validate-integration",
        "match-pattern",
    ] {
        assert!(
            text.contains(&format!("missing function `{f}`")),
            "{f}: {text}"
        );
    }
    assert!(
        !text.contains("missing function `check-definition`"),
        "{text}"
    );
    // The guest exports validator@0.2.7: found as semver-compatible with
    // 0.2.0, so the report is about its functions, not a missing export.
    assert!(!text.contains("missing export"), "{text}");
}

#[test]
fn bytes_that_are_not_a_component_are_refused() {
    let err = Sandbox::load(GuestSource::Bytes {
        name: "junk".into(),
        bytes: b"\0asm junk".to_vec(),
    })
    .err()
    .unwrap();
    assert!(matches!(err, LoadError::NotAComponent { .. }), "{err:?}");
    let err = Sandbox::load(GuestSource::Path("/nonexistent/guest.wasm".into()))
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Read { .. }), "{err:?}");
}
