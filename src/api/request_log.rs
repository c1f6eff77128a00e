//! Middleware: a request id for every request, in the log span and in the
//! `x-request-id` response header, and one log line per finished request.
//! Ids are always generated here, never taken from the client, so a log
//! line can be trusted to name one request.
//!
//! It is also the HTTP layer's one instrumentation point: the request's
//! span is the OpenTelemetry HTTP server span (named `{method} {route}`,
//! its parent the caller's `traceparent` when sent), and each answer counts
//! in `warden_http_requests_total` and `warden_http_request_duration_seconds`
//! under the OpenAPI `operationId` of the route that matched (never the raw
//! path, whose ids would explode the series).

use crate::trace_context::{Parent, Scope};
use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use std::borrow::Cow;
use std::time::Instant;
use tracing::Instrument;

/// A request that matched no route (404 fallback, or the docs UI).
const UNMATCHED: &str = "unmatched";

pub async fn request_log(request: Request, next: Next) -> Response {
    let id = crate::domain::id::random_uuid().simple().to_string();
    let observed = crate::metrics::handle().is_some() || crate::trace_context::enabled();
    let route = observed
        .then(|| request.extensions().get::<MatchedPath>().cloned())
        .flatten();
    let operation = observed
        .then(|| {
            route
                .as_ref()
                .and_then(|route| super::openapi::operation(request.method(), route.as_str()))
        })
        .flatten();
    // The log's span, the same with tracing on or off, and the trace's
    // server span beside it, every attribute known now given now.
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path());
    let server = Scope::start(SpanKind::Server, Parent::Remote(request.headers()), || {
        let (name, method, route): (Cow<'static, str>, Cow<'static, str>, Cow<'static, str>) =
            match operation {
                // The usual case: every name made once, with the document.
                Some(operation) if request.method().as_str() == operation.method => (
                    operation.span_name.into(),
                    operation.method.into(),
                    operation.route.into(),
                ),
                _ => {
                    let route = route.as_ref().map_or(UNMATCHED, |r| r.as_str()).to_owned();
                    let method = request.method().as_str().to_owned();
                    (
                        format!("{method} {route}").into(),
                        method.into(),
                        route.into(),
                    )
                }
            };
        (
            name,
            crate::trace_context::attributes(
                [
                    KeyValue::new("http.request.method", method),
                    KeyValue::new("http.route", route),
                    KeyValue::new("warden.operation", operation.map_or(UNMATCHED, |o| o.id)),
                ],
                1,
            ),
        )
    });
    let started = Instant::now();
    let mut response = server.run(next.run(request).instrument(span.clone())).await;
    let status = response.status().as_u16();
    server.set_attribute(|| KeyValue::new("http.response.status_code", i64::from(status)));
    if status >= 500 {
        server.set_error();
    }
    server.in_scope(|| {
        span.in_scope(|| {
            tracing::info!(
                status,
                latency_ms = started.elapsed().as_millis() as u64,
                "request finished"
            )
        })
    });
    if observed {
        let operation = operation.map_or(UNMATCHED, |o| o.id);
        crate::metrics::http_request(operation, status, started.elapsed());
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
