//! OpenTelemetry traces (issue 26): the real binary exporting OTLP/HTTP
//! (protobuf) to a receiver on loopback that decodes every request with the
//! protocol's own generated types (`opentelemetry-proto`). One turn sent
//! with a W3C `traceparent`: the server span is its child; `invoke_agent`,
//! `execute_tool order_status`, the outbound HTTP client span and the
//! `chat` spans share its trace id, each under the one above it; the host
//! endpoint received a `traceparent` of that trace naming the client span;
//! the RFC 9421 signature still verifies with the independent `httpsig`;
//! every export carries the collector's `OTEL_EXPORTER_OTLP_HEADERS`;
//! JSON log lines inside the trace carry its ids; and no exported byte
//! holds the message text, the arguments, the result or a secret.
//! A platform delivery: the worker's turn is a trace of its own, linked to
//! the webhook request, and the send API gets its context; a prompt
//! execution carries its trace to the challenge verifier and the model.
//! An MCP tool call is one trace from the client to the endpoint.
//! Misconfiguration (an unknown OTLP protocol) fails at start; a collector
//! that is down or hangs never slows a request, and what it could not take
//! is counted in `warden_trace_spans_dropped_total`.

use crate::helpers::endpoint::*;
use crate::helpers::fake_inference::{
    FAKE_INPUT_TOKENS, FAKE_OUTPUT_TOKENS, FakeInference, FakeReply,
};
use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::fake_verifier::{self, FakeVerifier, mint};
use crate::helpers::fixtures::{CREDENTIAL, new_key};
use crate::helpers::shop::order_status;
use crate::helpers::*;
use crate::metrics::{forms_integration, metrics_address, scraped};
use crate::platform_durability::{APP_SECRET, TOKEN, delivery, platform_env, register_number};
use crate::prompt_integrations::{GOOD_OUTPUT, HOST, ORIGIN, topic};
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
use warden::platform::webhook::sign;

const MESSAGE: &str = "¿Dónde está mi pedido A-1001? Mi nombre es Lucía Marsella";
const MODEL_REPLY: &str = "Tu pedido viaja con TRANSPORTES-ZAFIRO hoy mismo.";
const ENDPOINT_TOKEN: &str = "endpoint-token-trace-7d1f";
const INFERENCE_KEY: &str = "sk-inference-trace-93ab";
/// What the collector asks for in a header (`OTEL_EXPORTER_OTLP_HEADERS`).
const COLLECTOR_TOKEN: &str = "collector token/41";

/// One export request as received: decoded, and its bytes.
type Export = (ExportTraceServiceRequest, Vec<u8>);

/// An OTLP/HTTP trace receiver: every export request it received.
struct Receiver {
    base: String,
    requests: Arc<Mutex<Vec<Export>>>,
    /// Each request's `x-collector-token` header.
    tokens: Arc<Mutex<Vec<Option<String>>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let tokens = Arc::new(Mutex::new(Vec::new()));
        let seen = tokens.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let log = log.clone();
                    let tokens = seen.clone();
                    async move {
                        assert_eq!(
                            headers.get("content-type").unwrap(),
                            "application/x-protobuf"
                        );
                        let token = headers
                            .get("x-collector-token")
                            .map(|v| v.to_str().unwrap().to_owned());
                        tokens.lock().unwrap().push(token);
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
        Receiver {
            base,
            requests,
            tokens,
        }
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

    /// Waits until a span of each of these names has been exported.
    async fn wait_for(&self, names: &[&str]) -> Vec<Span> {
        for _ in 0..150 {
            let spans = self.spans();
            if names
                .iter()
                .all(|name| spans.iter().any(|s| s.name == *name))
            {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "not every span of {names:?} exported within 15 s: {:?}",
            self.spans().iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }

    /// Every exported byte, raw and decoded, as text (for privacy sweeps).
    fn exported_text(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(decoded, raw)| format!("{decoded:?}\n{}", String::from_utf8_lossy(raw)))
            .collect()
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
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-collector-token=collector%20token%2F41",
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("WARDEN_INFERENCE_URL", model),
        ("WARDEN_INFERENCE_MODEL", "fake-model"),
        ("WARDEN_INFERENCE_API_KEY", INFERENCE_KEY),
    ]
}

/// A traced server with one account whose `order_status` capability calls
/// `endpoint` with a credential.
struct TracedShop {
    /// Bound by the caller for as long as the server runs.
    _db: TestDb,
    key: String,
    receiver: Receiver,
    endpoint: FakeEndpoint,
    server: ServerProcess,
}

impl TracedShop {
    async fn open(backend: Backend, endpoint_answer: Value, model_url: &str) -> TracedShop {
        let db = TestDb::new(backend).await;
        let key = cli_account_with_key(&db, "traced").await;
        let receiver = Receiver::start().await;
        let endpoint = FakeEndpoint::json(endpoint_answer).await;
        let server = ServerProcess::start(&db, &otel_env(&receiver.base, model_url)).await;
        let api = server.api(&key);
        let secret = json!({"auth_type": "bearer", "secret": ENDPOINT_TOKEN});
        assert_eq!(api.put_credential(CREDENTIAL, &secret).await.0, 201);
        let (status, body) = api
            .import_capabilities(&new_key(), vec![order_status(&endpoint.base)])
            .await;
        assert_eq!(status, 201, "{body}");
        TracedShop {
            _db: db,
            key,
            receiver,
            endpoint,
            server,
        }
    }
}

/// The spans of one trace.
fn of_trace(spans: &[Span], trace_id: &str) -> Vec<Span> {
    spans
        .iter()
        .filter(|s| hex(&s.trace_id) == trace_id)
        .cloned()
        .collect()
}

/// The server span of `route`: a child of the caller's span.
fn server_span_of<'a>(ours: &'a [Span], route: &str, caller_span: &str) -> &'a Span {
    let span = one(ours, &format!("POST {route}"));
    assert_eq!(span.kind, SpanKind::Server as i32);
    assert_eq!(hex(&span.parent_span_id), caller_span);
    assert_eq!(text(span, "http.request.method"), "POST");
    assert_eq!(text(span, "http.route"), route);
    span
}

