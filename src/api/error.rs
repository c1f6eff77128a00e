//! Every error the API answers, and the one place that turns it into the
//! contract's bodies (section 7).
//!
//! Handlers return [`ApiError`]. Its response carries only a status and an
//! [`ErrorInfo`] extension; the [`shape_errors`] middleware, which sees the
//! request path, renders the body in the shape of the route family:
//! - flat `{"error": …, "code": …}` on management routes, health and webhooks;
//! - nested `{"error": {"code": …, "message": …}}` on the HTTP channel and
//!   prompt integrations.
//!
//! Responses produced by the framework itself (unknown route, wrong method,
//! a panic) get the same treatment, so no route ever answers plain text or HTML.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::domain::closed_set::closed_set;
use crate::store::StoreError;

closed_set! {
    /// Every error code the API answers (contract section 7).
    pub enum ErrorCode {
        BadRequest = "BAD_REQUEST",
        InvalidJson = "INVALID_JSON",
        PolicyInvalid = "POLICY_INVALID",
        PolicyEmpty = "POLICY_EMPTY",
        Unauthorized = "UNAUTHORIZED",
        Forbidden = "FORBIDDEN",
        NotFound = "NOT_FOUND",
        MethodNotAllowed = "METHOD_NOT_ALLOWED",
        Conflict = "CONFLICT",
        IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED",
        Gone = "GONE",
        PayloadTooLarge = "PAYLOAD_TOO_LARGE",
        RequestTooLarge = "REQUEST_TOO_LARGE",
        ValidationError = "VALIDATION_ERROR",
        OriginDenied = "ORIGIN_DENIED",
        ChallengeInvalid = "CHALLENGE_INVALID",
        IntegrationDisabled = "INTEGRATION_DISABLED",
        RateLimited = "RATE_LIMITED",
        DailyQuotaExceeded = "DAILY_QUOTA_EXCEEDED",
        InternalError = "INTERNAL_ERROR",
        ModelOutputInvalid = "MODEL_OUTPUT_INVALID",
        ServiceUnavailable = "SERVICE_UNAVAILABLE",
        InferenceUnavailable = "INFERENCE_UNAVAILABLE",
    }
}

/// A located rule violation of a submitted document (a 400's `violations`,
/// a failed contract test's `violations`). Fields in the order they were
/// always written (alphabetical).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Violation {
    /// The definition's `name`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// The definition's index in an import's `capabilities`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability_index: Option<usize>,
    pub message: String,
    /// JSON pointer into the request body.
    pub pointer: String,
    /// A stable rule id.
    pub rule: String,
}

impl Violation {
    pub fn new(pointer: String, rule: impl Into<String>, message: String) -> Self {
        Violation {
            capability: None,
            capability_index: None,
            message,
            pointer,
            rule: rule.into(),
        }
    }
}

/// The flat error body (section 7.1): management routes, health, the key
/// set, webhooks. `error` holds the code itself for `INVALID_JSON`,
/// `POLICY_INVALID` and `POLICY_EMPTY`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct FlatError {
    pub code: ErrorCode,
    pub error: String,
    /// Every rule violation of a rejected document (400 `BAD_REQUEST`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<Violation>>,
}

