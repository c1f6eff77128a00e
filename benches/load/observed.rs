//! What watching Warden costs (issue 26): in the same run, on the same
//! database, right after `turn_1`, two more `warden serve` of the same
//! build take the same turn, side by side: one with nothing on
//! (`turn_1_unobserved`) and one with both metrics (`WARDEN_METRICS_LISTEN`,
//! scraped every second as Prometheus would) and tracing on (OTLP/HTTP to a
//! local collector, `role otlp`, every span sampled): `turn_1_observed`.
//!
//! The two are loaded in alternating slices (A B B A …) at each connection
//! level and each row adds up its slices, so that what drifts during a run
//! (the database growing by every turn, the machine's other load) falls on
//! both alike: two servers measured one after the other differed by more
//! than the 5 % being judged. The report compares their CPU per turn.

use std::path::Path;
use std::time::Duration;

use crate::counted::{self, Count};
use crate::load::{Measured, RequestSpec};
use crate::procs::{self, Proc};
use crate::report::{Mode, Row};
use crate::{Config, Target, profile};

/// Slices per server and connection level: many short ones, so that what
/// drifts is shared finely (the quick mode's two: one each way).
fn rounds(config: &Config) -> usize {
    if config.quick { 2 } else { 10 }
}

/// One slice: wrk counts whole seconds.
const SLICE: Duration = Duration::from_secs(2);

/// A server of the pair and what feeds on it; dropped, all stop.
pub struct Server {
    pub warden: Proc,
    pub base: String,
    /// The metrics scrape's address, when metrics are on.
    pub metrics: Option<String>,
    _collector: Option<Proc>,
    scraper: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(scraper) = &self.scraper {
            scraper.abort();
        }
    }
}

/// `turn_1_unobserved` and `turn_1_observed` rows at each of `levels`.
pub async fn paired(
    exe: &Path,
    database_url: &str,
    work: &Path,
    backend: &'static str,
    turn: &RequestSpec,
    config: &Config,
    levels: &[usize],
) -> Vec<Row> {
    let plain = start(exe, database_url, work, backend, false).await;
    let observed = start(exe, database_url, work, backend, true).await;
    let target = |scenario, server: &Server| {
        let mut spec = turn.clone();
        spec.url = format!("{}/v1/channels/http/messages", server.base);
        Target {
            scenario,
            backend,
            pid: server.warden.pid(),
            spec,
            config,
            work,
        }
    };
    let pair = [
        target("turn_1_unobserved", &plain),
        target("turn_1_observed", &observed),
    ];
    // A server's first seconds cost more per turn (caches filling, pools
    // growing), and the second server is newer than the first: each is
    // warmed for a whole run before any slice counts (not in the quick
    // mode, whose figures are a smoke's).
    for server in &pair {
        server.warm_up().await;
        if !config.quick {
            server.measure_for(Mode::Closed(8), config.run).await;
        }
    }
    let mut rows = Vec::new();
    for &connections in levels {
        let mut slices: [Vec<Row>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds(config) {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let server = &pair[which];
                let profiled = round == 0
                    && connections == 8
                    && config.profile.as_deref() == Some(server.scenario);
                let recording =
                    profiled.then(|| profile::Recording::start(server.pid, SLICE, work));
                slices[which].push(server.measure_for(Mode::Closed(connections), SLICE).await);
                if let Some(recording) = recording {
                    recording.finish(
                        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
                        &format!("{}-{backend}", server.scenario),
                    );
                }
            }
        }
        for (server, slices) in pair.iter().zip(&slices) {
            let row = sum(server.scenario, backend, Mode::Closed(connections), slices);
            println!(
                "{} (sum of {} alternating slices)",
                crate::report::line(&row),
                slices.len()
            );
            rows.push(row);
        }
    }
    rows
}

