//! `POST /v1/channels/http/messages` (contract 2.1, 2.2, 4.2): one user turn.
//! Errors use the nested shape. A `Client-Event-Id` header (1 to 200
//! visible ASCII characters) makes a retried delivery detectable: the same
//! identifier again is 409 `CONFLICT` (kept 24 hours; released if the turn
//! failed, so the retry of a failed turn runs).

use super::AppState;
use super::auth::TurnCaller;
use super::error::{ApiError, NestedError};
use super::message_body::Inbound;
use crate::agent::response::MessageResponse;
use crate::agent::{TurnChannel, TurnError};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;

/// The message request (2.1) as the document describes it; `Inbound`
/// parses and bounds it (docs/contract-decisions.md).
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"user_id": "user-42", "message": {"type": "text", "body": "Where is my order A-1001?"}}))]
pub struct MessageRequest {
    /// Opaque id of the end user: usage is attributed to them.
    #[schema(min_length = 1, max_length = 128, pattern = "^\\S+$")]
    user_id: Option<String>,
    /// From an earlier response, to continue that conversation.
    #[schema(min_length = 1, max_length = 128, pattern = "^\\S+$")]
    conversation_id: Option<String>,
    message: UserMessage,
    /// Free-form: at most 16 properties, nested at most 4 levels, 8 KiB as JSON.
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Value>,
}

/// The user's message: `{type: "text", body}`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
pub struct UserMessage {
    #[serde(rename = "type")]
    #[schema(value_type = crate::agent::response::MessageType)]
    kind: String,
    /// 1 to 4000 characters; may be empty only beside an image.
    #[schema(max_length = 4000)]
    body: String,
}

/// The multipart form: the request as its `payload` part, and one image.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct MessageMultipart {
    payload: MessageRequest,
    /// JPEG, PNG or WebP, at most 4 MiB.
    #[schema(value_type = Option<String>, format = Binary)]
    image: Option<Vec<u8>>,
}

pub const CLIENT_EVENT_HEADER: &str = "client-event-id";
pub const MAX_CLIENT_EVENT_CHARS: usize = 200;

#[utoipa::path(
    post,
    path = "/v1/channels/http/messages",
    operation_id = "sendHttpMessage",
    tag = "channel",
    summary = "One user turn of the HTTP channel",
    security(("bearer" = [])),
    params(
        ("Client-Event-Id" = Option<String>, Header, description = "Makes a retried delivery detectable: the same id again within 24 hours is 409", min_length = 1, max_length = 200, pattern = "^[\\x21-\\x7e]+$"),
    ),
    request_body(content((MessageRequest = "application/json"), (MessageMultipart = "multipart/form-data"))),
    responses(
        (status = 200, description = "The assistant's answer", body = MessageResponse),
        (status = 405, description = "Wrong method", body = NestedError),
        (status = 409, description = "This Client-Event-Id was already delivered", body = NestedError),
        (status = 413, description = "The body or the image is too large (REQUEST_TOO_LARGE)", body = NestedError),
        (status = 422, description = "Invalid JSON, a body that does not meet the schema, or a conversation_id that names no conversation of this key", body = NestedError),
        (status = 500, description = "Unexpected failure", body = NestedError),
    )
)]
pub async fn send_message(
    State(app): State<AppState>,
    TurnCaller { caller, basis }: TurnCaller,
    headers: HeaderMap,
    Inbound(inbound): Inbound,
) -> Result<Json<MessageResponse>, ApiError> {
    let event_id = client_event_id(&headers)?;
    if let Some(id) = &event_id
        && !app.store.claim_channel_event(&caller.account, id).await?
    {
        return Err(ApiError::Conflict(
            "this client event was already delivered".into(),
        ));
    }
    let turn = app
        .engine
        .turn(TurnChannel::Http, &caller.account, basis, &inbound)
        .await;
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
        // The channel declares no 404: an unknown or foreign conversation_id
        // is a body field that does not validate (docs/contract-decisions.md).
        Err(TurnError::ConversationNotFound) => Err(ApiError::Validation(
            "conversation_id names no conversation of this account".into(),
        )),
        // Nothing of the turn was kept; sending again starts afresh.
        Err(TurnError::UserErased) => Err(ApiError::Conflict(
            "this user's data was erased while the message was answered; nothing was kept".into(),
        )),
        Err(TurnError::Inference(err)) => Err(ApiError::InferenceUnavailable(err.into())),
        Err(TurnError::Store(err)) => Err(err.into()),
        // Only a platform turn carries a lease; never this channel's.
        Err(err @ TurnError::LeaseLost) => Err(ApiError::Internal(err.into())),
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
