//! `POST /v1/mcp` (issue 27): the door of the MCP room (`crate::mcp`), MCP's
//! Streamable HTTP transport without sessions. In order: a request carrying
//! an `Origin` not listed in `WARDEN_MCP_ALLOWED_ORIGINS` is 403 (the
//! transport's DNS-rebinding rule); the bearer key decides the account (401
//! with `WWW-Authenticate: Bearer` otherwise); the body must be JSON and at
//! most `mcp::MAX_BODY_BYTES` (read no further: 413); then the room answers
//! with a JSON-RPC response. `GET` and `DELETE` are 405: no server-initiated
//! stream and no session to end.
//!
//! Refusals raised here are `ApiError`s, rendered by `error.rs` as JSON-RPC
//! errors without an id; the room's own answers (results and JSON-RPC
//! errors with the request's id) are marked `ProtocolAnswer` and go out as
//! the room wrote them.

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ProtocolAnswer};
use crate::mcp::protocol::{Header, Headers};
use crate::mcp::{Answer, Exchange, MAX_BODY_BYTES, Status};

/// A request whose `Origin`, if it carries one, is allowed.
pub struct AllowedOrigin;

impl FromRequestParts<AppState> for AllowedOrigin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match parts.headers.get(header::ORIGIN) {
            None => Ok(AllowedOrigin),
            Some(value) => match value.to_str() {
                Ok(origin) if state.mcp.origin_allowed(origin) => Ok(AllowedOrigin),
                _ => {
                    tracing::info!("MCP request refused: its Origin is not allowed");
                    Err(ApiError::Forbidden(
                        "this Origin may not use the MCP endpoint (WARDEN_MCP_ALLOWED_ORIGINS)",
                    ))
                }
            },
        }
    }
}

/// The caller of an MCP request with its account's capability version, read
/// in the same statement as the key (a round trip fewer on PostgreSQL): the
/// version the catalog's tool set is taken at, as of the request's arrival
/// (as for a message's turn, docs/contract-decisions.md).
pub struct McpCaller {
    caller: Caller,
    capability_version: i64,
    /// The key's hash, kept for the exchange (its sessions are the key's).
    key_hash: String,
}

impl FromRequestParts<AppState> for McpCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (caller, (capability_version, key_hash)) =
            Caller::authenticate(parts, state, |key_hash| async move {
                let read = (state.store)
                    .authenticate_with_capability_version(&key_hash, &state.environment)
                    .await;
                read.map(|judged| judged.map(|(account, version)| (account, (version, key_hash))))
            })
            .await?;
        Ok(McpCaller {
            caller,
            capability_version,
            key_hash,
        })
    }
}

/// A JSON-RPC id as MCP allows it: a string or an integer (echoed as sent
/// in the answer; `null` in an error when the request's could not be read).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Describes the id in the document.
#[serde(untagged)]
pub enum JsonRpcId {
    Text(String),
    Number(i64),
}

/// One JSON-RPC 2.0 message (request or notification), as MCP sends it.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // Describes the body in the document; the room parses raw bytes.
#[schema(example = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "order_status", "arguments": {"order": "A-1001"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}}}}))]
pub struct JsonRpcMessage {
    /// Always `2.0`.
    jsonrpc: String,
    /// A string or an integer; absent for a notification.
    #[schema(value_type = Option<JsonRpcId>)]
    id: Option<Value>,
    /// `initialize`, `ping`, `server/discover`, `tools/list`, `tools/call`, a notification, …
    method: String,
    #[schema(value_type = Option<Object>)]
    params: Option<Value>,
}

/// A JSON-RPC 2.0 response: `result`, or `error`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct JsonRpcResponse {
    jsonrpc: String,
    #[schema(value_type = Option<JsonRpcId>)]
    id: Option<Value>,
    #[schema(value_type = Option<Object>)]
    result: Option<Value>,
    error: Option<JsonRpcErrorObject>,
}

/// A JSON-RPC 2.0 error response; `id` is absent when the request's could not be read.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct JsonRpcError {
    jsonrpc: String,
    #[schema(value_type = Option<JsonRpcId>)]
    id: Option<Value>,
    error: JsonRpcErrorObject,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct JsonRpcErrorObject {
    /// -32700 parse error, -32600 invalid request, -32601 method not found,
    /// -32602 invalid params, -32603 internal error, -32020 header mismatch,
    /// -32022 unsupported protocol version, -31000 busy (retry).
    code: i64,
    message: String,
    #[schema(value_type = Option<Object>)]
    data: Option<Value>,
}

