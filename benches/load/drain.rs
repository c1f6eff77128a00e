//! The platform queue draining a backlog (growth run, `growth.rs`): the
//! workers of a `warden serve` started on a queue already holding it claim,
//! answer and send every message to a send API on loopback (here, in this
//! process) that counts what arrives. The rate over the first and the last
//! tenth of the backlog tells whether a message costs more as the queue's
//! history grows (the finished rows, and on PostgreSQL their dead versions).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::procs;

/// A send API that answers every send as the platform does and counts them.
pub struct FakeSendApi {
    /// The base URL (`WARDEN_PLATFORM_API_URL`), with its version segment.
    pub base: String,
    sent: Arc<AtomicU64>,
}

impl FakeSendApi {
    pub async fn start() -> FakeSendApi {
        let sent: Arc<AtomicU64> = Arc::default();
        let counter = sent.clone();
        let app = axum::Router::new().fallback(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::Relaxed);
                axum::Json(
                    json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.out"}]}),
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v21.0", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeSendApi { base, sent }
    }

    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

/// One stretch of the drain.
#[derive(Clone, Copy, Debug)]
pub struct Stretch {
    pub items: u64,
    pub seconds: f64,
    /// CPU of `warden serve` per message over the stretch.
    pub cpu_us_per_item: f64,
}

impl Stretch {
    pub fn per_second(&self) -> f64 {
        self.items as f64 / self.seconds.max(1e-9)
    }
}

/// How a backlog drained.
#[derive(Clone, Copy, Debug)]
pub struct Drain {
    pub backlog: u64,
    /// Replies that arrived (the backlog, unless the watch gave up).
    pub sent: u64,
    /// From the first reply to the last.
    pub seconds: f64,
    pub first: Stretch,
    pub last: Stretch,
    /// PostgreSQL: the server's WAL syncs over the drain per message sent
    /// (`pg_stat_wal`, the whole server's; nothing else runs meanwhile).
    pub wal_syncs_per_item: Option<f64>,
}

impl Drain {
    /// What a message costs over the last tenth against the first (time).
    pub fn cost_ratio(&self) -> f64 {
        self.first.per_second() / self.last.per_second().max(1e-9)
    }
}

/// A reading taken while the backlog drains.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    sent: u64,
    cpu: Duration,
}

/// Watches `send_api` until `backlog` more replies arrived than `base` (its
/// count before the server started), or nothing arrived for `stall`,
/// reading the server's CPU as it goes.
pub async fn watch(
    send_api: &FakeSendApi,
    base: u64,
    pid: u32,
    backlog: u64,
    stall: Duration,
) -> Drain {
    let mut samples: Vec<Sample> = Vec::new();
    let mut last_progress = Instant::now();
    loop {
        let sample = Sample {
            at: Instant::now(),
            sent: send_api.sent() - base,
            cpu: procs::cpu(pid),
        };
        if samples.last().is_none_or(|s| s.sent != sample.sent) {
            last_progress = sample.at;
        }
        samples.push(sample);
        if sample.sent >= backlog || last_progress.elapsed() > stall {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sent = samples.last().map_or(0, |s| s.sent);
    // The first sample at or past `n` replies.
    let at = |n: u64| {
        *samples
            .iter()
            .find(|s| s.sent >= n)
            .unwrap_or(&samples[samples.len() - 1])
    };
    let stretch = |from: Sample, to: Sample| Stretch {
        items: to.sent.saturating_sub(from.sent),
        seconds: (to.at - from.at).as_secs_f64(),
        cpu_us_per_item: (to.cpu.saturating_sub(from.cpu)).as_secs_f64() * 1e6
            / to.sent.saturating_sub(from.sent).max(1) as f64,
    };
    let tenth = (backlog / 10).max(1);
    // The first tenth begins after the first 1 %: past the start-up.
    let settled = (backlog / 100).max(1);
    let (start, end) = (at(1), at(sent));
    println!(
        "  drained {sent} of {backlog} in {:.1} s",
        (end.at - start.at).as_secs_f64()
    );
    Drain {
        backlog,
        sent,
        seconds: (end.at - start.at).as_secs_f64(),
        first: stretch(at(settled), at(settled + tenth)),
        last: stretch(at(backlog - tenth), end),
        wal_syncs_per_item: None,
    }
}
