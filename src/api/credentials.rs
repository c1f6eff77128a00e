//! Endpoint credentials (contract 2.8, 3.2, 4.7): PUT stores or rotates,
//! DELETE revokes. The secret is sealed by the vault and never returned.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, FlatError};
use super::json_body::JsonBody;
use crate::domain::credential::{
    AuthType, CredentialError, CredentialRef, CredentialSpec, CredentialStatus,
    MAX_CREDENTIAL_BODY_BYTES, MAX_SECRET_BYTES,
};
use crate::vault;

/// CredentialResponse.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CredentialResponse {
    #[schema(
        pattern = "^cred_[A-Za-z0-9_-]{3,120}$",
        min_length = 7,
        max_length = 128
    )]
    credential_ref: String,
    status: CredentialStatus,
}

/// The request body (2.8); the handler reads raw JSON
/// (`CredentialSpec::from_json`), this describes it.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"auth_type": "bearer", "secret": "the-endpoint-token"}))]
pub struct CredentialRequest {
    #[schema(value_type = AuthType)]
    auth_type: String,
    /// For `basic`, the pre-encoded Basic value. Never returned.
    #[schema(min_length = 1, max_length = 4096, write_only)]
    secret: String,
    /// Required when `auth_type` is `api_key`.
    #[schema(value_type = Option<crate::domain::credential::ApiKeyHeader>)]
    header_name: Option<String>,
}

/// The reference's pattern (2.8).
const INVALID_REF: &str = "credentialRef must match ^cred_[A-Za-z0-9_-]{3,120}$";

#[utoipa::path(
    put,
    path = "/v1/capability-credentials/{credentialRef}",
    operation_id = "putCapabilityCredential",
    tag = "credentials",
    summary = "Store or rotate an endpoint credential (sealed, never returned)",
    security(("bearer" = [])),
    params(
        ("credentialRef" = String, Path, description = "The credential reference", example = "cred_orders", pattern = "^cred_[A-Za-z0-9_-]{3,120}$", min_length = 7, max_length = 128),
    ),
    request_body(content = CredentialRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Configured", body = CredentialResponse),
        (status = 400, description = "Invalid reference or body", body = FlatError),
        (status = 413, description = "Body or secret too large", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn put_credential(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_ref): Path<String>,
    JsonBody(body): JsonBody<MAX_CREDENTIAL_BODY_BYTES>,
) -> Result<(StatusCode, Json<CredentialResponse>), ApiError> {
    let credential_ref =
        CredentialRef::parse(&raw_ref).ok_or_else(|| ApiError::BadRequest(INVALID_REF.into()))?;
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

#[utoipa::path(
    delete,
    path = "/v1/capability-credentials/{credentialRef}",
    operation_id = "revokeCapabilityCredential",
    tag = "credentials",
    summary = "Revoke an endpoint credential",
    security(("bearer" = [])),
    params(
        ("credentialRef" = String, Path, description = "The credential reference", example = "cred_orders", pattern = "^cred_[A-Za-z0-9_-]{3,120}$", min_length = 7, max_length = 128),
    ),
    responses(
        (status = 200, description = "Revoked", body = CredentialResponse),
        (status = 404, description = "No such credential (a malformed reference names none)", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn delete_credential(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_ref): Path<String>,
) -> Result<Json<CredentialResponse>, ApiError> {
    // DELETE declares no 400: a malformed reference names no credential.
    let credential_ref =
        CredentialRef::parse(&raw_ref).ok_or(ApiError::NotFound("no such credential"))?;
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
