//! Diagnostics (contract 2.10, 3.4, 4.6): the settings and the capability-gap report.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::diagnostics::DiagnosticMode;
use crate::store::gap_events::GapCursor;

const MAX_SETTINGS_BYTES: usize = 4 * 1024;

#[derive(Serialize)]
pub struct DiagnosticSettings {
    diagnostic_message_mode: DiagnosticMode,
}

pub async fn get_settings(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<DiagnosticSettings>, ApiError> {
    let mode = app
        .store
        .get_diagnostic_mode(&caller.account)
        .await?
        .unwrap_or_default();
    Ok(Json(DiagnosticSettings {
        diagnostic_message_mode: mode,
    }))
}

pub async fn put_settings(
    State(app): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody<MAX_SETTINGS_BYTES>,
) -> Result<(StatusCode, Json<DiagnosticSettings>), ApiError> {
    let mode = parse_settings(&body).map_err(ApiError::BadRequest)?;
    let created = app.store.put_diagnostic_mode(&caller.account, mode).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(DiagnosticSettings {
            diagnostic_message_mode: mode,
        }),
    ))
}

fn parse_settings(body: &Value) -> Result<DiagnosticMode, String> {
    let object = body.as_object().ok_or("the body must be a JSON object")?;
    if let Some(unknown) = object.keys().find(|k| *k != "diagnostic_message_mode") {
        return Err(format!("unknown property {unknown:?}"));
    }
    let mode = object
        .get("diagnostic_message_mode")
        .ok_or("diagnostic_message_mode is required")?;
    mode.as_str()
        .and_then(DiagnosticMode::parse)
        .ok_or_else(|| "diagnostic_message_mode must be one of disabled, metadata, text".to_owned())
}

const DEFAULT_PAGE: i64 = 50;
const MAX_PAGE: i64 = 100;
const MAX_BEFORE_ID_CHARS: usize = 128;

/// `GET /v1/diagnostics/capability-gaps`: unresolved gap events of the
/// account, newest first, shown as its diagnostic mode allows.
pub async fn list_capability_gaps(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let page = parse_page(query.as_deref().unwrap_or("")).map_err(ApiError::BadRequest)?;
    let mode = app
        .store
        .get_diagnostic_mode(&caller.account)
        .await?
        .unwrap_or_default();
    if mode == DiagnosticMode::Disabled {
        return Ok(Json(json!({"diagnostic_message_mode": mode, "events": []})));
    }
    let events = app
        .store
        .list_gap_events(&caller.account, page.limit, page.before.as_ref())
        .await?;
    let items: Vec<Value> = events
        .iter()
        .map(|e| {
            let mut item = json!({"id": e.id, "kind": e.kind, "reason_code": e.reason_code, "occurred_at": to_rfc3339(e.occurred_at)});
            if let Some(c) = &e.conversation_id {
                item["conversation_id"] = json!(c);
            }
            if let Some(c) = &e.capability {
                item["capability"] = json!(c);
            }
            if let (DiagnosticMode::Text, Some(text)) = (mode, &e.message_text) {
                item["message_text"] = json!(text);
            }
            item
        })
        .collect();
    let mut body = json!({"diagnostic_message_mode": mode, "events": items});
    // A full page may have more behind it: hand out the cursor of its last event.
    if events.len() as i64 == page.limit
        && let Some(last) = events.last()
    {
        body["next_before"] = json!(to_rfc3339(last.occurred_at));
        body["next_before_id"] = json!(last.id);
    }
    Ok(Json(body))
}

struct Page {
    limit: i64,
    before: Option<GapCursor>,
}

fn parse_page(query: &str) -> Result<Page, String> {
    let (mut limit, mut before, mut before_id) = (None, None, None);
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match name.as_ref() {
            "limit" => &mut limit,
            "before" => &mut before,
            "before_id" => &mut before_id,
            other => return Err(format!("unknown query parameter {other:?}")),
        };
        if slot.replace(value.into_owned()).is_some() {
            return Err(format!("the query parameter {name:?} is given twice"));
        }
    }
    let limit = match limit {
        None => DEFAULT_PAGE,
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|l| (1..=MAX_PAGE).contains(l))
            .ok_or_else(|| format!("limit must be an integer from 1 to {MAX_PAGE}"))?,
    };
    let before = match (before, before_id) {
        (None, None) => None,
        (Some(at), Some(id)) => {
            let occurred_at = crate::clock::parse_rfc3339_utc(&at)
                .ok_or("before must be an RFC 3339 date-time ending in Z")?;
            if id.is_empty() || id.chars().count() > MAX_BEFORE_ID_CHARS {
                return Err(format!(
                    "before_id must be 1 to {MAX_BEFORE_ID_CHARS} characters"
                ));
            }
            Some(GapCursor { occurred_at, id })
        }
        _ => return Err("before and before_id go together: give both or neither".into()),
    };
    Ok(Page { limit, before })
}
