//! Middleware: a request id for every request, in the log span and in the
//! `x-request-id` response header, and one log line per finished request.
//! Ids are always generated here, never taken from the client, so a log
//! line can be trusted to name one request.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;
use tracing::Instrument;

pub async fn request_log(request: Request, next: Next) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path());
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_millis() as u64,
            "request finished"
        )
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
