//! Capabilities (contract 2.5–2.7, 3.1, 4.8): create and import (idempotent,
//! validated in the policy guest, published atomically), list and detail.
//! Revisions under If-Match (PATCH, enable, disable) are
//! `capability_revisions`; the request bodies as the document describes
//! them, `capability_bodies`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::capability_bodies::{CapabilityRequest, ManifestRequest};
use super::error::{ApiError, FlatError, Violation};
use super::idempotent::{self, IdempotencyKeyHeader};
use super::json_body::JsonBody;
use crate::clock::to_rfc3339;
use crate::domain::account::AccountId;
use crate::domain::capability::{
    CapabilityId, LifecycleStatus, MAX_CREATE_BODY_BYTES, MAX_IMPORT_BODY_BYTES, PublishRequest,
    RevisionChange, Wrapper,
};
use crate::store::capabilities::{CapabilityRow, NewCapability};
use crate::store::capability_tests::{TestRecord, TestStatus};
use crate::store::idempotency::Completion;
use crate::store::{Constraint, StoreError};
use crate::vault;

/// The capability record (2.7): create, revise, enable and disable answer
/// with these three fields.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CapabilityRecord {
    #[schema(pattern = "^cap_[a-z0-9]+$", min_length = 8, max_length = 80)]
    id: String,
    lifecycle_status: LifecycleStatus,
    #[schema(minimum = 1)]
    revision: i64,
}

impl From<&CapabilityRow> for CapabilityRecord {
    fn from(row: &CapabilityRow) -> Self {
        CapabilityRecord {
            id: row.id.clone(),
            lifecycle_status: row.lifecycle_status,
            revision: row.revision,
        }
    }
}

/// What an import answers: `{capabilities: array of records}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ImportResponse {
    capabilities: Vec<CapabilityRecord>,
}

/// One capability of the list.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CapabilitySummary {
    #[schema(format = DateTime)]
    created_at: String,
    domain: String,
    #[schema(pattern = "^cap_[a-z0-9]+$", min_length = 8, max_length = 80)]
    id: String,
    lifecycle_status: LifecycleStatus,
    name: String,
    #[schema(minimum = 1)]
    revision: i64,
    #[schema(format = DateTime)]
    updated_at: String,
}

impl From<&CapabilityRow> for CapabilitySummary {
    fn from(row: &CapabilityRow) -> Self {
        CapabilitySummary {
            created_at: to_rfc3339(row.created_at),
            domain: row.domain.clone(),
            id: row.id.clone(),
            lifecycle_status: row.lifecycle_status,
            name: row.name.clone(),
            revision: row.revision,
            updated_at: to_rfc3339(row.updated_at),
        }
    }
}

/// The list scoped to the key, oldest first.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CapabilityList {
    capabilities: Vec<CapabilitySummary>,
}

/// The detail: the summary, the current definition, the revision history
/// (oldest first) and the latest contract tests (newest first).
#[derive(Serialize, utoipa::ToSchema)]
pub struct CapabilityDetail {
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(value_type = Object)]
    definition: Value,
    domain: String,
    #[schema(pattern = "^cap_[a-z0-9]+$", min_length = 8, max_length = 80)]
    id: String,
    lifecycle_status: LifecycleStatus,
    name: String,
    #[schema(minimum = 1)]
    revision: i64,
    revisions: Vec<RevisionEntry>,
    tests: Vec<RecordedTest>,
    #[schema(format = DateTime)]
    updated_at: String,
}

/// A stored contract-test record as the API shows it (the capability
/// detail's `tests`): never an output or a secret. Fields in the order they
/// were always written (alphabetical).
#[derive(Serialize, utoipa::ToSchema)]
pub struct RecordedTest {
    pub(super) attempts: i64,
    pub(super) capability_id: String,
    #[schema(format = DateTime)]
    pub(super) created_at: String,
    pub(super) duration_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) http_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<String>,
    pub(super) revision: i64,
    pub(super) status: TestStatus,
    pub(super) test_id: String,
}

impl From<&TestRecord> for RecordedTest {
    fn from(record: &TestRecord) -> Self {
        RecordedTest {
            attempts: record.attempts,
            capability_id: record.capability_id.clone(),
            created_at: to_rfc3339(record.created_at),
            duration_ms: record.duration_ms,
            http_status: record.http_status,
            reason: record.reason.clone(),
            revision: record.revision,
            status: record.status,
            test_id: record.id.clone(),
        }
    }
}

/// One revision of the history.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RevisionEntry {
    change: RevisionChange,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(value_type = Object)]
    definition: Value,
    lifecycle_status: LifecycleStatus,
    #[schema(minimum = 1)]
    revision: i64,
}

/// The `capabilityId` path parameter (2.7), declared once for every route
/// that takes one; its pattern is checked by the handler (a malformed id is
/// 404, as for an absent capability).
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CapabilityPath {
    /// The capability id
    #[serde(rename = "capabilityId")]
    #[param(pattern = "^cap_[a-z0-9]+$", min_length = 8, max_length = 80)]
    pub capability_id: String,
}

#[utoipa::path(
    post,
    path = "/v1/capabilities",
    operation_id = "createCapability",
    tag = "capabilities",
    summary = "Publish one capability (active, revision 1)",
    security(("bearer" = [])),
    params(
        IdempotencyKeyHeader,
    ),
    request_body(content = CapabilityRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Published (or the replay of an earlier request with the same key)", body = CapabilityRecord, headers(("Idempotency-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key"))),
        (status = 400, description = "Invalid body or definition (every violation listed), or a missing or malformed Idempotency-Key", body = FlatError),
        (status = 409, description = "The key was used with another request (IDEMPOTENCY_KEY_REUSED), is in flight, or the name was taken meanwhile", body = FlatError),
    )
)]
pub async fn create_capability(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MAX_CREATE_BODY_BYTES>,
) -> Result<Response, ApiError> {
    publish_idempotently(&app, &caller.account, &headers, body, Wrapper::Single).await
}

