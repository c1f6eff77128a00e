//! A host's endpoint that Warden calls, as a host's developers would write
//! it: every request must carry the endpoint's bearer token and a valid
//! signed capability context, or it gets 401 and nothing is read.
//!
//! Two capabilities:
//! - `POST /orders/status` (read-only): `{"order": "A-1001"}` → the order's status;
//! - `POST /orders/cancel/prepare` (`result_handling: host_interaction`):
//!   a just-in-time preparation — a `confirm_operation` for a cancellable
//!   order, `not_found` otherwise. Preparation is not a lock: the host
//!   rechecks everything when the user confirms.

pub mod verify;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::sync::Arc;

pub struct Config {
    /// The token Warden sends (stored in Warden as the capability's credential).
    pub token: String,
    /// Warden's JWK set URL.
    pub jwks_url: String,
    /// This service's origin as Warden calls it (the audience it must see).
    pub origin: String,
}

pub struct Endpoint {
    config: Config,
    keys: verify::KeySet,
}

impl Endpoint {
    pub fn new(config: Config) -> Arc<Self> {
        let keys = verify::KeySet::new(config.jwks_url.clone());
        Arc::new(Endpoint { config, keys })
    }

    pub fn keys(&self) -> &verify::KeySet {
        &self.keys
    }
}

pub fn router(endpoint: Arc<Endpoint>) -> Router {
    Router::new()
        .route("/orders/status", post(order_status))
        .route("/orders/cancel/prepare", post(prepare_cancel))
        .with_state(endpoint)
}

/// Checks the bearer token and the signature; returns the arguments.
async fn authenticate(
    endpoint: &Endpoint,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, Response> {
    let refuse =
        |why: String| (StatusCode::UNAUTHORIZED, Json(json!({"error": why}))).into_response();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if token != Some(endpoint.config.token.as_str()) {
        return Err(refuse("bad bearer token".into()));
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let target_uri = format!(
        "{}{}",
        endpoint.config.origin,
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
    );
    let request = verify::ReceivedRequest {
        method: method.as_str(),
        target_uri: &target_uri,
        header: &header,
        body,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    verify::verify(&request, &endpoint.keys, now, &endpoint.config.origin)
        .await
        .map_err(|e| refuse(e.to_string()))?;
    serde_json::from_slice(body)
        .map_err(|_| (StatusCode::BAD_REQUEST, Json(json!({"error": "JSON body"}))).into_response())
}

async fn order_status(
    State(endpoint): State<Arc<Endpoint>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arguments = match authenticate(&endpoint, &method, &uri, &headers, &body).await {
        Ok(a) => a,
        Err(refused) => return refused,
    };
    match arguments["order"].as_str() {
        Some("A-1001") => Json(json!({"status": "shipped", "lines": [{"sku": "TSHIRT-M", "qty": 2}], "warehouse": "internal"})).into_response(),
        Some(_) => Json(json!({"status": "unknown", "lines": []})).into_response(),
        None => (StatusCode::BAD_REQUEST, Json(json!({"error": "order is required"}))).into_response(),
    }
}

async fn prepare_cancel(
    State(endpoint): State<Arc<Endpoint>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arguments = match authenticate(&endpoint, &method, &uri, &headers, &body).await {
        Ok(a) => a,
        Err(refused) => return refused,
    };
    // Only unshipped orders can be cancelled; anything else is not_found
    // (no matching resource and matching-but-ineligible look the same).
    match arguments["order"].as_str() {
        Some("A-2002") => Json(json!({
            "type": "confirm_operation", "operation": "cancel_order",
            "operation_ref": "op_7f3a9c", "expires_at": "2099-01-01T00:00:00Z",
            "preview": {"title": "Cancel order A-2002", "fields": [{"label": "Order", "value": "A-2002"}, {"label": "Items", "value": "1"}]}
        }))
        .into_response(),
        _ => Json(json!({"type": "not_found"})).into_response(),
    }
}
