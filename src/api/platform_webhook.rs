//! `GET` and `POST /v1/webhooks/platform` (contract 2.12, 4.3), public:
//! the subscription handshake, and receipt of signed events. Both answer
//! 404 when the channel is not configured. The POST checks the signature
//! over the raw bytes before parsing anything, and does nothing but queue:
//! the turn and the reply happen in the worker (`platform::worker`).

use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::AppState;
use super::error::{ApiError, FlatError};
use crate::platform::inbound;
use crate::platform::queue::{self, ReceiveError, WebhookAnswer};
use crate::platform::webhook::{HandshakeError, Signature, SignatureError};

/// Largest event body accepted (413 beyond); the platform's deliveries are
/// a few kilobytes.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// `Retry-After` of the 503 for a full number: long enough for its workers
/// to drain some of the backlog, short next to the platform's own retries.
pub const QUEUE_FULL_RETRY_AFTER_SECS: u64 = 30;

#[utoipa::path(
    get,
    path = "/v1/webhooks/platform",
    operation_id = "verifyPlatformWebhook",
    tag = "platform",
    summary = "The platform's subscription handshake",
    params(
        ("hub.mode" = String, Query, description = "Must be `subscribe`", max_length = 32),
        ("hub.verify_token" = String, Query, description = "The configured verify token", max_length = 256),
        ("hub.challenge" = String, Query, description = "Echoed back on success", max_length = 2048),
    ),
    responses(
        (status = 200, description = "The challenge, exactly", body = String, content_type = "text/plain"),
        (status = 403, description = "Wrong mode or token, or a missing, repeated or overlong parameter", body = FlatError),
        (status = 404, description = "The channel is not configured on this deployment", body = FlatError),
    )
)]
pub async fn verify_platform_webhook(
    State(app): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let channel = app
        .platform
        .as_ref()
        .ok_or(ApiError::NotFound("no such route"))?;
    match channel.secrets.handshake(query.as_deref().unwrap_or("")) {
        Ok(challenge) => Ok((
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                ),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            challenge,
        )
            .into_response()),
        // The contract declares only 403 for a failed handshake: a missing,
        // repeated or overlong parameter fails it too (the log says which).
        Err(HandshakeError::Invalid(why)) => {
            tracing::info!(reason = %why, "platform webhook handshake refused");
            Err(ApiError::Forbidden("the webhook verification failed"))
        }
        Err(HandshakeError::Refused) => Err(ApiError::Forbidden("the webhook verification failed")),
    }
}

#[utoipa::path(
    post,
    path = "/v1/webhooks/platform",
    operation_id = "receivePlatformWebhook",
    tag = "platform",
    summary = "A signed event delivery from the messaging platform; text messages are queued",
    params(
        ("X-Hub-Signature-256" = String, Header, description = "HMAC-SHA256 of the raw body under the app secret", pattern = "^sha256=[0-9a-f]{64}$"),
    ),
    request_body(content = Object, content_type = "application/json", description = "The platform's event (`entry[].changes[].value`), at most 256 KiB"),
    responses(
        (status = 200, description = "Each message accepted, duplicated or intentionally ignored", body = WebhookAnswer),
        (status = 400, description = "A missing or malformed signature header, or a body that is not a JSON object of the platform's shape", body = FlatError),
        (status = 401, description = "The signature does not match the raw body", body = FlatError),
        (status = 404, description = "No registered phone number, or the channel is not configured", body = FlatError),
        (status = 413, description = "Body over 256 KiB", body = FlatError),
        (status = 503, description = "The database does not answer, or a number's queue is full (what fitted was queued; a retry finds it `duplicated`)", body = FlatError,
            headers(("Retry-After" = u64, description = "Seconds to wait; sent when a number's queue is full"))),
    )
)]
pub async fn receive_platform_webhook(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<WebhookAnswer>, ApiError> {
    let channel = app
        .platform
        .as_ref()
        .ok_or(ApiError::NotFound("no such route"))?;
    let signature = Signature::parse(headers.get(SIGNATURE_HEADER).map(HeaderValue::as_bytes))
        .map_err(|_| {
            ApiError::BadRequest(
                "X-Hub-Signature-256 must be sha256= and 64 lowercase hex digits".into(),
            )
        })?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_WEBHOOK_BYTES as u64) {
        return Err(ApiError::PayloadTooLarge {
            limit: MAX_WEBHOOK_BYTES,
        });
    }
    let bytes = Limited::new(body, MAX_WEBHOOK_BYTES)
        .collect()
        .await
        .map_err(|err| {
            if err.downcast_ref::<LengthLimitError>().is_some() {
                ApiError::PayloadTooLarge {
                    limit: MAX_WEBHOOK_BYTES,
                }
            } else {
                ApiError::BadRequest("the request body could not be read".into())
            }
        })?
        .to_bytes();
    channel
        .secrets
        .verify(&signature, &bytes)
        .map_err(|_: SignatureError| ApiError::SignatureMismatch)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::InvalidJson(
            "the body must be a JSON object".into(),
        ));
    }
    let changes = inbound::parse(value).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let receipt = queue::receive(&app.store, changes, channel.queue_per_number)
        .await
        .map_err(|err| match err {
            ReceiveError::NotRegistered => ApiError::NotFound("the phone number is not registered"),
            ReceiveError::Store(err) => err.into(),
        })?;
    if receipt.answer.status == queue::Outcome::Accepted {
        channel.wake.notify_waiters();
    }
    if receipt.queue_full {
        return Err(ApiError::Overloaded {
            reason: "the phone number's queue is full; retry later",
            retry_after_secs: QUEUE_FULL_RETRY_AFTER_SECS,
        });
    }
    Ok(Json(receipt.answer))
}
