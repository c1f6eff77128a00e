//! `POST /v1/capabilities/{id}/test` (contract 3.1, 4.8): calls the
//! endpoint at the current revision with the supplied arguments and stores
//! an independent record. No revision or state changes.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::AppState;
use super::auth::Caller;
use super::capabilities::{owned, parse_id};
use super::error::ApiError;
use super::json_body::JsonBody;
use crate::clock::{now_millis, to_rfc3339};
use crate::executor::{CallFailure, CallResult, CapabilityAtRevision, FailureSummary};
use crate::store::capability_tests::{TestRecord, TestStatus};

const MAX_TEST_BODY_BYTES: usize = 64 * 1024;

pub async fn test_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_id): Path<String>,
    JsonBody(body): JsonBody<MAX_TEST_BODY_BYTES>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&raw_id)?;
    let row = owned(&app, &caller.account, &id).await?;
    let arguments = test_arguments(&body).map_err(ApiError::BadRequest)?;
    let capability = CapabilityAtRevision {
        id: row.id.clone(),
        revision: row.revision,
        definition: serde_json::from_str(&row.definition)
            .map_err(|e| ApiError::Internal(e.into()))?,
    };
    let started = std::time::Instant::now();
    let report = app
        .executor
        .call(crate::executor::Call {
            account: &caller.account,
            user_id: None,
            capability: &capability,
            arguments,
        })
        .await;
    let (status, failure, output) = match &report.outcome {
        Ok(CallResult::Data(data)) => (TestStatus::Passed, None, Some(data.clone())),
        Ok(CallResult::Interaction(shaped)) => (
            TestStatus::Passed,
            None,
            Some(json!({"interaction": shaped.public})),
        ),
        // Nothing was called: the request itself is at fault.
        Err(CallFailure::ArgumentsInvalid(violations)) => {
            let violations = violations
                .iter()
                .map(|v| json!({"pointer": format!("/arguments{}", v.pointer), "rule": v.rule, "message": v.message}))
                .collect();
            return Err(ApiError::Violations {
                message: "the arguments do not match the input schema; nothing was called".into(),
                violations,
            });
        }
        Err(CallFailure::CredentialUnavailable) => {
            return Err(ApiError::Conflict(format!(
                "the capability's credential {} is not configured",
                capability.definition.auth.credential_ref
            )));
        }
        Err(failure) => (
            TestStatus::Failed,
            Some(FailureSummary::from(failure)),
            None,
        ),
    };
    let record = TestRecord {
        id: format!("ctest_{}", uuid::Uuid::new_v4().simple()),
        capability_id: row.id.clone(),
        revision: row.revision,
        status,
        reason: failure.as_ref().map(|f| f.reason.to_owned()),
        http_status: report
            .outcome
            .as_ref()
            .err()
            .and_then(CallFailure::http_status)
            .map(i64::from),
        attempts: i64::from(report.attempts),
        duration_ms: started.elapsed().as_millis() as i64,
        created_at: now_millis(),
    };
    app.store
        .insert_test_record(&caller.account, &record)
        .await?;
    tracing::info!(capability = %row.id, revision = row.revision, status = %status, reason = record.reason.as_deref(), "contract test recorded");
    let mut response = recorded_test(&record);
    if let Some(failure) = failure {
        response["message"] = json!(failure.message);
    }
    if let Some(output) = output {
        response["output"] = output;
    }
    Ok(Json(response))
}

/// `{arguments: object}` and nothing else.
fn test_arguments(body: &Value) -> Result<&Value, String> {
    let object = body.as_object().ok_or("the body must be a JSON object")?;
    if let Some(unknown) = object.keys().find(|k| *k != "arguments") {
        return Err(format!(
            "unknown property {unknown:?}: the body is {{arguments}}"
        ));
    }
    match object.get("arguments") {
        Some(arguments @ Value::Object(_)) => Ok(arguments),
        _ => Err("arguments is required and must be an object".into()),
    }
}

/// A stored contract-test record as the API shows it (the test's answer and
/// the capability detail's `tests`): never an output or a secret.
pub fn recorded_test(record: &TestRecord) -> Value {
    let mut shown = json!({
        "test_id": record.id, "capability_id": record.capability_id, "revision": record.revision,
        "status": record.status, "attempts": record.attempts, "duration_ms": record.duration_ms,
        "created_at": to_rfc3339(record.created_at),
    });
    if let Some(reason) = &record.reason {
        shown["reason"] = json!(reason);
    }
    if let Some(http_status) = record.http_status {
        shown["http_status"] = json!(http_status);
    }
    shown
}