#[utoipa::path(
    post,
    path = "/v1/capabilities/import",
    operation_id = "importCapabilities",
    tag = "capabilities",
    summary = "Publish a manifest atomically",
    security(("bearer" = [])),
    params(
        IdempotencyKeyHeader,
    ),
    request_body(content = ManifestRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "All published (or the replay of an earlier import with the same key)", body = ImportResponse, headers(("Idempotency-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key"))),
        (status = 400, description = "Invalid body or definitions (every violation listed), or a missing or malformed Idempotency-Key", body = FlatError),
        (status = 409, description = "The key was used with another request (IDEMPOTENCY_KEY_REUSED), is in flight, or a name was taken meanwhile", body = FlatError),
    )
)]
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
            credential_ref: d.credential_ref().map(str::to_owned),
        })
        .collect();
    let mut records: Vec<CapabilityRecord> = capabilities
        .iter()
        .map(|c| CapabilityRecord {
            id: c.id.as_str().to_owned(),
            lifecycle_status: LifecycleStatus::Active,
            revision: 1,
        })
        .collect();
    // Stored as text: a replay answers these very bytes.
    let response_text = match wrapper {
        Wrapper::Single => serde_json::to_string(&records.swap_remove(0)),
        Wrapper::Manifest => serde_json::to_string(&ImportResponse {
            capabilities: records,
        }),
    }
    .map_err(|e| ApiError::Internal(e.into()))?;
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
pub(super) async fn check_definitions(
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
            let mut v = Violation::new(format!("{base}{pointer}"), rule, message);
            v.capability_index = (wrapper == Wrapper::Manifest).then_some(index);
            v.capability = name.map(str::to_owned);
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
            let pointer = match wrapper {
                Wrapper::Single => "/capability/name".to_owned(),
                Wrapper::Manifest => format!("/capabilities/{index}/name"),
            };
            let mut v = Violation::new(
                pointer,
                "name-not-unique",
                format!("the account already has a capability named {name:?}"),
            );
            v.capability_index = (wrapper == Wrapper::Manifest).then_some(index);
            v.capability = Some(name.to_owned());
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

#[utoipa::path(
    get,
    path = "/v1/capabilities",
    operation_id = "listCapabilities",
    tag = "capabilities",
    summary = "The capabilities of this key's account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Oldest first", body = CapabilityList),
    )
)]
pub async fn list_capabilities(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<CapabilityList>, ApiError> {
    let rows = app.store.list_capabilities(&caller.account).await?;
    Ok(Json(CapabilityList {
        capabilities: rows.iter().map(CapabilitySummary::from).collect(),
    }))
}

/// A malformed id names no capability: 404 like an absent one (the routes
/// that take it declare no 400; docs/contract-decisions.md).
pub(super) fn parse_id(raw: &str) -> Result<CapabilityId, ApiError> {
    CapabilityId::parse(raw).ok_or(NOT_FOUND)
}

pub(super) const NOT_FOUND: ApiError = ApiError::NotFound("no such capability");

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

#[utoipa::path(
    get,
    path = "/v1/capabilities/{capabilityId}",
    operation_id = "getCapability",
    tag = "capabilities",
    summary = "Definition, revision history and latest contract tests",
    security(("bearer" = [])),
    params(
        CapabilityPath,
    ),
    responses(
        (status = 200, description = "The capability", body = CapabilityDetail),
        (status = 404, description = "No such capability for this key", body = FlatError),
    )
)]
pub async fn get_capability(
    State(app): State<AppState>,
    caller: Caller,
    Path(CapabilityPath {
        capability_id: raw_id,
    }): Path<CapabilityPath>,
) -> Result<Json<CapabilityDetail>, ApiError> {
    let id = parse_id(&raw_id)?;
    let row = owned(&app, &caller.account, &id).await?;
    let history = app.store.capability_history(&caller.account, &id).await?;
    let parse = |text: &str| -> Result<Value, ApiError> {
        serde_json::from_str(text).map_err(|e| ApiError::Internal(e.into()))
    };
    let mut revisions = Vec::with_capacity(history.len());
    for r in &history {
        revisions.push(RevisionEntry {
            change: r.change,
            created_at: to_rfc3339(r.created_at),
            definition: parse(&r.definition)?,
            lifecycle_status: r.lifecycle_status,
            revision: r.revision,
        });
    }
    // The latest contract tests (contract 2.7), newest first.
    let tests = app
        .store
        .list_test_records(&caller.account, id.as_str(), LATEST_TESTS_SHOWN)
        .await?
        .iter()
        .map(RecordedTest::from)
        .collect();
    Ok(Json(CapabilityDetail {
        created_at: to_rfc3339(row.created_at),
        definition: parse(&row.definition)?,
        domain: row.domain,
        id: row.id,
        lifecycle_status: row.lifecycle_status,
        name: row.name,
        revision: row.revision,
        revisions,
        tests,
        updated_at: to_rfc3339(row.updated_at),
    }))
}

/// Contract-test records the capability detail shows.
pub const LATEST_TESTS_SHOWN: i64 = 10;
