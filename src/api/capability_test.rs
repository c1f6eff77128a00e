//! `POST /v1/capabilities/{id}/test` (contract 3.1, 4.8): calls the
//! endpoint at the current revision with the supplied arguments and stores
//! an independent record. No revision or state changes.
//!
//! The route declares 200, 401, 404 and 409 only: a request whose body or
//! arguments are not acceptable is a test that failed before the host was
//! called (200, `failed`, reason `arguments_invalid`, the violations listed),
//! recorded like any other (docs/contract-decisions.md).

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Caller;
use super::capabilities::{CapabilityPath, NOT_FOUND, RecordedTest};
use super::error::{ApiError, FlatError, Violation};
use super::json_body::JsonBody;
use crate::clock::now_millis;
use crate::domain::capability::CapabilityId;
use crate::executor::{
    CallFailure, CallResult, CapabilityAtRevision, FailureReason, FailureSummary,
};
use crate::store::capabilities::{CapabilityForCall, CredentialRead};
use crate::store::capability_tests::{TestRecord, TestStatus};

pub const MAX_TEST_BODY_BYTES: usize = 64 * 1024;
/// The reason of a test refused before any call (the executor's own word).
const ARGUMENTS_INVALID: FailureReason = FailureReason::ArgumentsInvalid;

/// The request body: `{arguments: object}` and nothing else.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // Describes the body in the document; the handler reads raw JSON.
#[serde(deny_unknown_fields)]
#[schema(example = json!({"arguments": {"order": "A-1001"}}))]
pub struct TestRequest {
    /// Arguments for the capability's `input_schema`.
    #[schema(value_type = Object)]
    arguments: Value,
}

/// What the test route answers: the record, plus the failure's message,
/// the pruned output of a passed test, and the violations of arguments
/// that were refused before any call.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TestResult {
    attempts: i64,
    capability_id: String,
    #[schema(format = DateTime)]
    created_at: String,
    duration_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    revision: i64,
    status: TestStatus,
    test_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    violations: Option<Vec<Violation>>,
}

impl TestResult {
    fn new(record: &TestRecord) -> Self {
        let shown = RecordedTest::from(record);
        TestResult {
            attempts: shown.attempts,
            capability_id: shown.capability_id,
            created_at: shown.created_at,
            duration_ms: shown.duration_ms,
            http_status: shown.http_status,
            message: None,
            output: None,
            reason: shown.reason,
            revision: shown.revision,
            status: shown.status,
            test_id: shown.test_id,
            violations: None,
        }
    }
}

/// What a test came to.
struct Outcome {
    status: TestStatus,
    reason: Option<String>,
    message: Option<String>,
    output: Option<Value>,
    violations: Option<Vec<Violation>>,
    http_status: Option<i64>,
    attempts: u32,
}

impl Outcome {
    /// Refused before any call: the request itself is at fault.
    fn refused(message: &str, violations: Vec<Violation>) -> Self {
        Outcome {
            status: TestStatus::Failed,
            reason: Some(ARGUMENTS_INVALID.as_str().to_owned()),
            message: Some(message.to_owned()),
            output: None,
            violations: Some(violations),
            http_status: None,
            attempts: 0,
        }
    }
}

/// The caller of a contract test with the capability its path names and
/// that capability's credential, read in the same statement as the key (two
/// round trips fewer on PostgreSQL). `capability` is `None` when the
/// account has no such capability or the id is malformed: the handler's
/// 404, after the key was judged as on every route.
#[derive(Debug)]
pub struct CapabilityCaller {
    pub caller: Caller,
    pub capability: Option<CapabilityForCall>,
}

impl FromRequestParts<AppState> for CapabilityCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let id = Path::<CapabilityPath>::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|Path(path)| CapabilityId::parse(&path.capability_id));
        let (caller, capability) = Caller::authenticate(parts, state, |key_hash| async move {
            let (store, environment) = (&state.store, &state.environment);
            match id {
                Some(id) => {
                    store
                        .authenticate_for_call(&key_hash, environment, &id)
                        .await
                }
                None => {
                    let judged = store.authenticate(&key_hash, environment).await?;
                    Ok(judged.map(|account| (account, None)))
                }
            }
        })
        .await?;
        Ok(CapabilityCaller { caller, capability })
    }
}

