//! The MCP room: an account's read capabilities as the tools of a stateless
//! MCP server (Streamable HTTP, revisions 2026-07-28, 2025-11-25 and
//! 2025-06-18). No HTTP framework here: the door (`api::mcp`) authenticates,
//! checks the origin, reads the bounded body and hands over an [`Exchange`];
//! this room answers it with an [`Answer`] (a status and a JSON-RPC body).
//!
//! - `jsonrpc`: the envelope (one message, standard error codes);
//! - `protocol`: the revision a request speaks and its header checks;
//! - `tools`: capabilities as tools, executor reports as tool results.
//!
//! A `tools/call` is the executor's call, exactly as a turn's: arguments
//! judged in the guest, the sealed credential, the DNS-pinned guarded
//! exchange, the signature, time-outs and retries, output pruned in the
//! guest. No database connection is held while the endpoint is called; each
//! call leaves an audit record (`store::mcp_calls`), never its arguments or
//! result. An account has at most `max_calls_per_account` calls in progress
//! on a replica; beyond it the answer is 429 with `Retry-After`.

pub mod jsonrpc;
pub mod protocol;
pub mod tools;

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

use crate::agent::catalog::{Active, Catalog};
use crate::clock::now_millis;
use crate::domain::account::AccountId;
use crate::executor::{Call, CallKind, Executor};
use crate::fair_share::FairShare;
use crate::store::Store;
use crate::store::mcp_calls::{McpCallRecord, McpCallStatus};
use jsonrpc::{Id, Incoming, Response, RpcCode, RpcError};
use protocol::{Headers, META_SERVER_INFO, Revision};

/// The largest POST body read (one JSON-RPC message; tool arguments are
/// bounded by their input schemas well below it).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Calls one account may have in progress on one replica, by default.
pub const DEFAULT_MAX_CALLS_PER_ACCOUNT: usize =
    crate::cli::McpArgs::DEFAULT_MAX_CONCURRENT_PER_ACCOUNT;
/// How long a client may keep a `tools/list` (2026-07-28 `ttlMs`): short,
/// since a disabled capability must stop being offered at once.
pub const TOOLS_TTL_MS: u64 = 10_000;
/// How long `server/discover` may be kept: it changes only with a release.
pub const DISCOVER_TTL_MS: u64 = 3_600_000;
/// Seconds a client over the per-account cap is asked to wait.
pub const BUSY_RETRY_AFTER_SECONDS: u64 = 1;

/// The MCP server's settings (`cli::McpArgs`).
#[derive(Clone, Debug)]
pub struct McpConfig {
    /// Origins a request carrying `Origin` may come from (exact match).
    pub allowed_origins: Vec<String>,
    /// Calls one account may have in progress at once on this replica (0: no limit).
    pub max_calls_per_account: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            allowed_origins: Vec::new(),
            max_calls_per_account: DEFAULT_MAX_CALLS_PER_ACCOUNT,
        }
    }
}

impl From<&crate::cli::McpArgs> for McpConfig {
    fn from(args: &crate::cli::McpArgs) -> Self {
        McpConfig {
            allowed_origins: args
                .mcp_allowed_origins
                .iter()
                .map(|o| o.trim().to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
            max_calls_per_account: args.mcp_max_concurrent_per_account,
        }
    }
}

/// One POST as the door hands it over: the account the key resolved to,
/// the key's hash (for the audit record), the MCP headers, the body.
pub struct Exchange<'a> {
    pub account: AccountId,
    /// The account's capability version, read with the key: the catalog's
    /// tool set is taken at it (at least as new).
    pub capability_version: i64,
    pub key_hash: &'a str,
    pub headers: Headers,
    pub body: &'a [u8],
}

/// How the transport reports an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// A notification, accepted: no body.
    Accepted,
    BadRequest,
    NotFound,
    /// Over the per-account cap; `Retry-After` says when to retry.
    TooManyRequests,
    /// The database did not answer.
    Unavailable,
}

/// The answer to one POST.
#[derive(Debug)]
pub struct Answer {
    pub status: Status,
    /// The JSON-RPC response (none for an accepted notification).
    pub body: Option<Vec<u8>>,
    pub retry_after_secs: Option<u64>,
}

