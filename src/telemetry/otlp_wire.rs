//! One OTLP trace export request (`ExportTraceServiceRequest`) in protobuf,
//! written straight from the SDK's finished spans.
//!
//! Why not build `opentelemetry-proto`'s messages and let `prost` encode
//! them, as `opentelemetry-otlp` does: that path allocates a `String` or a
//! `Vec` for every id, name, key and value of every span (the keys through
//! `Display`), frees them all again, and sizes each nested message once per
//! level above it. Counted under callgrind it was 12,700 instructions a
//! span, 6 % of a turn for its seven spans (docs/benchmarks.md, "What
//! watching costs"); writing the bytes directly is a tenth of that.
//!
//! What is written is exactly what `opentelemetry-proto`'s own conversion
//! (`Span::from(SpanData)`) encodes with `prost`, byte for byte: the tests
//! below compare the two for spans with every kind of field. The resource
//! and the instrumentation scope, written once a batch, go through that
//! conversion and `prost` as they are.
//!
//! Field numbers are those of `opentelemetry/proto/trace/v1/trace.proto`
//! and `common/v1/common.proto`; fields are written in the order `prost`
//! writes them (by field number), and a field at its default value is
//! left out as `prost` leaves it out, except inside a `oneof` and for a
//! present optional message.

use opentelemetry::trace::{SpanId, Status};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_proto::tonic::trace::v1::SpanFlags;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind as WireKind;
use opentelemetry_sdk::trace::SpanData;
use std::time::{SystemTime, UNIX_EPOCH};

/// The request for one batch: one resource (already encoded), and under it
/// each instrumentation scope (already encoded) with its spans. `capacity`
/// is a guess at its size, so that the buffer is not grown and copied
/// again and again.
pub(super) fn export_request<'a>(
    capacity: usize,
    resource: &[u8],
    resource_schema_url: &str,
    scopes: impl IntoIterator<Item = EncodedScope<'a>>,
) -> Vec<u8> {
    let mut wire = Wire(Vec::with_capacity(capacity));
    // ExportTraceServiceRequest.resource_spans
    wire.message(1, |w| {
        // ResourceSpans
        w.encoded(1, resource);
        for scope in scopes {
            w.message(2, |w| {
                // ScopeSpans
                w.encoded(1, scope.scope);
                for span in scope.spans {
                    w.message(2, |w| span_body(w, span));
                }
                w.string(3, scope.schema_url);
            });
        }
        w.string(3, resource_schema_url);
    });
    wire.0
}

/// One instrumentation scope of a batch: its encoded message and its spans.
pub(super) struct EncodedScope<'a> {
    pub scope: &'a [u8],
    pub schema_url: &'a str,
    pub spans: Vec<&'a SpanData>,
}

/// `Span`'s fields.
fn span_body(w: &mut Wire, span: &SpanData) {
    let ids = &span.span_context;
    w.bytes(1, &ids.trace_id().to_bytes());
    w.bytes(2, &ids.span_id().to_bytes());
    w.string(3, &ids.trace_state().header());
    if span.parent_span_id != SpanId::INVALID {
        w.bytes(4, &span.parent_span_id.to_bytes());
    }
    w.string(5, &span.name);
    w.uint(6, WireKind::from(span.span_kind.clone()) as u64);
    w.fixed64(7, nanos(span.start_time));
    w.fixed64(8, nanos(span.end_time));
    attributes(w, 9, &span.attributes);
    w.uint(10, span.dropped_attributes_count.into());
    for event in span.events.iter() {
        // Span.Event
        w.message(11, |w| {
            w.fixed64(1, nanos(event.timestamp));
            w.string(2, &event.name);
            attributes(w, 3, &event.attributes);
            w.uint(4, event.dropped_attributes_count.into());
        });
    }
    w.uint(12, span.events.dropped_count.into());
    for link in span.links.iter() {
        // Span.Link
        let ids = &link.span_context;
        w.message(13, |w| {
            w.bytes(1, &ids.trace_id().to_bytes());
            w.bytes(2, &ids.span_id().to_bytes());
            w.string(3, &ids.trace_state().header());
            attributes(w, 4, &link.attributes);
            w.uint(5, link.dropped_attributes_count.into());
            w.fixed32(6, flags(ids.is_remote(), ids.trace_flags().to_u8()));
        });
    }
    w.uint(14, span.links.dropped_count.into());
    // Status: always present, as the conversion makes it.
    w.message(15, |w| match &span.status {
        Status::Error { description } => {
            w.string(2, description);
            w.uint(3, 2);
        }
        Status::Ok => w.uint(3, 1),
        Status::Unset => {}
    });
    w.fixed32(
        16,
        flags(span.parent_span_is_remote, ids.trace_flags().to_u8()),
    );
}

