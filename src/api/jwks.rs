//! `GET /.well-known/service/capability-context/v1/jwks.json` (contract 4.1,
//! 5.5): the public keys that verify capability-context signatures — the
//! signing key, one about to sign, and replaced keys still in their grace
//! period. Public halves only.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::AppState;
use super::error::{ApiError, FlatError};
use crate::clock::now_millis;
use crate::signing::keys::{PublicJwk, public_jwk};

/// The public-key set (RFC 7517).
#[derive(Serialize, utoipa::ToSchema)]
pub struct JwkSet {
    keys: Vec<PublicJwk>,
}

/// Where the set is served (contract 4.1).
pub const JWKS_PATH: &str = "/.well-known/service/capability-context/v1/jwks.json";

/// Hosts may cache the set this long; rotation keeps old keys far longer.
const CACHE_CONTROL: &str = "public, max-age=300";

#[utoipa::path(
    get,
    path = "/.well-known/service/capability-context/v1/jwks.json",
    operation_id = "getCapabilityContextKeys",
    tag = "system",
    summary = "Public keys that verify capability-context signatures",
    responses(
        (status = 200, description = "The key set", body = JwkSet, headers(("Cache-Control" = String))),
        (status = 404, description = "No key is published", body = FlatError),
        (status = 503, description = "The database is unavailable", body = FlatError),
    )
)]
pub async fn jwks(State(app): State<AppState>) -> Result<Response, ApiError> {
    let keys = app.store.published_signing_keys(now_millis()).await?;
    if keys.is_empty() {
        return Err(ApiError::NotFound("no capability-context key is published"));
    }
    let set = JwkSet {
        keys: keys.iter().map(public_jwk).collect(),
    };
    let mut response = Json(set).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    Ok(response)
}
