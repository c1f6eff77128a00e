//! Capability revisions under `If-Match` (contract 3.1, 4.8): PATCH (a
//! complete replacement, judged like a create, state preserved), enable
//! (the credential rechecked) and disable. Each is one compare-and-set of
//! the revision: of two writers with the same `If-Match`, one wins.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::capabilities::{
    CapabilityPath, CapabilityRecord, NOT_FOUND, check_definitions, owned, parse_id,
};
use super::capability_bodies::CapabilityRequest;
use super::error::{ApiError, FlatError};
use super::json_body::JsonBody;
use crate::domain::account::AccountId;
use crate::domain::capability::{
    IfMatchError, LifecycleStatus, MAX_CREATE_BODY_BYTES, PublishRequest, Wrapper, parse_if_match,
};
use crate::store::capabilities::{GuardedWriteError, RevisedDefinition};
use crate::vault;

/// Where a missing or malformed `If-Match` is answered: PATCH declares 400;
/// enable and disable declare none, so there it is the 409 of a revision
/// that is not the current one (docs/contract-decisions.md).
#[derive(Clone, Copy)]
enum IfMatchRefusal {
    BadRequest,
    Conflict,
}

fn if_match(headers: &HeaderMap, refusal: IfMatchRefusal) -> Result<i64, ApiError> {
    parse_if_match(header_str(headers, "if-match")).map_err(|e| {
        let message = match e {
            IfMatchError::Missing => "the If-Match header (the current revision) is required",
            IfMatchError::Malformed => {
                "If-Match must be the current numeric revision (1 to 80 characters)"
            }
        };
        match refusal {
            IfMatchRefusal::BadRequest => ApiError::BadRequest(message.into()),
            IfMatchRefusal::Conflict => ApiError::Conflict(message.into()),
        }
    })
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn guarded_failure(err: GuardedWriteError) -> ApiError {
    match err {
        GuardedWriteError::NotFound => NOT_FOUND,
        GuardedWriteError::StaleRevision { current } => ApiError::Conflict(format!(
            "If-Match does not match the current revision ({current})"
        )),
        GuardedWriteError::AlreadyInState => {
            ApiError::Conflict("the capability is already in that state".into())
        }
        GuardedWriteError::NameTaken => {
            ApiError::Conflict("the account already has a capability of that name".into())
        }
    }
}

#[utoipa::path(
    patch,
    path = "/v1/capabilities/{capabilityId}",
    operation_id = "reviseCapability",
    tag = "capabilities",
    summary = "Replace the definition (state preserved)",
    security(("bearer" = [])),
    params(
        CapabilityPath,
        IfMatchHeader,
    ),
    request_body(content = CapabilityRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The new revision", body = CapabilityRecord),
        (status = 400, description = "Invalid body or definition, or a missing or malformed If-Match", body = FlatError),
        (status = 404, description = "No such capability for this key", body = FlatError),
        (status = 409, description = "If-Match is not the current revision, or the name is taken", body = FlatError),
    )
)]
pub async fn revise_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(CapabilityPath {
        capability_id: raw_id,
    }): Path<CapabilityPath>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_CREATE_BODY_BYTES>,
) -> Result<Json<CapabilityRecord>, ApiError> {
    let id = parse_id(&raw_id)?;
    owned(&app, &caller.account, &id).await?;
    let expected = if_match(&headers, IfMatchRefusal::BadRequest)?;
    let request =
        PublishRequest::from_json(&body, Wrapper::Single).map_err(ApiError::BadRequest)?;
    check_definitions(&app, &caller.account, &request, Wrapper::Single, Some(&id)).await?;
    let submitted = &request.definitions[0];
    let name = submitted.name().unwrap_or_default();
    let row = app
        .store
        .revise_capability(
            &caller.account,
            &id,
            expected,
            &RevisedDefinition {
                domain: &request.domain,
                name,
                definition: &submitted.definition.to_string(),
                credential_ref: submitted.credential_ref(),
            },
        )
        .await?
        .map_err(guarded_failure)?;
    tracing::info!(capability = %row.id, revision = row.revision, "capability revised");
    Ok(Json(CapabilityRecord::from(&row)))
}