/// The nested error body (section 7.2): the HTTP channel and prompt integrations.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NestedError {
    pub error: NestedErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct NestedErrorDetail {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("missing or invalid bearer key")]
    Unauthorized,
    #[error("{0}")]
    NotFound(&'static str),
    /// A public route's own check refused the caller (the webhook handshake).
    #[error("{0}")]
    Forbidden(&'static str),
    /// `X-Hub-Signature-256` is well formed but not the body's HMAC.
    #[error("the webhook signature does not match the body")]
    SignatureMismatch,
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    InvalidJson(String),
    #[error("{0}")]
    PolicyInvalid(String),
    #[error("the policy must set instructions or allowed_topics")]
    PolicyEmpty,
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// Rule violations of a submitted document, each with its location.
    #[error("{message}")]
    Violations {
        message: String,
        violations: Vec<Violation>,
    },
    #[error("{0}")]
    Conflict(String),
    /// The body does not meet the schema (nested routes: 422).
    #[error("{0}")]
    Validation(String),
    #[error("the Idempotency-Key was already used with a different request")]
    IdempotencyKeyReused,
    /// The resource existed but is no longer usable (an expired interaction).
    #[error("{0}")]
    Gone(String),
    /// The inference backend is down or answered garbage.
    #[error("the inference backend is unavailable")]
    InferenceUnavailable(#[source] anyhow::Error),
    #[error("the policy sandbox failed")]
    Sandbox(#[source] anyhow::Error),
    #[error("the service is temporarily unavailable")]
    Unavailable(#[source] StoreError),
    /// The request outlived the server's whole-request deadline.
    #[error("the request did not finish in time; retry later")]
    DeadlineElapsed,
    /// Refused for lack of room, before any work started (a `Retry-After`
    /// comes with it): the server or the account has as much work in
    /// progress as it may (`api::admission`), or a platform number holds
    /// its cap of unfinished messages (what fitted was queued). Back-pressure
    /// working, not a failure: not logged as an error.
    #[error("{reason}")]
    Overloaded {
        reason: &'static str,
        retry_after_secs: u64,
    },
    /// A refusal of the prompt-integration route (contract 7's table).
    #[error("{message}")]
    Prompt {
        refusal: PromptRefusal,
        message: String,
    },
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// The prompt-integration route's own refusals, each with its status and
/// code (contract 7, prompt-integration codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptRefusal {
    IntegrationDisabled,
    OriginDenied,
    RateLimited,
    RequestTooLarge,
    ChallengeInvalid,
    DailyQuotaExceeded,
    ModelOutputInvalid,
    /// The challenge verifier is down or not configured.
    VerifierUnavailable,
}

impl PromptRefusal {
    pub fn status_and_code(self) -> (StatusCode, ErrorCode) {
        match self {
            PromptRefusal::IntegrationDisabled => {
                (StatusCode::NOT_FOUND, ErrorCode::IntegrationDisabled)
            }
            PromptRefusal::OriginDenied => (StatusCode::FORBIDDEN, ErrorCode::OriginDenied),
            PromptRefusal::RateLimited => (StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited),
            PromptRefusal::RequestTooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::RequestTooLarge)
            }
            PromptRefusal::ChallengeInvalid => (StatusCode::FORBIDDEN, ErrorCode::ChallengeInvalid),
            PromptRefusal::DailyQuotaExceeded => {
                (StatusCode::TOO_MANY_REQUESTS, ErrorCode::DailyQuotaExceeded)
            }
            PromptRefusal::ModelOutputInvalid => {
                (StatusCode::BAD_GATEWAY, ErrorCode::ModelOutputInvalid)
            }
            PromptRefusal::VerifierUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ServiceUnavailable,
            ),
        }
    }
}

impl ApiError {
    pub fn prompt(refusal: PromptRefusal, message: impl Into<String>) -> Self {
        ApiError::Prompt {
            refusal,
            message: message.into(),
        }
    }
}

/// What [`shape_errors`] needs to render an error body.
#[derive(Clone, Debug)]
pub struct ErrorInfo {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// Located rule violations, rendered as a `violations` array.
    pub violations: Option<Vec<Violation>>,
}

/// Codes whose flat body holds the code in both fields (contract section 7);
/// their human-readable detail travels in the `warden-error-detail` header.
const CODE_ONLY: [ErrorCode; 3] = [
    ErrorCode::InvalidJson,
    ErrorCode::PolicyInvalid,
    ErrorCode::PolicyEmpty,
];
static DETAIL_HEADER: HeaderName = HeaderName::from_static("warden-error-detail");

impl ApiError {
    /// The contract's error code of this error (a closed set of words).
    pub fn code(&self) -> ErrorCode {
        self.info().code
    }

    fn info(&self) -> ErrorInfo {
        let (status, code) = match self {
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::SignatureMismatch => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
            ApiError::InvalidJson(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidJson),
            ApiError::PolicyInvalid(_) => (StatusCode::BAD_REQUEST, ErrorCode::PolicyInvalid),
            ApiError::PolicyEmpty => (StatusCode::BAD_REQUEST, ErrorCode::PolicyEmpty),
            ApiError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge)
            }
            ApiError::Violations { .. } => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, ErrorCode::Conflict),
            ApiError::Validation(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::ValidationError)
            }
            ApiError::IdempotencyKeyReused => {
                (StatusCode::CONFLICT, ErrorCode::IdempotencyKeyReused)
            }
            ApiError::Gone(_) => (StatusCode::GONE, ErrorCode::Gone),
            ApiError::InferenceUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::InferenceUnavailable,
            ),
            ApiError::Sandbox(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError),
            ApiError::Unavailable(_) | ApiError::DeadlineElapsed | ApiError::Overloaded { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::ServiceUnavailable,
            ),
            ApiError::Prompt { refusal, .. } => refusal.status_and_code(),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError),
        };
        let violations = match self {
            ApiError::Violations { violations, .. } => Some(violations.clone()),
            _ => None,
        };
        ErrorInfo {
            status,
            code,
            message: self.to_string(),
            violations,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        if err.is_unavailable() {
            ApiError::Unavailable(err)
        } else {
            ApiError::Internal(err.into())
        }
    }
}

