//! `make bench`: the cost of the sandbox next to the same work done natively.
//!
//! For small, medium and large schemas: validate (warm: compiled schema cached
//! in a live instance), validate on the first call of a new revision (the
//! guest compiles the schema), prune (warm), each sandboxed and native (the
//! same rule library compiled for the host), as p50 / p99 and ratios.
//!
//! Run: `cargo bench -p warden-host --bench sandbox` (release profile).
//! `BENCH_ITERS=N` changes the number of timed iterations (default 20000).

use std::time::{Duration, Instant};

use serde_json::Value;
use warden_host::{GuestSource, Sandbox, SandboxConfig, SchemaRef};
use warden_policy_rules::bench_cases::cases;
use warden_policy_rules::schema::{Dialect, compile_text};

#[derive(Clone, Copy)]
struct Stat {
    p50: Duration,
    p99: Duration,
}

fn measure(iters: usize, mut f: impl FnMut(usize)) -> Stat {
    for i in 0..(iters / 10).max(100) {
        f(i);
    }
    let mut samples = Vec::with_capacity(iters);
    for i in 0..iters {
        let t = Instant::now();
        f(i);
        samples.push(t.elapsed());
    }
    samples.sort();
    Stat {
        p50: samples[samples.len() / 2],
        p99: samples[samples.len() * 99 / 100],
    }
}

fn us(d: Duration) -> String {
    format!("{:8.2}", d.as_secs_f64() * 1e6)
}

