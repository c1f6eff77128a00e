//! Capabilities (contract 2.5–2.7, 3.1, 4.8): create and import (idempotent,
//! validated in the policy guest, published atomically), list, detail,
//! revise (If-Match), enable and disable (If-Match).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Caller;
use super::error::ApiError;
use super::idempotent;
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::account::AccountId;
use crate::domain::capability::{
    CapabilityId, IfMatchError, LifecycleStatus, MAX_CREATE_BODY_BYTES, MAX_IMPORT_BODY_BYTES,
    PublishRequest, Wrapper, parse_if_match,
};
use crate::store::capabilities::{CapabilityRow, GuardedWriteError, NewCapability};
use crate::store::idempotency::Completion;
use crate::store::{Constraint, StoreError};
use crate::vault;

/// Create, revise, enable and disable answer with these three fields.
#[derive(Serialize)]
struct CapabilityRecord<'a> {
    id: &'a str,
    lifecycle_status: LifecycleStatus,
    revision: i64,
}

impl<'a> From<&'a CapabilityRow> for CapabilityRecord<'a> {
    fn from(row: &'a CapabilityRow) -> Self {
        CapabilityRecord {
            id: &row.id,
            lifecycle_status: row.lifecycle_status,
            revision: row.revision,
        }
    }
}

pub async fn create_capability(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_CREATE_BODY_BYTES>,
) -> Result<Response, ApiError> {
    publish_idempotently(&app, &caller.account, &headers, body, Wrapper::Single).await
}

pub async fn import_capabilities(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_IMPORT_BODY_BYTES>,
) -> Result<Response, ApiError> {
    publish_idempotently(&app, &caller.account, &headers, body, Wrapper::Manifest).await
}

/// Publishes under the claimed Idempotency-Key (see `api::idempotent`).
async fn publish_idempotently(
    app: &AppState,
    account: &AccountId,
    headers: &HeaderMap,
    body: Value,
    wrapper: Wrapper,
) -> Result<Response, ApiError> {
    let operation = match wrapper {
        Wrapper::Single => "POST /v1/capabilities",
        Wrapper::Manifest => "POST /v1/capabilities/import",
    };
    let hashed = body.clone();
    idempotent::run(
        app,
        account,
        headers,
        operation,
        &hashed,
        |key| async move { publish(app, account, &key, body, wrapper).await },
    )
    .await
}

async fn publish(
    app: &AppState,
    account: &AccountId,
    key: &str,
    body: Value,
    wrapper: Wrapper,
) -> Result<Response, ApiError> {
    let request = PublishRequest::from_json(&body, wrapper).map_err(ApiError::BadRequest)?;
    check_definitions(app, account, &request, wrapper, None).await?;
    let capabilities: Vec<NewCapability> = request
        .definitions
        .iter()
        .map(|d| NewCapability {
            id: CapabilityId::generate(),
            name: d.name().unwrap_or_default().to_owned(),
            definition: d.definition.to_string(),
        })
        .collect();
    let records: Vec<Value> = capabilities
        .iter()
        .map(|c| json!({"id": c.id.as_str(), "lifecycle_status": LifecycleStatus::Active.as_str(), "revision": 1}))
        .collect();
    let response = match wrapper {
        Wrapper::Single => records[0].clone(),
        Wrapper::Manifest => json!({"capabilities": records}),
    };
    let response_text = response.to_string();
    let completion = Completion {
        key,
        status: StatusCode::CREATED.as_u16(),
        body: &response_text,
    };
    match app
        .store
        .publish_capabilities(account, &request.domain, &capabilities, &completion)
        .await
    {
        Ok(()) => {}
        Err(StoreError::Conflict(Constraint::CapabilityName)) => {
            return Err(ApiError::Conflict(
                "a capability of that name was published meanwhile".into(),
            ));
        }
        Err(StoreError::NotFound) => {
            return Err(ApiError::Conflict(
                "the Idempotency-Key claim was lost; retry".into(),
            ));
        }
        Err(err) => return Err(err.into()),
    }
    tracing::info!(count = capabilities.len(), domain = %request.domain, "capabilities published");
    Ok((
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        response_text,
    )
        .into_response())
}