/// The W3C flags, with the bits that say whether the parent is remote.
fn flags(parent_is_remote: bool, trace_flags: u8) -> u32 {
    let mut flags = u32::from(trace_flags) | SpanFlags::ContextHasIsRemoteMask as u32;
    if parent_is_remote {
        flags |= SpanFlags::ContextIsRemoteMask as u32;
    }
    flags
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// Repeated `KeyValue`s in field `field`. A scalar's message is sized
/// first and written in place; only an array goes through `Wire::message`.
fn attributes(w: &mut Wire, field: u32, attributes: &[KeyValue]) {
    for attribute in attributes {
        let key = attribute.key.as_str();
        let Some(value_length) = scalar_length(&attribute.value) else {
            w.message(field, |w| {
                w.string(1, key);
                w.message(2, |w| any_value(w, &attribute.value));
            });
            continue;
        };
        let key_length = if key.is_empty() {
            0
        } else {
            1 + varint_length(key.len() as u64) + key.len()
        };
        let length = key_length + 1 + varint_length(value_length as u64) + value_length;
        w.tag(field, LENGTH_DELIMITED);
        w.varint(length as u64);
        w.string(1, key);
        w.tag(2, LENGTH_DELIMITED);
        w.varint(value_length as u64);
        any_value(w, &attribute.value);
    }
}

/// The length of a scalar's `AnyValue` message (its one-byte tag and its
/// value), or `None` for an array.
fn scalar_length(value: &Value) -> Option<usize> {
    Some(match value {
        Value::String(text) => 1 + varint_length(text.as_str().len() as u64) + text.as_str().len(),
        Value::Bool(_) => 2,
        Value::I64(number) => 1 + varint_length(*number as u64),
        Value::F64(_) => 9,
        _ => return None,
    })
}

/// `AnyValue`'s one field (a `oneof`: written even at its default).
fn any_value(w: &mut Wire, value: &Value) {
    match value {
        Value::String(text) => w.oneof_string(1, text.as_str()),
        Value::Bool(flag) => w.oneof_varint(2, u64::from(*flag)),
        Value::I64(number) => w.oneof_varint(3, *number as u64),
        Value::F64(number) => w.oneof_double(4, *number),
        Value::Array(array) => w.message(5, |w| match array {
            Array::Bool(values) => array_of(w, values, |w, v| w.oneof_varint(2, u64::from(*v))),
            Array::I64(values) => array_of(w, values, |w, v| w.oneof_varint(3, *v as u64)),
            Array::F64(values) => array_of(w, values, |w, v| w.oneof_double(4, *v)),
            Array::String(values) => array_of(w, values, |w, v| w.oneof_string(1, v.as_str())),
            // A kind of array newer than this code: its text, rather than a
            // span the collector cannot read.
            other => array_of(w, &[other.to_string()], |w, v| w.oneof_string(1, v)),
        }),
        other => w.oneof_string(1, &other.to_string()),
    }
}

/// `ArrayValue.values`: one `AnyValue` each.
fn array_of<T>(w: &mut Wire, values: &[T], one: impl Fn(&mut Wire, &T)) {
    for value in values {
        w.message(1, |w| one(w, value));
    }
}

/// The protobuf wire format, as far as a trace needs it.
struct Wire(Vec<u8>);

/// Wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;
const FIXED32: u64 = 5;

/// Room kept for a nested message's length before its body is written.
const LENGTH_ROOM: usize = 5;

impl Wire {
    /// Most varints a span holds (tags, short lengths, small numbers)
    /// are one byte: pushed directly, where `prost`'s loop, which writes
    /// through `BufMut` a byte at a time, cost five times as much
    /// (counted: 3,400 instructions a turn).
    #[inline]
    fn varint(&mut self, value: u64) {
        if value < 0x80 {
            self.0.push(value as u8);
        } else {
            prost::encoding::encode_varint(value, &mut self.0);
        }
    }

    #[inline]
    fn tag(&mut self, field: u32, wire_type: u64) {
        self.varint((u64::from(field) << 3) | wire_type);
    }

    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.oneof_varint(field, value);
        }
    }

    fn oneof_varint(&mut self, field: u32, value: u64) {
        self.tag(field, VARINT);
        self.varint(value);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.tag(field, FIXED64);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn oneof_double(&mut self, field: u32, value: f64) {
        self.tag(field, FIXED64);
        self.0.extend_from_slice(&value.to_bits().to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, value: u32) {
        if value != 0 {
            self.tag(field, FIXED32);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.encoded(field, bytes);
        }
    }

    fn string(&mut self, field: u32, text: &str) {
        self.bytes(field, text.as_bytes());
    }

    fn oneof_string(&mut self, field: u32, text: &str) {
        self.encoded(field, text.as_bytes());
    }

    /// A length-delimited field holding `bytes` (a string, bytes, or a
    /// message encoded elsewhere), written even when empty.
    fn encoded(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, LENGTH_DELIMITED);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A nested message: its body is written after room for its length,
    /// then the length is put in and the body moved up to meet it (one
    /// copy of a few hundred bytes, rather than sizing every message
    /// beneath it first).
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Wire)) {
        self.tag(field, LENGTH_DELIMITED);
        let at = self.0.len();
        self.0.extend_from_slice(&[0; LENGTH_ROOM]);
        body(self);
        let end = self.0.len();
        let length = (end - at - LENGTH_ROOM) as u64;
        let used = varint_length(length);
        assert!(used <= LENGTH_ROOM, "a message of 32 GiB");
        prost::encoding::encode_varint(length, &mut &mut self.0[at..at + used]);
        self.0.copy_within(at + LENGTH_ROOM..end, at + used);
        self.0.truncate(end - (LENGTH_ROOM - used));
    }
}