/// One row for several slices of the same load: counts and CPU added up,
/// latencies the median slice's (a slice's percentiles cannot be merged).
fn sum(scenario: &'static str, backend: &'static str, mode: Mode, slices: &[Row]) -> Row {
    let ok: u64 = slices.iter().map(|r| r.m.ok).sum();
    let seconds: f64 = slices
        .iter()
        .map(|r| r.m.ok as f64 / r.m.throughput.max(f64::MIN_POSITIVE))
        .sum();
    let cpu_us: f64 = slices
        .iter()
        .map(|r| r.cpu_us_per_request * r.m.ok.max(1) as f64)
        .sum();
    let median = |pick: fn(&Row) -> f64| {
        let mut values: Vec<f64> = slices.iter().map(pick).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    Row {
        scenario,
        backend,
        mode,
        m: Measured {
            throughput: ok as f64 / seconds.max(f64::MIN_POSITIVE),
            p50_ms: median(|r| r.m.p50_ms),
            p99_ms: median(|r| r.m.p99_ms),
            p999_ms: median(|r| r.m.p999_ms),
            ok,
            errors: slices.iter().map(|r| r.m.errors).sum(),
        },
        cpu_us_per_request: cpu_us / ok.max(1) as f64,
        peak_rss_mib: slices.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max),
    }
}

/// A server of the pair: `watched` turns metrics and tracing on.
async fn start(
    exe: &Path,
    database_url: &str,
    work: &Path,
    backend: &str,
    watched: bool,
) -> Server {
    let scrape_every = Duration::from_secs(1);
    start_under(&[], exe, database_url, work, backend, watched, scrape_every).await
}

/// A server of the pair run by `wrapper` (see [`Proc::warden_under`]).
pub async fn start_under(
    wrapper: &[String],
    exe: &Path,
    database_url: &str,
    work: &Path,
    backend: &str,
    watched: bool,
    scrape_every: Duration,
) -> Server {
    let port = procs::free_port();
    let name = if watched { "observed" } else { "unobserved" };
    let log = work.join(format!("warden-{backend}-{name}.log"));
    let mut extra = Vec::new();
    let mut collector = None;
    let mut metrics = None;
    if watched {
        let (otlp, collector_port) = Proc::role("otlp", &["otlp"]);
        collector = Some(otlp);
        let metrics_port = procs::free_port();
        metrics = Some(format!("http://127.0.0.1:{metrics_port}/metrics"));
        extra = vec![
            ("WARDEN_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{collector_port}"),
            ),
            ("OTEL_TRACES_SAMPLER", "always_on".to_owned()),
        ];
    }
    if !wrapper.is_empty() {
        // valgrind cannot map the sandbox's default reservation (about a
        // terabyte of address space); both servers of a counted pair run
        // with the same smaller one.
        extra.push(("WARDEN_GUEST_MEMORY_RESERVATION_MIB", "64".to_owned()));
    }
    let mut warden = Proc::warden_under(wrapper, exe, port, database_url, work, &log, &extra);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    // Under callgrind a start takes tens of times longer.
    let limit = if wrapper.is_empty() { 180 } else { 900 };
    procs::wait_ready(
        &client,
        &format!("{base}/health"),
        &mut warden,
        Duration::from_secs(limit),
    )
    .await;
    let scraper = metrics.clone().map(|metrics| {
        tokio::spawn(async move {
            let mut every = tokio::time::interval(scrape_every);
            loop {
                every.tick().await;
                if let Ok(response) = client.get(&metrics).send().await {
                    let _ = response.bytes().await;
                }
            }
        })
    });
    Server {
        warden,
        base,
        metrics,
        _collector: collector,
        scraper,
    }
}

/// The pair's question asked of a measure that does not move with the
/// machine: instructions per turn on each server of the pair in turn,
/// counted by callgrind (`counted.rs`).
pub async fn counted(at: &counted::At<'_>, turn: &RequestSpec, config: &Config) -> Vec<Count> {
    let mut counts = Vec::new();
    for (scenario, watched) in [("turn_1_unobserved", false), ("turn_1_observed", true)] {
        counts.extend(counted::count(at, scenario, turn, watched, config.counted_turns()).await);
    }
    counts
}
