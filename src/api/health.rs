//! `GET /health` (contract 2.14): exactly `{status, service}`; 503 when the
//! database does not answer.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::time::Duration;

use super::AppState;
use super::error::{ApiError, FlatError};
use crate::store::StoreError;

pub const SERVICE_NAME: &str = "warden";
const DATABASE_DEADLINE: Duration = Duration::from_secs(2);

/// The health object (2.14): both fields required, no other properties.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    #[schema(value_type = String, pattern = "^ok$", max_length = 16)]
    status: &'static str,
    #[schema(value_type = String, max_length = 64)]
    service: &'static str,
}

#[utoipa::path(
    get,
    path = "/health",
    operation_id = "getHealth",
    tag = "system",
    responses(
        (status = 200, description = "The service and its database answer", body = Health),
        (status = 400, description = "Bad request", body = FlatError),
        (status = 503, description = "The database does not answer", body = FlatError),
    )
)]
pub async fn health(State(app): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(DATABASE_DEADLINE, app.store.ping()).await {
        Ok(Ok(())) => Ok(Json(Health {
            status: "ok",
            service: SERVICE_NAME,
        })),
        Ok(Err(err)) => Err(ApiError::Unavailable(err)),
        Err(_) => Err(ApiError::Unavailable(StoreError::Timeout)),
    }
}
