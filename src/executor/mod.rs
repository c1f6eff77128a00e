//! The executor: the only code that calls host endpoints. For one call it
//! revalidates the arguments in the policy guest, opens the credential,
//! signs the capability context, performs the exchange (with retries on
//! transient failures), then prunes and validates the answer in the guest
//! and, for preparation capabilities, shapes the closed interaction.
//!
//! Opaque interaction references come back in [`CallResult::Interaction`]
//! apart from everything that may reach a model, history or storage.

pub mod address_guard;
pub mod failure;
pub mod outbound;

use rand::Rng;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

use crate::trace_context::{Parent, Scope};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use crate::crypto::master_key::Keyring;
use crate::domain::account::AccountId;
use crate::domain::capability::CapabilityDefinition;
use crate::domain::closed_set::closed_set;
use crate::domain::credential::AuthType;
use crate::sandbox::{PolicySandbox, SandboxError, ShapedInteraction};
use crate::signing::{ContextClaims, Signer};
use crate::store::Store;
use crate::store::credentials::KnownCredential;
use crate::vault;
use address_guard::{AddressPolicy, AddressRefused, NameLookup, SystemLookup};
pub use failure::{CallFailure, FailureReason, FailureSummary};
use outbound::{Exchange, HttpCaller};

/// A capability at one revision, as the executor calls it.
pub struct CapabilityAtRevision {
    pub id: String,
    pub revision: i64,
    /// Shared: a turn hands the catalog's parsed revision to the executor
    /// without copying it.
    pub definition: std::sync::Arc<CapabilityDefinition>,
}

pub struct Call<'a> {
    /// Who asked for the call (the capability-call metric's `kind`).
    pub kind: CallKind,
    pub account: &'a AccountId,
    /// The end user, when the host named one (becomes an opaque subject).
    pub user_id: Option<&'a str>,
    pub capability: &'a CapabilityAtRevision,
    pub arguments: &'a Value,
    /// The capability's credential, when the caller read it already.
    pub credential: Option<KnownCredential<'a>>,
}

closed_set! {
    /// Who asked for a capability call: a turn, a contract test, an MCP
    /// `tools/call`.
    pub enum CallKind {
        Turn = "turn",
        Test = "test",
        Mcp = "mcp",
    }
}

#[derive(Debug)]
pub enum CallResult {
    /// The endpoint's answer pruned to the output schema and validated.
    Data(Value),
    /// A preparation capability's closed interaction (references apart).
    Interaction(ShapedInteraction),
}

/// Where the time of a call went, for traces and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct CallTiming {
    pub sandbox: Duration,
    pub signing: Duration,
    pub http: Duration,
    pub backoff: Duration,
}

#[derive(Debug)]
pub struct CallReport {
    pub outcome: Result<CallResult, CallFailure>,
    /// Exchanges attempted with the endpoint (0 when refused before any).
    pub attempts: u32,
    pub timing: CallTiming,
}

#[derive(Clone)]
pub struct Executor {
    http: HttpCaller,
    sandbox: PolicySandbox,
    store: Store,
    keyring: Keyring,
    signer: Signer,
}

impl Executor {
    pub fn new(sandbox: PolicySandbox, store: Store, keyring: Keyring, signer: Signer) -> Self {
        Self::with_lookup(sandbox, store, keyring, signer, Arc::new(SystemLookup))
    }

    /// Same, resolving host names with `lookup` (tests substitute answers).
    pub fn with_lookup(
        sandbox: PolicySandbox,
        store: Store,
        keyring: Keyring,
        signer: Signer,
        lookup: Arc<dyn NameLookup>,
    ) -> Self {
        let policy = AddressPolicy {
            allow_loopback: sandbox.allows_loopback(),
        };
        Executor {
            http: HttpCaller::new(policy, lookup),
            sandbox,
            store,
            keyring,
            signer,
        }
    }

    pub fn with_max_response_bytes(mut self, limit: usize) -> Self {
        self.http = self.http.with_max_response_bytes(limit);
        self
    }

