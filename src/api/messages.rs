//! `POST /v1/channels/http/messages` (contract 2.1, 2.2, 4.2): one user turn.
//! Errors use the nested shape. A `Client-Event-Id` header (1 to 200
//! visible ASCII characters) makes a retried delivery detectable: the same
//! identifier again is 409 `CONFLICT` (kept 24 hours; released if the turn
//! failed, so the retry of a failed turn runs).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use crate::agent::TurnError;
use crate::channel::inbound::Inbound;

pub const CLIENT_EVENT_HEADER: &str = "client-event-id";
pub const MAX_CLIENT_EVENT_CHARS: usize = 200;

pub async fn send_message(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Inbound(inbound): Inbound,
) -> Result<Json<Value>, ApiError> {
    let event_id = client_event_id(&headers)?;
    if let Some(id) = &event_id
        && !app.store.claim_channel_event(&caller.account, id).await?
    {
        return Err(ApiError::Conflict(
            "this client event was already delivered".into(),
        ));
    }
    let turn = app.engine.turn(&caller.account, &inbound).await;
    // The image, if any, is dropped with `inbound` here: never stored.
    drop(inbound);
    if turn.is_err()
        && let Some(id) = &event_id
        && let Err(err) = app.store.release_channel_event(&caller.account, id).await
    {
        tracing::warn!(error = %err, "could not release a client event id");
    }
    match turn {
        Ok(response) => Ok(Json(response)),
        Err(TurnError::ConversationNotFound) => Err(ApiError::NotFound("no such conversation")),
        Err(TurnError::Inference(err)) => Err(ApiError::InferenceUnavailable(err.into())),
        Err(TurnError::Store(err)) => Err(err.into()),
    }
}

fn client_event_id(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(CLIENT_EVENT_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    let ok = (1..=MAX_CLIENT_EVENT_CHARS).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_graphic());
    if !ok {
        return Err(ApiError::Validation(format!(
            "Client-Event-Id must be 1 to {MAX_CLIENT_EVENT_CHARS} visible ASCII characters"
        )));
    }
    Ok(Some(text.to_owned()))
}