/// The names of `span`'s ancestors among `spans`, nearest first.
fn ancestors(spans: &[Span], span: &Span) -> Vec<String> {
    let mut chain = Vec::new();
    let mut parent = span.parent_span_id.clone();
    while let Some(p) = spans.iter().find(|s| s.span_id == parent) {
        chain.push(p.name.clone());
        parent = p.parent_span_id.clone();
    }
    chain
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_is_one_trace_from_the_host_through_the_endpoint_and_the_model(backend: Backend) {
    let model = FakeInference::start(vec![
        FakeReply::tool_call("order_status", json!({"order": "A-1001"})),
        FakeReply::text(MODEL_REPLY),
    ])
    .await;
    let TracedShop {
        _db,
        key,
        receiver,
        endpoint,
        server,
    } = TracedShop::open(
        backend,
        json!({"status": "enviado", "carrier": "TRANSPORTES-ZAFIRO"}),
        &model.base_url(),
    )
    .await;
    let api = server.api(&key);

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

    let spans = receiver
        .wait_for(&["invoke_agent", "POST /v1/channels/http/messages"])
        .await;
    let ours = of_trace(&spans, &trace_id);

    // The server span: a child of the caller's span, in the caller's trace.
    let server_span = server_span_of(&ours, "/v1/channels/http/messages", caller_span);
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
    let ancestors = |span: &Span| ancestors(&ours, span);
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
        // The tokens the backend reported (the fake's `usage`).
        for (key, tokens) in [
            ("gen_ai.usage.input_tokens", FAKE_INPUT_TOKENS),
            ("gen_ai.usage.output_tokens", FAKE_OUTPUT_TOKENS),
        ] {
            assert_eq!(
                attribute(chat, key),
                Some(&AnyValue::IntValue(tokens)),
                "{key} of {chat:?}"
            );
        }
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
    // Every export carried the collector's header, percent-decoded.
    let tokens = receiver.tokens.lock().unwrap().clone();
    assert!(!tokens.is_empty());
    assert!(
        tokens.iter().all(|t| t.as_deref() == Some(COLLECTOR_TOKEN)),
        "{tokens:?}"
    );
    // The caller's `tracestate` travels on with its trace.
    assert_eq!(
        endpoint.last().headers["tracestate"].to_str().unwrap(),
        "vendor=opaque"
    );

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
    let logs = server.logs_so_far().await;
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

    // Log lines stay logs: none is copied into a span as an event (a
    // line's fields are judged by the log filter, not exported).
    let with_events: Vec<(&str, usize)> = spans
        .iter()
        .filter(|s| !s.events.is_empty())
        .map(|s| (s.name.as_str(), s.events.len()))
        .collect();
    assert!(
        with_events.is_empty(),
        "spans with log events: {with_events:?}"
    );

    // The privacy sweep: every byte exported, raw and decoded.
    let exported = receiver.exported_text();
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

/// An MCP client's tool call is traced as a turn's is: the server span a
/// child of the caller's, the call under it, the endpoint given the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_call_is_one_trace_from_the_client_to_the_endpoint() {
    // No model: a tool call does not reach one.
    let TracedShop {
        _db,
        key,
        receiver,
        endpoint,
        server,
    } = TracedShop::open(
        Backend::Sqlite,
        json!({"status": "enviado"}),
        "http://127.0.0.1:9",
    )
    .await;

    let (trace_id, caller_span) = caller_context();
    let mut params = json!({"name": "order_status", "arguments": {"order": "A-1001"}});
    params["_meta"] = crate::mcp::meta();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/mcp", server.address))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", crate::mcp::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "order_status")
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    let (status, answer) = status_and_json(response).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let spans = receiver
        .wait_for(&["POST /v1/mcp", "execute_tool order_status"])
        .await;
    let ours = of_trace(&spans, &trace_id);
    let server_span = server_span_of(&ours, "/v1/mcp", &caller_span);
    let tool = one(&ours, "execute_tool order_status");
    assert_eq!(text(tool, "gen_ai.tool.name"), "order_status");
    assert_eq!(text(tool, "warden.call.outcome"), "succeeded");
    assert!(
        ancestors(&ours, tool).contains(&server_span.name),
        "the call is under the server span: {:?}",
        ancestors(&ours, tool)
    );
    let client = one(&ours, "POST");
    assert_eq!(client.kind, SpanKind::Client as i32);
    assert_eq!(client.parent_span_id, tool.span_id);
    let received = endpoint.last();
    assert_eq!(
        received.headers["traceparent"].to_str().unwrap(),
        format!("00-{trace_id}-{}-01", hex(&client.span_id))
    );
    let exported = receiver.exported_text();
    for needle in ["A-1001", "enviado", ENDPOINT_TOKEN, key.as_str()] {
        assert!(
            !exported.iter().any(|e| e.contains(needle)),
            "an exported span holds {needle:?}"
        );
    }
}

