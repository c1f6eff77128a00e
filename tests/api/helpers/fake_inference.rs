//! A scripted OpenAI-compatible chat-completions backend on loopback:
//! records every request it gets and answers from a script (tool calls,
//! text, error statuses, hangs, garbage).

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer of the fake backend.
#[derive(Clone, Debug)]
pub enum FakeReply {
    /// One tool call; `arguments` is sent verbatim (it may be malformed).
    ToolCall { name: String, arguments: String },
    /// Several tool calls in one answer: `(name, raw arguments)`.
    ToolCalls(Vec<(String, String)>),
    /// A plain assistant text.
    Text(String),
    /// This error status with an OpenAI-style JSON error body.
    Status(u16),
    /// Never answers (well past any test's deadline).
    Hang,
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with exactly this JSON body.
    Json(Value),
    /// The inner reply, after a pause (a model that takes its time).
    Delayed(Duration, Box<FakeReply>),
}

impl FakeReply {
    pub fn tool_call(name: &str, arguments: Value) -> Self {
        FakeReply::ToolCall {
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    pub fn text(text: &str) -> Self {
        FakeReply::Text(text.into())
    }
}

/// What the fake received for one call.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Script {
    replies: Vec<FakeReply>,
    next: usize,
}

impl Script {
    /// The next reply; the last one repeats once the script is used up.
    fn take(&mut self) -> Option<FakeReply> {
        let reply = self
            .replies
            .get(self.next)
            .or_else(|| self.replies.last())
            .cloned();
        self.next += 1;
        reply
    }
}

pub struct FakeInference {
    base: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<Script>>,
}

impl FakeInference {
    pub async fn start(replies: Vec<FakeReply>) -> Self {
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(Script { replies, next: 0 }));
        let (log, answers) = (recorded.clone(), script.clone());
        let app = axum::Router::new()
            .route(
                "/v1/chat/completions",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let (log, answers) = (log.clone(), answers.clone());
                    async move {
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        log.lock().unwrap().push(Recorded { headers, body });
                        let reply = answers.lock().unwrap().take();
                        respond(reply).await
                    }
                }),
            )
            .fallback(|| async { error_response(StatusCode::NOT_FOUND) });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeInference {
            base,
            recorded,
            script,
        }
    }

    /// The base URL to configure, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        self.base.clone()
    }

    /// Every request body received, oldest first.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .map(|recorded| recorded.body)
            .collect()
    }

    /// Every request received (headers and body), oldest first.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap().clone()
    }

    /// Replaces the script; the next request gets its first reply.
    pub fn set_script(&self, replies: Vec<FakeReply>) {
        *self.script.lock().unwrap() = Script { replies, next: 0 };
    }
}

async fn respond(reply: Option<FakeReply>) -> Response<Body> {
    let Some(mut reply) = reply else {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR);
    };
    while let FakeReply::Delayed(pause, inner) = reply {
        tokio::time::sleep(pause).await;
        reply = *inner;
    }
    match reply {
        FakeReply::ToolCall { name, arguments } => {
            completion(tool_calls_message(&[(name, arguments)]))
        }
        FakeReply::ToolCalls(calls) => completion(tool_calls_message(&calls)),
        FakeReply::Text(text) => completion(json!({ "role": "assistant", "content": text })),
        FakeReply::Status(status) => {
            error_response(StatusCode::from_u16(status).expect("a valid HTTP status"))
        }
        FakeReply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            error_response(StatusCode::GATEWAY_TIMEOUT)
        }
        FakeReply::Garbage => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Body::from("<html>this is not JSON</html>"))
            .unwrap(),
        FakeReply::Json(body) => json_response(StatusCode::OK, &body),
        FakeReply::Delayed(..) => unreachable!("unwrapped above"),
    }
}

fn tool_calls_message(calls: &[(String, String)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({
                "id": format!("call_{i}"),
                "type": "function",
                "function": { "name": name, "arguments": arguments },
            })
        })
        .collect();
    json!({ "role": "assistant", "content": null, "tool_calls": calls })
}

/// The tokens every answer reports in its `usage` (distinct, so a trace
/// test can tell them apart).
pub const FAKE_INPUT_TOKENS: i64 = 37;
pub const FAKE_OUTPUT_TOKENS: i64 = 11;

/// A chat-completions answer with one choice holding `message`.
fn completion(message: Value) -> Response<Body> {
    let finish_reason = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }],
        "usage": {
            "prompt_tokens": FAKE_INPUT_TOKENS,
            "completion_tokens": FAKE_OUTPUT_TOKENS,
            "total_tokens": FAKE_INPUT_TOKENS + FAKE_OUTPUT_TOKENS,
        },
    });
    json_response(StatusCode::OK, &body)
}

fn error_response(status: StatusCode) -> Response<Body> {
    let body = json!({
        "error": {
            "message": format!("fake backend error {}", status.as_u16()),
            "type": "server_error",
            "code": null,
        }
    });
    json_response(status, &body)
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}