#[utoipa::path(
    post,
    path = "/v1/capabilities/{capabilityId}/enable",
    operation_id = "enableCapability",
    tag = "capabilities",
    summary = "Re-enable a disabled capability (credential rechecked)",
    security(("bearer" = [])),
    params(
        CapabilityPath,
        IfMatchHeader,
    ),
    responses(
        (status = 200, description = "Active at a new revision", body = CapabilityRecord),
        (status = 404, description = "No such capability for this key", body = FlatError),
        (status = 409, description = "If-Match missing, malformed or not the current revision; already active; or the credential is not configured", body = FlatError),
    )
)]
pub async fn enable_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(CapabilityPath {
        capability_id: raw_id,
    }): Path<CapabilityPath>,
    headers: HeaderMap,
) -> Result<Json<CapabilityRecord>, ApiError> {
    transition(
        &app,
        &caller.account,
        &raw_id,
        &headers,
        LifecycleStatus::Active,
    )
    .await
}

#[utoipa::path(
    post,
    path = "/v1/capabilities/{capabilityId}/disable",
    operation_id = "disableCapability",
    tag = "capabilities",
    summary = "Disable an active capability",
    security(("bearer" = [])),
    params(
        CapabilityPath,
        IfMatchHeader,
    ),
    responses(
        (status = 200, description = "Disabled at a new revision", body = CapabilityRecord),
        (status = 404, description = "No such capability for this key", body = FlatError),
        (status = 409, description = "If-Match missing, malformed or not the current revision, or already disabled", body = FlatError),
    )
)]
pub async fn disable_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(CapabilityPath {
        capability_id: raw_id,
    }): Path<CapabilityPath>,
    headers: HeaderMap,
) -> Result<Json<CapabilityRecord>, ApiError> {
    transition(
        &app,
        &caller.account,
        &raw_id,
        &headers,
        LifecycleStatus::Disabled,
    )
    .await
}

async fn transition(
    app: &AppState,
    account: &AccountId,
    raw_id: &str,
    headers: &HeaderMap,
    target: LifecycleStatus,
) -> Result<Json<CapabilityRecord>, ApiError> {
    let id = parse_id(raw_id)?;
    let current = owned(app, account, &id).await?;
    let expected = if_match(headers, IfMatchRefusal::Conflict)?;
    if target == LifecycleStatus::Active {
        // Enabling rechecks the credential: a revoked one keeps it disabled.
        let definition: Value =
            serde_json::from_str(&current.definition).map_err(|e| ApiError::Internal(e.into()))?;
        let reference = definition
            .get("auth")
            .and_then(|a| a.get("credential_ref"))
            .and_then(Value::as_str);
        let configured = match reference {
            Some(r) => vault::is_configured(&app.store, account, r).await?,
            None => false,
        };
        if !configured {
            return Err(ApiError::Conflict(format!(
                "the capability's credential {} is not configured; PUT it before enabling",
                reference.unwrap_or("(none)")
            )));
        }
    }
    let row = app
        .store
        .transition_capability(account, &id, expected, target)
        .await?
        .map_err(guarded_failure)?;
    tracing::info!(capability = %row.id, revision = row.revision, status = %row.lifecycle_status, "capability state changed");
    Ok(Json(CapabilityRecord::from(&row)))
}

/// The `If-Match` request header of the revision-guarded routes, declared
/// once for the OpenAPI document; `if_match` reads and checks it.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IfMatchHeader {
    /// The current revision (digits, optionally quoted)
    #[serde(rename = "If-Match")]
    #[param(min_length = 1, max_length = 80)]
    pub if_match: String,
}
