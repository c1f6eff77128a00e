//! Prometheus metrics: every series Warden exposes is named here, once, with
//! one recording function per family that the layers call (one place per
//! layer; ARCHITECTURE.md lists them). The `metrics` facade records them;
//! `metrics-exporter-prometheus` renders the classic text format, served by
//! `http_server::metrics_listener` on a listener of its own
//! (`--metrics-listen`).
//!
//! Off unless [`install`] ran: every recording function then returns after
//! one atomic load, before any label is built, so a server without a metrics
//! listener pays nothing per request.
//!
//! Labels are closed sets by construction: every value is a `&'static str`
//! taken from a closed set of the layer that records it (a `closed_set!`
//! word, an OpenAPI operationId, a status code). No label names an account,
//! a capability, a conversation or anything a client chose, so the number of
//! series stays bounded whatever the tenants do.

use metrics::{Counter, Histogram};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use rustc_hash::FxHashMap;
use std::sync::{LazyLock, OnceLock, RwLock};
use std::time::Duration;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// What `warden_build_info` says of this binary.
pub struct BuildInfo {
    pub version: &'static str,
    pub contract: &'static str,
    /// SHA-256 of the policy guest component in use (hex).
    pub guest_sha256: String,
}

/// Latency buckets from 1 ms to ~33 s (doubling): turns, calls and model
/// answers all fall inside, and 16 buckets keep each histogram small.
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384, 32.768,
];

/// Guest calls live in microseconds, up to their 50 ms deadline.
const GUEST_BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_4, 0.000_8, 0.001_6, 0.003_2, 0.006_4, 0.012_8, 0.025_6,
    0.051_2, 0.102_4,
];

/// Turns metrics on for this process and returns the handle that renders
/// them. The recorder is the process's: a later call (a second server in
/// the same process, as tests run them) gets the same handle.
pub fn install(build: BuildInfo) -> anyhow::Result<&'static PrometheusHandle> {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = HANDLE.get() {
        return Ok(handle);
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(&LATENCY_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full("warden_guest_call_duration_seconds".into()),
            &GUEST_BUCKETS,
        )?
        .install_recorder()?;
    describe();
    gauge!(
        "warden_build_info",
        "version" => build.version,
        "contract" => build.contract,
        "guest_sha256" => build.guest_sha256,
    )
    .set(1.0);
    // Every family with no samples yet still shows its help and type.
    gauge!("warden_http_connections_open").set(0.0);
    counter!("warden_trace_spans_dropped_total").absolute(0);
    HANDLE
        .set(handle)
        .map_err(|_| anyhow::anyhow!("metrics are already installed"))?;
    Ok(HANDLE.get().expect("just set"))
}

/// The renderer, when metrics are on.
#[inline]
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE.get()
}

#[inline]
fn on() -> bool {
    HANDLE.get().is_some()
}