#[utoipa::path(
    post,
    path = "/v1/mcp",
    operation_id = "sendMcpMessage",
    tag = "mcp",
    summary = "MCP (Streamable HTTP, stateless): the account's read capabilities as tools",
    description = "One JSON-RPC message per request, answered with `application/json`. Revisions \
        2026-07-28 (per-request `_meta`, `server/discover`, `Mcp-Method`/`Mcp-Name` headers), \
        2025-11-25 and 2025-06-18 (`initialize` without a session, then `MCP-Protocol-Version`). \
        Methods: `initialize`, `ping` (before 2026-07-28), `server/discover` (2026-07-28), \
        `tools/list`, `tools/call`. `GET` and `DELETE` answer 405.",
    security(("bearer" = [])),
    params(
        ("MCP-Protocol-Version" = Option<String>, Header, description = "The revision: required on every request but `initialize`"),
        ("Mcp-Method" = Option<String>, Header, description = "2026-07-28: the body's `method`"),
        ("Mcp-Name" = Option<String>, Header, description = "2026-07-28 `tools/call`: the body's `params.name` (plain or `=?base64?…?=`)"),
        ("Origin" = Option<String>, Header, description = "A browser's origin: must be listed in WARDEN_MCP_ALLOWED_ORIGINS"),
    ),
    request_body(content = JsonRpcMessage, content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC response (before 2026-07-28 also a method's own errors)", body = JsonRpcResponse),
        (status = 202, description = "A notification, accepted"),
        (status = 400, description = "Not one readable JSON-RPC message (-32700, -32600), invalid params (-32602), headers that do not match the body (-32020), an unserved protocol revision (-32022), or a body that is not JSON", body = JsonRpcError),
        (status = 401, description = "Missing or invalid bearer key", body = JsonRpcError,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 403, description = "The `Origin` is not allowed", body = JsonRpcError),
        (status = 404, description = "2026-07-28: the method is not served (-32601)", body = JsonRpcError),
        (status = 413, description = "The body is over 256 KiB", body = JsonRpcError),
        (status = 429, description = "The account has as many tool calls in progress as it may (-31000); retry after `Retry-After`", body = JsonRpcError,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying"))),
        (status = 503, description = "The database did not answer (-32603)", body = JsonRpcError),
    )
)]
pub async fn mcp(
    State(app): State<AppState>,
    _origin: AllowedOrigin,
    caller: McpCaller,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    if !is_json(parts.headers.get(header::CONTENT_TYPE)) {
        return Err(ApiError::BadRequest(
            "the content type must be application/json".into(),
        ));
    }
    let bytes = read_bounded(&parts.headers, body).await?;
    let answer = app
        .mcp
        .answer(Exchange {
            account: caller.caller.account,
            capability_version: caller.capability_version,
            key_hash: &caller.key_hash,
            headers: mcp_headers(&parts.headers),
            body: &bytes,
        })
        .await;
    Ok(respond(answer))
}

async fn read_bounded(headers: &HeaderMap, body: Body) -> Result<bytes::Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(ApiError::PayloadTooLarge {
            limit: MAX_BODY_BYTES,
        });
    }
    Ok(Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|err| {
            if err.downcast_ref::<LengthLimitError>().is_some() {
                ApiError::PayloadTooLarge {
                    limit: MAX_BODY_BYTES,
                }
            } else {
                ApiError::BadRequest("the request body could not be read".into())
            }
        })?
        .to_bytes())
}

fn is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn mcp_headers(headers: &HeaderMap) -> Headers {
    let read = |name: &str| match headers.get(name) {
        None => Header::Absent,
        Some(value) => value.to_str().map_or(Header::Unreadable, |text| {
            Header::Text(text.trim().to_owned())
        }),
    };
    Headers {
        protocol_version: read("mcp-protocol-version"),
        method: read("mcp-method"),
        name: read("mcp-name"),
    }
}

fn respond(answer: Answer) -> Response {
    let status = match answer.status {
        Status::Ok => StatusCode::OK,
        Status::Accepted => StatusCode::ACCEPTED,
        Status::BadRequest => StatusCode::BAD_REQUEST,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = match answer.body {
        Some(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        None => status.into_response(),
    };
    if let Some(seconds) = answer.retry_after_secs {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response.extensions_mut().insert(ProtocolAnswer);
    response
}