/// Every violation of every definition, located: the guest's rules (2.5,
/// 2.6), then what only the server can know (credentials, name uniqueness).
async fn check_definitions(
    app: &AppState,
    account: &AccountId,
    request: &PublishRequest,
    wrapper: Wrapper,
    revising: Option<&CapabilityId>,
) -> Result<(), ApiError> {
    let mut violations = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (index, submitted) in request.definitions.iter().enumerate() {
        let base = match wrapper {
            Wrapper::Single => "/capability".to_owned(),
            Wrapper::Manifest => format!("/capabilities/{index}"),
        };
        let name = submitted.name();
        let mut located = |pointer: &str, rule: &str, message: String| {
            let mut v =
                json!({"pointer": format!("{base}{pointer}"), "rule": rule, "message": message});
            if wrapper == Wrapper::Manifest {
                v["capability_index"] = json!(index);
            }
            if let Some(name) = name {
                v["capability"] = json!(name);
            }
            violations.push(v);
        };
        for v in app
            .sandbox
            .check_definition(account, &submitted.definition)
            .await?
        {
            located(&v.pointer, &v.rule, v.message);
        }
        if let Some(reference) = submitted.credential_ref()
            && !vault::is_configured(&app.store, account, reference).await?
        {
            located(
                "/auth/credential_ref",
                "credential-not-configured",
                format!("no configured credential {reference:?}: PUT it first"),
            );
        }
        if let Some(name) = name {
            if names.contains(&name) {
                located(
                    "/name",
                    "name-duplicate",
                    format!("the name {name:?} appears twice in the request"),
                );
            }
            names.push(name);
        }
    }
    let in_use = app
        .store
        .capability_names_in_use(account, &names, revising)
        .await?;
    for (index, submitted) in request.definitions.iter().enumerate() {
        if let Some(name) = submitted.name().filter(|n| in_use.iter().any(|u| u == n)) {
            let mut v = json!({"rule": "name-not-unique", "capability": name,
                "message": format!("the account already has a capability named {name:?}")});
            v["pointer"] = json!(match wrapper {
                Wrapper::Single => "/capability/name".to_owned(),
                Wrapper::Manifest => {
                    v["capability_index"] = json!(index);
                    format!("/capabilities/{index}/name")
                }
            });
            violations.push(v);
        }
    }
    if violations.is_empty() {
        return Ok(());
    }
    let message = format!(
        "the request has {} violation(s); nothing was published",
        violations.len()
    );
    Err(ApiError::Violations {
        message,
        violations,
    })
}

pub async fn list_capabilities(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let rows = app.store.list_capabilities(&caller.account).await?;
    let items: Vec<Value> = rows.iter().map(summary).collect();
    Ok(Json(json!({"capabilities": items})))
}

fn summary(row: &CapabilityRow) -> Value {
    json!({
        "id": row.id, "name": row.name, "domain": row.domain, "lifecycle_status": row.lifecycle_status,
        "revision": row.revision, "created_at": to_rfc3339(row.created_at), "updated_at": to_rfc3339(row.updated_at),
    })
}

pub(super) fn parse_id(raw: &str) -> Result<CapabilityId, ApiError> {
    CapabilityId::parse(raw).ok_or_else(|| {
        ApiError::BadRequest("capabilityId must match ^cap_[a-z0-9]+$ (8 to 80 characters)".into())
    })
}

const NOT_FOUND: ApiError = ApiError::NotFound("no such capability");

pub(super) async fn owned(
    app: &AppState,
    account: &AccountId,
    id: &CapabilityId,
) -> Result<CapabilityRow, ApiError> {
    app.store
        .get_capability(account, id)
        .await?
        .ok_or(NOT_FOUND)
}