fn describe() {
    describe_counter!(
        "warden_http_requests_total",
        "API requests answered, by OpenAPI operationId and status code"
    );
    describe_histogram!(
        "warden_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to answer an API request, by OpenAPI operationId"
    );
    describe_gauge!("warden_http_connections_open", "API connections open now");
    describe_counter!(
        "warden_turns_total",
        "Conversation turns, by channel (http, platform) and outcome"
    );
    describe_histogram!(
        "warden_turn_duration_seconds",
        metrics::Unit::Seconds,
        "Time to run one turn, by channel"
    );
    describe_counter!(
        "warden_capability_calls_total",
        "Capability calls through the executor, by kind (turn, test, mcp) and outcome (succeeded or the failure reason)"
    );
    describe_histogram!(
        "warden_capability_call_duration_seconds",
        metrics::Unit::Seconds,
        "Time of one capability call (guest checks, signing, every attempt), by kind"
    );
    describe_counter!(
        "warden_guest_calls_total",
        "Calls into the policy guest, by export and outcome (ok, refused, deadline, trap, memory, fault)"
    );
    describe_histogram!(
        "warden_guest_call_duration_seconds",
        metrics::Unit::Seconds,
        "Time of one call into the policy guest, by export"
    );
    describe_counter!(
        "warden_model_calls_total",
        "Calls to an inference backend, by purpose (planner, prompt_integration) and outcome"
    );
    describe_histogram!(
        "warden_model_call_duration_seconds",
        metrics::Unit::Seconds,
        "Time of one call to an inference backend, by purpose"
    );
    describe_gauge!(
        "warden_platform_queue_depth",
        "Platform messages not finished (queued or answered, not yet replied or dead), read at scrape time"
    );
    describe_gauge!(
        "warden_platform_queue_oldest_age_seconds",
        "Age of the oldest unfinished platform message, read at scrape time (0 when none)"
    );
    describe_counter!(
        "warden_platform_deliveries_total",
        "Messages of platform webhook deliveries, by outcome (accepted, duplicated, full, ignored, unknown_number)"
    );
    describe_counter!(
        "warden_platform_sends_total",
        "Replies through the platform's send API, by outcome (sent, transient_error, refused, unbuildable)"
    );
    describe_counter!(
        "warden_prompt_executions_total",
        "Prompt integration executions, by outcome"
    );
    describe_gauge!(
        "warden_db_pool_connections",
        "Database connections, the pool's and (PostgreSQL) the hot statements' lane's together, by state (idle, in_use), read at scrape time"
    );
    describe_counter!(
        "warden_db_wal_checkpoints_total",
        "SQLite WAL checkpoints run off the request path, by outcome (complete, partial: frames a reader still needs were left, busy, error)"
    );
    describe_counter!(
        "warden_db_statement_errors_total",
        "Database statements that failed, by the store's error class"
    );
    describe_counter!(
        "warden_trace_spans_dropped_total",
        "Trace spans dropped instead of exported (export queue full, or the collector refused or did not answer)"
    );
    describe_gauge!(
        "warden_build_info",
        "This binary: its version, the contract it implements and the policy guest in use (always 1)"
    );
}

