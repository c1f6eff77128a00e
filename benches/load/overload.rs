//! Past capacity (issue 28, graceful overload): requests arrive at twice
//! the rate the server sustained with 8 connections (its capacity, measured
//! in the same run), then at half of it. What a user should see:
//! - admitted requests keep a bounded latency (p99 ≤ 100 ms);
//! - the excess is answered at once with 503 and `Retry-After` (p99 ≤ 10 ms);
//! - once arrivals drop, every request succeeds again within 1 s;
//! - `GET /health`, probed every 50 ms throughout, keeps answering.
//!
//! Latency counts from each request's due time (no coordinated omission),
//! as in `load::open_loop`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::RequestSpec;
use crate::open_client::{Broken, OpenClient};

/// Bounds the report checks each run against.
const ADMITTED_P99_MS: f64 = 100.0;
const REFUSED_P99_MS: f64 = 10.0;
const RECOVERY_MS: f64 = 1000.0;
/// Outstanding requests the generator allows (beyond: counted, not sent).
const GENERATOR_CAP: usize = 2048;
/// The generator's time-out per request (a failure counts as this slow).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    Ok,
    /// 503 with a `Retry-After` header.
    Refused,
    /// Anything else.
    Failed(Failure),
}

/// How a request failed, counted by kind in the summary line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Failure {
    /// Another status, or a 503 without `Retry-After`.
    Status(u16),
    /// No answer (the client's 10 s time-out among them).
    Broken(Broken),
}

struct Sample {
    /// Due time, from the start of the run.
    due: Duration,
    /// From the due time to the moment the generator began to send: its
    /// own lateness, part of `latency`.
    late: Duration,
    latency: Duration,
    outcome: Outcome,
}

/// One scenario's run past capacity.
pub struct Overload {
    pub scenario: &'static str,
    pub backend: &'static str,
    pub capacity: f64,
    high: PhaseFigures,
    /// After the load dropped: when the last failed or slow (over
    /// `ADMITTED_P99_MS`) request was due, from the drop (0 when none).
    recovered_after_ms: f64,
    low_failed: usize,
    /// p99 of the requests due from 1 s after the drop (all of them: a
    /// failure counts as the client's time-out).
    settled_p99_ms: f64,
    health_p99_ms: f64,
    health_failed: usize,
    not_sent: usize,
    /// p99 of the generator's own lateness at twice capacity (`Sample::late`).
    generator_late_p99_ms: f64,
}

#[derive(Default)]
struct PhaseFigures {
    rate: f64,
    admitted: usize,
    admitted_p50_ms: f64,
    admitted_p99_ms: f64,
    refused: usize,
    refused_p99_ms: f64,
    failed: usize,
    /// `failed` by kind.
    failures: std::collections::BTreeMap<Failure, usize>,
}

impl Overload {
    /// Whether every bound held.
    pub fn holds(&self) -> bool {
        self.high.admitted_p99_ms <= ADMITTED_P99_MS
            && self.high.refused_p99_ms <= REFUSED_P99_MS
            && self.high.failed == 0
            && self.recovered_after_ms <= RECOVERY_MS
            && self.health_failed == 0
    }

    pub fn line(&self) -> String {
        let h = &self.high;
        format!(
            "{:<16} {:<8} past capacity: capacity {:.0}/s, offered {:.0}/s: admitted {} (p50 {:.1} ms, p99 {:.1} ms), \
             refused {} (p99 {:.2} ms), failed {} {:?}, not sent {}; recovered after {:.0} ms ({} failed after the drop), \
             p99 from 1 s after the drop {:.1} ms; health p99 {:.2} ms, {} failed; the generator's own lateness p99 {:.2} ms: {}",
            self.scenario,
            self.backend,
            self.capacity,
            h.rate,
            h.admitted,
            h.admitted_p50_ms,
            h.admitted_p99_ms,
            h.refused,
            h.refused_p99_ms,
            h.failed,
            h.failures,
            self.not_sent,
            self.recovered_after_ms,
            self.low_failed,
            self.settled_p99_ms,
            self.health_p99_ms,
            self.health_failed,
            self.generator_late_p99_ms,
            if self.holds() { "holds" } else { "MISSES" },
        )
    }
}

