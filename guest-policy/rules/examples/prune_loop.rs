//! A tiny native loop over the streaming pruner, for profiling:
//! `cargo run --release --example prune_loop -p warden-policy-rules [iters]`
//! (from `guest-policy/`), or the built binary under
//! `valgrind --tool=callgrind`. It prunes the large case of the host's
//! benchmark (`host/benches/sandbox.rs`): 20 orders, ~9 KB, to ~6.5 KB.

use std::time::Instant;

use serde_json::{Value, json};
use warden_policy_rules::schema::{Dialect, compile_text};

fn string(max: u64) -> Value {
    json!({"type": "string", "maxLength": max})
}

fn closed(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
}

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let line = closed(
        json!({"sku": string(20), "qty": {"type": "integer"}, "price": {"type": "number"}}),
        &["sku"],
    );
    let schema = closed(
        json!({
            "orders": {"type": "array", "maxItems": 50, "items": closed(json!({
                "id": string(20), "status": string(20), "placed_at": string(30), "total": {"type": "number"},
                "shipping": closed(json!({"carrier": string(20), "tracking": string(40), "eta": string(30)}), &[]),
                "lines": {"type": "array", "maxItems": 20, "items": line}}), &["id"])},
            "page": {"type": "integer"}, "pages": {"type": "integer"}
        }),
        &[],
    );
    let order = |i: u32| {
        json!({"id": format!("ORD-{i:06}"), "status": "delivered", "placed_at": "2026-10-01T10:00:00Z",
        "total": 99.9, "margin": 12.5, "customer_email": "someone@shop.example",
        "shipping": {"carrier": "UPS", "tracking": "1Z999AA10123456784", "eta": "2026-10-03", "cost": 4.2},
        "lines": (0..4).map(|j| json!({"sku": format!("SKU-{j}"), "qty": 1, "price": 24.9, "cost": 10.0})).collect::<Vec<_>>()})
    };
    let result = json!({"orders": (0..20).map(order).collect::<Vec<_>>(), "page": 1, "pages": 3, "trace": "x".repeat(200)})
        .to_string();
    let compiled = compile_text(Dialect::Output, &schema.to_string()).expect("schema compiles");
    let pruned = compiled.prune_text(&result).expect("prunes");
    println!("result {} B -> pruned {} B", result.len(), pruned.len());
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let out = compiled.prune_text(std::hint::black_box(&result));
        samples.push(t.elapsed());
        std::hint::black_box(out.ok());
    }
    samples.sort();
    println!(
        "prune p50 {:.2} µs, p99 {:.2} µs over {iters} iterations",
        samples[iters / 2].as_secs_f64() * 1e6,
        samples[iters * 99 / 100].as_secs_f64() * 1e6
    );
}
