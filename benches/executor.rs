//! `make bench`: the executor's overhead per call against a loopback
//! endpoint, split into sandbox (argument validation + pruning), signing and
//! HTTP, next to a bare HTTP call to the same endpoint.
//!
//! Run: `cargo bench --bench executor` (harness-free: prints a table).

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use warden::cli::{
    AccountCommand, AdminCommand, DatabaseArgs, KeyCommand, MasterKeyArgs, ServeArgs,
};
use warden::executor::{Call, CallKind, CapabilityAtRevision};
use warden::startup::Application;

const WARMUP: usize = 200;
const CALLS: usize = 2_000;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let database = DatabaseArgs {
        database_url: format!("sqlite://{}", dir.path().join("bench.db").display()),
        environment: "bench".into(),
    };
    let keys = MasterKeyArgs {
        master_key: Some("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".into()),
        ..Default::default()
    };
    let serve = ServeArgs::local()
        .with_guest_cache(dir.path().join("cache"))
        .with_loopback_endpoints(true);
    let app = Application::build(&database, &keys, &serve).await.unwrap();
    let context = app.context();
    let base = format!("http://{}", app.local_addr());
    tokio::spawn(app.run(std::future::pending()));

    // The host endpoint: a fixed answer with fields to prune.
    let answer = json!({"status": "shipped", "internal": "x", "lines": [{"sku": "A1", "qty": 1, "cost": 3.5}]});
    let endpoint = axum::Router::new().fallback(move || {
        let answer = answer.clone();
        async move { axum::Json(answer) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint_url = format!("http://{}/orders/status", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, endpoint).await.unwrap() });

    let admin = |command| warden::admin::execute(&context.store, &database, &keys, command);
    admin(AdminCommand::Account(AccountCommand::Create {
        name: "bench".into(),
    }))
    .await
    .unwrap();
    let issued = admin(AdminCommand::Key(KeyCommand::Issue {
        account: "bench".into(),
    }))
    .await
    .unwrap();
    let api_key = issued["api_key"].as_str().unwrap().to_owned();
    let client = reqwest::Client::new();
    client
        .put(format!("{base}/v1/capability-credentials/cred_bench"))
        .bearer_auth(&api_key)
        .json(&json!({"auth_type": "bearer", "secret": "bench-secret"}))
        .send()
        .await
        .unwrap();
    let definition: Value = json!({
        "name": "order_status", "description": "Order status", "method": "POST", "url": endpoint_url,
        "auth": {"type": "bearer", "credential_ref": "cred_bench"}, "side_effect": "read",
        "input_schema": {"type": "object", "additionalProperties": false, "required": ["order"],
            "properties": {"order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z0-9-]+$"}}},
        "output_schema": {"type": "object", "additionalProperties": false, "properties": {
            "status": {"type": "string", "maxLength": 40},
            "lines": {"type": "array", "maxItems": 10, "items": {"type": "object", "additionalProperties": false,
                "properties": {"sku": {"type": "string", "maxLength": 20}, "qty": {"type": "integer"}}}}}},
        "timeout_ms": 5000, "retry_count": 0
    });
    let created: Value = client
        .post(format!("{base}/v1/capabilities"))
        .bearer_auth(&api_key)
        .header("idempotency-key", "bench")
        .json(&json!({"domain": "bench", "capability": definition}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let capability = CapabilityAtRevision {
        id: created["id"].as_str().unwrap().to_owned(),
        revision: 1,
        definition: std::sync::Arc::new(serde_json::from_value(definition).unwrap()),
    };
    let account = context.store.find_account("bench").await.unwrap().unwrap();
    let arguments = json!({"order": "A-1001"});

    let (mut total, mut sandbox, mut signing, mut http) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..WARMUP + CALLS {
        let started = Instant::now();
        let report = context
            .executor
            .call(Call {
                kind: CallKind::Test,
                account: &account,
                user_id: Some("user-1"),
                capability: &capability,
                arguments: &arguments,
                credential: None,
            })
            .await;
        let elapsed = started.elapsed();
        assert!(report.outcome.is_ok(), "{:?}", report.outcome);
        if i >= WARMUP {
            total.push(elapsed);
            sandbox.push(report.timing.sandbox);
            signing.push(report.timing.signing);
            http.push(report.timing.http);
        }
    }

    // The same exchange without Warden: what the HTTP part alone costs.
    let bare = reqwest::Client::new();
    let mut bare_http = Vec::new();
    for i in 0..WARMUP + CALLS {
        let started = Instant::now();
        let r = bare
            .post(&endpoint_url)
            .json(&arguments)
            .send()
            .await
            .unwrap();
        let _: Value = r.json().await.unwrap();
        if i >= WARMUP {
            bare_http.push(started.elapsed());
        }
    }

    println!(
        "executor overhead per call ({CALLS} calls after {WARMUP} warm-up, loopback endpoint)"
    );
    println!("{:<28} {:>10} {:>10}", "part", "p50 µs", "p99 µs");
    for (name, samples) in [
        ("total", &mut total),
        ("  sandbox (validate+prune)", &mut sandbox),
        ("  signing (RFC 9421)", &mut signing),
        ("  http exchange", &mut http),
        ("bare reqwest call", &mut bare_http),
    ] {
        println!(
            "{:<28} {:>10.1} {:>10.1}",
            name,
            micros(percentile(samples, 0.5)),
            micros(percentile(samples, 0.99))
        );
    }
    let overhead = micros(percentile(&mut total, 0.5)) - micros(percentile(&mut bare_http, 0.5));
    println!(
        "overhead over a bare call (p50): {overhead:.1} µs ({:.2}x)",
        micros(percentile(&mut total, 0.5)) / micros(percentile(&mut bare_http, 0.5))
    );
}