#[utoipa::path(
    post,
    path = "/v1/capabilities/{capabilityId}/test",
    operation_id = "testCapability",
    tag = "capabilities",
    summary = "Call the endpoint at the current revision and record the result",
    security(("bearer" = [])),
    params(
        CapabilityPath,
    ),
    request_body(content = TestRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The test ran: `passed`, or `failed` with a reason (`arguments_invalid` with violations when the body or arguments were refused and nothing was called)", body = TestResult),
        (status = 404, description = "No such capability for this key", body = FlatError),
        (status = 409, description = "The capability's credential is not configured", body = FlatError),
    )
)]
pub async fn test_capability(
    State(app): State<AppState>,
    target: CapabilityCaller,
    body: Result<JsonBody<MAX_TEST_BODY_BYTES>, ApiError>,
) -> Result<Json<TestResult>, ApiError> {
    let CapabilityCaller { caller, capability } = target;
    let CapabilityForCall {
        capability: row,
        credential,
    } = capability.ok_or(NOT_FOUND)?;
    let capability = CapabilityAtRevision {
        id: row.id.clone(),
        revision: row.revision,
        definition: std::sync::Arc::new(
            serde_json::from_str(&row.definition).map_err(|e| ApiError::Internal(e.into()))?,
        ),
    };
    let started = std::time::Instant::now();
    let outcome = match body
        .map_err(|e| e.to_string())
        .and_then(|b| test_arguments(b.0))
    {
        Err(message) => Outcome::refused(
            "the request body is not {arguments: object}; nothing was called",
            vec![Violation::new(String::new(), "request-body", message)],
        ),
        Ok(arguments) => run(&app, &caller, &capability, &credential, &arguments).await?,
    };
    let record = TestRecord {
        id: format!("ctest_{}", crate::domain::id::random_uuid().simple()),
        capability_id: row.id.clone(),
        revision: row.revision,
        status: outcome.status,
        reason: outcome.reason,
        http_status: outcome.http_status,
        attempts: i64::from(outcome.attempts),
        duration_ms: started.elapsed().as_millis() as i64,
        created_at: now_millis(),
    };
    app.store
        .insert_test_record(&caller.account, &record)
        .await?;
    tracing::info!(capability = %row.id, revision = row.revision, status = %record.status, reason = record.reason.as_deref(), "contract test recorded");
    let mut response = TestResult::new(&record);
    response.message = outcome.message;
    response.output = outcome.output;
    response.violations = outcome.violations;
    Ok(Json(response))
}

/// One call through the executor (which revalidates the arguments in the
/// guest before anything is sent).
async fn run(
    app: &AppState,
    caller: &Caller,
    capability: &CapabilityAtRevision,
    credential: &CredentialRead,
    arguments: &Value,
) -> Result<Outcome, ApiError> {
    let report = app
        .executor
        .call(crate::executor::Call {
            kind: crate::executor::CallKind::Test,
            account: &caller.account,
            user_id: None,
            capability,
            arguments,
            credential: credential.known(),
        })
        .await;
    let passed = |output: Value| Outcome {
        status: TestStatus::Passed,
        reason: None,
        message: None,
        output: Some(output),
        violations: None,
        http_status: None,
        attempts: report.attempts,
    };
    Ok(match &report.outcome {
        Ok(CallResult::Data(data)) => passed(data.clone()),
        Ok(CallResult::Interaction(shaped)) => passed(json!({"interaction": shaped.public})),
        // Nothing was called: the arguments are at fault.
        Err(CallFailure::ArgumentsInvalid(violations)) => Outcome::refused(
            "the arguments do not match the input schema; nothing was called",
            violations
                .iter()
                .map(|v| {
                    Violation::new(
                        format!("/arguments{}", v.pointer),
                        v.rule.clone(),
                        v.message.clone(),
                    )
                })
                .collect(),
        ),
        Err(CallFailure::CredentialUnavailable) => {
            return Err(ApiError::Conflict(format!(
                "the capability's credential {} is not configured",
                capability.definition.auth.credential_ref
            )));
        }
        Err(failure) => {
            let summary = FailureSummary::from(failure);
            Outcome {
                status: TestStatus::Failed,
                reason: Some(summary.reason.as_str().to_owned()),
                message: Some(summary.message),
                output: None,
                violations: None,
                http_status: failure.http_status().map(i64::from),
                attempts: report.attempts,
            }
        }
    })
}

/// `{arguments: object}` and nothing else.
fn test_arguments(body: Value) -> Result<Value, String> {
    let Value::Object(mut object) = body else {
        return Err("the body must be a JSON object".into());
    };
    if let Some(unknown) = object.keys().find(|k| *k != "arguments") {
        return Err(format!(
            "unknown property {unknown:?}: the body is {{arguments}}"
        ));
    }
    match object.remove("arguments") {
        Some(arguments @ Value::Object(_)) => Ok(arguments),
        _ => Err("arguments is required and must be an object".into()),
    }
}
