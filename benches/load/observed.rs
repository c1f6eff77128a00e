//! What watching Warden costs (issue 26): in the same run, on the same
//! database, right after `turn_1`, a second `warden serve` with both
//! metrics (`WARDEN_METRICS_LISTEN`, scraped every second as Prometheus
//! would) and tracing on (OTLP/HTTP to a local collector, `role otlp`,
//! every span sampled) takes the same turn at the same loads:
//! `turn_1_observed`. The report compares its CPU per turn with `turn_1`'s.

use std::path::Path;
use std::time::Duration;

use crate::procs::{self, Proc};

/// The observed server and what feeds on it; dropped, all stop.
pub struct Observed {
    pub warden: Proc,
    pub base: String,
    _collector: Proc,
    scraper: tokio::task::JoinHandle<()>,
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.scraper.abort();
    }
}

pub async fn start(exe: &Path, database_url: &str, work: &Path, backend: &str) -> Observed {
    let (collector, collector_port) = Proc::role("otlp", &["otlp"]);
    let port = procs::free_port();
    let metrics_port = procs::free_port();
    let log = work.join(format!("warden-{backend}-observed.log"));
    let mut warden = Proc::warden_with(
        exe,
        port,
        database_url,
        work,
        &log,
        &[
            ("WARDEN_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{collector_port}"),
            ),
            ("OTEL_TRACES_SAMPLER", "always_on".to_owned()),
        ],
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    procs::wait_ready(
        &client,
        &format!("{base}/health"),
        &mut warden,
        Duration::from_secs(180),
    )
    .await;
    let metrics = format!("http://127.0.0.1:{metrics_port}/metrics");
    let scraper = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            if let Ok(response) = client.get(&metrics).send().await {
                let _ = response.bytes().await;
            }
        }
    });
    Observed {
        warden,
        base,
        _collector: collector,
        scraper,
    }
}
