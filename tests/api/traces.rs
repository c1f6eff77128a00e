//! OpenTelemetry traces (issue 26): the real binary exporting OTLP/HTTP
//! (protobuf) to a receiver on loopback that decodes every request with the
//! protocol's own generated types (`opentelemetry-proto`). One turn sent
//! with a W3C `traceparent`: the server span is its child; `invoke_agent`,
//! `execute_tool order_status`, the outbound HTTP client span and the
//! `chat` spans share its trace id, each under the one above it; the host
//! endpoint received a `traceparent` of that trace naming the client span;
//! the RFC 9421 signature still verifies with the independent `httpsig`;
//! JSON log lines inside the trace carry its ids; and no exported byte
//! holds the message text, the arguments, the result or a secret.
//! Misconfiguration (an unknown OTLP protocol) fails at start; an
//! unreachable collector never fails a request.

use crate::helpers::endpoint::*;
use crate::helpers::fake_inference::{FakeInference, FakeReply};
use crate::helpers::fixtures::{CREDENTIAL, new_key};
use crate::helpers::shop::order_status;
use crate::helpers::*;
use crate::signing::verify_with_httpsig;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MESSAGE: &str = "¿Dónde está mi pedido A-1001? Mi nombre es Lucía Marsella";
const MODEL_REPLY: &str = "Tu pedido viaja con TRANSPORTES-ZAFIRO hoy mismo.";
const ENDPOINT_TOKEN: &str = "endpoint-token-trace-7d1f";
const INFERENCE_KEY: &str = "sk-inference-trace-93ab";

/// One export request as received: decoded, and its bytes.
type Export = (ExportTraceServiceRequest, Vec<u8>);

/// An OTLP/HTTP trace receiver: every export request it received.
struct Receiver {
    base: String,
    requests: Arc<Mutex<Vec<Export>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let log = log.clone();
                    async move {
                        assert_eq!(
                            headers.get("content-type").unwrap(),
                            "application/x-protobuf"
                        );
                        let decoded = ExportTraceServiceRequest::decode(body.as_ref())
                            .expect("an OTLP protobuf export request");
                        log.lock().unwrap().push((decoded, body.to_vec()));
                        (
                            [("content-type", "application/x-protobuf")],
                            ExportTraceServiceResponse::default().encode_to_vec(),
                        )
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { base, requests }
    }