/// A random W3C trace id and a caller's span id (hex).
fn caller_context() -> (String, String) {
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let span_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
    (trace_id, span_id)
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_turn_is_its_own_trace_linked_to_the_delivery_that_queued_it(backend: Backend) {
    let db = TestDb::new(backend).await;
    cli_account_with_key(&db, "shop").await;
    register_number(&db).await;
    let receiver = Receiver::start().await;
    let send_api = FakeSendApi::start().await;
    let mut env = platform_env(&send_api);
    env.extend([
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base.clone()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = ServerProcess::start(&db, &env).await;

    let (trace_id, caller_span) = caller_context();
    let body = delivery("34600000009", "wamid.traced-1", "Hola");
    let response = reqwest::Client::new()
        .post(format!("{}/v1/webhooks/platform", server.address))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign(APP_SECRET, &body))
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = send_api.wait_for(1, 30).await;
    let spans = receiver
        .wait_for(&["POST /v1/webhooks/platform", "process platform_message"])
        .await;

    // The webhook request: the caller's child, in the caller's trace.
    let webhook = one(&spans, "POST /v1/webhooks/platform");
    assert_eq!(hex(&webhook.trace_id), trace_id);
    assert_eq!(hex(&webhook.parent_span_id), caller_span);
    // The worker's processing: a root of a trace of its own, linked to a
    // span of the request that queued the message.
    let worker = one(&spans, "process platform_message");
    assert_eq!(worker.kind, SpanKind::Consumer as i32);
    assert!(worker.parent_span_id.is_empty(), "a root: {worker:?}");
    assert_ne!(hex(&worker.trace_id), trace_id, "a trace of its own");
    let links: Vec<(String, String)> = worker
        .links
        .iter()
        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
        .collect();
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0].0, trace_id, "linked to the delivery's trace");
    assert!(
        spans
            .iter()
            .any(|s| hex(&s.trace_id) == trace_id && hex(&s.span_id) == links[0].1),
        "the link names a span of the webhook request: {links:?}"
    );
    // The turn runs in the worker's trace; the send API got its context.
    let turn = spans
        .iter()
        .find(|s| s.name == "invoke_agent" && s.trace_id == worker.trace_id)
        .expect("the platform turn in the worker's trace");
    assert_eq!(text(turn, "warden.channel"), "platform");
    let worker_trace = hex(&worker.trace_id);
    assert!(
        sent[0]
            .traceparent
            .starts_with(&format!("00-{worker_trace}-")),
        "the send API got {:?}, not the worker's trace {worker_trace}",
        sent[0].traceparent
    );
    let exported = receiver.exported_text();
    for needle in ["34600000009", "Hola", TOKEN] {
        assert!(
            !exported.iter().any(|e| e.contains(needle)),
            "an exported span holds {needle:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_execution_carries_its_trace_to_the_verifier_and_the_model() {
    let db = TestDb::new(Backend::Sqlite).await;
    let (integration, action) = forms_integration(&db).await;
    let receiver = Receiver::start().await;
    let model = FakeInference::start(vec![FakeReply::text(GOOD_OUTPUT)]).await;
    let verifier = FakeVerifier::start().await;
    let (model_url, verifier_url) = (model.base_url(), verifier.url());
    let mut env = otel_env(&receiver.base, &model_url);
    env.extend([
        ("WARDEN_CHALLENGE_VERIFY_URL", verifier_url.as_str()),
        ("WARDEN_CHALLENGE_SECRET", fake_verifier::SECRET),
    ]);
    let server = ServerProcess::start(&db, &env).await;

    let (trace_id, caller_span) = caller_context();
    let token = mint(HOST, &action, true);
    let response = reqwest::Client::new()
        .post(format!(
            "{}/v1/prompt-integrations/{integration}/execute",
            server.address
        ))
        .header("origin", ORIGIN)
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&topic("boots", &token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());

    let within = format!("00-{trace_id}-");
    let asked = verifier.traceparents();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].starts_with(&within), "the verifier got {asked:?}");
    let recorded = model.recorded();
    assert_eq!(recorded.len(), 1);
    let sent = recorded[0].headers["traceparent"].to_str().unwrap();
    assert!(sent.starts_with(&within), "the model got {sent}");
    let spans = receiver.wait_for(&["chat fake-model"]).await;
    let chat = one(&spans, "chat fake-model");
    assert_eq!(hex(&chat.trace_id), trace_id);
    assert_eq!(
        attribute(chat, "gen_ai.usage.output_tokens"),
        Some(&AnyValue::IntValue(FAKE_OUTPUT_TOKENS))
    );
    let exported = receiver.exported_text();
    for needle in [
        token.as_str(),
        "MODEL-OUTPUT-MARKER",
        "boots",
        INFERENCE_KEY,
        fake_verifier::SECRET,
    ] {
        assert!(
            !exported.iter().any(|e| e.contains(needle)),
            "an exported span holds {needle:?}"
        );
    }
}