/// Twice `capacity` for `high`, then half of it for `low`.
pub async fn run(
    scenario: &'static str,
    backend: &'static str,
    spec: &RequestSpec,
    health_url: &str,
    capacity: f64,
    high: Duration,
    low: Duration,
) -> Overload {
    let client = reqwest::Client::builder()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .unwrap();
    let requests = Arc::new(OpenClient::new(spec, CLIENT_TIMEOUT));
    let permits = Arc::new(tokio::sync::Semaphore::new(GENERATOR_CAP));
    let (high_rate, low_rate) = (2.0 * capacity, 0.5 * capacity);
    let start = Instant::now() + Duration::from_millis(50);
    let drop_at = start + high;
    let end = drop_at + low;

    let health = {
        let (client, url) = (client.clone(), health_url.to_owned());
        tokio::spawn(async move {
            let mut figures = Vec::new();
            let mut every = tokio::time::interval(Duration::from_millis(50));
            while Instant::now() < end {
                every.tick().await;
                let sent = Instant::now();
                let ok = matches!(client.get(&url).send().await, Ok(r) if r.status() == 200);
                figures.push((sent.elapsed(), ok));
            }
            figures
        })
    };

    let mut tasks = tokio::task::JoinSet::new();
    let mut not_sent = 0;
    let mut due = start;
    while due < end {
        tokio::time::sleep_until(due.into()).await;
        let offset = due - start;
        let rate = if due < drop_at { high_rate } else { low_rate };
        let this_due = due;
        due += Duration::from_secs_f64(1.0 / rate);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            not_sent += 1;
            continue;
        };
        let requests = requests.clone();
        tasks.spawn(async move {
            let late = this_due.elapsed();
            let outcome = send(&requests).await;
            drop(permit);
            Sample {
                due: offset,
                late,
                latency: this_due.elapsed(),
                outcome,
            }
        });
    }
    let mut samples = Vec::new();
    while let Some(done) = tasks.join_next().await {
        samples.push(done.unwrap());
    }
    let health = health.await.unwrap();

    if let Ok(path) = std::env::var("WARDEN_BENCH_OVERLOAD_SAMPLES") {
        write_samples(&path, scenario, backend, &samples);
    }
    let drop_offset = drop_at - start;
    let in_high: Vec<&Sample> = samples.iter().filter(|s| s.due < drop_offset).collect();
    let in_low: Vec<&Sample> = samples.iter().filter(|s| s.due >= drop_offset).collect();
    let latencies = |outcome: Outcome| {
        let mut l: Vec<Duration> = in_high
            .iter()
            .filter(|s| s.outcome == outcome)
            .map(|s| s.latency)
            .collect();
        l.sort();
        l
    };
    let mut late: Vec<Duration> = in_high.iter().map(|s| s.late).collect();
    late.sort();
    let admitted = latencies(Outcome::Ok);
    let refused = latencies(Outcome::Refused);
    let high_figures = PhaseFigures {
        rate: high_rate,
        admitted: admitted.len(),
        admitted_p50_ms: percentile(&admitted, 0.5),
        admitted_p99_ms: percentile(&admitted, 0.99),
        refused: refused.len(),
        refused_p99_ms: percentile(&refused, 0.99),
        failed: in_high
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Failed(_)))
            .count(),
        failures: in_high.iter().fold(Default::default(), |mut kinds, s| {
            if let Outcome::Failed(kind) = s.outcome {
                *kinds.entry(kind).or_default() += 1;
            }
            kinds
        }),
    };
    let slow = Duration::from_secs_f64(ADMITTED_P99_MS / 1e3);
    let bad_after_drop: Vec<&&Sample> = in_low
        .iter()
        .filter(|s| s.outcome != Outcome::Ok || s.latency > slow)
        .collect();
    let recovered_after_ms = bad_after_drop
        .iter()
        .map(|s| (s.due - drop_offset).as_secs_f64() * 1e3)
        .fold(0.0, f64::max);
    let mut settled: Vec<Duration> = in_low
        .iter()
        .filter(|s| s.due >= drop_offset + Duration::from_secs(1))
        .map(|s| match s.outcome {
            Outcome::Ok => s.latency,
            _ => CLIENT_TIMEOUT,
        })
        .collect();
    settled.sort();
    let mut health_latencies: Vec<Duration> = health.iter().map(|(l, _)| *l).collect();
    health_latencies.sort();
    Overload {
        scenario,
        backend,
        capacity,
        high: high_figures,
        recovered_after_ms,
        low_failed: bad_after_drop
            .iter()
            .filter(|s| s.outcome != Outcome::Ok)
            .count(),
        settled_p99_ms: percentile(&settled, 0.99),
        health_p99_ms: percentile(&health_latencies, 0.99),
        health_failed: health.iter().filter(|(_, ok)| !ok).count(),
        not_sent,
        generator_late_p99_ms: percentile(&late, 0.99),
    }
}