fn main() {
    let iters: usize = std::env::var("BENCH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let started = Instant::now();
    let config = SandboxConfig {
        max_calls_per_instance: u32::MAX,
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::load_with(GuestSource::Default, config).expect("default guest");
    println!(
        "guest loaded (compile) in {:.1} ms; {} bytes; {iters} timed iterations per row\n",
        started.elapsed().as_secs_f64() * 1e3,
        sandbox.info().size_bytes
    );

    let cache_dir = std::env::temp_dir().join(format!("warden-bench-cache-{}", std::process::id()));
    let cached = SandboxConfig {
        cache_dir: Some(cache_dir.clone()),
        ..SandboxConfig::default()
    };
    drop(Sandbox::load_with(GuestSource::Default, cached.clone()).expect("fill the cache"));
    let t = Instant::now();
    let again = Sandbox::load_with(GuestSource::Default, cached).expect("from cache");
    println!(
        "guest loaded from the precompiled cache in {:.2} ms (from_cache = {})\n",
        t.elapsed().as_secs_f64() * 1e3,
        again.info().from_cache
    );
    let _ = std::fs::remove_dir_all(&cache_dir);

    // The fixed cost of crossing the boundary: an empty closed object
    // validated against an empty closed schema.
    let empty = SchemaRef {
        key: "empty",
        text: r#"{"type":"object","additionalProperties":false}"#,
    };
    let s = measure(iters, |_| {
        sandbox
            .validate_arguments("bench-empty", empty, "{}")
            .unwrap()
            .unwrap()
    });
    let native_empty = compile_text(Dialect::Input, empty.text).unwrap();
    let n = measure(iters, |_| native_empty.validate_text("{}").unwrap());
    println!(
        "boundary: validate of {{}} against an empty schema: sandboxed p50 {} µs, native p50 {} µs\n",
        us(s.p50).trim(),
        us(n.p50).trim()
    );

    println!(
        "{:<7} {:<22} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "schema", "operation", "sbx p50", "sbx p99", "nat p50", "nat p99", "ratio"
    );
    println!(
        "{:<7} {:<22} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "", "", "(µs)", "(µs)", "(µs)", "(µs)", "p50"
    );
    let mut verdicts = Vec::new();
    for case in cases() {
        let account = format!("bench-{}", case.name);
        let in_ref = SchemaRef {
            key: "cap_bench@1/input",
            text: &case.input_schema,
        };
        let out_ref = SchemaRef {
            key: "cap_bench@1/output",
            text: &case.output_schema,
        };
        // Sanity: the operations succeed, sandboxed and native, with the same answer.
        assert_eq!(
            sandbox
                .validate_arguments(&account, in_ref, &case.arguments)
                .unwrap(),
            Ok(()),
            "{}",
            case.name
        );
        let pruned = sandbox
            .prune_output(&account, out_ref, &case.result)
            .unwrap()
            .expect("prunes");
        let native_in = compile_text(Dialect::Input, &case.input_schema).unwrap();
        let native_out = compile_text(Dialect::Output, &case.output_schema).unwrap();
        assert_eq!(
            native_out.prune_text(&case.result).unwrap(),
            pruned.unchecked_text()
        );

        let row = |op: &str, s: Stat, n: Stat| {
            println!(
                "{:<7} {:<22} {} {} {} {} {:>7.1}x",
                case.name,
                op,
                us(s.p50),
                us(s.p99),
                us(n.p50),
                us(n.p99),
                s.p50.as_secs_f64() / n.p50.as_secs_f64()
            );
        };

        let s = measure(iters, |_| {
            sandbox
                .validate_arguments(&account, in_ref, &case.arguments)
                .unwrap()
                .unwrap();
        });
        let n = measure(iters, |_| native_in.validate_text(&case.arguments).unwrap());
        row("validate (warm)", s, n);
        // The same validation by jsonschema, natively, validator cached
        // (parsing the arguments included, as the guest does).
        let general =
            jsonschema::validator_for(&serde_json::from_str(&case.input_schema).unwrap()).unwrap();
        let j = measure(iters, |_| {
            let value: serde_json::Value = serde_json::from_str(&case.arguments).unwrap();
            assert!(general.is_valid(&value));
        });
        row("  vs jsonschema native", s, j);
        verdicts.push((
            case.name,
            "validate warm within 5x native jsonschema (cached)",
            s.p50.as_secs_f64() <= 5.0 * j.p50.as_secs_f64(),
        ));
        verdicts.push((
            case.name,
            "validate warm p50 <= 10 µs",
            s.p50 <= Duration::from_micros(10),
        ));
        // The ratio to our own native rule compiler is shown in the table
        // but is not a target: the issue's reference is native cached
        // validation by a general library (jsonschema, above).

        // First call of a new revision: a key the instance has never seen, so
        // the guest compiles the schema (checks included) before validating.
        let first_iters = (iters / 10).max(200);
        let keys: Vec<String> = (0..first_iters * 2 + 200)
            .map(|i| format!("cap_bench@{}/input", i + 2))
            .collect();
        let s = measure(first_iters, |i| {
            let r = SchemaRef {
                key: &keys[i],
                text: &case.input_schema,
            };
            sandbox
                .validate_arguments(&account, r, &case.arguments)
                .unwrap()
                .unwrap();
        });
        let n = measure(first_iters, |_| {
            let c = compile_text(Dialect::Input, &case.input_schema).unwrap();
            c.validate_text(&case.arguments).unwrap();
        });
        row("validate (new rev.)", s, n);
        verdicts.push((
            case.name,
            "first call of a new revision <= 500 µs",
            s.p50 <= Duration::from_micros(500),
        ));

        let s = measure(iters, |_| {
            sandbox
                .prune_output(&account, out_ref, &case.result)
                .unwrap()
                .unwrap();
        });
        let n = measure(iters, |_| {
            native_out.prune_text(&case.result).unwrap();
        });
        row("prune (warm)", s, n);
        verdicts.push((
            case.name,
            "prune warm p50 <= 20 µs",
            s.p50 <= Duration::from_micros(20),
        ));
        // What the server pays per result: the pruned text parsed into a
        // `serde_json::Value` (that parse is also the check that the guest
        // returned JSON). Shown for context; not a target.
        let s = measure(iters, |_| {
            let text = sandbox
                .prune_output(&account, out_ref, &case.result)
                .unwrap()
                .unwrap();
            let _: Value = text.parse("the pruned result").unwrap();
        });
        let n = measure(iters, |_| {
            let text = native_out.prune_text(&case.result).unwrap();
            let _: Value = serde_json::from_str(&text).unwrap();
        });
        row("prune + parse", s, n);

        // A fresh instance per call (a new account every time): the cost
        // when no instance of the account is idle.
        let mut k = 0u64;
        let s = measure(first_iters, |_| {
            k += 1;
            sandbox
                .validate_arguments(&format!("{account}-fresh-{k}"), in_ref, &case.arguments)
                .unwrap()
                .unwrap();
        });
        let n = measure(first_iters, |_| {
            let c = compile_text(Dialect::Input, &case.input_schema).unwrap();
            c.validate_text(&case.arguments).unwrap();
        });
        row("validate (new account)", s, n);
        println!(
            "{:<7} sizes: input schema {} B, arguments {} B, output schema {} B, result {} B -> pruned {} B",
            case.name,
            case.input_schema.len(),
            case.arguments.len(),
            case.output_schema.len(),
            case.result.len(),
            pruned.len()
        );
    }
    println!("\ntargets:");
    for (case, what, ok) in &verdicts {
        println!("  [{}] {case}: {what}", if *ok { "met" } else { "MISSED" });
    }
    println!("\nstats: {:?}", sandbox.stats());
}