/// A collector that is down, or that takes connections and never answers,
/// never slows a request; what it cannot take is dropped and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_never_fails_a_request_and_dropped_spans_are_counted() {
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    // A collector that accepts connections and never reads or answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hanging_url = format!("http://{}", hanging.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hanging.accept().await {
            held.push(stream);
        }
    });
    for collector in [closed, hanging_url] {
        let db = TestDb::new(Backend::Sqlite).await;
        let key = cli_account_with_key(&db, "lonely").await;
        let model = FakeInference::start(vec![FakeReply::text("Hola")]).await;
        let model_url = model.base_url();
        let mut env = otel_env(&collector, &model_url);
        // A queue of 4 spans: a turn's spans overflow it while the first
        // batch is stuck at the collector.
        env.extend([
            ("OTEL_BSP_MAX_QUEUE_SIZE", "4"),
            ("WARDEN_METRICS_LISTEN", "127.0.0.1:0"),
        ]);
        let server = ServerProcess::start(&db, &env).await;
        let metrics = metrics_address(&server);
        let message = json!({"user_id": "u-1", "message": {"type": "text", "body": "Hola"}});
        for _ in 0..5 {
            let started = std::time::Instant::now();
            let (status, body) = server.api(&key).send_message(&message).await;
            assert_eq!(status, 200, "{collector}: {body}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{collector}: a turn took {:?}",
                started.elapsed()
            );
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (dropped, lines) = scraped(&metrics, "warden_trace_spans_dropped_total").await;
            if dropped >= 1.0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{collector}: no dropped span counted within 30 s: {lines:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
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
