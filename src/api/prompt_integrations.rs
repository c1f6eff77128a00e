//! `OPTIONS` and `POST /v1/prompt-integrations/{publicId}/execute`
//! (contract 2.13, 4.4), public: no API key is read, and one sent grants
//! nothing. POST runs the contract's processing order, each stage's
//! failure in the nested shape:
//!
//! 1. resolve the integration (404 `NOT_FOUND`, 404 `INTEGRATION_DISABLED`);
//! 2. the exact `Origin` (403 `ORIGIN_DENIED`);
//! 3. the per-client burst, 3 a minute (429 `RATE_LIMITED`, `Retry-After`);
//! 4. the body, `{input, challenge_token}` only, at most
//!    [`MAX_EXECUTE_BYTES`] (413 `REQUEST_TOO_LARGE`, 400 / 422), and the
//!    input against the input schema in the guest (422 `VALIDATION_ERROR`);
//!    nothing so far touches the token;
//! 5. the challenge token: spent (single use) then verified (403
//!    `CHALLENGE_INVALID`; 503 when the verifier cannot be asked);
//! 6. one of the day's executions reserved (429 `DAILY_QUOTA_EXCEEDED`,
//!    `Retry-After` until UTC midnight), given back if a later stage fails;
//! 7. the model, in JSON mode (503 `INFERENCE_UNAVAILABLE`);
//! 8. its output against the output schema in the guest (502
//!    `MODEL_OUTPUT_INVALID`) → 200 `{data}`.
//!
//! Every answer to the configured origin carries
//! `Access-Control-Allow-Origin` with it, errors included; another origin is
//! never echoed.

use std::net::SocketAddr;

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Serialize;
use serde_json::{Map, Value};

use super::AppState;
use super::error::{ApiError, NestedError, PromptRefusal};
use crate::agent::planner::Planner;
use crate::client_address::{ClientKey, client_ip};
use crate::domain::text::refuse_nul;
use crate::prompt::challenge::Verdict;
use crate::prompt::manifest::{Manifest, Origin, is_public_id};
use crate::prompt::{self, seconds_until_midnight, token_hash, utc_day};
use crate::store::prompt_integrations::{Burst, PromptIntegrationRow, PromptOutcome};

/// Largest execute body read (413 beyond; a larger declared length is
/// refused before reading anything).
pub const MAX_EXECUTE_BYTES: usize = 64 * 1024;
/// `challenge_token`: 1 to 2048 characters (contract 8).
pub const MAX_TOKEN_CHARS: usize = 2048;

/// The execute answer: the model's output, validated.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ExecuteResponse {
    #[schema(value_type = Object)]
    pub data: Value,
}

