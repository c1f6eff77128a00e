//! The metrics listener (`--metrics-listen`): `GET /metrics` in the
//! Prometheus text format, on an address of its own so the API's clients
//! never reach it and a scrape never waits behind API traffic.
//!
//! Gauges that need the database (the platform queue's depth and oldest
//! age) are read at scrape time within [`GAUGE_READ_DEADLINE`]; a scrape
//! that finds the database slow, or another scrape already reading, serves
//! the last values read instead of waiting. The pool gauge is read from the
//! pool itself, without a query.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::store::Store;

/// How long a scrape may wait for the database gauges.
pub const GAUGE_READ_DEADLINE: Duration = Duration::from_millis(500);

/// How often recorded histograms are folded into their buckets between
/// scrapes (bounds the memory of samples not yet rendered).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Scrape {
    handle: &'static PrometheusHandle,
    store: Store,
    /// One database read at a time, whatever the number of scrapers.
    reading: Arc<Semaphore>,
}

/// Serves `/metrics` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, handle: &'static PrometheusHandle, store: Store) {
    let upkeep = tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    });
    let router = Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape {
            handle,
            store,
            reading: Arc::new(Semaphore::new(1)),
        });
    if let Err(err) = axum::serve(listener, router).await {
        tracing::error!(error = %err, "the metrics listener stopped");
    }
    upkeep.abort();
}

async fn scrape(State(scrape): State<Scrape>) -> Response {
    if let Ok(_reading) = scrape.reading.try_acquire() {
        read_database_gauges(&scrape.store).await;
    }
    let (idle, in_use) = scrape.store.pool_connections();
    crate::metrics::set_db_pool(idle, in_use);
    let mut response = scrape.handle.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

async fn read_database_gauges(store: &Store) {
    match tokio::time::timeout(GAUGE_READ_DEADLINE, store.platform_queue_backlog()).await {
        Ok(Ok((depth, oldest))) => {
            let age_ms = oldest.map_or(0, |at| (crate::clock::now_millis() - at).max(0));
            crate::metrics::set_platform_queue(depth, Duration::from_millis(age_ms as u64));
        }
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "metrics: could not read the platform queue; serving its last values")
        }
        Err(_) => tracing::warn!(
            deadline_ms = GAUGE_READ_DEADLINE.as_millis() as u64,
            "metrics: the platform queue read took too long; serving its last values"
        ),
    }
}