impl Answer {
    fn result(id: &Id, result: Value) -> Self {
        Answer {
            status: Status::Ok,
            body: Some(Response::result(id, result).to_bytes()),
            retry_after_secs: None,
        }
    }

    fn error(id: Option<&Id>, status: Status, error: &RpcError) -> Self {
        Answer {
            status,
            body: Some(Response::error(id, error).to_bytes()),
            retry_after_secs: None,
        }
    }
}

/// Shared by every request of a replica.
#[derive(Clone)]
pub struct McpServer {
    store: Store,
    executor: Executor,
    catalog: Catalog,
    calls: Arc<FairShare<AccountId>>,
    config: Arc<McpConfig>,
}

impl McpServer {
    pub fn new(store: Store, executor: Executor, config: McpConfig) -> Self {
        McpServer {
            store,
            executor,
            catalog: Catalog::default(),
            calls: FairShare::new(config.max_calls_per_account),
            config: Arc::new(config),
        }
    }

    /// Whether a request carrying `Origin: origin` may be served (the
    /// transport's DNS-rebinding rule): only the listed origins.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        self.config.allowed_origins.iter().any(|o| o == origin)
    }

    pub async fn answer(&self, exchange: Exchange<'_>) -> Answer {
        let incoming = match jsonrpc::parse(exchange.body) {
            Ok(incoming) => incoming,
            Err(refusal) => {
                return Answer::error(refusal.id.as_ref(), Status::BadRequest, &refusal.error);
            }
        };
        let Some(id) = incoming.id.clone() else {
            // `notifications/initialized`, `notifications/cancelled`, …:
            // nothing to keep for a stateless server.
            return Answer {
                status: Status::Accepted,
                body: None,
                retry_after_secs: None,
            };
        };
        let revision = match protocol::negotiate(&incoming, &exchange.headers) {
            Ok(revision) => revision,
            Err(error) => return Answer::error(Some(&id), Status::BadRequest, &error),
        };
        match self.dispatch(&exchange, &incoming, revision).await {
            Ok(mut result) => {
                if revision.is_modern() {
                    result["resultType"] = json!("complete");
                    result["_meta"] = json!({META_SERVER_INFO: server_info()});
                }
                Answer::result(&id, result)
            }
            Err(Failed { status, error }) => {
                let status = match status {
                    // Before 2026-07-28 a method's own errors travel in a 200.
                    Status::BadRequest | Status::NotFound if !revision.is_modern() => Status::Ok,
                    status => status,
                };
                let mut answer = Answer::error(Some(&id), status, &error);
                if error.is(RpcCode::Busy) {
                    answer.retry_after_secs = Some(BUSY_RETRY_AFTER_SECONDS);
                }
                answer
            }
        }
    }

    async fn dispatch(
        &self,
        exchange: &Exchange<'_>,
        incoming: &Incoming,
        revision: Revision,
    ) -> Result<Value, Failed> {
        match (incoming.method.as_str(), revision.is_modern()) {
            ("initialize", false) => Ok(json!({
                "protocolVersion": revision.as_str(),
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            })),
            ("ping", false) => Ok(json!({})),
            ("server/discover", true) => Ok(json!({
                "supportedVersions": Revision::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
                "capabilities": {"tools": {}},
                "instructions": INSTRUCTIONS,
                "ttlMs": DISCOVER_TTL_MS,
                "cacheScope": "public",
            })),
            ("tools/list", _) => self.list(exchange, incoming, revision).await,
            ("tools/call", _) => self.call(exchange, incoming, revision).await,
            (method, _) => Err(Failed::new(
                Status::NotFound,
                RpcCode::MethodNotFound,
                format!("method {method:?} is not served: this server offers tools only"),
            )),
        }
    }

    async fn tools(&self, exchange: &Exchange<'_>) -> Result<Active, Failed> {
        // The version was read with the key: what is listed after it is at
        // least that new, and any replica's change moves it.
        self.catalog
            .active(&self.store, &exchange.account, exchange.capability_version)
            .await
            .map_err(Failed::store)
    }

    async fn list(
        &self,
        exchange: &Exchange<'_>,
        incoming: &Incoming,
        revision: Revision,
    ) -> Result<Value, Failed> {
        // Every tool fits one page, so no cursor is ever issued.
        if incoming.params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(Failed::params("unknown cursor: tools/list has one page"));
        }
        let active = self.tools(exchange).await?;
        let tools: Vec<Value> = active
            .capabilities
            .iter()
            .filter(|c| tools::is_tool(c))
            .map(|c| tools::tool(c, revision))
            .collect();
        let mut result = json!({"tools": tools});
        if revision.is_modern() {
            result["ttlMs"] = json!(TOOLS_TTL_MS);
            // One account's tools: no shared cache may keep them.
            result["cacheScope"] = json!("private");
        }
        Ok(result)
    }

    async fn call(
        &self,
        exchange: &Exchange<'_>,
        incoming: &Incoming,
        revision: Revision,
    ) -> Result<Value, Failed> {
        let Some(name) = incoming.params.get("name").and_then(Value::as_str) else {
            return Err(Failed::params("name is required and must be a string"));
        };
        let arguments = match incoming.params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(object @ Value::Object(_)) => object.clone(),
            Some(_) => return Err(Failed::params("arguments must be an object")),
        };
        let active = self.tools(exchange).await?;
        let Some(capability) = active
            .capabilities
            .iter()
            .find(|c| tools::is_tool(c) && c.at.definition.name == name)
        else {
            return Err(Failed::params(format!("unknown tool {name:?}")));
        };
        let Some(_place) = self.calls.take(exchange.account) else {
            tracing::warn!(
                account = exchange.account.number(),
                limit = self.calls.limit(),
                "MCP tool call refused: the account has as many in progress as it may"
            );
            return Err(Failed {
                status: Status::TooManyRequests,
                error: RpcError::new(
                    RpcCode::Busy,
                    "this account has as many tool calls in progress as it may; retry after the time given in Retry-After",
                )
                .with_data(json!({"retryAfterMs": BUSY_RETRY_AFTER_SECONDS * 1000})),
            });
        };
        let started = Instant::now();
        let report = self
            .executor
            .call(Call {
                kind: CallKind::Mcp,
                account: &exchange.account,
                user_id: None,
                capability: &capability.at,
                arguments: &arguments,
                credential: Some(active.credential_of(&capability.at)),
            })
            .await;
        let duration_ms = started.elapsed().as_millis() as i64;
        let record = McpCallRecord {
            id: crate::domain::id::random_id("mcpc_"),
            capability_id: capability.at.id.clone(),
            revision: capability.at.revision,
            status: match &report.outcome {
                Ok(_) => McpCallStatus::Succeeded,
                Err(_) => McpCallStatus::Failed,
            },
            reason: report
                .outcome
                .as_ref()
                .err()
                .map(|f| f.reason().as_str().to_owned()),
            attempts: i64::from(report.attempts),
            duration_ms,
            created_at: now_millis(),
            key_id: None,
        };
        if let Err(err) = self
            .store
            .insert_mcp_call(&exchange.account, exchange.key_hash, &record)
            .await
        {
            // The call happened; its answer is still the client's.
            tracing::error!(error = %err, capability = %record.capability_id, "MCP call record not stored");
        }
        tracing::info!(capability = %record.capability_id, revision = record.revision,
            status = %record.status, reason = record.reason.as_deref(), attempts = record.attempts,
            duration_ms, "MCP tool call");
        Ok(tools::result(&report.outcome, revision))
    }
}

/// Why a method failed, and how the transport reports it.
struct Failed {
    status: Status,
    error: RpcError,
}

impl Failed {
    fn new(status: Status, code: RpcCode, message: impl Into<String>) -> Self {
        Failed {
            status,
            error: RpcError::new(code, message),
        }
    }

    fn params(message: impl Into<String>) -> Self {
        Failed::new(Status::BadRequest, RpcCode::InvalidParams, message)
    }

    fn store(err: crate::store::StoreError) -> Self {
        tracing::error!(error = %err, "MCP request failed in the database");
        Failed::new(
            Status::Unavailable,
            RpcCode::InternalError,
            "the service is temporarily unavailable",
        )
    }
}

const INSTRUCTIONS: &str = "Each tool is a read capability of this account, called through \
Warden: arguments are checked against the tool's input schema before anything is sent, and \
results are pruned to its output schema. A result with isError explains what to correct.";

fn server_info() -> Value {
    json!({"name": "warden", "version": env!("CARGO_PKG_VERSION")})
}
