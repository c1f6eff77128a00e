//! Diagnostics (contract 2.10, 3.4, 4.6): the settings and the capability-gap report.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, FlatError};
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::diagnostics::{DiagnosticMode, GapKind, GapReason};
use crate::domain::text::check_bounded;
use crate::store::gap_events::GapCursor;

const MAX_SETTINGS_BYTES: usize = 4 * 1024;

/// The settings (2.10); also the body of PUT, which takes no other property.
#[derive(Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"diagnostic_message_mode": "metadata"}))]
pub struct DiagnosticSettings {
    diagnostic_message_mode: DiagnosticMode,
}

/// One unresolved capability-gap event. Fields in the order they were
/// always written (alphabetical).
#[derive(Serialize, utoipa::ToSchema)]
pub struct GapEventView {
    #[serde(skip_serializing_if = "Option::is_none")]
    capability: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_id: Option<String>,
    id: String,
    kind: GapKind,
    /// Only in `text` mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    message_text: Option<String>,
    #[schema(format = DateTime)]
    occurred_at: String,
    /// A diagnostic code; the set may grow, so clients parse it tolerantly
    /// (contract 9).
    #[schema(value_type = String)]
    reason_code: GapReason,
}

/// The report: the mode it was shown in, the events newest first, and the
/// cursor of the next page when this one was full.
#[derive(Serialize, utoipa::ToSchema)]
pub struct GapReport {
    diagnostic_message_mode: DiagnosticMode,
    events: Vec<GapEventView>,
    /// Pass as `before` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    next_before: Option<String>,
    /// Pass as `before_id` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_before_id: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/diagnostics/settings",
    operation_id = "getDiagnosticSettings",
    tag = "diagnostics",
    summary = "The diagnostic message mode",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The settings (`metadata` when never set)", body = DiagnosticSettings),
        (status = 401, description = "Missing or invalid bearer key", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
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

#[utoipa::path(
    put,
    path = "/v1/diagnostics/settings",
    operation_id = "putDiagnosticSettings",
    tag = "diagnostics",
    summary = "Set the diagnostic message mode",
    security(("bearer" = [])),
    request_body(content = DiagnosticSettings, content_type = "application/json"),
    responses(
        (status = 201, description = "First set", body = DiagnosticSettings),
        (status = 200, description = "Replaced", body = DiagnosticSettings),
        (status = 400, description = "Invalid settings", body = FlatError),
        (status = 401, description = "Missing or invalid bearer key", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 413, description = "Body too large", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
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
#[utoipa::path(
    get,
    path = "/v1/diagnostics/capability-gaps",
    operation_id = "listCapabilityGaps",
    tag = "diagnostics",
    summary = "Unresolved capability-gap events, newest first",
    security(("bearer" = [])),
    params(
        ("limit" = Option<i64>, Query, description = "Page size", minimum = 1, maximum = 100),
        ("before" = Option<String>, Query, description = "Cursor: `next_before` of the previous page (RFC 3339, ending in Z); with `before_id`", format = DateTime),
        ("before_id" = Option<String>, Query, description = "Cursor: `next_before_id` of the previous page; with `before`", min_length = 1, max_length = 128),
    ),
    responses(
        (status = 200, description = "The events of this key's account", body = GapReport),
        (status = 400, description = "Invalid pagination", body = FlatError),
        (status = 401, description = "Missing or invalid bearer key", body = FlatError),
        (status = 405, description = "Wrong method", body = FlatError),
        (status = 503, description = "The database or vault is unavailable", body = FlatError),
    )
)]
pub async fn list_capability_gaps(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<GapReport>, ApiError> {
    let page = parse_page(query.as_deref().unwrap_or("")).map_err(ApiError::BadRequest)?;
    let mode = app
        .store
        .get_diagnostic_mode(&caller.account)
        .await?
        .unwrap_or_default();
    let mut report = GapReport {
        diagnostic_message_mode: mode,
        events: Vec::new(),
        next_before: None,
        next_before_id: None,
    };
    if mode == DiagnosticMode::Disabled {
        return Ok(Json(report));
    }
    let events = app
        .store
        .list_gap_events(&caller.account, page.limit, page.before.as_ref())
        .await?;
    // A full page may have more behind it: hand out the cursor of its last event.
    if events.len() as i64 == page.limit
        && let Some(last) = events.last()
    {
        report.next_before = Some(to_rfc3339(last.occurred_at));
        report.next_before_id = Some(last.id.clone());
    }
    report.events = events
        .into_iter()
        .map(|e| GapEventView {
            capability: e.capability,
            conversation_id: e.conversation_id,
            id: e.id,
            kind: e.kind,
            message_text: e.message_text.filter(|_| mode == DiagnosticMode::Text),
            occurred_at: to_rfc3339(e.occurred_at),
            reason_code: e.reason_code,
        })
        .collect();
    Ok(Json(report))
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
            // Also refuses control characters: U+0000 would reach the store.
            check_bounded("before_id", &id, 1, MAX_BEFORE_ID_CHARS)?;
            Some(GapCursor { occurred_at, id })
        }
        _ => return Err("before and before_id go together: give both or neither".into()),
    };
    Ok(Page { limit, before })
}
