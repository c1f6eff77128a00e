//! Agent policy (contract 2.9, 3.3, 4.5): GET, PUT (full replacement), DELETE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, FlatError};
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::policy::{AgentPolicy, MAX_POLICY_BYTES, PolicyError};
use crate::store::policy::StoredPolicy;

/// AgentPolicyResponse: the validated policy and an informational revision.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PolicyResponse {
    policy: AgentPolicy,
    /// Informational: 1 on creation, +1 on every replacement.
    #[schema(minimum = 1)]
    revision: i64,
    #[schema(format = DateTime)]
    updated_at: String,
}

impl From<StoredPolicy> for PolicyResponse {
    fn from(stored: StoredPolicy) -> Self {
        PolicyResponse {
            policy: stored.policy,
            revision: stored.revision,
            updated_at: to_rfc3339(stored.updated_at),
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/agent-policy",
    operation_id = "getAgentPolicy",
    tag = "policy",
    summary = "The account's agent policy",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The policy", body = PolicyResponse),
        (status = 404, description = "No policy is set", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn get_policy(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<PolicyResponse>, ApiError> {
    let stored = app
        .store
        .get_policy(&caller.account)
        .await?
        .ok_or(ApiError::NotFound("no agent policy is set"))?;
    Ok(Json(stored.into()))
}

#[utoipa::path(
    put,
    path = "/v1/agent-policy",
    operation_id = "putAgentPolicy",
    tag = "policy",
    summary = "Replace the agent policy",
    security(("bearer" = [])),
    request_body(content = AgentPolicy, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = PolicyResponse),
        (status = 200, description = "Replaced", body = PolicyResponse),
        (status = 400, description = "INVALID_JSON, POLICY_INVALID or POLICY_EMPTY (the code in both fields; the detail in the `warden-error-detail` header)", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 413, description = "Over 16 KiB", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn put_policy(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<MAX_POLICY_BYTES>,
) -> Result<(StatusCode, Json<PolicyResponse>), ApiError> {
    let policy = AgentPolicy::from_json(&body).map_err(|err| match err {
        PolicyError::Empty => ApiError::PolicyEmpty,
        PolicyError::Invalid(msg) => ApiError::PolicyInvalid(msg),
    })?;
    let stored = app.store.put_policy(&caller.account, &policy).await?;
    let status = if stored.revision == 1 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    tracing::info!(revision = stored.revision, "agent policy stored");
    Ok((status, Json(stored.into())))
}

#[utoipa::path(
    delete,
    path = "/v1/agent-policy",
    operation_id = "deleteAgentPolicy",
    tag = "policy",
    summary = "Remove the agent policy (platform defaults apply)",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No policy is set", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn delete_policy(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<StatusCode, ApiError> {
    if app.store.delete_policy(&caller.account).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("no agent policy is set"))
    }
}
