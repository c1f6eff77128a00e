//! W3C trace context in and out (`traceparent`, `tracestate`), over the
//! `tracing` spans that `tracing-opentelemetry` turns into OpenTelemetry
//! spans. The HTTP layer adopts an incoming context as the parent of its
//! server span; every outbound call (capability endpoints, the platform's
//! send API, the model, the challenge verifier) injects the current span's.
//!
//! Off unless `telemetry` installed an exporter ([`enable`]): then every
//! function here returns at once, so a server without tracing neither reads
//! nor writes the headers.

use opentelemetry::KeyValue;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt, Tracer as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::borrow::Cow;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The tracer behind the OpenTelemetry layer, for [`Leaf`] spans.
static TRACER: OnceLock<opentelemetry_sdk::trace::SdkTracer> = OnceLock::new();

/// Called once the OpenTelemetry layer is installed, with its tracer.
pub fn enable(tracer: opentelemetry_sdk::trace::SdkTracer) {
    let _ = TRACER.set(tracer);
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

/// A span with no children of its own (a guest call, an outbound HTTP
/// exchange), made straight on the OpenTelemetry API under the current
/// `tracing` span. Such a span needs none of what a `tracing` span costs a
/// turn: no registry entry, nothing entered and left on every poll, no
/// layer building an OpenTelemetry span beside it (issue 26's 5 % bound).
/// Ends when dropped; inert when tracing is off.
pub struct Leaf(Option<opentelemetry_sdk::trace::Span>);

impl Leaf {
    /// Starts a span now, its name and attributes from `describe`, which
    /// is called only when tracing is on.
    pub fn start(
        kind: SpanKind,
        describe: impl FnOnce() -> (Cow<'static, str>, Vec<KeyValue>),
    ) -> Leaf {
        let Some(tracer) = TRACER.get().filter(|_| enabled()) else {
            return Leaf(None);
        };
        let (name, attributes) = describe();
        let parent = tracing::Span::current().context();
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Leaf(Some(span))
    }

    pub fn set_attribute(&mut self, attribute: impl FnOnce() -> KeyValue) {
        if let Some(span) = &mut self.0 {
            span.set_attribute(attribute());
        }
    }

    /// Adds this span's `traceparent` (and `tracestate`) to an outbound
    /// request's headers: the exchange it stands for is its child.
    pub fn inject(&self, headers: &mut http::HeaderMap) {
        if let Some(span) = &self.0 {
            let context =
                opentelemetry::Context::new().with_remote_span_context(span.span_context().clone());
            TraceContextPropagator::new()
                .inject_context(&context, &mut opentelemetry_http::HeaderInjector(headers));
        }
    }
}

impl Drop for Leaf {
    fn drop(&mut self) {
        if let Some(span) = &mut self.0 {
            span.end();
        }
    }
}
