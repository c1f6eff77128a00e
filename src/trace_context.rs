//! W3C trace context in and out (`traceparent`, `tracestate`), and the
//! spans of a trace, made on the OpenTelemetry API directly: a [`Scope`] for
//! a span with children (the HTTP server span, `invoke_agent`,
//! `execute_tool`, `process platform_message`), carried as the current
//! OpenTelemetry context through the future that does its work, and a
//! [`Leaf`] for one without (a guest call, an outbound exchange, the
//! model's chat). The HTTP layer adopts an incoming context as the parent
//! of its server span; every outbound call (capability endpoints, the
//! platform's send API, the model, the challenge verifier) injects the
//! current span's.
//!
//! Logs and traces are kept apart: the `tracing` spans are the logs' alone
//! and no layer turns them into OpenTelemetry spans. Such a layer cost a
//! turn more than what it exported (a registry lookup and two layers'
//! visits on every enter, exit and field, every poll): issue 26's 5 % bound.
//!
//! Off unless `telemetry` installed an exporter ([`enable`]): then every
//! function here returns at once, so a server without tracing neither reads
//! nor writes the headers, and makes no span.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Link, Span as _, SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt, TraceFlags,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");

static ENABLED: AtomicBool = AtomicBool::new(false);

/// The tracer every span is made with.
static TRACER: OnceLock<opentelemetry_sdk::trace::SdkTracer> = OnceLock::new();

/// Called once the exporter is installed, with its tracer.
pub fn enable(tracer: opentelemetry_sdk::trace::SdkTracer) {
    let _ = TRACER.set(tracer);
    ENABLED.store(true, Ordering::Relaxed);
}

#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The tracer, when tracing is on.
fn tracer() -> Option<&'static opentelemetry_sdk::trace::SdkTracer> {
    TRACER.get().filter(|_| enabled())
}

/// What a span is, given only when tracing is on: its name and the
/// attributes known when it starts (a value recorded later costs a visit
/// of its own).
pub type Describe = (Cow<'static, str>, Vec<KeyValue>);

/// Where a new [`Scope`]'s parent comes from.
pub enum Parent<'a> {
    /// The span current where it starts.
    Current,
    /// The caller's `traceparent` (and `tracestate`) when valid; else a
    /// new trace.
    Remote(&'a http::HeaderMap),
    /// A new trace, linked to the span a stored `traceparent` names (work
    /// that another trace queued).
    LinkedTo(Option<&'a str>),
}

/// A span with children: made on the OpenTelemetry API and carried, as
/// the current context, through the future that does its work
/// ([`Scope::run`]). Ends when dropped; inert when tracing is off.
pub struct Scope(Option<Context>);

impl Scope {
    pub fn start(kind: SpanKind, parent: Parent<'_>, describe: impl FnOnce() -> Describe) -> Scope {
        let Some(tracer) = tracer() else {
            return Scope(None);
        };
        let mut links = Vec::new();
        let parent = match parent {
            Parent::Current => current(),
            Parent::Remote(headers) if headers.contains_key(TRACEPARENT) => {
                TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers))
            }
            Parent::Remote(_) => Context::new(),
            Parent::LinkedTo(traceparent) => {
                links.extend(
                    traceparent
                        .and_then(span_context_of)
                        .map(Link::with_context),
                );
                Context::new()
            }
        };
        let span = started(tracer, kind, describe(), links, &parent);
        Scope(Some(parent.with_span(span)))
    }

    pub fn set_attribute(&self, attribute: impl FnOnce() -> KeyValue) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(attribute());
        }
    }

    /// Marks the span failed (`otel.status_code = ERROR`).
    pub fn set_error(&self) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(""));
        }
    }

    /// `work` with this span current on every poll: its children, its log
    /// lines' ids and its outbound `traceparent`s are this span's.
    pub fn run<F: Future>(&self, work: F) -> InContext<F> {
        InContext {
            context: self.0.clone(),
            work,
        }
    }

    /// `f` with this span current (a log line written after its work).
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _current = self.0.as_ref().map(Current::enter);
        f()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

/// A span's attributes known when it starts, with room for the `later`
/// ones set when its work is done (status, outcome, attempts): the span
/// keeps this vector, and growing it then is a reallocation and a copy
/// under the span's lock.
pub fn attributes<const N: usize>(known: [KeyValue; N], later: usize) -> Vec<KeyValue> {
    let mut all = Vec::with_capacity(N + later);
    all.extend(known);
    all
}