async fn send(requests: &OpenClient) -> Outcome {
    match requests.send().await {
        Ok(answer) => match (answer.status, answer.retry_after) {
            (200..=299, _) => Outcome::Ok,
            (503, true) => Outcome::Refused,
            (status, _) => Outcome::Failed(Failure::Status(status)),
        },
        Err(broken) => Outcome::Failed(Failure::Broken(broken)),
    }
}

/// Every request of the run as CSV (`WARDEN_BENCH_OVERLOAD_SAMPLES`, a
/// path to which `-<scenario>-<db>.csv` is added), to see when in the run
/// the slow ones were due.
fn write_samples(path: &str, scenario: &str, backend: &str, samples: &[Sample]) {
    let mut csv = String::from("due_ms,late_ms,latency_ms,outcome\n");
    for s in samples {
        let _ = writeln!(
            csv,
            "{:.3},{:.3},{:.3},{:?}",
            s.due.as_secs_f64() * 1e3,
            s.late.as_secs_f64() * 1e3,
            s.latency.as_secs_f64() * 1e3,
            s.outcome
        );
    }
    let file = format!("{path}-{scenario}-{backend}.csv");
    std::fs::write(&file, csv).unwrap_or_else(|e| panic!("cannot write {file}: {e}"));
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// The report's section: one row per scenario and database.
pub fn markdown(runs: &[Overload], high: Duration, low: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n### Past capacity\n\nArrivals at twice the capacity each scenario sustained with 8 connections in this run, for {} s, \
         then at half of it for {} s; `GET /health` probed every 50 ms throughout. Bounds: admitted p99 ≤ {ADMITTED_P99_MS} ms, \
         refused (503 with `Retry-After`) p99 ≤ {REFUSED_P99_MS} ms, no other failure, every request succeeding within \
         {RECOVERY_MS} ms of the drop, health always answering. Latency counts from each request's due time; the generator runs on the same cores, and its own \
         lateness (from the due time until it began to send) is part of every figure: its p99 is the last column.\n",
        high.as_secs(),
        low.as_secs()
    );
    s += "| scenario | db | capacity /s | offered /s | admitted | admitted p50 ms | admitted p99 ms | refused | refused p99 ms | failed | recovered after ms | p99 1 s after the drop ms | health p99 ms | bounds | generator late p99 ms |\n";
    s += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n";
    for r in runs {
        let h = &r.high;
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {} | {:.1} | {:.1} | {} | {:.2} | {} | {:.0} | {:.1} | {:.2} | {} | {:.2} |",
            r.scenario,
            r.backend,
            r.capacity,
            h.rate,
            h.admitted,
            h.admitted_p50_ms,
            h.admitted_p99_ms,
            h.refused,
            h.refused_p99_ms,
            h.failed + r.not_sent,
            r.recovered_after_ms,
            r.settled_p99_ms,
            r.health_p99_ms,
            if r.holds() { "hold" } else { "missed" },
            r.generator_late_p99_ms,
        );
    }
    s
}