#[utoipa::path(
    options,
    path = "/v1/prompt-integrations/{publicId}/execute",
    operation_id = "preflightPromptIntegration",
    tag = "prompt-integrations",
    summary = "CORS preflight of a prompt integration",
    params(
        ("publicId" = String, Path, pattern = r"^pi_public_[A-Za-z0-9_-]{16,80}$", min_length = 27, max_length = 90),
        ("Origin" = Option<String>, Header, description = "Must equal the integration's origin exactly"),
    ),
    responses(
        (status = 204, description = "Preflight accepted for the configured origin",
            headers(
                ("Access-Control-Allow-Origin" = String, description = "The configured origin"),
                ("Access-Control-Allow-Methods" = String, description = "POST"),
                ("Access-Control-Allow-Headers" = String, description = "content-type"),
                ("Vary" = String, description = "Origin"),
            )),
        (status = 403, description = "Another origin (`ORIGIN_DENIED`)", body = NestedError),
        (status = 404, description = "Unknown, malformed or disabled integration", body = NestedError),
    )
)]
pub async fn preflight_prompt_integration(
    State(app): State<AppState>,
    Path(public_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    // A disabled integration's preflight still passes for its origin, so
    // that its page can read the POST's `INTEGRATION_DISABLED`.
    let row = match find(&app, &public_id).await {
        Ok(row) => row,
        Err(refused) => return refused.into_response(),
    };
    let Some(origin) = matching_origin(&row, &headers) else {
        return ApiError::prompt(
            PromptRefusal::OriginDenied,
            "this origin may not call the integration",
        )
        .into_response();
    };
    let mut response = StatusCode::NO_CONTENT.into_response();
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    response
}

#[utoipa::path(
    post,
    path = "/v1/prompt-integrations/{publicId}/execute",
    operation_id = "executePromptIntegration",
    tag = "prompt-integrations",
    summary = "Run a prompt integration from its page",
    params(
        ("publicId" = String, Path, pattern = r"^pi_public_[A-Za-z0-9_-]{16,80}$", min_length = 27, max_length = 90),
        ("Origin" = String, Header, description = "Must equal the integration's origin exactly"),
    ),
    request_body(content = ExecuteRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The model's output, valid against the output schema", body = ExecuteResponse),
        (status = 400, description = "Malformed body", body = NestedError),
        (status = 403, description = "`ORIGIN_DENIED` or `CHALLENGE_INVALID`", body = NestedError),
        (status = 404, description = "`NOT_FOUND` or `INTEGRATION_DISABLED`", body = NestedError),
        (status = 413, description = "`REQUEST_TOO_LARGE`: over 64 KiB", body = NestedError),
        (status = 422, description = "`VALIDATION_ERROR`: the input does not match the input schema", body = NestedError),
        (status = 429, description = "`RATE_LIMITED` or `DAILY_QUOTA_EXCEEDED`", body = NestedError,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        (status = 502, description = "`MODEL_OUTPUT_INVALID`", body = NestedError),
        (status = 503, description = "`INFERENCE_UNAVAILABLE`, or the challenge verifier is unavailable", body = NestedError),
    )
)]
pub async fn execute_prompt_integration(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(public_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let row = match find(&app, &public_id).await {
        Ok(row) => row,
        Err(refused) => return refused.into_response(),
    };
    let origin = matching_origin(&row, &headers);
    let outcome = if !row.is_active() {
        Err(refuse(
            PromptRefusal::IntegrationDisabled,
            "this integration is disabled",
        ))
    } else if origin.is_none() {
        Err(refuse(
            PromptRefusal::OriginDenied,
            "this origin may not call the integration",
        ))
    } else {
        match manifest_of(&row) {
            Ok(manifest) => execute(&app, &row, &manifest, peer, &headers, body).await,
            Err(err) => Err(err.into()),
        }
    };
    // The prompt layer's one count: each execution that found its
    // integration, by outcome (`succeeded` or the contract's error code).
    crate::metrics::prompt_execution(match &outcome {
        Ok(_) => "succeeded",
        Err(refused) => refused.error.code().as_str(),
    });
    let mut response = match outcome {
        Ok(data) => (StatusCode::OK, Json(ExecuteResponse { data })).into_response(),
        Err(Refused { error, retry_after }) => {
            let mut response = error.into_response();
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            response
        }
    };
    let h = response.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        // The page may read when to come back after a 429.
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Retry-After"),
        );
    }
    response
}

/// A stage's refusal, and the seconds to wait when it is a 429.
struct Refused {
    error: ApiError,
    retry_after: Option<u64>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Self {
        Refused {
            error,
            retry_after: None,
        }
    }
}

fn refuse(refusal: PromptRefusal, message: impl Into<String>) -> Refused {
    ApiError::prompt(refusal, message).into()
}