    /// Performs one capability call. Never panics on what the endpoint or the
    /// guest does; every failure is a [`CallFailure`] with a reason code.
    ///
    /// The executor's one instrumentation point: the `execute_tool {name}`
    /// span (OpenTelemetry GenAI conventions; the guest calls and the HTTP
    /// client span of each attempt beneath it; never the arguments or the
    /// result) and `warden_capability_calls_total` /
    /// `warden_capability_call_duration_seconds` by kind and outcome.
    pub async fn call(&self, call: Call<'_>) -> CallReport {
        let span = Scope::start(SpanKind::Internal, Parent::Current, || {
            let name = call.capability.definition.name.as_str();
            (
                format!("execute_tool {name}").into(),
                crate::trace_context::attributes(
                    [
                        KeyValue::new("gen_ai.operation.name", "execute_tool"),
                        KeyValue::new("gen_ai.tool.name", name.to_owned()),
                        KeyValue::new("gen_ai.tool.call.id", crate::domain::id::random_id("call_")),
                        KeyValue::new("gen_ai.tool.type", "extension"),
                        KeyValue::new("warden.capability.revision", call.capability.revision),
                        KeyValue::new("warden.call.kind", call.kind.as_str()),
                    ],
                    3,
                ),
            )
        });
        let started = Instant::now();
        let mut timing = CallTiming::default();
        let mut attempts = 0;
        let outcome = span.run(self.run(&call, &mut timing, &mut attempts)).await;
        let word = match &outcome {
            Ok(_) => "succeeded",
            Err(failure) => {
                span.set_attribute(|| KeyValue::new("error.type", failure.reason().as_str()));
                failure.reason().as_str()
            }
        };
        span.set_attribute(|| KeyValue::new("warden.call.outcome", word));
        span.set_attribute(|| KeyValue::new("warden.call.attempts", i64::from(attempts)));
        crate::metrics::capability_call(call.kind.as_str(), word, started.elapsed());
        if let Err(failure) = &outcome {
            tracing::info!(capability = %call.capability.id, revision = call.capability.revision,
                reason = failure.reason().as_str(), attempts, "capability call failed");
        }
        CallReport {
            outcome,
            attempts,
            timing,
        }
    }

    async fn run(
        &self,
        call: &Call<'_>,
        timing: &mut CallTiming,
        attempts: &mut u32,
    ) -> Result<CallResult, CallFailure> {
        let capability = call.capability;
        let definition = &capability.definition;
        let started = Instant::now();
        let violations = self
            .sandbox
            .validate_arguments(
                call.account,
                schema_key(capability, "input"),
                definition.input_schema.to_string(),
                call.arguments.to_string(),
            )
            .await
            .map_err(sandbox_fault)?;
        timing.sandbox += started.elapsed();
        if !violations.is_empty() {
            return Err(CallFailure::ArgumentsInvalid(violations));
        }

        let credential = match call.credential {
            // Read with the capability, for the reference its definition names.
            Some(KnownCredential {
                credential_ref,
                row,
            }) if credential_ref == definition.auth.credential_ref => {
                vault::open_stored(&self.keyring, row)
            }
            _ => {
                vault::open_credential(
                    &self.store,
                    &self.keyring,
                    call.account,
                    &definition.auth.credential_ref,
                )
                .await
            }
        }
        .map_err(|err| {
            tracing::error!(error = %err, "credential could not be opened");
            CallFailure::CredentialUnavailable
        })?
        .ok_or(CallFailure::CredentialUnavailable)?;
        let url = url::Url::parse(&definition.url)
            .map_err(|_| CallFailure::AddressRefused(AddressRefused::InvalidUrl))?;
        let method = reqwest::Method::from_bytes(definition.method.as_str().as_bytes())
            .map_err(|_| CallFailure::ConnectFailed)?;
        let body = serde_json::to_vec(call.arguments).expect("JSON values serialize");

        let mut base = HeaderMap::new();
        for (name, value) in &definition.safe_headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                base.insert(name, value);
            }
        }
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let (auth_name, auth_text) = match credential.auth_type {
            AuthType::Bearer => (
                AUTHORIZATION,
                Zeroizing::new(format!("Bearer {}", credential.secret.as_str())),
            ),
            AuthType::Basic => (
                AUTHORIZATION,
                Zeroizing::new(format!("Basic {}", credential.secret.as_str())),
            ),
            AuthType::ApiKey => (
                HeaderName::from_bytes(
                    credential
                        .header_name
                        .as_deref()
                        .unwrap_or("x-api-key")
                        .as_bytes(),
                )
                .map_err(|_| CallFailure::CredentialUnavailable)?,
                credential.secret.clone(),
            ),
        };
        let mut auth_value =
            HeaderValue::from_str(&auth_text).map_err(|_| CallFailure::CredentialUnavailable)?;
        auth_value.set_sensitive(true);
        base.insert(auth_name, auth_value);

        let claims = ContextClaims {
            account: call.account,
            user_id: call.user_id,
            capability_id: &capability.id,
            revision: capability.revision,
        };
        let retries = definition.retry_count.unwrap_or(0);
        let raw = loop {
            // Each attempt is signed afresh: new created/expires and nonce.
            let signing_started = Instant::now();
            let signed = self
                .signer
                .sign(method.as_str(), &url, &body, &claims)
                .await
                .map_err(|err| {
                    tracing::error!(error = %err, "capability context could not be signed");
                    CallFailure::SigningFailed
                })?;
            timing.signing += signing_started.elapsed();
            let mut headers = base.clone();
            for (name, value) in signed {
                headers.insert(name, value);
            }
            *attempts += 1;
            let http_started = Instant::now();
            let exchanged = self
                .http
                .exchange(Exchange {
                    method: method.clone(),
                    url: &url,
                    headers,
                    body: body.clone(),
                    timeout: definition.timeout(),
                })
                .await;
            timing.http += http_started.elapsed();
            match exchanged {
                Ok(value) => break value,
                Err(failure) if failure.is_retryable() && *attempts <= retries => {
                    let pause = backoff(*attempts);
                    timing.backoff += pause;
                    crate::local_work::outside(tokio::time::sleep(pause)).await;
                }
                Err(failure) => return Err(failure),
            }
        };

        let started = Instant::now();
        let pruned = self
            .sandbox
            .prune_output(
                call.account,
                schema_key(capability, "output"),
                definition.output_schema.to_string(),
                raw.to_string(),
            )
            .await
            .map_err(sandbox_fault)?
            .map_err(CallFailure::OutputInvalid)?;
        let result = if definition.is_host_interaction() {
            let shaped = self
                .sandbox
                .shape_interaction(call.account, pruned.to_string())
                .await
                .map_err(sandbox_fault)?
                .map_err(CallFailure::InteractionInvalid)?;
            CallResult::Interaction(shaped)
        } else {
            CallResult::Data(pruned)
        };
        timing.sandbox += started.elapsed();
        Ok(result)
    }
}

