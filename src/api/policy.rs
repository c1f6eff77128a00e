//! Agent policy (contract 2.9, 3.3, 4.5): GET, PUT (full replacement), DELETE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::policy::{AgentPolicy, MAX_POLICY_BYTES, PolicyError};
use crate::store::policy::StoredPolicy;

/// AgentPolicyResponse: the validated policy and an informational revision.
#[derive(Serialize)]
pub struct PolicyResponse {
    policy: AgentPolicy,
    revision: i64,
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
