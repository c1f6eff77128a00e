//! `GET /.well-known/service/capability-context/v1/jwks.json` (contract 4.1,
//! 5.5): the public keys that verify capability-context signatures — the
//! signing key, one about to sign, and replaced keys still in their grace
//! period. Public halves only.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use crate::clock::now_millis;
use crate::signing::keys::public_jwk;

/// Hosts may cache the set this long; rotation keeps old keys far longer.
const CACHE_CONTROL: &str = "public, max-age=300";

pub async fn jwks(State(app): State<AppState>) -> Result<Response, ApiError> {
    let keys = app.store.published_signing_keys(now_millis()).await?;
    if keys.is_empty() {
        return Err(ApiError::NotFound("no capability-context key is published"));
    }
    let set = json!({"keys": keys.iter().map(public_jwk).collect::<Vec<_>>()});
    let mut response = Json(set).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    Ok(response)
}
