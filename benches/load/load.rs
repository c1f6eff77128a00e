//! The two ways of loading a server.
//!
//! Closed loop (a fixed number of connections, each sending its next request
//! when the last one answered) is `wrk`'s: Debian packages it, it is a small
//! C program that costs far less CPU per request than anything under test
//! (this machine has 2 cores, shared by generator and servers), and a Lua
//! `done` hook prints its exact HdrHistogram percentiles as JSON.
//!
//! Open loop (requests arrive at a fixed rate whether or not the server keeps
//! up) is not something `wrk` does, so it is here: request *i* is due at
//! `start + i / rate` and its latency counts from that instant, not from when
//! it was sent, so a stalled server's queueing shows up in the figures
//! (no coordinated omission). At most [`MAX_IN_FLIGHT`] are outstanding;
//! arrivals beyond that are counted as dropped: the server is saturated.
//! Its client is `open_client`'s, which costs the shared CPU little.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One request, sent again and again.
#[derive(Clone)]
pub struct RequestSpec {
    pub method: &'static str,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// Each request's order number drawn at random (`A-0000`…`A-9999` in
    /// place of [`ORDER`]): the words a server sees vary as a real
    /// population's do, so no cache of Warden's gets only repeats.
    pub vary_order: bool,
}

/// The order number in request bodies.
pub const ORDER: &str = "A-1001";

impl RequestSpec {
    /// The request, ready to send with `client`.
    pub fn request(&self, client: &reqwest::Client) -> reqwest::RequestBuilder {
        let mut request = client.request(self.method.parse().unwrap(), &self.url);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(body) = self.body_now() {
            request = request.body(body);
        }
        request
    }

    fn body_now(&self) -> Option<String> {
        let body = self.body.as_ref()?;
        Some(if self.vary_order {
            body.replace(ORDER, &random_order())
        } else {
            body.clone()
        })
    }
}

/// An order number drawn at random, in [`ORDER`]'s place.
pub fn random_order() -> String {
    let n: u32 = rand::Rng::gen_range(&mut rand::thread_rng(), 0..10_000);
    format!("A-{n:04}")
}

/// What one run measured from outside.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Successful (2xx) answers per second.
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub ok: u64,
    /// Non-2xx answers, socket errors, timeouts, and (open loop) dropped arrivals.
    pub errors: u64,
}

/// `wrk` with `connections` connections for `duration`.
pub fn closed_loop(
    spec: &RequestSpec,
    connections: usize,
    duration: Duration,
    work: &Path,
) -> Measured {
    let script = work.join("wrk.lua");
    std::fs::write(&script, lua_script(spec)).unwrap();
    let threads = connections.min(2);
    let out = super::procs::dies_with_parent(&mut Command::new("wrk"))
        .args([
            &format!("-t{threads}"),
            &format!("-c{connections}"),
            &format!("-d{}s", duration.as_secs().max(1)),
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(&script)
        .arg(&spec.url)
        .output()
        .expect("wrk (scripts/ensure-bench-tools.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("WRK_JSON "))
        .unwrap_or_else(|| {
            panic!(
                "no result from wrk: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let n = |k: &str| v[k].as_f64().unwrap_or(0.0);
    let requests = n("requests");
    let non2xx = n("non2xx");
    let ok = (requests - non2xx).max(0.0);
    Measured {
        throughput: ok / (n("duration_us") / 1e6),
        p50_ms: n("p50") / 1e3,
        p99_ms: n("p99") / 1e3,
        p999_ms: n("p999") / 1e3,
        ok: ok as u64,
        errors: (non2xx + n("socket_errors")) as u64,
    }
}

/// The Lua script: the request, and a `done` hook printing one JSON line.
fn lua_script(spec: &RequestSpec) -> String {
    let mut s = format!("wrk.method = \"{}\"\n", spec.method);
    for (name, value) in &spec.headers {
        s += &format!("wrk.headers[\"{name}\"] = \"{value}\"\n");
    }
    if let Some(body) = &spec.body {
        assert!(!body.contains("]==]"));
        s += &format!("wrk.body = [==[{body}]==]\n");
        if spec.vary_order {
            assert_eq!(ORDER, "A-1001");
            s += r#"
request = function()
  local body = wrk.body:gsub("A%-1001", string.format("A-%04d", math.random(0, 9999)))
  return wrk.format(nil, nil, nil, body)
end
"#;
        }
    }
    s += r#"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50":%d,"p99":%d,"p999":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
"#;
    s
}

pub const MAX_IN_FLIGHT: usize = 512;

/// Requests arriving at `rate` per second for `duration`.
pub async fn open_loop(spec: &RequestSpec, rate: f64, duration: Duration) -> Measured {
    let client = Arc::new(crate::open_client::OpenClient::new(
        spec,
        Duration::from_secs(10),
    ));
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let total = (rate * duration.as_secs_f64()).round() as usize;
    let start = Instant::now() + Duration::from_millis(50);
    let mut tasks = tokio::task::JoinSet::new();
    let mut dropped = 0u64;
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            dropped += 1;
            continue;
        };
        let client = client.clone();
        tasks.spawn(async move {
            let ok =
                matches!(client.send().await, Ok(answer) if (200..300).contains(&answer.status));
            drop(permit);
            (due.elapsed(), ok)
        });
    }
    let mut latencies = Vec::with_capacity(total);
    let mut failed = 0u64;
    while let Some(done) = tasks.join_next().await {
        let (latency, ok) = done.unwrap();
        if ok {
            latencies.push(latency);
        } else {
            failed += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut m = summarize(&mut latencies, elapsed);
    m.errors = failed + dropped;
    m
}

/// Throughput and percentiles of successful requests.
pub fn summarize(latencies: &mut [Duration], elapsed_secs: f64) -> Measured {
    latencies.sort();
    let at = |p: f64| {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() - 1) as f64 * p).round() as usize;
        latencies[i].as_secs_f64() * 1e3
    };
    Measured {
        throughput: latencies.len() as f64 / elapsed_secs,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        p999_ms: at(0.999),
        ok: latencies.len() as u64,
        errors: 0,
    }
}

/// One request at a time on one connection, `count` of them (fewer if
/// `limit` passes first), request `i` built by `next(i)` so each may differ
/// (a conversation to continue, a cursor). Latencies of 2xx answers;
/// anything else is an error. The growth run's figures (`growth.rs`).
pub async fn sequential<F>(count: usize, limit: Duration, mut next: F) -> Measured
where
    F: FnMut(usize) -> reqwest::RequestBuilder,
{
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(count);
    let mut failed = 0u64;
    for i in 0..count {
        if started.elapsed() > limit {
            break;
        }
        let request = next(i).timeout(Duration::from_secs(60));
        let sent = Instant::now();
        let ok = match request.send().await {
            Ok(r) => {
                let ok = r.status().is_success();
                r.bytes().await.is_ok() && ok
            }
            Err(_) => false,
        };
        if ok {
            latencies.push(sent.elapsed());
        } else {
            failed += 1;
        }
    }
    let mut m = summarize(&mut latencies, started.elapsed().as_secs_f64());
    m.errors = failed;
    m
}