impl From<crate::sandbox::SandboxError> for ApiError {
    fn from(err: crate::sandbox::SandboxError) -> Self {
        match err {
            crate::sandbox::SandboxError::InputTooLarge { limit, .. } => {
                ApiError::PayloadTooLarge { limit }
            }
            fault => ApiError::Sandbox(anyhow::anyhow!("{} ({})", fault, fault.code())),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let info = self.info();
        // A bad webhook signature is a 401 with no bearer scheme to offer.
        let bearer = !matches!(self, ApiError::SignatureMismatch);
        let retry_after = match self {
            ApiError::Overloaded {
                retry_after_secs, ..
            } => Some(retry_after_secs),
            _ => None,
        };
        if info.status.is_server_error() && retry_after.is_none() {
            // The cause chain is for the operator; the client gets the safe message.
            tracing::error!(code = info.code.as_str(), error = ?anyhow::Error::new(self), "request failed");
        } else {
            tracing::debug!(code = info.code.as_str(), message = %info.message, "request refused");
        }
        let mut response = info.status.into_response();
        if info.status == StatusCode::UNAUTHORIZED && bearer {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response.extensions_mut().insert(info);
        response
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorShape {
    Flat,
    Nested,
    /// `/v1/mcp`: a JSON-RPC error response without an id, as MCP's
    /// transport allows for what is refused before a message is read.
    JsonRpc,
}

impl ErrorShape {
    pub fn for_path(path: &str) -> Self {
        if path.starts_with("/v1/channels/") || path.starts_with("/v1/prompt-integrations/") {
            ErrorShape::Nested
        } else if path == "/v1/mcp" {
            ErrorShape::JsonRpc
        } else {
            ErrorShape::Flat
        }
    }
}

/// Marks a response whose body is already the protocol's own error answer
/// (MCP's JSON-RPC error, with the request's id): [`shape_errors`] leaves it.
#[derive(Clone, Copy, Debug)]
pub struct ProtocolAnswer;

/// Middleware: gives every error response the body of its route family.
pub async fn shape_errors(request: Request, next: Next) -> Response {
    let shape = ErrorShape::for_path(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<ProtocolAnswer>().is_some()
    {
        return response;
    }
    let info = response
        .extensions()
        .get::<ErrorInfo>()
        .cloned()
        .unwrap_or_else(|| framework_error(status));
    let (mut parts, _) = response.into_parts();
    let (status, body, detail) = render(&info, shape);
    parts.status = status;
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Some(detail) = detail {
        parts.headers.insert(DETAIL_HEADER.clone(), detail);
    }
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Errors raised by axum or tower rather than a handler.
fn framework_error(status: StatusCode) -> ErrorInfo {
    let (code, message) = match status {
        StatusCode::NOT_FOUND => (ErrorCode::NotFound, "no such route"),
        StatusCode::METHOD_NOT_ALLOWED => (
            ErrorCode::MethodNotAllowed,
            "method not allowed on this route",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => {
            (ErrorCode::PayloadTooLarge, "the request body is too large")
        }
        StatusCode::GONE => (ErrorCode::Gone, "the resource has expired"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (ErrorCode::BadRequest, "unsupported content type"),
        s if s.is_server_error() => (ErrorCode::InternalError, "internal error"),
        _ => (ErrorCode::BadRequest, "bad request"),
    };
    ErrorInfo {
        status,
        code,
        message: message.to_owned(),
        violations: None,
    }
}

fn render(
    info: &ErrorInfo,
    shape: ErrorShape,
) -> (StatusCode, serde_json::Value, Option<HeaderValue>) {
    let (status, body, detail) = match shape {
        ErrorShape::Flat if CODE_ONLY.contains(&info.code) => {
            let detail = HeaderValue::from_str(&sanitize_header(&info.message)).ok();
            let body = FlatError {
                code: info.code,
                error: info.code.as_str().to_owned(),
                violations: None,
            };
            (info.status, serde_json::to_value(body), detail)
        }
        ErrorShape::Flat => {
            let body = FlatError {
                code: info.code,
                error: info.message.clone(),
                violations: info.violations.clone(),
            };
            (info.status, serde_json::to_value(body), None)
        }
        ErrorShape::Nested => {
            // The channel and prompt integrations name these differently (section 7).
            let (status, code) = match info.code {
                ErrorCode::InvalidJson => {
                    (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::ValidationError)
                }
                ErrorCode::PayloadTooLarge => (info.status, ErrorCode::RequestTooLarge),
                code => (info.status, code),
            };
            let body = NestedError {
                error: NestedErrorDetail {
                    code,
                    message: info.message.clone(),
                },
            };
            (status, serde_json::to_value(body), None)
        }
        ErrorShape::JsonRpc => {
            use crate::mcp::jsonrpc::{Response, RpcCode, RpcError};
            let code = if info.status.is_server_error() {
                RpcCode::InternalError
            } else {
                RpcCode::InvalidRequest
            };
            let error = RpcError::new(code, info.message.clone());
            let body = serde_json::to_value(Response::error(None, &error));
            (info.status, body, None)
        }
    };
    // Plain structs of strings: serialising them cannot fail.
    (status, body.unwrap_or_default(), detail)
}

fn sanitize_header(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(512)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_routes_are_the_channel_and_prompt_integrations() {
        assert_eq!(
            ErrorShape::for_path("/v1/channels/http/messages"),
            ErrorShape::Nested
        );
        assert_eq!(
            ErrorShape::for_path("/v1/prompt-integrations/pi_public_x/execute"),
            ErrorShape::Nested
        );
        assert_eq!(ErrorShape::for_path("/v1/agent-policy"), ErrorShape::Flat);
        assert_eq!(ErrorShape::for_path("/health"), ErrorShape::Flat);
        assert_eq!(ErrorShape::for_path("/v1/mcp"), ErrorShape::JsonRpc);
    }

    #[test]
    fn code_only_errors_repeat_the_code() {
        let info = ApiError::PolicyEmpty.info();
        let (status, body, detail) = render(&info, ErrorShape::Flat);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            json!({"error": "POLICY_EMPTY", "code": "POLICY_EMPTY"})
        );
        assert!(detail.is_some());
    }

    #[test]
    fn invalid_json_is_a_422_validation_error_on_nested_routes() {
        let info = ApiError::InvalidJson("x".into()).info();
        let (status, body, _) = render(&info, ErrorShape::Nested);
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(body["error"]["code"], "VALIDATION_ERROR");
    }
}