/// Stages 3 to 8 for an active integration called from its origin.
async fn execute(
    app: &AppState,
    row: &PromptIntegrationRow,
    manifest: &Manifest,
    peer: SocketAddr,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Refused> {
    let channel = app.prompt.as_ref();
    let now = crate::clock::now_millis();
    // 3. The per-client burst.
    let ip = ClientKey::of(client_ip(
        channel.and_then(|c| c.client_ip_header.as_ref()),
        headers,
        peer,
    ))
    .to_string();
    let client = match channel {
        Some(c) => c.client_hash(&row.id, &ip),
        None => prompt::token_hash(&format!("{}\u{0}{ip}", row.id)),
    };
    if let Burst::Limited { retry_after_ms } = app
        .store
        .admit_prompt_burst(&row.id, &client, now)
        .await
        .map_err(ApiError::from)?
    {
        return Err(Refused {
            error: ApiError::prompt(
                PromptRefusal::RateLimited,
                "too many requests from this client; wait and try again",
            ),
            retry_after: Some(((retry_after_ms as u64).div_ceil(1000)).clamp(1, 60)),
        });
    }
    // 4. The body and the input; nothing here touches the token.
    let request = read_body(headers, body).await?;
    let account = row.account();
    let input_violations = app
        .sandbox
        .validate_integration(
            &account,
            schema_key(row, "input"),
            manifest.input_schema.to_string(),
            Value::Object(request.input.clone()).to_string(),
        )
        .await
        .map_err(ApiError::from)?;
    if let Some(first) = input_violations.first() {
        return Err(ApiError::Validation(format!(
            "input does not match the input schema: {} at {:?}",
            first.message, first.pointer
        ))
        .into());
    }
    // 5. The challenge token: spent before it is verified, so it is
    // invalid after any attempt that reaches here.
    let token = match request.challenge_token.as_deref() {
        Some(t) if !t.is_empty() => t,
        _ => {
            return Err(refuse(
                PromptRefusal::ChallengeInvalid,
                "challenge_token is required",
            ));
        }
    };
    if token.chars().count() > MAX_TOKEN_CHARS {
        return Err(refuse(
            PromptRefusal::ChallengeInvalid,
            "challenge_token is longer than 2048 characters",
        ));
    }
    let Some(channel) = channel else {
        return Err(refuse(
            PromptRefusal::VerifierUnavailable,
            "no challenge verifier is configured",
        ));
    };
    let hash = token_hash(token);
    if !app
        .store
        .spend_challenge_token(&row.id, &hash, now)
        .await
        .map_err(ApiError::from)?
    {
        return Err(refuse(
            PromptRefusal::ChallengeInvalid,
            "the challenge token was already used",
        ));
    }
    let host = Origin::parse(&row.origin)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored origin: {e}")))?
        .host;
    match channel
        .verifier
        .verify(
            token,
            &ip,
            &idempotency_key(&hash),
            &host,
            &row.challenge_action,
        )
        .await
    {
        Ok(Verdict::Valid) => {}
        Ok(Verdict::Invalid(why)) => return Err(refuse(PromptRefusal::ChallengeInvalid, why)),
        Err(down) => {
            tracing::warn!(integration = %row.id, error = %down, "challenge verifier unavailable");
            return Err(refuse(
                PromptRefusal::VerifierUnavailable,
                "the challenge could not be verified; try again later",
            ));
        }
    }
    // 6. One of the day's executions.
    let day = utc_day(now);
    if !app
        .store
        .reserve_prompt_quota(&row.id, &day)
        .await
        .map_err(ApiError::from)?
    {
        record(app, row, &day, PromptOutcome::QuotaExceeded).await;
        return Err(Refused {
            error: ApiError::prompt(
                PromptRefusal::DailyQuotaExceeded,
                "this integration's daily limit is reached",
            ),
            retry_after: Some(seconds_until_midnight(crate::clock::now_millis())),
        });
    }
    // 7 and 8; a failure gives the reservation back.
    let outcome = run_model(app, row, manifest, &request.input).await;
    let label = match &outcome {
        Ok(_) => PromptOutcome::Succeeded,
        Err(Refused {
            error: ApiError::InferenceUnavailable(_),
            ..
        }) => PromptOutcome::InferenceUnavailable,
        Err(Refused {
            error:
                ApiError::Prompt {
                    refusal: PromptRefusal::ModelOutputInvalid,
                    ..
                },
            ..
        }) => PromptOutcome::ModelOutputInvalid,
        Err(_) => PromptOutcome::Failed,
    };
    if outcome.is_err()
        && let Err(err) = app.store.release_prompt_quota(&row.id, &day).await
    {
        tracing::error!(integration = %row.id, error = %err, "a failed execution's reservation was not given back");
    }
    record(app, row, &day, label).await;
    outcome
}

/// The model's JSON answer to the operator's prompt and the input,
/// validated against the output schema in the guest.
async fn run_model(
    app: &AppState,
    row: &PromptIntegrationRow,
    manifest: &Manifest,
    input: &Map<String, Value>,
) -> Result<Value, Refused> {
    let Planner::OpenAi(model) = app.engine.planner() else {
        return Err(ApiError::InferenceUnavailable(anyhow::anyhow!(
            "no inference backend is configured (WARDEN_INFERENCE_URL)"
        ))
        .into());
    };
    let system = format!(
        "{}\n\nAnswer with one JSON object, and nothing else, valid against this JSON Schema:\n{}",
        manifest.prompt, manifest.output_schema
    );
    let user = Value::Object(input.clone()).to_string();
    let answer = model
        .json_completion(&system, &user)
        .await
        .map_err(|e| ApiError::InferenceUnavailable(e.into()))?;
    let invalid = |why: &str| refuse(PromptRefusal::ModelOutputInvalid, why.to_owned());
    let text = answer.ok_or_else(|| invalid("the model returned no content"))?;
    let data: Value =
        serde_json::from_str(&text).map_err(|_| invalid("the model returned invalid JSON"))?;
    if !data.is_object() {
        return Err(invalid("the model did not return a JSON object"));
    }
    let violations = app
        .sandbox
        .validate_integration(
            &row.account(),
            schema_key(row, "output"),
            manifest.output_schema.to_string(),
            data.to_string(),
        )
        .await
        .map_err(ApiError::from)?;
    if !violations.is_empty() {
        return Err(invalid(
            "the model's output does not match the output schema",
        ));
    }
    Ok(data)
}

async fn record(app: &AppState, row: &PromptIntegrationRow, day: &str, outcome: PromptOutcome) {
    let now = crate::clock::now_millis();
    if let Err(err) = app
        .store
        .record_prompt_usage(&row.id, row.account_id, day, outcome, now)
        .await
    {
        tracing::warn!(integration = %row.id, error = %err, "usage not recorded");
    }
}

/// The verifier's `idempotency_key`: a UUID-shaped form of the token's
/// hash (siteverify expects a UUID; the same token always gives the same).
fn idempotency_key(hash: &str) -> String {
    let h = &hash[..32];
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The guest's cache key of an integration's schema: new with each revision.
fn schema_key(row: &PromptIntegrationRow, which: &str) -> String {
    format!("{}@{}/{which}", row.id, row.revision)
}

/// The integration (active or not); 404 `NOT_FOUND` for a malformed or
/// unknown id.
async fn find(app: &AppState, public_id: &str) -> Result<PromptIntegrationRow, ApiError> {
    let not_found = || ApiError::NotFound("no such prompt integration");
    if !is_public_id(public_id) {
        return Err(not_found());
    }
    app.store
        .get_prompt_integration(public_id)
        .await?
        .ok_or_else(not_found)
}

fn manifest_of(row: &PromptIntegrationRow) -> Result<Manifest, ApiError> {
    serde_json::from_str(&row.manifest)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored manifest of {}: {e}", row.id)))
}

/// The request's `Origin` when it is exactly the integration's.
fn matching_origin(row: &PromptIntegrationRow, headers: &HeaderMap) -> Option<HeaderValue> {
    let sent = headers.get(header::ORIGIN)?;
    (sent.as_bytes() == row.origin.as_bytes()).then(|| sent.clone())
}

// As read from the body: the reader answers each malformed part in the
// route's processing order; the document describes the same type.
/// The execute request (2.13).
#[derive(utoipa::ToSchema)]
pub struct ExecuteRequest {
    /// Validated against the integration's input schema.
    #[schema(value_type = Object)]
    input: Map<String, Value>,
    // `None` when absent; a non-string is a malformed body.
    /// The challenge widget's token: single use.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2048)]
    challenge_token: Option<String>,
}

async fn read_body(headers: &HeaderMap, body: Body) -> Result<ExecuteRequest, Refused> {
    let too_large = || {
        refuse(
            PromptRefusal::RequestTooLarge,
            format!("the request body is larger than {MAX_EXECUTE_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_EXECUTE_BYTES as u64) {
        return Err(too_large());
    }
    let bytes = Limited::new(body, MAX_EXECUTE_BYTES)
        .collect()
        .await
        .map_err(|err| {
            if err.downcast_ref::<LengthLimitError>().is_some() {
                too_large()
            } else {
                ApiError::BadRequest("the request body could not be read".into()).into()
            }
        })?
        .to_bytes();
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::BadRequest("the body is not valid JSON".into()))?;
    // Nothing with U+0000 goes on to the guest, the store or the model.
    refuse_nul(&value).map_err(ApiError::Validation)?;
    let Value::Object(mut object) = value else {
        return Err(ApiError::Validation("the body must be a JSON object".into()).into());
    };
    if let Some(other) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "input" | "challenge_token"))
    {
        return Err(ApiError::Validation(format!(
            "unknown property {other:?}: the body has only input and challenge_token"
        ))
        .into());
    }
    let input = match object.remove("input") {
        Some(Value::Object(input)) => input,
        _ => {
            return Err(ApiError::Validation("input must be a JSON object".into()).into());
        }
    };
    let challenge_token = match object.remove("challenge_token") {
        None | Some(Value::Null) => None,
        Some(Value::String(token)) => Some(token),
        Some(_) => {
            return Err(ApiError::Validation("challenge_token must be a string".into()).into());
        }
    };
    Ok(ExecuteRequest {
        input,
        challenge_token,
    })
}
