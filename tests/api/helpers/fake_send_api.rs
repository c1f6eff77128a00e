//! A fake of the messaging platform's send API on loopback, speaking its
//! protocol: `POST /{version}/{phone_number_id}/messages` with a bearer
//! token and a JSON text message, answered like the real one. Like a
//! platform that deduplicates, a resend with an `Idempotency-Key` it has
//! already delivered is acknowledged but not delivered twice. It can be
//! made slow (`set_delay`) or held (`hold` / `release`), as a platform
//! under load would be.

use axum::Json;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One reply the fake delivered to a user.
#[derive(Clone, Debug)]
pub struct Delivered {
    pub phone_number_id: String,
    pub authorization: String,
    pub idempotency_key: String,
    /// The W3C trace context it carried ("" when none).
    pub traceparent: String,
    pub body: Value,
    /// When the fake delivered it.
    pub at: Instant,
}

#[derive(Default)]
struct State {
    delivered: Vec<Delivered>,
    keys: HashSet<String>,
    requests: usize,
    /// Statuses to answer, one per request, before delivering again.
    failures: Vec<u16>,
    /// How long each request takes before it is answered.
    delay: Duration,
}

pub struct FakeSendApi {
    base: String,
    state: Arc<Mutex<State>>,
    /// True while requests are held unanswered.
    held: watch::Sender<bool>,
}

impl FakeSendApi {
    pub async fn start() -> Self {
        Self::start_on("127.0.0.1:0").await
    }

    /// On a given address (a restarted fake keeps its port).
    pub async fn start_on(address: &str) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let (held, _) = watch::channel(false);
        let gate = held.clone();
        let app = axum::Router::new().route(
            "/v21.0/{phone_number_id}/messages",
            axum::routing::post(
                move |Path(phone_number_id): Path<String>,
                      headers: HeaderMap,
                      Json(body): Json<Value>| {
                    let state = shared.clone();
                    let mut gate = gate.subscribe();
                    async move {
                        let _ = gate.wait_for(|held| !*held).await;
                        let delay = state.lock().unwrap().delay;
                        tokio::time::sleep(delay).await;
                        answer(&state, phone_number_id, &headers, body)
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let base = format!("http://{}/v21.0", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeSendApi { base, state, held }
    }

    /// Every request takes this long from now on.
    pub fn set_delay(&self, delay: Duration) {
        self.state.lock().unwrap().delay = delay;
    }

    /// Requests wait unanswered until `release`.
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    pub fn release(&self) {
        self.held.send_replace(false);
    }

    /// `http://127.0.0.1:PORT/v21.0`: what WARDEN_PLATFORM_API_URL is set to.
    pub fn base_url(&self) -> String {
        self.base.clone()
    }

    /// Replies delivered so far, oldest first (resends of a delivered key excluded).
    pub fn delivered(&self) -> Vec<Delivered> {
        self.state.lock().unwrap().delivered.clone()
    }

    /// Requests received, resends and refusals included.
    pub fn requests(&self) -> usize {
        self.state.lock().unwrap().requests
    }

    /// The next requests are answered with these statuses, in order.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.state.lock().unwrap().failures = statuses.to_vec();
    }

    /// Waits until `n` replies were delivered (panics after `secs`).
    pub async fn wait_for(&self, n: usize, secs: u64) -> Vec<Delivered> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let delivered = self.delivered();
            if delivered.len() >= n {
                return delivered;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "only {} of {n} replies delivered within {secs} s",
                delivered.len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

fn answer(
    state: &Mutex<State>,
    phone_number_id: String,
    headers: &HeaderMap,
    body: Value,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut state = state.lock().unwrap();
    state.requests += 1;
    if !state.failures.is_empty() {
        let status = state.failures.remove(0);
        let error =
            json!({"error": {"message": "fake failure", "type": "OAuthException", "code": 1}});
        return (StatusCode::from_u16(status).unwrap(), Json(error)).into_response();
    }
    let key = header("idempotency-key");
    let to = body["to"].clone();
    if key.is_empty() || state.keys.insert(key.clone()) {
        state.delivered.push(Delivered {
            phone_number_id,
            authorization: header("authorization"),
            idempotency_key: key.clone(),
            traceparent: header("traceparent"),
            body,
            at: Instant::now(),
        });
    }
    Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": format!("wamid.out.{key}")}]
    }))
    .into_response()
}
