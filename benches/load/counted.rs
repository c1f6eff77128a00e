//! Instructions per request, counted by callgrind (`callgrind.rs`): a
//! measure of a request's work that repeats within 0.3 % run after run on a
//! shared machine, where CPU time moved by 25 %. A fresh `warden serve` of
//! the build under test runs under callgrind on the run's database, is
//! warmed, and `callgrind_control --dump` brackets a window of requests
//! from [`CLIENTS`] clients. It judges the observed pair (`observed.rs`),
//! the MCP tools/call against the contract test (issue 27: no dearer), and,
//! with `WARDEN_BENCH_COUNT`, the turn too (issue 28, item 1: what a change
//! to the request path saves, in one run each); see `Config::counts`.

use std::path::Path;
use std::time::Duration;

use crate::callgrind::Callgrind;
use crate::load::RequestSpec;
use crate::observed;

/// Where a counted server runs: the build and the run's database.
pub struct At<'a> {
    pub exe: &'a Path,
    pub database_url: &'a str,
    pub work: &'a Path,
    pub backend: &'static str,
}

/// One scenario's count.
pub struct Count {
    pub scenario: &'static str,
    pub backend: &'static str,
    pub requests: usize,
    pub per_request: f64,
}

/// Clients sending the counted requests at once (each waits for its answer).
const CLIENTS: usize = 4;

/// Requests that warm a server before its window: every pooled connection
/// has prepared its statements, the caches hold what the request reads.
const WARM: usize = 64;

/// The trace exporter's schedule (`OTEL_BSP_SCHEDULE_DELAY`'s default, 5 s)
/// and a margin, waited before each dump: the spans of the window's last
/// requests are exported inside it. Every server waits alike.
const SETTLE: Duration = Duration::from_secs(8);

/// Counts `requests` of `spec` (re-aimed at a new server) on a server
/// started under callgrind, with metrics and tracing on if `watched`.
/// None, with a word, without valgrind or when `requests` is 0.
pub async fn count(
    at: &At<'_>,
    scenario: &'static str,
    spec: &RequestSpec,
    watched: bool,
    requests: usize,
) -> Option<Count> {
    if requests == 0 {
        return None;
    }
    if !Callgrind::available() {
        println!("valgrind is not installed: {scenario} not counted in instructions");
        return None;
    }
    let name = format!("{scenario}-{}", at.backend);
    let counter = Callgrind::new(at.work, &name);
    // Scraped once in the window below, not every second: the server runs
    // tens of times slower, and a scrape a second would weigh on each
    // request tens of times more than it does outside callgrind.
    let hour = Duration::from_secs(3600);
    let server = observed::start_under(
        &counter.wrapper(),
        at.exe,
        at.database_url,
        at.work,
        at.backend,
        watched,
        hour,
    )
    .await;
    let spec = retarget(spec, &server.base);
    send(&spec, requests.min(WARM)).await;
    tokio::time::sleep(SETTLE).await;
    counter.dump(server.warden.pid());
    send(&spec, requests).await;
    if let Some(metrics) = &server.metrics {
        // An older build (`WARDEN_BENCH_WARDEN_EXE`) may have no listener.
        if let Ok(scrape) = reqwest::get(metrics).await {
            let _ = scrape.bytes().await;
        }
    }
    tokio::time::sleep(SETTLE).await;
    let window = counter.dump(server.warden.pid());
    // Kept for `callgrind_annotate`: where the instructions went.
    let kept = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/callgrind");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::copy(&window.path, kept.join(format!("{name}.out"))).unwrap();
    let per_request = window.instructions as f64 / requests as f64;
    println!(
        "{name}: {} instructions in {requests} requests, {per_request:.0} per request (callgrind)",
        window.instructions
    );
    Some(Count {
        scenario,
        backend: at.backend,
        requests,
        per_request,
    })
}

/// `spec` sent to `base` instead of the server it was made for.
fn retarget(spec: &RequestSpec, base: &str) -> RequestSpec {
    let url = reqwest::Url::parse(&spec.url).expect("a request's URL");
    let path = &spec.url[url.origin().ascii_serialization().len()..];
    let mut spec = spec.clone();
    spec.url = format!("{base}{path}");
    spec
}

/// `count` requests from [`CLIENTS`] clients; each must succeed.
async fn send(spec: &RequestSpec, count: usize) {
    let client = reqwest::Client::new();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (spec, client) = (spec.clone(), client.clone());
        let mine = count / CLIENTS + usize::from(c < count % CLIENTS);
        clients.spawn(async move {
            for _ in 0..mine {
                let response = spec.request(&client).send().await.unwrap();
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                assert!(status.is_success(), "counted request: {status} {body}");
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }
}

/// The counts as a table for docs/benchmarks.md, with the observed pair's
/// comparison against issue 26's bound.
pub fn markdown(counts: &[Count]) -> String {
    use std::fmt::Write;
    let mut s = String::from(
        "\nInstructions per request (callgrind, user space only: repeatable \
         whatever else the machine runs; see \"What watching costs\"):\n\n\
         | scenario | db | requests counted | instructions/request |\n\
         |---|---|---:|---:|\n",
    );
    for c in counts {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} |",
            c.scenario, c.backend, c.requests, c.per_request
        );
    }
    for backend in ["sqlite", "postgres"] {
        if let Some((observed, plain)) = observed_pair(counts, backend) {
            let extra = observed.per_request / plain.per_request - 1.0;
            let _ = writeln!(
                s,
                "\nMetrics and tracing on add ≤ 5 % instructions per turn ({backend}): \
                 {:+.1} % ({:.0} vs {:.0}): {}",
                extra * 100.0,
                observed.per_request,
                plain.per_request,
                if extra <= 0.05 { "met" } else { "**not met**" }
            );
        }
    }
    s
}

/// The count of `scenario` on `backend`, when it was counted.
pub fn find<'a>(counts: &'a [Count], scenario: &str, backend: &str) -> Option<&'a Count> {
    counts
        .iter()
        .find(|c| c.scenario == scenario && c.backend == backend)
}

/// The observed turn's count and the unobserved one's on `backend`, when
/// both were counted: issue 26's judge (also in the run's targets table).
pub fn observed_pair<'a>(counts: &'a [Count], backend: &str) -> Option<(&'a Count, &'a Count)> {
    Some((
        find(counts, "turn_1_observed", backend)?,
        find(counts, "turn_1_unobserved", backend)?,
    ))
}
