//! Diagnostic settings (contract 2.10, 3.4, 4.6).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::json_body::JsonBody;
use crate::domain::diagnostics::DiagnosticMode;

const MAX_SETTINGS_BYTES: usize = 4 * 1024;

#[derive(Serialize)]
pub struct DiagnosticSettings {
    diagnostic_message_mode: DiagnosticMode,
}

pub async fn get_settings(State(app): State<AppState>, caller: Caller) -> Result<Json<DiagnosticSettings>, ApiError> {
    let mode = app.store.get_diagnostic_mode(&caller.account).await?.unwrap_or_default();
    Ok(Json(DiagnosticSettings { diagnostic_message_mode: mode }))
}

pub async fn put_settings(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<MAX_SETTINGS_BYTES>,
) -> Result<(StatusCode, Json<DiagnosticSettings>), ApiError> {
    let mode = parse_settings(&body).map_err(ApiError::BadRequest)?;
    let created = app.store.put_diagnostic_mode(&caller.account, mode).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(DiagnosticSettings { diagnostic_message_mode: mode })))
}

fn parse_settings(body: &Value) -> Result<DiagnosticMode, String> {
    let object = body.as_object().ok_or("the body must be a JSON object")?;
    if let Some(unknown) = object.keys().find(|k| *k != "diagnostic_message_mode") {
        return Err(format!("unknown property {unknown:?}"));
    }
    let mode = object.get("diagnostic_message_mode").ok_or("diagnostic_message_mode is required")?;
    mode.as_str()
        .and_then(DiagnosticMode::parse)
        .ok_or_else(|| "diagnostic_message_mode must be one of disabled, metadata, text".to_owned())
}