/// How many bytes `value` takes as a varint (`prost`'s own count).
fn varint_length(value: u64) -> usize {
    prost::encoding::encoded_len_varint(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        Event, Link, SpanContext, SpanKind, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{InstrumentationScope, StringValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1 as common;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;
    use std::borrow::Cow;
    use std::time::Duration;

    fn context(trace: u128, span: u64, flags: u8, remote: bool, state: &str) -> SpanContext {
        let state = if state.is_empty() {
            TraceState::default()
        } else {
            state.parse().unwrap()
        };
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::new(flags),
            remote,
            state,
        )
    }

    fn at(nanos: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    }

    fn every_value() -> Vec<KeyValue> {
        vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("owned", String::from("a value with ünïcode")),
            KeyValue::new("empty", ""),
            KeyValue::new("zero", 0_i64),
            KeyValue::new("negative", -300_i64),
            KeyValue::new("large", i64::MAX),
            KeyValue::new("yes", true),
            KeyValue::new("no", false),
            KeyValue::new("ratio", 0.25_f64),
            KeyValue::new("nothing", 0.0_f64),
            KeyValue::new("flags", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("sizes", Value::Array(Array::I64(vec![0, -1, 1 << 40]))),
            KeyValue::new("weights", Value::Array(Array::F64(vec![]))),
            KeyValue::new(
                "names",
                Value::Array(Array::String(vec![
                    StringValue::from("a"),
                    StringValue::from(""),
                ])),
            ),
            // A key long enough that its message needs a two-byte length.
            KeyValue::new("k".repeat(200), "v".repeat(300)),
        ]
    }

    fn spans(scope: &InstrumentationScope) -> Vec<SpanData> {
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "retry",
            at(1_700_000_000_500_000_000),
            vec![KeyValue::new("attempt", 2_i64)],
            1,
        ));
        events.events.push(Event::new("bare", at(0), Vec::new(), 0));
        events.dropped_count = 3;
        let mut links = SpanLinks::default();
        links.links.push(Link::new(
            context(7, 8, 1, true, "a=1"),
            vec![KeyValue::new("why", "queued")],
            2,
        ));
        links
            .links
            .push(Link::with_context(context(9, 10, 0, false, "")));
        links.dropped_count = 4;
        let plain = SpanData {
            span_context: context(
                0x0af7651916cd43dd8448eb211c80319c,
                0x00f067aa0ba902b7,
                1,
                false,
                "",
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Server,
            name: Cow::Borrowed("POST /v1/channels/http/messages"),
            start_time: at(1_700_000_000_000_000_000),
            end_time: at(1_700_000_000_250_000_000),
            attributes: vec![KeyValue::new("http.response.status_code", 200_i64)],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope.clone(),
        };
        let full = SpanData {
            span_context: context(u128::MAX - 5, u64::MAX, 0xff, true, "vendor=opaque,b=2"),
            parent_span_id: SpanId::from(42),
            parent_span_is_remote: true,
            span_kind: SpanKind::Client,
            name: Cow::Owned("execute_tool order_status".into()),
            start_time: at(1),
            end_time: at(u64::MAX),
            attributes: every_value(),
            dropped_attributes_count: 5,
            events,
            links,
            status: Status::error("the endpoint timed out"),
            instrumentation_scope: scope.clone(),
        };
        let mut kinds = Vec::new();
        for (kind, status) in [
            (SpanKind::Internal, Status::Ok),
            (SpanKind::Producer, Status::error("")),
            (SpanKind::Consumer, Status::Unset),
        ] {
            kinds.push(SpanData {
                span_kind: kind,
                status,
                name: Cow::Borrowed(""),
                start_time: UNIX_EPOCH - Duration::from_secs(1),
                ..plain.clone()
            });
        }
        [vec![plain, full], kinds].concat()
    }

    /// Our bytes for `batch`, one scope.
    fn ours(
        resource: &ResourceAttributesWithSchema,
        scope: &InstrumentationScope,
        batch: &[SpanData],
    ) -> Vec<u8> {
        let resource_message = opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: resource.attributes.0.clone(),
            dropped_attributes_count: 0,
            entity_refs: Vec::new(),
        }
        .encode_to_vec();
        let scope_message = common::InstrumentationScope::from((scope, None)).encode_to_vec();
        export_request(
            0,
            &resource_message,
            resource.schema_url.as_deref().unwrap_or(""),
            [EncodedScope {
                scope: &scope_message,
                schema_url: scope.schema_url().unwrap_or(""),
                spans: batch.iter().collect(),
            }],
        )
    }

    fn resource(schema_url: Option<&str>) -> ResourceAttributesWithSchema {
        let mut builder = opentelemetry_sdk::Resource::builder_empty()
            .with_attributes([KeyValue::new("service.name", "warden")]);
        if let Some(url) = schema_url {
            builder = builder.with_schema_url([], url.to_owned());
        }
        (&builder.build()).into()
    }

    /// Byte for byte what `opentelemetry-proto`'s conversion and `prost`
    /// write, for spans with every kind of field and value.
    #[test]
    fn the_request_is_the_reference_conversions_byte_for_byte() {
        for (scope, schema) in [
            (InstrumentationScope::builder("warden").build(), None),
            (
                InstrumentationScope::builder("other")
                    .with_version("1.2.3")
                    .with_schema_url("https://opentelemetry.io/schemas/1.37.0")
                    .with_attributes([KeyValue::new("scope.attr", 1_i64)])
                    .build(),
                Some("https://opentelemetry.io/schemas/1.36.0"),
            ),
        ] {
            let resource = resource(schema);
            let batch = spans(&scope);
            let reference = ExportTraceServiceRequest {
                resource_spans: group_spans_by_resource_and_scope(batch.clone(), &resource),
            };
            let ours = ours(&resource, &scope, &batch);
            assert_eq!(
                ExportTraceServiceRequest::decode(ours.as_slice()).unwrap(),
                reference,
                "decoded"
            );
            assert_eq!(ours, reference.encode_to_vec(), "bytes");
        }
    }

    /// Lengths that need one, two and three bytes of varint.
    #[test]
    fn nested_lengths_of_every_size_are_canonical() {
        let scope = InstrumentationScope::builder("warden").build();
        let resource = resource(None);
        for size in [0, 1, 127, 128, 16_383, 16_384, 70_000] {
            let mut span = spans(&scope).remove(0);
            span.attributes = vec![KeyValue::new("big", "x".repeat(size))];
            let reference = ExportTraceServiceRequest {
                resource_spans: group_spans_by_resource_and_scope(vec![span.clone()], &resource),
            };
            assert_eq!(
                ours(&resource, &scope, &[span]),
                reference.encode_to_vec(),
                "{size}"
            );
        }
    }
}