/// The handles of one family's series, by label values: the recorder's
/// look-up (a key built with its labels, hashed, found under a lock) runs
/// once per series instead of on every request, turn and guest call. The
/// labels are closed sets (above), so each cache stays small. Hashed with
/// FxHash: the keys are the code's own label values, never a caller's, and
/// SipHash was most of a look-up.
struct Handles<T>(LazyLock<RwLock<FxHashMap<[&'static str; 2], T>>>);

impl<T> Handles<T> {
    const fn new() -> Self {
        Handles(LazyLock::new(Default::default))
    }

    /// `record` with the handles for `labels`, registered by `register`
    /// the first time (used in place: no handle is cloned).
    fn with(
        &self,
        labels: [&'static str; 2],
        register: impl FnOnce() -> T,
        record: impl FnOnce(&T),
    ) {
        if let Some(handles) = self
            .0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&labels)
        {
            return record(handles);
        }
        let mut all = self.0.write().unwrap_or_else(|e| e.into_inner());
        record(all.entry(labels).or_insert_with(register));
    }
}

/// A family counted by two labels and timed by the first: one look-up
/// finds both (the histogram registered under each pair is the same one).
struct Timed {
    count: Counter,
    time: Histogram,
}

fn count_and_time(
    family: &Handles<Timed>,
    labels: [&'static str; 2],
    register: impl FnOnce() -> Timed,
    elapsed: Duration,
) {
    family.with(labels, register, |timed| {
        timed.count.increment(1);
        timed.time.record(elapsed.as_secs_f64());
    });
}

static HTTP_REQUESTS: Handles<Timed> = Handles::new();
static TURNS: Handles<Timed> = Handles::new();
static CAPABILITY_CALLS: Handles<Timed> = Handles::new();
static GUEST_CALLS: Handles<Timed> = Handles::new();

pub fn http_request(operation: &'static str, status: u16, elapsed: Duration) {
    if !on() {
        return;
    }
    let status = status_text(status);
    count_and_time(
        &HTTP_REQUESTS,
        [operation, status],
        || Timed {
            count: counter!("warden_http_requests_total", "operation" => operation, "status" => status),
            time: histogram!("warden_http_request_duration_seconds", "operation" => operation),
        },
        elapsed,
    );
}

/// A status code as a label without allocating: the codes an API answers
/// are few; anything else is its class.
fn status_text(status: u16) -> &'static str {
    match status {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        304 => "304",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        406 => "406",
        409 => "409",
        410 => "410",
        412 => "412",
        413 => "413",
        415 => "415",
        422 => "422",
        428 => "428",
        429 => "429",
        431 => "431",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        _ => match status / 100 {
            1 => "1xx",
            2 => "2xx",
            3 => "3xx",
            4 => "4xx",
            _ => "5xx",
        },
    }
}

/// Counts one open connection until the guard drops.
pub fn connection_opened() -> Option<OpenConnection> {
    on().then(|| {
        gauge!("warden_http_connections_open").increment(1.0);
        OpenConnection
    })
}

pub struct OpenConnection;

impl Drop for OpenConnection {
    fn drop(&mut self) {
        gauge!("warden_http_connections_open").decrement(1.0);
    }
}

pub fn turn(channel: &'static str, outcome: &'static str, elapsed: Duration) {
    if !on() {
        return;
    }
    count_and_time(
        &TURNS,
        [channel, outcome],
        || Timed {
            count: counter!("warden_turns_total", "channel" => channel, "outcome" => outcome),
            time: histogram!("warden_turn_duration_seconds", "channel" => channel),
        },
        elapsed,
    );
}

pub fn capability_call(kind: &'static str, outcome: &'static str, elapsed: Duration) {
    if !on() {
        return;
    }
    count_and_time(
        &CAPABILITY_CALLS,
        [kind, outcome],
        || Timed {
            count: counter!("warden_capability_calls_total", "kind" => kind, "outcome" => outcome),
            time: histogram!("warden_capability_call_duration_seconds", "kind" => kind),
        },
        elapsed,
    );
}

pub fn guest_call(export: &'static str, outcome: &'static str, elapsed: Duration) {
    if !on() {
        return;
    }
    count_and_time(
        &GUEST_CALLS,
        [export, outcome],
        || Timed {
            count: counter!("warden_guest_calls_total", "export" => export, "outcome" => outcome),
            time: histogram!("warden_guest_call_duration_seconds", "export" => export),
        },
        elapsed,
    );
}

pub fn model_call(purpose: &'static str, outcome: &'static str, elapsed: Duration) {
    if !on() {
        return;
    }
    counter!("warden_model_calls_total", "purpose" => purpose, "outcome" => outcome).increment(1);
    histogram!("warden_model_call_duration_seconds", "purpose" => purpose)
        .record(elapsed.as_secs_f64());
}

pub fn platform_delivery(outcome: &'static str) {
    if on() {
        counter!("warden_platform_deliveries_total", "outcome" => outcome).increment(1);
    }
}

pub fn platform_send(outcome: &'static str) {
    if on() {
        counter!("warden_platform_sends_total", "outcome" => outcome).increment(1);
    }
}

pub fn prompt_execution(outcome: &'static str) {
    if on() {
        counter!("warden_prompt_executions_total", "outcome" => outcome).increment(1);
    }
}

pub fn db_statement_error(class: &'static str) {
    if on() {
        counter!("warden_db_statement_errors_total", "class" => class).increment(1);
    }
}

pub fn wal_checkpoint(outcome: &'static str) {
    if on() {
        counter!("warden_db_wal_checkpoints_total", "outcome" => outcome).increment(1);
    }
}

pub fn trace_spans_dropped(count: u64) {
    if on() {
        counter!("warden_trace_spans_dropped_total").increment(count);
    }
}

/// Gauges read at scrape time from the database.
pub fn set_platform_queue(depth: i64, oldest_age: Duration) {
    if on() {
        gauge!("warden_platform_queue_depth").set(depth as f64);
        gauge!("warden_platform_queue_oldest_age_seconds").set(oldest_age.as_secs_f64());
    }
}

pub fn set_db_pool(idle: usize, in_use: usize) {
    if on() {
        gauge!("warden_db_pool_connections", "state" => "idle").set(idle as f64);
        gauge!("warden_db_pool_connections", "state" => "in_use").set(in_use as f64);
    }
}