impl Executor {
    /// Which `candidates` match the `pattern` of `property` in the
    /// capability's input schema, judged by the guest (with the schema key
    /// `validate-arguments` uses, so the compiled schema is shared).
    pub async fn match_pattern(
        &self,
        account: &AccountId,
        capability: &CapabilityAtRevision,
        property: &str,
        candidates: Vec<String>,
    ) -> Result<Result<Vec<usize>, Vec<crate::sandbox::Violation>>, SandboxError> {
        self.sandbox
            .match_pattern(
                account,
                schema_key(capability, "input"),
                capability.definition.input_schema.to_string(),
                property.to_owned(),
                candidates,
            )
            .await
    }
}

impl Executor {
    /// [`Self::match_pattern`] for many questions at once (one trip to the
    /// blocking pool; verdicts remembered by the sandbox).
    pub async fn match_patterns(
        &self,
        account: &AccountId,
        questions: Vec<crate::sandbox::PatternQuestion>,
    ) -> Vec<crate::sandbox::PatternVerdict> {
        self.sandbox.match_patterns(account, questions).await
    }

    /// The guest's cache key for a capability's input schema.
    pub fn input_schema_key(&self, capability: &CapabilityAtRevision) -> String {
        schema_key(capability, "input")
    }
}

/// The guest's cache key for a schema: it changes with every revision.
fn schema_key(capability: &CapabilityAtRevision, which: &str) -> String {
    format!("{}@{}/{which}", capability.id, capability.revision)
}

fn sandbox_fault(err: SandboxError) -> CallFailure {
    tracing::error!(error = %err, code = err.code(), "policy sandbox fault during a capability call");
    CallFailure::SandboxFault(err.code())
}

/// Exponential backoff from 100 ms, capped at 1 s, with ±50 % jitter.
fn backoff(attempt: u32) -> Duration {
    let base = (100u64 << attempt.saturating_sub(1).min(4)).min(1000);
    let jitter = rand::thread_rng().gen_range(base / 2..=base + base / 2);
    Duration::from_millis(jitter)
}
