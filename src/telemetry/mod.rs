//! Logging and traces. Logs: `tracing` to standard error, as text or JSON
//! lines (standard output stays free for the admin commands' JSON); a JSON
//! line written inside a traced span carries its `trace_id` and `span_id`.
//! Traces: OpenTelemetry spans made by `trace_context` (not from the logs'
//! `tracing` spans), exported over OTLP/HTTP (protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, configured by the standard
//! `OTEL_*` variables (`otlp`); off otherwise.
//!
//! Export never slows a request: finished spans go into a bounded queue that
//! a batch processor drains on its own thread (with the blocking HTTP
//! client, never on the server's runtime); a span that finds the queue full,
//! or whose batch the collector refused or did not take in time, is dropped
//! and counted in `warden_trace_spans_dropped_total`.

mod otlp;
mod otlp_wire;

pub use otlp::{OtlpSettings, otlp_settings};

use crate::cli::{LogArgs, LogFormat};
use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};
use otlp::OtlpExporter;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tracing_subscriber::fmt::format::{Format, Json, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Keeps the trace exporter alive; dropping it flushes what is queued
/// (for at most a few seconds).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown_with_timeout(Duration::from_secs(3));
        }
    }
}

/// Installs logging, and tracing when `traces` is set (`warden serve` with
/// an OTLP endpoint).
pub fn init(args: &LogArgs, traces: Option<OtlpSettings>) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_new(&args.filter)
        .with_context(|| format!("invalid log filter {:?} (WARDEN_LOG)", args.filter))?;
    let logs = match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(true)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .map_event_format(WithTraceIds)
            .boxed(),
    };
    // The filter is the subscriber's, not the log layer's: with one layer
    // a per-layer filter only adds its bookkeeping to every span and event
    // (1 % of a turn, measured against the build before issue 26).
    tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .try_init()
        .map_err(|e| anyhow::anyhow!("could not install the logger: {e}"))?;
    // Traces are made on the OpenTelemetry API (`trace_context`), not from
    // the logs' `tracing` spans.
    let provider = traces
        .map(|settings| tracer_provider(&settings))
        .transpose()?;
    if let Some(provider) = &provider {
        crate::trace_context::enable(provider.tracer("warden"));
    }
    Ok(Telemetry { provider })
}

fn tracer_provider(settings: &OtlpSettings) -> anyhow::Result<SdkTracerProvider> {
    let exporter = OtlpExporter::new(settings)?;
    let gate = Arc::new(QueueGate {
        pending: AtomicUsize::new(0),
        limit: settings.max_queue,
    });
    let batches = BatchSpanProcessor::builder(CountingExporter {
        inner: exporter,
        gate: gate.clone(),
    })
    // The gate admits at most `limit` spans, so the processor's own queue
    // (the same size) never drops one uncounted.
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_max_queue_size(settings.max_queue)
            .build(),
    )
    .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(GatedProcessor {
            inner: batches,
            gate,
        })
        .build())
}

/// Spans handed to the batch processor and not yet exported (or dropped).
#[derive(Debug)]
struct QueueGate {
    pending: AtomicUsize,
    limit: usize,
}

/// Admits a finished span into the export queue while it has room; counts
/// the ones it turns away.
#[derive(Debug)]
struct GatedProcessor {
    inner: BatchSpanProcessor,
    gate: Arc<QueueGate>,
}

impl SpanProcessor for GatedProcessor {
    fn on_start(&self, span: &mut Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.gate.pending.fetch_add(1, Ordering::AcqRel) >= self.gate.limit {
            self.gate.pending.fetch_sub(1, Ordering::AcqRel);
            crate::metrics::trace_spans_dropped(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans of every batch it could not deliver.
#[derive(Debug)]
struct CountingExporter {
    inner: OtlpExporter,
    gate: Arc<QueueGate>,
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        let exported = self.inner.export(batch).await;
        self.gate.pending.fetch_sub(count, Ordering::AcqRel);
        if exported.is_err() {
            crate::metrics::trace_spans_dropped(count as u64);
        }
        exported
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// The JSON line of `tracing-subscriber`, with `trace_id` and `span_id`
/// first when the event happens inside a traced span.
struct WithTraceIds(Format<Json>);

impl<S> FormatEvent<S, JsonFields> for WithTraceIds
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let Some((trace_id, span_id)) = crate::trace_context::current_ids() else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(
                writer,
                "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"
            ),
            None => writer.write_str(&line),
        }
    }
}
