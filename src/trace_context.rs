//! W3C trace context in and out (`traceparent`, `tracestate`), over the
//! `tracing` spans that `tracing-opentelemetry` turns into OpenTelemetry
//! spans. The HTTP layer adopts an incoming context as the parent of its
//! server span; every outbound call (capability endpoints, the platform's
//! send API, the model, the challenge verifier) injects the current span's.
//!
//! Off unless `telemetry` installed an exporter ([`enable`]): then every
//! function here returns at once, so a server without tracing neither reads
//! nor writes the headers.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Called once the OpenTelemetry layer is installed.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The target of the spans made for the trace alone (by [`span`], with
/// `target: TARGET`). The log layer leaves them out (`telemetry`): logs read
/// the same with tracing on or off, and a turn does not pay to format the
/// fields of spans no log line shows.
pub const TARGET: &str = "warden::trace";

/// The span `make` builds when tracing is on, else a disabled span: with
/// tracing off the layers' spans cost nothing and the logs are as before.
#[inline]
pub fn span(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if enabled() {
        make()
    } else {
        tracing::Span::none()
    }
}

/// Makes the request's `traceparent` (when valid) the parent of `span`.
pub fn adopt_remote_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    if !enabled() || !headers.contains_key("traceparent") {
        return;
    }
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outbound
/// request's headers.
pub fn inject_current(headers: &mut http::HeaderMap) {
    if !enabled() {
        return;
    }
    let context = tracing::Span::current().context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new()
            .inject_context(&context, &mut opentelemetry_http::HeaderInjector(headers));
    }
}

/// The current span's `traceparent`, to store with queued work so the trace
/// that picks it up later can link back to it.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    let mut headers = http::HeaderMap::new();
    inject_current(&mut headers);
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Links `span` to the span a stored `traceparent` names (a new trace that
/// continues work another one queued).
pub fn link_to(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(traceparent) = traceparent.filter(|_| enabled()) else {
        return;
    };
    let Ok(value) = http::HeaderValue::from_str(traceparent) else {
        return;
    };
    let mut headers = http::HeaderMap::new();
    headers.insert("traceparent", value);
    let queued =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(&headers));
    let queued = queued.span().span_context().clone();
    if queued.is_valid() {
        span.add_link(queued);
    }
}

/// The ids of the current span, for log lines (`trace_id`, `span_id`).
pub fn current_ids() -> Option<(String, String)> {
    if !enabled() {
        return None;
    }
    let context = tracing::Span::current().context();
    let span = context.span();
    let ids = span.span_context();
    ids.is_valid()
        .then(|| (ids.trace_id().to_string(), ids.span_id().to_string()))
}
