//! OTLP/HTTP (protobuf) trace export: where it goes, from the standard
//! `OTEL_EXPORTER_OTLP_*` variables, and the exporter that sends each
//! batch there.
//!
//! The exporter is ours, not `opentelemetry-otlp`'s, for one reason: that
//! one clones every span, converts it into `opentelemetry-proto`'s
//! messages and encodes those with `prost`, 12,700 instructions a span and
//! more than half of what a traced turn added (counted under callgrind,
//! docs/benchmarks.md). This one writes the same bytes straight from the
//! spans (`otlp_wire`, tested byte for byte against that conversion). It
//! sends with a blocking client on the batch processor's own thread
//! (`batch`), never on the server's runtime.

use super::otlp_wire::{self, EncodedScope};
use anyhow::Context as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::InstrumentationScope;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope as WireScope;
use opentelemetry_proto::tonic::resource::v1::Resource as WireResource;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;
use prost::Message as _;
use std::time::Duration;

/// How long one export may take when no variable says
/// (`OTEL_EXPORTER_OTLP_TIMEOUT`'s default in the specification).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how traces go, from the standard variables.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    pub service_name: String,
    /// The traces URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `v1/traces` appended.
    pub endpoint: url::Url,
    /// Sent with every export (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`).
    pub headers: HeaderMap,
    /// One export's deadline (`OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, ms).
    pub timeout: Duration,
    pub batch: BatchSettings,
}

/// How finished spans are batched (`telemetry::batch`), from the standard
/// `OTEL_BSP_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSettings {
    /// Spans waiting for export at most (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048).
    pub max_queue: usize,
    /// Spans in one export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512,
    /// never more than the queue).
    pub max_batch: usize,
    /// Time between two exports when no batch fills
    /// (`OTEL_BSP_SCHEDULE_DELAY`, ms, 5000).
    pub schedule_delay: Duration,
    /// One export's deadline (`OTEL_BSP_EXPORT_TIMEOUT`, ms, 30000); the
    /// shorter of it and the OTLP timeout bounds each request.
    pub export_timeout: Duration,
}

/// Reads the `OTEL_*` variables: `None` when no endpoint is set (or
/// `OTEL_SDK_DISABLED=true`), an error naming the variable for a protocol
/// or compression this build does not speak, an endpoint that is not a
/// URL, a header list or a number that does not parse.
pub fn otlp_settings(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Option<OtlpSettings>> {
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    // The traces variable first, then the generic one (the specification's order).
    let either = |traces: &'static str, generic: &'static str| {
        var(traces)
            .map(|value| (traces, value))
            .or_else(|| var(generic).map(|value| (generic, value)))
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let endpoint = match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        Some(endpoint) => url_of("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &endpoint)?,
        None => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Some(base) => {
                let base = url_of("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?;
                traces_path(base)
            }
            None => return Ok(None),
        },
    };
    if let Some((name, protocol)) = either(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ) {
        if protocol.trim() != "http/protobuf" {
            anyhow::bail!(
                "{name} {protocol:?} is not supported: Warden exports traces as http/protobuf \
                 (set {name}=http/protobuf, or unset it)"
            );
        }
    }
    if let Some((name, compression)) = either(
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
    ) {
        if !compression.trim().eq_ignore_ascii_case("none") {
            anyhow::bail!(
                "{name} {compression:?} is not supported: Warden sends traces uncompressed \
                 (set {name}=none, or unset it)"
            );
        }
    }
    let headers = match either(
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ) {
        Some((name, list)) => headers_of(&list).with_context(|| format!("{name} is invalid"))?,
        None => HeaderMap::new(),
    };
    let timeout = match either(
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ) {
        Some((name, ms)) => ms
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
            .with_context(|| format!("{name} {ms:?} is not a positive number of milliseconds"))?,
        None => DEFAULT_TIMEOUT,
    };
    let positive = |name: &str, default: u64| -> anyhow::Result<u64> {
        match var(name) {
            Some(value) => value
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| format!("{name} {value:?} is not a positive number")),
            None => Ok(default),
        }
    };
    let max_queue = positive("OTEL_BSP_MAX_QUEUE_SIZE", 2048)? as usize;
    let batch = BatchSettings {
        max_queue,
        max_batch: (positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)? as usize).min(max_queue),
        schedule_delay: Duration::from_millis(positive("OTEL_BSP_SCHEDULE_DELAY", 5000)?),
        export_timeout: Duration::from_millis(positive("OTEL_BSP_EXPORT_TIMEOUT", 30_000)?),
    };
    Ok(Some(OtlpSettings {
        service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "warden".into()),
        endpoint,
        headers,
        timeout,
        batch,
    }))
}

