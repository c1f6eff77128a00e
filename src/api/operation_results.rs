//! `POST /v1/conversations/{conversationId}/operation-results` (contract
//! 2.11, 4.2): the host reports the terminal status of an operation it ran
//! after an interaction. The service never calls the host here; it closes
//! the interaction and appends a deterministic text to the conversation.
//!
//! Order of checks: key (401) → path (400) → body (400, 413) →
//! Idempotency-Key (400; replay, 409 reuse or in flight) → conversation and
//! interaction (404) → operation (400) → closed (409) → expired (410).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, FlatError};
use super::idempotent::{self, IdempotencyKeyHeader};
use super::json_body::JsonBody;
use crate::agent::language::texts;
use crate::agent::new_id;
use crate::agent::response::AssistantMessage;
use crate::clock::now_millis;
use crate::domain::interaction::{InteractionStatus, TerminalStatus};
use crate::domain::language::Language;
use crate::domain::text::check_bounded;
use crate::store::conversations::{CloseOutcome, NewMessage};
use crate::store::idempotency::Completion;

pub const MAX_BODY_BYTES: usize = 8 * 1024;
pub const MAX_CONVERSATION_ID_CHARS: usize = 128;
/// What must never be sent here (contract 2.11): references, mutation
/// arguments, result bodies, user-authored messages.
const FORBIDDEN_FIELDS: [&str; 14] = [
    "operation_ref",
    "selection_ref",
    "option_ref",
    "arguments",
    "mutation",
    "parameters",
    "result",
    "results",
    "data",
    "body",
    "message",
    "messages",
    "text",
    "user_message",
];

/// HostOperationResultResponse: the report as accepted and the
/// deterministic text appended to the conversation. Fields in the order
/// they were always written (alphabetical).
#[derive(Serialize, utoipa::ToSchema)]
pub struct OperationResultResponse {
    conversation_id: String,
    interaction_id: String,
    message: AssistantMessage,
    operation: String,
    status: InteractionStatus,
}

// As `parse_report` reads it (each refusal located, operation references
// and results refused by name); the document describes the same type.
/// The request body (2.11): exactly these three fields.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = OperationResultRequest,
    example = json!({"interaction_id": "int_0123456789abcdef", "operation": "change_address", "status": "succeeded"})
)]
struct Report {
    #[schema(min_length = 1, max_length = 128)]
    interaction_id: String,
    #[schema(min_length = 1, max_length = 64)]
    operation: String,
    #[schema(value_type = TerminalStatus)]
    status: InteractionStatus,
}

fn parse_report(body: &Value) -> Result<Report, ApiError> {
    let bad = |m: String| ApiError::BadRequest(m);
    let object = body
        .as_object()
        .ok_or_else(|| bad("the body must be a JSON object".into()))?;
    for key in object.keys() {
        if FORBIDDEN_FIELDS.contains(&key.as_str()) {
            return Err(bad(format!(
                "{key:?} must not be sent: report only interaction_id, operation and status"
            )));
        }
        if !["interaction_id", "operation", "status"].contains(&key.as_str()) {
            return Err(bad(format!("unknown property {key:?}")));
        }
    }
    let field = |name: &str, max: usize| -> Result<String, ApiError> {
        let text = object
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{name} is required and must be a string")))?;
        check_bounded(name, text, 1, max).map_err(bad)?;
        Ok(text.to_owned())
    };
    let interaction_id = field("interaction_id", 128)?;
    let operation = field("operation", 64)?;
    let status = field("status", 32)?;
    let status = InteractionStatus::parse_terminal(&status).ok_or_else(|| {
        let terminal: Vec<&str> = InteractionStatus::terminal().map(|s| s.as_str()).collect();
        bad(format!("status must be one of {}", terminal.join(", ")))
    })?;
    Ok(Report {
        interaction_id,
        operation,
        status,
    })
}

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversationId}/operation-results",
    operation_id = "reportHostOperationResult",
    tag = "channel",
    summary = "The host reports the terminal status of an interaction's operation",
    security(("bearer" = [])),
    params(
        ("conversationId" = String, Path, description = "The conversation of the interaction", min_length = 1, max_length = 128),
        IdempotencyKeyHeader,
    ),
    request_body(content = Report, content_type = "application/json"),
    responses(
        (status = 200, description = "Accepted (or the replay of an earlier report with the same key)", body = OperationResultResponse, headers(("Idempotency-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key"))),
        (status = 400, description = "Invalid body (forbidden or unknown fields, status, operation) or a missing or malformed Idempotency-Key", body = FlatError),
        (status = 404, description = "No such conversation or interaction for this key", body = FlatError),
        (status = 409, description = "The interaction is already closed, the key is in flight, or it was used with another request (IDEMPOTENCY_KEY_REUSED)", body = FlatError),
        (status = 410, description = "The interaction has expired", body = FlatError),
        (status = 413, description = "Body too large", body = FlatError),
    )
)]
pub async fn report_operation_result(
    State(app): State<AppState>,
    caller: Caller,
    Path(conversation_id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_BODY_BYTES>,
) -> Result<Response, ApiError> {
    check_bounded(
        "conversationId",
        &conversation_id,
        1,
        MAX_CONVERSATION_ID_CHARS,
    )
    .map_err(ApiError::BadRequest)?;
    let report = parse_report(&body)?;
    let account = &caller.account;
    let operation = format!("POST /v1/conversations/{conversation_id}/operation-results");
    let store = app.store.clone();
    idempotent::run(&app, account, &headers, &operation, &body, |key| async move {
        let conversation = store
            .find_conversation(account, &conversation_id)
            .await?
            .ok_or(ApiError::NotFound("no such conversation"))?;
        let interaction = store
            .find_interaction(&conversation, &report.interaction_id)
            .await?
            .ok_or(ApiError::NotFound("no such interaction in this conversation"))?;
        if interaction.operation != report.operation {
            return Err(ApiError::BadRequest(
                "operation does not name this interaction's operation".into(),
            ));
        }
        if interaction.status != InteractionStatus::Pending {
            return Err(ApiError::Conflict(format!(
                "the interaction is already closed ({})",
                interaction.status
            )));
        }
        if interaction.expires_at <= now_millis() {
            return Err(ApiError::Gone("the interaction has expired".into()));
        }
        let message_id = new_id("msg_");
        // The conversation's own language (Spanish, the default, for one
        // with no text message yet or older than the language column).
        let language = conversation.language().unwrap_or(Language::Spanish);
        let text = texts::operation_reported(language, report.status);
        // Stored as text: a replay answers these very bytes.
        let response = serde_json::to_string(&OperationResultResponse {
            conversation_id: conversation_id.clone(),
            interaction_id: report.interaction_id.clone(),
            message: AssistantMessage::text(message_id.clone(), text.to_owned()),
            operation: report.operation.clone(),
            status: report.status,
        })
        .map_err(|e| ApiError::Internal(e.into()))?;
        let completion = Completion {
            key: &key,
            status: StatusCode::OK.as_u16(),
            body: &response,
        };
        let message = NewMessage {
            id: &message_id,
            body: text,
            metadata: None,
        };
        match store
            .close_interaction(account, &interaction, report.status, &message, &completion)
            .await?
        {
            CloseOutcome::Closed => {}
            CloseOutcome::AlreadyClosed => {
                return Err(ApiError::Conflict("the interaction is already closed".into()));
            }
            CloseOutcome::ConversationGone => {
                return Err(ApiError::NotFound("no such conversation"));
            }
        }
        tracing::info!(interaction = %report.interaction_id, status = %report.status, "host operation result recorded");
        Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], response).into_response())
    })
    .await
}
