//! Routes that take an `Idempotency-Key` (import, create, operation results):
//! claim the key with the request's hash, answer a replay or a reuse at
//! once, run the request, and give the key back if the request failed, so a
//! failed request leaves no record behind. The request itself completes the
//! claim inside its own transaction (`store::idempotency::complete_in_tx!`).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::future::Future;

use super::AppState;
use super::error::ApiError;
use crate::domain::account::AccountId;
use crate::domain::idempotency;
use crate::store::idempotency::Claim;

/// The `Idempotency-Key` request header, declared once for the OpenAPI
/// document of every route that takes one; `run` reads and checks it.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// 1 to 200 visible ASCII characters; a repeat with the same body replays the first answer
    #[serde(rename = "Idempotency-Key")]
    #[param(min_length = 1, max_length = 200)]
    pub idempotency_key: String,
}

/// Runs `request` (given the parsed key) under the claimed key.
pub async fn run<F, Fut>(
    app: &AppState,
    account: &AccountId,
    headers: &HeaderMap,
    operation: &str,
    body: &Value,
    request: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    let key = idempotency::parse_key(headers.get("idempotency-key").and_then(|v| v.to_str().ok()))
        .map_err(ApiError::BadRequest)?;
    match app
        .store
        .claim_idempotency_key(account, &key, &idempotency::request_hash(operation, body))
        .await?
    {
        Claim::Fresh => {}
        Claim::Replay { status, body } => return Ok(replay(status, body)),
        Claim::KeyReused => return Err(ApiError::IdempotencyKeyReused),
        Claim::InFlight => {
            return Err(ApiError::Conflict(
                "a request with this Idempotency-Key is in progress".into(),
            ));
        }
    }
    let outcome = request(key.clone()).await;
    if outcome.is_err()
        && let Err(err) = app.store.release_idempotency_key(account, &key).await
    {
        // The claim expires as abandoned; a retry can take it over then.
        tracing::warn!(error = %err, "could not release an idempotency claim");
    }
    outcome
}

/// The stored answer of the first request, marked as a replay.
fn replay(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    response
        .headers_mut()
        .insert("idempotency-replayed", HeaderValue::from_static("true"));
    response
}
