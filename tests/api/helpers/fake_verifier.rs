//! A siteverify-compatible challenge verifier on loopback (Cloudflare
//! Turnstile's protocol): form POST of `secret`, `response`, `remoteip`,
//! `idempotency_key`; JSON `success`, `hostname`, `action`,
//! `challenge_ts`, `error-codes`. Tokens are minted by [`mint`]: the
//! verifier reads the host and action they were issued for from the token
//! itself, and reports truthfully; keeping a token single use is Warden's
//! job, not the verifier's.

use axum::extract::Form;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub const SECRET: &str = "0x-test-challenge-secret";

/// A token the verifier accepts for `host` and `action` (`valid`), or one
/// it refuses.
pub fn mint(host: &str, action: &str, valid: bool) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let verdict = if valid { "ok" } else { "no" };
    format!("{verdict}~{host}~{action}~{n}")
}

pub struct FakeVerifier {
    base: String,
    received: Arc<Mutex<Vec<HashMap<String, String>>>>,
    /// The `traceparent` of each request ("" when none), oldest first.
    traceparents: Arc<Mutex<Vec<String>>>,
    down: Arc<AtomicBool>,
}

impl FakeVerifier {
    pub async fn start() -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let down = Arc::new(AtomicBool::new(false));
        let traceparents = Arc::new(Mutex::new(Vec::new()));
        let (log, is_down, traces) = (received.clone(), down.clone(), traceparents.clone());
        let app = axum::Router::new().route(
            "/siteverify",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, Form(form): Form<HashMap<String, String>>| {
                    let (log, is_down, traces) = (log.clone(), is_down.clone(), traces.clone());
                    async move {
                        let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
                        traces
                            .lock()
                            .unwrap()
                            .push(traceparent.unwrap_or("").to_owned());
                        log.lock().unwrap().push(form.clone());
                        if is_down.load(Ordering::SeqCst) {
                            return (
                                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                                axum::Json(json!({})),
                            );
                        }
                        (axum::http::StatusCode::OK, axum::Json(answer(&form)))
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeVerifier {
            base,
            received,
            traceparents,
            down,
        }
    }

    pub fn url(&self) -> String {
        format!("{}/siteverify", self.base)
    }

    /// Every form received, oldest first.
    pub fn received(&self) -> Vec<HashMap<String, String>> {
        self.received.lock().unwrap().clone()
    }

    /// The `traceparent` each request carried ("" when none), oldest first.
    pub fn traceparents(&self) -> Vec<String> {
        self.traceparents.lock().unwrap().clone()
    }

    /// How many times `token` was asked about.
    pub fn asked_about(&self, token: &str) -> usize {
        self.received()
            .iter()
            .filter(|f| f.get("response").map(String::as_str) == Some(token))
            .count()
    }

    /// Answer 503 from now on (or again normally).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

fn answer(form: &HashMap<String, String>) -> Value {
    if form.get("secret").map(String::as_str) != Some(SECRET) {
        return json!({"success": false, "error-codes": ["invalid-input-secret"]});
    }
    let token = form.get("response").cloned().unwrap_or_default();
    let parts: Vec<&str> = token.splitn(4, '~').collect();
    match parts.as_slice() {
        ["ok", host, action, _] => json!({
            "success": true,
            "hostname": host,
            "action": action,
            "challenge_ts": "2026-11-24T00:00:00Z",
            "error-codes": [],
        }),
        _ => json!({"success": false, "error-codes": ["invalid-input-response"]}),
    }
}
