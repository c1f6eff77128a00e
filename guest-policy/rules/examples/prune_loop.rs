//! A tiny native loop over the streaming pruner, for profiling:
//! `cargo run --release --features bench-cases --example prune_loop -p warden-policy-rules [iters]`
//! (from `guest-policy/`), or the built binary under
//! `valgrind --tool=callgrind`. It prunes the large case of the host's
//! benchmark (`bench_cases`): 20 orders, ~9 KB, to ~6.5 KB.

use std::time::Instant;

use warden_policy_rules::bench_cases::case;
use warden_policy_rules::schema::{Dialect, compile_text};

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let large = case("large");
    let result = large.result;
    let compiled = compile_text(Dialect::Output, &large.output_schema).expect("schema compiles");
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
