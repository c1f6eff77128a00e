//! A host's endpoint that Warden calls, as a host's developers would write
//! it: every request must carry the endpoint's bearer token and a valid
//! signed capability context, or it gets 401 and nothing is read.
//!
//! Three capabilities:
//! - `POST /orders/status` (read-only): `{"order": "A-1001"}` → the order's status;
//! - `POST /orders/cancel/prepare` (`result_handling: host_interaction`):
//!   a just-in-time preparation — a `confirm_operation` for a cancellable
//!   order, `not_found` otherwise;
//! - `POST /orders/prepare-address-change` (`host_interaction`): the same
//!   for changing an order's delivery address, with a fresh opaque
//!   `operation_ref` and an `expires_at` fifteen minutes ahead.
//!
//! Preparation is not a lock: the host rechecks authorization, state and
//! idempotency when the user confirms.

pub mod verify;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a prepared address change stays confirmable.
pub const PREPARATION_TTL_SECS: i64 = 15 * 60;

pub struct Config {
    /// The token Warden sends (stored in Warden as the capability's credential).
    pub token: String,
    /// Warden's JWK set URL.
    pub jwks_url: String,
    /// This service's origin as Warden calls it (the audience it must see).
    pub origin: String,
}

impl Config {
    /// The address to listen on and the settings, from the environment:
    /// HOST_ENDPOINT_LISTEN (default 127.0.0.1:9090), HOST_ENDPOINT_TOKEN
    /// (required), WARDEN_JWKS_URL (default Warden's on 127.0.0.1:8080),
    /// HOST_ENDPOINT_ORIGIN (default `http://{listen}`).
    pub fn from_env() -> (String, Config) {
        let listen =
            std::env::var("HOST_ENDPOINT_LISTEN").unwrap_or_else(|_| "127.0.0.1:9090".into());
        let config = Config {
            token: std::env::var("HOST_ENDPOINT_TOKEN")
                .expect("set HOST_ENDPOINT_TOKEN: the token stored in Warden as the credential"),
            jwks_url: std::env::var("WARDEN_JWKS_URL").unwrap_or_else(|_| {
                "http://127.0.0.1:8080/.well-known/service/capability-context/v1/jwks.json".into()
            }),
            origin: std::env::var("HOST_ENDPOINT_ORIGIN")
                .unwrap_or_else(|_| format!("http://{listen}")),
        };
        (listen, config)
    }
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
        .route(
            "/orders/prepare-address-change",
            post(prepare_address_change),
        )
        .with_state(endpoint)
}

/// The JSON arguments of a request whose bearer token and signed capability
/// context both checked out; extracting it refuses anything else with 401.
struct Verified(Value);

impl FromRequest<Arc<Endpoint>> for Verified {
    type Rejection = Response;

    async fn from_request(req: Request, endpoint: &Arc<Endpoint>) -> Result<Self, Response> {
        let (parts, body) = req.into_parts();
        // The `Bytes` extractor, so the router's body limit still applies.
        let body = Bytes::from_request(Request::from_parts(parts.clone(), body), endpoint)
            .await
            .map_err(IntoResponse::into_response)?;
        authenticate(endpoint, &parts.method, &parts.uri, &parts.headers, &body)
            .await
            .map(Verified)
    }
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
    let now = unix_now();
    verify::verify(&request, &endpoint.keys, now, &endpoint.config.origin)
        .await
        .map_err(|e| refuse(e.to_string()))?;
    serde_json::from_slice(body)
        .map_err(|_| (StatusCode::BAD_REQUEST, Json(json!({"error": "JSON body"}))).into_response())
}

async fn order_status(Verified(arguments): Verified) -> Response {
    match arguments["order"].as_str() {
        // `warehouse` is internal: a capability that does not declare it
        // never lets it reach the conversation (Warden prunes it).
        Some("A-1001") => Json(json!({"status": "shipped", "carrier": "Correos", "lines": [{"sku": "TSHIRT-M", "qty": 2}], "warehouse": "internal"})).into_response(),
        Some(_) => Json(json!({"status": "unknown", "lines": []})).into_response(),
        None => (StatusCode::BAD_REQUEST, Json(json!({"error": "order is required"}))).into_response(),
    }
}

async fn prepare_cancel(Verified(arguments): Verified) -> Response {
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

async fn prepare_address_change(Verified(arguments): Verified) -> Response {
    // A real host would look the order up for the user named in the
    // verified capability context (`usr`) and check it is still editable.
    match arguments["order"].as_str() {
        Some(order @ "A-1001") => {
            let now = unix_now();
            Json(json!({
                "type": "confirm_operation", "operation": "change_address",
                "operation_ref": operation_ref(order), "expires_at": rfc3339(now + PREPARATION_TTL_SECS),
                "preview": {"title": format!("Cambiar la dirección de envío del pedido {order}"), "fields": [
                    {"label": "Pedido", "value": order},
                    {"label": "Dirección actual", "value": "Calle Mayor 1, 28013 Madrid"},
                    {"label": "Transportista", "value": "Correos"}
                ]}
            }))
            .into_response()
        }
        _ => Json(json!({"type": "not_found"})).into_response(),
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An opaque, unguessable-enough reference to the prepared operation: the
/// host's own handle, which Warden hands back to the host only.
fn operation_ref(order: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let digest = Sha256::digest(format!("{order}:{nanos}:{}", std::process::id()));
    format!(
        "addrchg_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..16])
    )
}

/// Unix seconds as RFC 3339 in UTC (`2025-01-31T12:00:00Z`).
pub fn rfc3339(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs % 3_600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(super::rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }
}
