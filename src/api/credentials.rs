//! Endpoint credentials (contract 2.8, 3.2, 4.7): PUT stores or rotates,
//! DELETE revokes. The secret is sealed by the vault and never returned.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::json_body::JsonBody;
use crate::domain::credential::{
    CredentialError, CredentialRef, CredentialSpec, CredentialStatus, MAX_CREDENTIAL_BODY_BYTES,
    MAX_SECRET_BYTES,
};
use crate::vault;

/// CredentialResponse.
#[derive(Serialize)]
pub struct CredentialResponse {
    credential_ref: String,
    status: CredentialStatus,
}

fn parse_ref(raw: &str) -> Result<CredentialRef, ApiError> {
    CredentialRef::parse(raw).ok_or_else(|| {
        ApiError::BadRequest("credentialRef must match ^cred_[A-Za-z0-9_-]{3,120}$".into())
    })
}

pub async fn put_credential(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_ref): Path<String>,
    JsonBody(body): JsonBody<MAX_CREDENTIAL_BODY_BYTES>,
) -> Result<(StatusCode, Json<CredentialResponse>), ApiError> {
    let credential_ref = parse_ref(&raw_ref)?;
    let spec = CredentialSpec::from_json(&body).map_err(|err| match err {
        CredentialError::SecretTooLarge => ApiError::PayloadTooLarge {
            limit: MAX_SECRET_BYTES,
        },
        CredentialError::Invalid(msg) => ApiError::BadRequest(msg),
    })?;
    vault::store_credential(
        &app.store,
        &app.keyring,
        &caller.account,
        &credential_ref,
        &spec,
    )
    .await?;
    tracing::info!(
        credential_ref = credential_ref.as_str(),
        auth_type = spec.auth_type.as_str(),
        "credential configured"
    );
    Ok((
        StatusCode::CREATED,
        Json(CredentialResponse {
            credential_ref: credential_ref.as_str().into(),
            status: CredentialStatus::Configured,
        }),
    ))
}

pub async fn delete_credential(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_ref): Path<String>,
) -> Result<Json<CredentialResponse>, ApiError> {
    let credential_ref = parse_ref(&raw_ref)?;
    if !app
        .store
        .revoke_credential(&caller.account, credential_ref.as_str())
        .await?
    {
        return Err(ApiError::NotFound("no such credential"));
    }
    tracing::info!(
        credential_ref = credential_ref.as_str(),
        "credential revoked"
    );
    Ok(Json(CredentialResponse {
        credential_ref: credential_ref.as_str().into(),
        status: CredentialStatus::Revoked,
    }))
}