fn url_of(name: &str, value: &str) -> anyhow::Result<url::Url> {
    let parsed =
        url::Url::parse(value.trim()).with_context(|| format!("{name} {value:?} is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        anyhow::bail!("{name} {value:?} must be http(s)");
    }
    Ok(parsed)
}

/// The generic endpoint is a base: the traces path goes under it.
fn traces_path(mut base: url::Url) -> url::Url {
    let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
    base.set_path(&path);
    base
}

/// `key1=value1,key2=value2`, values percent-encoded (the specification's
/// format for `OTEL_EXPORTER_OTLP_HEADERS`).
fn headers_of(list: &str) -> anyhow::Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .with_context(|| format!("{pair:?} is not key=value"))?;
        let name = HeaderName::try_from(name.trim())
            .with_context(|| format!("{:?} is not a header name", name.trim()))?;
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .ok()
            .and_then(|value| HeaderValue::try_from(value.as_ref()).ok())
            // Never echo the value: it is usually a credential.
            .with_context(|| format!("the value of {name} is not a header value"))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// Sends each batch of finished spans to the collector, as one OTLP/HTTP
/// protobuf request.
#[derive(Debug)]
pub(super) struct OtlpExporter {
    client: reqwest::blocking::Client,
    endpoint: url::Url,
    headers: HeaderMap,
    /// The `Resource` message, encoded once.
    resource: Vec<u8>,
    resource_schema_url: String,
}

impl OtlpExporter {
    pub(super) fn new(settings: &OtlpSettings) -> anyhow::Result<OtlpExporter> {
        let timeout = settings.timeout.min(settings.batch.export_timeout);
        // The blocking client runs a runtime of its own, which cannot be
        // made (or dropped) inside the server's: build it on a thread.
        let client = std::thread::spawn(move || {
            reqwest::blocking::Client::builder()
                .timeout(timeout)
                .build()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("building the OTLP/HTTP client panicked"))?
        .context("cannot build the OTLP/HTTP client")?;
        let mut headers = settings.headers.clone();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        let mut exporter = OtlpExporter {
            client,
            endpoint: settings.endpoint.clone(),
            headers,
            resource: Vec::new(),
            resource_schema_url: String::new(),
        };
        exporter.set_resource(&opentelemetry_sdk::Resource::builder_empty().build());
        Ok(exporter)
    }

    /// The batch as one export request, its spans under the scope they
    /// were made in (one, `warden`, in practice).
    fn request(&self, batch: &[SpanData]) -> Vec<u8> {
        let mut scopes: Vec<(&InstrumentationScope, Vec<&SpanData>)> = Vec::new();
        for span in batch {
            match scopes
                .iter_mut()
                .find(|(scope, _)| same_scope(scope, &span.instrumentation_scope))
            {
                Some((_, spans)) => spans.push(span),
                None => scopes.push((&span.instrumentation_scope, vec![span])),
            }
        }
        let encoded: Vec<Vec<u8>> = scopes
            .iter()
            .map(|(scope, _)| WireScope::from((*scope, None)).encode_to_vec())
            .collect();
        // A span of Warden's is 150 to 400 bytes in protobuf.
        otlp_wire::export_request(
            batch.len() * 400,
            &self.resource,
            &self.resource_schema_url,
            scopes
                .into_iter()
                .zip(&encoded)
                .map(|((scope, spans), encoded)| EncodedScope {
                    scope: encoded,
                    schema_url: scope.schema_url().unwrap_or_default(),
                    spans,
                }),
        )
    }
}

/// `a == b`, without the two vectors that `InstrumentationScope`'s own
/// comparison allocates and sorts for the attributes when neither has any
/// (Warden's one scope has none): it was a tenth of writing a request.
fn same_scope(a: &InstrumentationScope, b: &InstrumentationScope) -> bool {
    if a.attributes().next().is_none() && b.attributes().next().is_none() {
        a.name() == b.name() && a.version() == b.version() && a.schema_url() == b.schema_url()
    } else {
        a == b
    }
}

impl OtlpExporter {
    /// Sends one batch; an error says why it was not taken.
    pub(super) fn send(&self, batch: &[SpanData]) -> Result<(), String> {
        let response = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .body(self.request(batch))
            .send()
            .map_err(|err| format!("OTLP export failed: {err}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "OTLP export refused: {} answered {}",
                self.endpoint,
                response.status()
            ));
        }
        Ok(())
    }

    pub(super) fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        let resource = ResourceAttributesWithSchema::from(resource);
        self.resource = WireResource {
            attributes: resource.attributes.0,
            dropped_attributes_count: 0,
            entity_refs: Vec::new(),
        }
        .encode_to_vec();
        self.resource_schema_url = resource.schema_url.unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> anyhow::Result<Option<OtlpSettings>> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        otlp_settings(|name| vars.get(name).cloned())
    }

    /// The shortcut answers as `InstrumentationScope`'s own comparison.
    #[test]
    fn same_scope_is_the_scopes_own_equality() {
        use opentelemetry::KeyValue;
        let scopes = [
            InstrumentationScope::builder("warden").build(),
            InstrumentationScope::builder("warden").build(),
            InstrumentationScope::builder("other").build(),
            InstrumentationScope::builder("warden")
                .with_version("1")
                .build(),
            InstrumentationScope::builder("warden")
                .with_schema_url("https://s")
                .build(),
            InstrumentationScope::builder("warden")
                .with_attributes([KeyValue::new("a", 1), KeyValue::new("b", 2)])
                .build(),
            InstrumentationScope::builder("warden")
                .with_attributes([KeyValue::new("b", 2), KeyValue::new("a", 1)])
                .build(),
        ];
        for a in &scopes {
            for b in &scopes {
                assert_eq!(same_scope(a, b), a == b, "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(settings(&[]).unwrap(), None);
        let disabled = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert_eq!(disabled.unwrap(), None);
    }

    #[test]
    fn the_generic_endpoint_is_a_base_and_the_traces_one_is_used_as_given() {
        for (base, expected) in [
            ("http://c:4318", "http://c:4318/v1/traces"),
            ("http://c:4318/", "http://c:4318/v1/traces"),
            ("https://c/otlp/", "https://c/otlp/v1/traces"),
        ] {
            let got = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", base)])
                .unwrap()
                .unwrap();
            assert_eq!(got.endpoint.as_str(), expected);
        }
        let got = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/x"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(got.endpoint.as_str(), "http://t:9/x");
        assert_eq!(got.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn headers_and_timeout_prefer_the_traces_variables() {
        let got = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-generic=1"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "authorization=Bearer%20abc, x-tenant = t1",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "750"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(got.headers.len(), 2);
        assert_eq!(got.headers["authorization"], "Bearer abc");
        assert_eq!(got.headers["x-tenant"], "t1");
        assert_eq!(got.timeout, Duration::from_millis(750));
    }

    #[test]
    fn the_batch_follows_the_bsp_variables_and_never_outgrows_the_queue() {
        let default = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])
            .unwrap()
            .unwrap()
            .batch;
        assert_eq!(
            default,
            BatchSettings {
                max_queue: 2048,
                max_batch: 512,
                schedule_delay: Duration::from_secs(5),
                export_timeout: Duration::from_secs(30),
            }
        );
        let small = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "4"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ])
        .unwrap()
        .unwrap()
        .batch;
        assert_eq!((small.max_queue, small.max_batch), (4, 4));
        assert_eq!(small.schedule_delay, Duration::from_millis(100));
    }

    #[test]
    fn what_cannot_be_honoured_is_an_error_naming_the_variable() {
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "no-equals-sign"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=x"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-1"),
            ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "1.5"),
        ] {
            let err = settings(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                (name, value),
            ])
            .unwrap_err();
            assert!(format!("{err:#}").contains(name), "{name}: {err:#}");
        }
        let secret = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=sk-123\u{7f}"),
        ])
        .unwrap_err();
        assert!(!format!("{secret:#}").contains("sk-123"), "{secret:#}");
    }
}
