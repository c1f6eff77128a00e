//! `GET /health` (contract 2.14): exactly `{status, service}`; 503 when the
//! database does not answer.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::time::Duration;

use super::AppState;
use super::error::ApiError;
use crate::store::StoreError;

pub const SERVICE_NAME: &str = "warden";
const DATABASE_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Serialize)]
pub struct Health {
    status: &'static str,
    service: &'static str,
}

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
