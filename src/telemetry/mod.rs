//! Logging and traces. Logs: `tracing` to standard error, as text or JSON
//! lines (standard output stays free for the admin commands' JSON); a JSON
//! line written inside a traced span carries its `trace_id` and `span_id`.
//! Traces: OpenTelemetry spans made by `trace_context` (not from the logs'
//! `tracing` spans), exported over OTLP/HTTP (protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, configured by the standard
//! `OTEL_*` variables (`otlp`); off otherwise.
//!
//! Export never slows a request: finished spans go into a bounded queue that
//! a batch processor (`batch`) drains on its own thread (with the blocking
//! HTTP client, never on the server's runtime); a span that finds the queue full,
//! or whose batch the collector refused or did not take in time, is dropped
//! and counted in `warden_trace_spans_dropped_total`.

mod batch;
mod otlp;
mod otlp_wire;

pub use otlp::{BatchSettings, OtlpSettings, otlp_settings};

use crate::cli::{LogArgs, LogFormat};
use anyhow::Context as _;
use batch::BatchProcessor;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use otlp::OtlpExporter;
use std::io::IsTerminal;
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
    let batches = BatchProcessor::start(exporter, settings.batch.clone())
        .context("cannot start the trace export thread")?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(batches)
        .build())
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