/// A span started now under `parent`.
fn started(
    tracer: &opentelemetry_sdk::trace::SdkTracer,
    kind: SpanKind,
    (name, attributes): Describe,
    links: Vec<Link>,
    parent: &Context,
) -> opentelemetry_sdk::trace::Span {
    // Built whole rather than through the `with_*` methods, each of which
    // moves the builder (counted: a tenth of starting a span); no links
    // is `None`, which the sampler and the span skip.
    let builder = SpanBuilder {
        span_kind: Some(kind),
        attributes: Some(attributes),
        links: (!links.is_empty()).then_some(links),
        ..SpanBuilder::from_name(name)
    };
    tracer.build_with_context(builder, parent)
}

/// `work` carrying the current span into a task of its own (`tokio::spawn`).
pub fn carry<F: Future>(work: F) -> InContext<F> {
    InContext {
        context: enabled().then(current),
        work,
    }
}

thread_local! {
    /// The span current on this thread: the innermost [`Scope`] whose work
    /// is being polled here. Ours rather than OpenTelemetry's context stack
    /// (`Context::attach`), which only this module reads: that stack cost
    /// about 190 instructions at each of the 28 polls of a turn's nested
    /// scopes (issue 26's 5 % bound, counted), this one about a quarter.
    static CURRENT: RefCell<Option<Context>> = const { RefCell::new(None) };
}

/// The current span's context (an empty one outside every scope).
fn current() -> Context {
    CURRENT.with_borrow(|current| current.clone().unwrap_or_default())
}

/// Makes a context current until dropped, then restores the one before.
/// Entered and dropped in strict nesting: each lives in one call frame.
struct Current(Option<Context>);

impl Current {
    fn enter(context: &Context) -> Current {
        Current(CURRENT.replace(Some(context.clone())))
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        let before = self.0.take();
        // The context replaced is dropped outside the borrow. `try_with`:
        // a drop while the thread's locals are being destroyed must not
        // panic (there is nothing left to restore then).
        let _ours = CURRENT.try_with(|current| current.replace(before));
    }
}

pin_project_lite::pin_project! {
    /// A future polled with a span current ([`Scope::run`], [`carry`]); a
    /// plain one when tracing is off.
    pub struct InContext<F> {
        context: Option<Context>,
        #[pin]
        work: F,
    }
}

impl<F: Future> Future for InContext<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _current = this.context.as_ref().map(Current::enter);
        this.work.poll(cx)
    }
}

/// The span context a `traceparent` names, when valid.
fn span_context_of(traceparent: &str) -> Option<opentelemetry::trace::SpanContext> {
    let value = http::HeaderValue::from_str(traceparent).ok()?;
    let mut headers = http::HeaderMap::new();
    headers.insert("traceparent", value);
    let queued =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(&headers));
    let queued = queued.span().span_context().clone();
    queued.is_valid().then_some(queued)
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outbound
/// request's headers.
pub fn inject_current(headers: &mut http::HeaderMap) {
    if !enabled() {
        return;
    }
    let context = current();
    write_headers(context.span().span_context(), headers);
}