    fn spans(&self) -> Vec<Span> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(r, _)| r.resource_spans.iter())
            .flat_map(|r| r.scope_spans.iter())
            .flat_map(|s| s.spans.iter().cloned())
            .collect()
    }

    /// Waits until a span named `name` has been exported.
    async fn wait_for(&self, name: &str) -> Vec<Span> {
        for _ in 0..150 {
            let spans = self.spans();
            if spans.iter().any(|s| s.name == name) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "no span {name:?} exported within 15 s: {:?}",
            self.spans().iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'a>(span: &'a Span, key: &str) -> &'a str {
    match attribute(span, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "{name}: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

fn otel_env<'a>(receiver: &'a str, model: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("WARDEN_DEV_ALLOW_LOOPBACK", "1"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("WARDEN_INFERENCE_URL", model),
        ("WARDEN_INFERENCE_MODEL", "fake-model"),
        ("WARDEN_INFERENCE_API_KEY", INFERENCE_KEY),
    ]
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_is_one_trace_from_the_host_through_the_endpoint_and_the_model(backend: Backend) {
    let db = TestDb::new(backend).await;
    let key = cli_account_with_key(&db, "traced").await;
    let receiver = Receiver::start().await;
    let endpoint =
        FakeEndpoint::json(json!({"status": "enviado", "carrier": "TRANSPORTES-ZAFIRO"})).await;
    let model = FakeInference::start(vec![
        FakeReply::tool_call("order_status", json!({"order": "A-1001"})),
        FakeReply::text(MODEL_REPLY),
    ])
    .await;
    let model_url = model.base_url();
    let server = ServerProcess::start(&db, &otel_env(&receiver.base, &model_url)).await;
    let api = server.api(&key);
    let secret = json!({"auth_type": "bearer", "secret": ENDPOINT_TOKEN});
    assert_eq!(api.put_credential(CREDENTIAL, &secret).await.0, 201);
    let (status, body) = api
        .import_capabilities(&new_key(), vec![order_status(&endpoint.base)])
        .await;
    assert_eq!(status, 201, "{body}");

    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let caller_span = &uuid::Uuid::new_v4().simple().to_string()[..16];
    let message = json!({"user_id": "u-trace", "message": {"type": "text", "body": MESSAGE}});
    let response = api
        .send_message(&message)
        .request()
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .header("tracestate", "vendor=opaque")
        .send()
        .await
        .unwrap();
    let (status, turn) = status_and_json(response).await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["message"]["body"], MODEL_REPLY, "{turn}");

    let spans = receiver.wait_for("invoke_agent").await;
    let spans = if spans
        .iter()
        .any(|s| s.name == "POST /v1/channels/http/messages")
    {
        spans
    } else {
        receiver.wait_for("POST /v1/channels/http/messages").await
    };
    let ours: Vec<Span> = spans
        .iter()
        .filter(|s| hex(&s.trace_id) == trace_id)
        .cloned()
        .collect();

    // The server span: a child of the caller's span, in the caller's trace.
    let server_span = one(&ours, "POST /v1/channels/http/messages");
    assert_eq!(server_span.kind, SpanKind::Server as i32);
    assert_eq!(hex(&server_span.parent_span_id), caller_span);
    assert_eq!(text(server_span, "http.request.method"), "POST");
    assert_eq!(
        text(server_span, "http.route"),
        "/v1/channels/http/messages"
    );
    assert!(
        matches!(
            attribute(server_span, "http.response.status_code"),
            Some(AnyValue::IntValue(200))
        ),
        "{server_span:?}"
    );
    let server_trace_state = &server_span.trace_state;
    assert!(
        server_trace_state.contains("vendor=opaque"),
        "{server_trace_state:?}"
    );

    // The turn under it, the call under the turn, the exchange under the call.
    let turn_span = one(&ours, "invoke_agent");
    assert_eq!(text(turn_span, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(turn_span, "warden.channel"), "http");
    assert_eq!(
        text(turn_span, "gen_ai.conversation.id"),
        turn["conversation_id"].as_str().unwrap()
    );
    let ancestors = |span: &Span| {
        let mut chain = Vec::new();
        let mut parent = span.parent_span_id.clone();
        while let Some(p) = ours.iter().find(|s| s.span_id == parent) {
            chain.push(p.name.clone());
            parent = p.parent_span_id.clone();
        }
        chain
    };
    assert!(
        ancestors(turn_span).contains(&server_span.name),
        "{:?}",
        ancestors(turn_span)
    );
    let tool = one(&ours, "execute_tool order_status");
    assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(text(tool, "gen_ai.tool.name"), "order_status");
    assert!(text(tool, "gen_ai.tool.call.id").starts_with("call_"));
    assert_eq!(text(tool, "warden.call.outcome"), "succeeded");
    assert!(ancestors(tool).contains(&"invoke_agent".to_owned()));
    let client = one(&ours, "POST");
    assert_eq!(client.kind, SpanKind::Client as i32);
    assert_eq!(client.parent_span_id, tool.span_id);
    assert_eq!(text(client, "server.address"), "127.0.0.1");
    assert!(matches!(
        attribute(client, "http.response.status_code"),
        Some(AnyValue::IntValue(200))
    ));
    let guests: Vec<&Span> = ours
        .iter()
        .filter(|s| s.parent_span_id == tool.span_id && s.name != "POST")
        .collect();
    let guest_names: Vec<&str> = guests.iter().map(|s| s.name.as_str()).collect();
    assert!(
        guest_names.contains(&"validate-arguments") && guest_names.contains(&"prune-output"),
        "{guest_names:?}"
    );
    let chats: Vec<&Span> = ours
        .iter()
        .filter(|s| s.name == "chat fake-model")
        .collect();
    assert_eq!(chats.len(), 2, "the plan, then the reply");
    for chat in &chats {
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.request.model"), "fake-model");
        assert!(ancestors(chat).contains(&"invoke_agent".to_owned()));
    }
    let service = {
        let requests = receiver.requests.lock().unwrap();
        requests[0].0.resource_spans[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.clone())
    };
    assert_eq!(service, Some(AnyValue::StringValue("warden".into())));

    // The endpoint got the trace, naming the client span; the signature
    // over the request still verifies with the independent implementation.
    let received = endpoint.last();
    let traceparent = received.headers["traceparent"].to_str().unwrap();
    assert_eq!(
        traceparent,
        format!("00-{trace_id}-{}-01", hex(&client.span_id))
    );
    let jwks: Value = reqwest::get(format!(
        "{}/.well-known/service/capability-context/v1/jwks.json",
        server.address
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    verify_with_httpsig(&received, &jwks).expect("the signature verifies");
    // So did the model's requests.
    for recorded in model.recorded() {
        let sent = recorded.headers["traceparent"].to_str().unwrap();
        assert!(sent.starts_with(&format!("00-{trace_id}-")), "{sent}");
    }

    // JSON log lines written inside the trace carry its ids.
    let logs = server.logs.lock().unwrap().clone();
    let joined: Vec<Value> = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["trace_id"] == trace_id.as_str())
        .collect();
    assert!(
        joined.iter().any(|l| l["message"] == "request finished"
            && l["span_id"].as_str().is_some_and(|s| s.len() == 16)),
        "no log line of the request carries the trace: {logs:?}"
    );

    // The privacy sweep: every byte exported, raw and decoded.
    let exported: Vec<String> = receiver
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(decoded, raw)| format!("{decoded:?}\n{}", String::from_utf8_lossy(raw)))
        .collect();
    let mut leaks = Vec::new();
    for (what, needle) in [
        ("message text", MESSAGE),
        ("a word of the message", "Marsella"),
        ("a word of the message", "Lucía"),
        ("the argument", "A-1001"),
        ("the endpoint's result", "TRANSPORTES-ZAFIRO"),
        ("the endpoint's result", "enviado"),
        ("the model's reply", MODEL_REPLY),
        ("the endpoint credential", ENDPOINT_TOKEN),
        ("the inference key", INFERENCE_KEY),
        ("the API key", key.as_str()),
        ("the master key", MASTER_KEY),
        ("the user id", "u-trace"),
    ] {
        if exported.iter().any(|e| e.contains(needle)) {
            leaks.push(format!("{what} ({needle:?})"));
        }
    }
    assert!(
        leaks.is_empty(),
        "exported spans hold: {}",
        leaks.join(", ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_never_fails_a_request() {
    let db = TestDb::new(Backend::Sqlite).await;
    let key = cli_account_with_key(&db, "lonely").await;
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let model = FakeInference::start(vec![FakeReply::text("Hola")]).await;
    let model_url = model.base_url();
    let server = ServerProcess::start(&db, &otel_env(&closed, &model_url)).await;
    let message = json!({"user_id": "u-1", "message": {"type": "text", "body": "Hola"}});
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let (status, body) = server.api(&key).send_message(&message).await;
        assert_eq!(status, 200, "{body}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

#[tokio::test]
async fn an_unknown_otlp_protocol_is_a_clear_error_at_start() {
    let db = TestDb::new(Backend::Sqlite).await;
    for (protocol, endpoint) in [
        ("grpc", "http://127.0.0.1:4317"),
        ("http/json", "http://127.0.0.1:4318"),
    ] {
        let stderr = serve_refuses(
            &db,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ],
        )
        .await;
        assert!(
            stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && stderr.contains(protocol),
            "{stderr}"
        );
    }
    let stderr = serve_refuses(&db, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")]).await;
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{stderr}");
}