pub async fn get_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&raw_id)?;
    let row = owned(&app, &caller.account, &id).await?;
    let history = app.store.capability_history(&caller.account, &id).await?;
    let mut body = summary(&row);
    body["definition"] =
        serde_json::from_str(&row.definition).map_err(|e| ApiError::Internal(e.into()))?;
    let mut revisions = Vec::with_capacity(history.len());
    for r in &history {
        let definition: Value =
            serde_json::from_str(&r.definition).map_err(|e| ApiError::Internal(e.into()))?;
        revisions.push(json!({"revision": r.revision, "change": r.change,
            "lifecycle_status": r.lifecycle_status, "definition": definition,
            "created_at": to_rfc3339(r.created_at)}));
    }
    body["revisions"] = Value::Array(revisions);
    // The latest contract tests (contract 2.7), newest first.
    body["tests"] = app
        .store
        .list_test_records(&caller.account, id.as_str(), LATEST_TESTS_SHOWN)
        .await?
        .iter()
        .map(super::capability_test::recorded_test)
        .collect();
    Ok(Json(body))
}

/// Contract-test records the capability detail shows.
pub const LATEST_TESTS_SHOWN: i64 = 10;

fn if_match(headers: &HeaderMap) -> Result<i64, ApiError> {
    parse_if_match(header_str(headers, "if-match")).map_err(|e| match e {
        IfMatchError::Missing => {
            ApiError::BadRequest("the If-Match header (the current revision) is required".into())
        }
        IfMatchError::Malformed => ApiError::BadRequest(
            "If-Match must be the current numeric revision (1 to 80 characters)".into(),
        ),
    })
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn guarded_failure(err: GuardedWriteError) -> ApiError {
    match err {
        GuardedWriteError::NotFound => NOT_FOUND,
        GuardedWriteError::StaleRevision { current } => ApiError::Conflict(format!(
            "If-Match does not match the current revision ({current})"
        )),
        GuardedWriteError::AlreadyInState => {
            ApiError::Conflict("the capability is already in that state".into())
        }
        GuardedWriteError::NameTaken => {
            ApiError::Conflict("the account already has a capability of that name".into())
        }
    }
}

pub async fn revise_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_CREATE_BODY_BYTES>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&raw_id)?;
    owned(&app, &caller.account, &id).await?;
    let expected = if_match(&headers)?;
    let request =
        PublishRequest::from_json(&body, Wrapper::Single).map_err(ApiError::BadRequest)?;
    check_definitions(&app, &caller.account, &request, Wrapper::Single, Some(&id)).await?;
    let submitted = &request.definitions[0];
    let name = submitted.name().unwrap_or_default();
    let row = app
        .store
        .revise_capability(
            &caller.account,
            &id,
            expected,
            &request.domain,
            name,
            &submitted.definition.to_string(),
        )
        .await?
        .map_err(guarded_failure)?;
    tracing::info!(capability = %row.id, revision = row.revision, "capability revised");
    Ok(Json(json!(CapabilityRecord::from(&row))))
}

pub async fn enable_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    transition(
        &app,
        &caller.account,
        &raw_id,
        &headers,
        LifecycleStatus::Active,
    )
    .await
}

pub async fn disable_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(raw_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    transition(
        &app,
        &caller.account,
        &raw_id,
        &headers,
        LifecycleStatus::Disabled,
    )
    .await
}

async fn transition(
    app: &AppState,
    account: &AccountId,
    raw_id: &str,
    headers: &HeaderMap,
    target: LifecycleStatus,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(raw_id)?;
    let expected = if_match(headers)?;
    let current = owned(app, account, &id).await?;
    if target == LifecycleStatus::Active {
        // Enabling rechecks the credential: a revoked one keeps it disabled.
        let definition: Value =
            serde_json::from_str(&current.definition).map_err(|e| ApiError::Internal(e.into()))?;
        let reference = definition
            .get("auth")
            .and_then(|a| a.get("credential_ref"))
            .and_then(Value::as_str);
        let configured = match reference {
            Some(r) => vault::is_configured(&app.store, account, r).await?,
            None => false,
        };
        if !configured {
            return Err(ApiError::Conflict(format!(
                "the capability's credential {} is not configured; PUT it before enabling",
                reference.unwrap_or("(none)")
            )));
        }
    }
    let row = app
        .store
        .transition_capability(account, &id, expected, target)
        .await?
        .map_err(guarded_failure)?;
    tracing::info!(capability = %row.id, revision = row.revision, status = %row.lifecycle_status, "capability state changed");
    Ok(Json(json!(CapabilityRecord::from(&row))))
}