/// `traceparent` (and `tracestate`, when there is one) naming `span`, as
/// W3C Trace Context writes them: version 00, the ids in lower-case hex,
/// only the sampled flag. Written directly, not through the propagator,
/// whose context and `format!` were a tenth of what tracing added to a
/// turn (counted).
fn write_headers(span: &SpanContext, headers: &mut http::HeaderMap) {
    if !span.is_valid() {
        return;
    }
    use crate::crypto::hex::encode_into;
    let mut value = [b'-'; 55];
    encode_into(&mut value[..2], &[0]);
    encode_into(&mut value[3..35], &span.trace_id().to_bytes());
    encode_into(&mut value[36..52], &span.span_id().to_bytes());
    encode_into(
        &mut value[53..],
        &[(span.trace_flags() & TraceFlags::SAMPLED).to_u8()],
    );
    headers.insert(
        TRACEPARENT,
        http::HeaderValue::from_bytes(&value).expect("hex digits and dashes are a header value"),
    );
    let state = span.trace_state().header();
    if !state.is_empty() {
        if let Ok(state) = http::HeaderValue::try_from(state) {
            headers.insert(TRACESTATE, state);
        }
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

/// The ids of the current span, for log lines (`trace_id`, `span_id`).
pub fn current_ids() -> Option<(String, String)> {
    if !enabled() {
        return None;
    }
    let context = current();
    let span = context.span();
    let ids = span.span_context();
    ids.is_valid()
        .then(|| (ids.trace_id().to_string(), ids.span_id().to_string()))
}

/// A span with no children of its own (a guest call, an outbound HTTP
/// exchange), under the current span: nothing is carried through a future
/// for it. Ends when dropped; inert when tracing is off.
pub struct Leaf(Option<opentelemetry_sdk::trace::Span>);

impl Leaf {
    /// Starts a span now, its name and attributes from `describe`, which
    /// is called only when tracing is on.
    pub fn start(kind: SpanKind, describe: impl FnOnce() -> Describe) -> Leaf {
        let Some(tracer) = tracer() else {
            return Leaf(None);
        };
        let span = started(tracer, kind, describe(), Vec::new(), &current());
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
            write_headers(span.span_context(), headers);
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

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceId, TraceState};

    fn context_of(span: u64) -> Context {
        Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from(7_u128),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        ))
    }

    fn current_span() -> SpanId {
        current().span().span_context().span_id()
    }

    /// A scope's context is current while its work is polled, nested ones
    /// inside it, and the one before comes back after each poll.
    #[test]
    fn the_current_span_nests_and_is_restored_after_each_poll() {
        use std::task::{Context as Task, Waker};
        assert_eq!(current_span(), SpanId::INVALID);
        let (outer, inner) = (context_of(1), context_of(2));
        let seen = std::sync::Mutex::new(Vec::new());
        let work = InContext {
            context: Some(outer.clone()),
            work: async {
                seen.lock().unwrap().push(current_span());
                InContext {
                    context: Some(inner.clone()),
                    work: async {
                        seen.lock().unwrap().push(current_span());
                        // Pending once: the next poll must set it again.
                        let mut yielded = false;
                        std::future::poll_fn(|_| {
                            if yielded {
                                Poll::Ready(())
                            } else {
                                yielded = true;
                                Poll::Pending
                            }
                        })
                        .await;
                        seen.lock().unwrap().push(current_span());
                    },
                }
                .await;
                seen.lock().unwrap().push(current_span());
            },
        };
        let mut work = std::pin::pin!(work);
        let mut task = Task::from_waker(Waker::noop());
        assert!(work.as_mut().poll(&mut task).is_pending());
        assert_eq!(current_span(), SpanId::INVALID, "restored between polls");
        assert!(work.as_mut().poll(&mut task).is_ready());
        assert_eq!(current_span(), SpanId::INVALID);
        let (one, two) = (SpanId::from(1), SpanId::from(2));
        assert_eq!(*seen.lock().unwrap(), [one, two, two, one]);
        // `in_scope`'s guard, the same way.
        {
            let _current = Current::enter(&outer);
            assert_eq!(current_span(), one);
        }
        assert_eq!(current_span(), SpanId::INVALID);
    }

    /// The headers written directly are the propagator's, byte for byte.
    #[test]
    fn written_headers_are_the_w3c_propagators() {
        let state = TraceState::from_key_value([("vendor", "opaque"), ("b", "2")]).unwrap();
        for (flags, state) in [
            (TraceFlags::SAMPLED, TraceState::default()),
            (TraceFlags::new(0), state.clone()),
            (TraceFlags::new(0xff), state),
        ] {
            let span = SpanContext::new(
                TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
                SpanId::from_hex("00f067aa0ba902b7").unwrap(),
                flags,
                true,
                state,
            );
            let mut ours = http::HeaderMap::new();
            write_headers(&span, &mut ours);
            let mut theirs = http::HeaderMap::new();
            TraceContextPropagator::new().inject_context(
                &Context::new().with_remote_span_context(span),
                &mut opentelemetry_http::HeaderInjector(&mut theirs),
            );
            // The propagator writes an empty `tracestate` too; W3C lets it
            // be left out, and it is.
            let their_state = theirs.get("tracestate").filter(|v| !v.is_empty());
            assert_eq!(ours.get("traceparent"), theirs.get("traceparent"));
            assert_eq!(ours.get("tracestate"), their_state);
            assert_eq!(ours.len(), 1 + usize::from(their_state.is_some()));
        }
        let mut none = http::HeaderMap::new();
        write_headers(&SpanContext::empty_context(), &mut none);
        assert!(none.is_empty());
    }
}
