//! The server's side of the policy sandbox: wraps `warden_host::Sandbox`
//! (which owns wasmtime, limits and instance pools) so the API layer never
//! touches it directly. Each account is its own sandbox scope: instances,
//! and the validators cached inside them, never serve two accounts.
//!
//! Guest calls are short but synchronous; they run on the blocking pool so a
//! guest at its deadline never holds up a runtime thread.
//!
//! A turn asks `match-pattern` about every patterned property of every
//! capability: [`PolicySandbox::match_patterns`] takes them in one trip to
//! the blocking pool, asks the guest once per distinct schema text, and
//! remembers the guest's verdict per token ([`PatternMemo`]), so a turn
//! with 1,000 capabilities costs the guest only the words it has not judged
//! yet. The memo holds verdicts, never patterns: a tenant's pattern still
//! runs only in the guest.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warden_host::{DefinitionOptions, GuestSource, Sandbox, SandboxConfig, SchemaRef};
pub use warden_host::{
    IntegrationSchemaKind, InteractionKind, SandboxError, ShapedInteraction, Violation,
};

use crate::cli::SandboxArgs;
use crate::domain::account::AccountId;

#[derive(Clone)]
pub struct PolicySandbox {
    sandbox: Sandbox,
    options: DefinitionOptions,
    memo: Arc<Mutex<PatternMemo>>,
}

/// One `match-pattern` question of a batch.
pub struct PatternQuestion {
    /// The guest's cache key for the schema (capability revision).
    pub schema_key: String,
    pub input_schema: Arc<str>,
    pub property: String,
    pub candidates: Vec<String>,
}

/// The guest's answer to one question: the indexes of the matching candidates.
pub type PatternVerdict = Result<Result<Vec<usize>, Vec<Violation>>, SandboxError>;

/// How long one batch may keep asking the guest (each call also has the
/// sandbox's own deadline); questions left are answered with a deadline
/// error, which the agent treats as "nothing matches".
const PATTERN_BATCH_BUDGET: Duration = Duration::from_millis(250);

/// The guest's verdicts remembered: (account scope, schema text, property)
/// → token → matches. The guest is a pure function of its inputs (it links
/// no import: no clock, no randomness), so the same question gets the same
/// answer; the schema *text* is the key, not the capability, so capabilities
/// sharing a schema share verdicts. Bounded: cleared whole when full.
#[derive(Default)]
pub struct PatternMemo {
    by_schema: HashMap<(String, Arc<str>, String), HashMap<String, bool>>,
    tokens: usize,
}

/// Tokens remembered at most, over all accounts (a few MiB).
const PATTERN_MEMO_TOKENS: usize = 100_000;

impl PatternMemo {
    fn get(&self, key: &(String, Arc<str>, String)) -> Option<&HashMap<String, bool>> {
        self.by_schema.get(key)
    }

    fn put(&mut self, key: (String, Arc<str>, String), verdicts: Vec<(String, bool)>) {
        if self.tokens + verdicts.len() > PATTERN_MEMO_TOKENS {
            self.by_schema.clear();
            self.tokens = 0;
        }
        let known = self.by_schema.entry(key).or_default();
        for (token, matched) in verdicts {
            if known.insert(token, matched).is_none() {
                self.tokens += 1;
            }
        }
    }
}

impl PolicySandbox {
    /// Loads the configured guest (or the embedded default) and checks it
    /// against the world; a guest that does not fit is refused here.
    pub fn load(args: &SandboxArgs) -> anyhow::Result<Self> {
        let source = GuestSource::from_option(args.policy_guest.as_deref());
        let config = SandboxConfig {
            cache_dir: args.guest_cache_dir.clone(),
            memory_reservation: args.guest_memory_reservation_mib.map(|mib| mib << 20),
            ..SandboxConfig::default()
        };
        let sandbox = Sandbox::load_with(source, config)?;
        let info = sandbox.info();
        tracing::info!(
            guest = %info.name, sha256 = %info.sha256, load_ms = info.load_ms, from_cache = info.from_cache,
            "policy guest loaded"
        );
        for warning in &info.cache_warnings {
            tracing::warn!("{warning}");
        }
        if args.dev_allow_loopback {
            tracing::warn!(
                "WARDEN_DEV_ALLOW_LOOPBACK is on: capability URLs may point at loopback over plain http. \
                 Never enable this in production."
            );
        }
        Ok(PolicySandbox {
            sandbox,
            options: DefinitionOptions {
                allow_loopback_http: args.dev_allow_loopback,
            },
            memo: Arc::default(),
        })
    }

    pub fn allows_loopback(&self) -> bool {
        self.options.allow_loopback_http
    }

    /// SHA-256 of the guest component in use (hex), for `warden_build_info`.
    pub fn guest_sha256(&self) -> &str {
        &self.sandbox.info().sha256
    }

    /// Import-time rules (contract 2.5, 2.6) for one definition.
    pub async fn check_definition(
        &self,
        account: &AccountId,
        definition: &Value,
    ) -> Result<Vec<Violation>, SandboxError> {
        let (sandbox, options, scope, text) = (
            self.sandbox.clone(),
            self.options,
            scope(account),
            definition.to_string(),
        );
        run_blocking("check-definition", move || {
            sandbox
                .check_definition(&scope, &text, options)
                .map(violations_of)
        })
        .await
    }
}

impl PolicySandbox {
    /// Arguments of a call against the capability's input schema. The cache
    /// key names the capability revision, so a new revision recompiles.
    pub async fn validate_arguments(
        &self,
        account: &AccountId,
        schema_key: String,
        input_schema: String,
        arguments: String,
    ) -> Result<Vec<Violation>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        run_blocking("validate-arguments", move || {
            let schema = SchemaRef {
                key: &schema_key,
                text: &input_schema,
            };
            sandbox
                .validate_arguments(&scope, schema, &arguments)
                .map(violations_of)
        })
        .await
    }

    /// An endpoint result pruned to the output schema and validated.
    pub async fn prune_output(
        &self,
        account: &AccountId,
        schema_key: String,
        output_schema: String,
        result: String,
    ) -> Result<Result<Value, Vec<Violation>>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        let pruned = run_blocking("prune-output", move || {
            let schema = SchemaRef {
                key: &schema_key,
                text: &output_schema,
            };
            sandbox.prune_output(&scope, schema, &result)
        })
        .await?;
        Ok(match pruned {
            Ok(text) => Ok(text.parse("the pruned result")?),
            Err(violations) => Err(violations),
        })
    }

    /// Which `candidates` match the `pattern` of the top-level input
    /// property `property` (their indexes). A tenant's pattern runs only
    /// here, in the guest under its deadline, never in the server: a
    /// catastrophic pattern costs a turn one deadline, not a worker thread.
    pub async fn match_pattern(
        &self,
        account: &AccountId,
        schema_key: String,
        input_schema: String,
        property: String,
        candidates: Vec<String>,
    ) -> Result<Result<Vec<usize>, Vec<Violation>>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        run_blocking("match-pattern", move || {
            let schema = SchemaRef {
                key: &schema_key,
                text: &input_schema,
            };
            sandbox.match_pattern(&scope, schema, &property, &candidates)
        })
        .await
    }

    /// Many [`Self::match_pattern`] questions in one trip to the blocking
    /// pool, answered in order. Tokens the guest already judged against the
    /// same schema text and property come from the memo; the rest go to the
    /// guest, once per distinct schema text, within [`PATTERN_BATCH_BUDGET`].
    pub async fn match_patterns(
        &self,
        account: &AccountId,
        questions: Vec<PatternQuestion>,
    ) -> Vec<PatternVerdict> {
        let (sandbox, scope, memo) = (self.sandbox.clone(), scope(account), self.memo.clone());
        let count = questions.len();
        let span = guest_span("match-pattern");
        let started = Instant::now();
        let verdicts =
            tokio::task::spawn_blocking(move || answer_batch(&sandbox, &scope, &memo, questions))
                .await
                .unwrap_or_else(|join| {
                    (0..count)
                        .map(|_| {
                            Err(SandboxError::Unavailable(format!(
                                "sandbox call panicked: {join}"
                            )))
                        })
                        .collect()
                });
        drop(span);
        // One batch, one observation: its worst verdict.
        let outcome = verdicts
            .iter()
            .find_map(|v| v.as_ref().err().map(guest_fault))
            .or_else(|| {
                verdicts
                    .iter()
                    .any(|v| matches!(v, Ok(Err(_))))
                    .then_some("refused")
            })
            .unwrap_or("ok");
        crate::metrics::guest_call("match-pattern", outcome, started.elapsed());
        verdicts
    }

    /// A prompt-integration schema against the subset of contract 2.13:
    /// its violations (none: acceptable).
    pub async fn check_integration_schema(
        &self,
        account: &AccountId,
        kind: IntegrationSchemaKind,
        schema: String,
    ) -> Result<Vec<Violation>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        run_blocking("check-integration-schema", move || {
            sandbox
                .check_integration_schema(&scope, kind, &schema)
                .map(violations_of)
        })
        .await
    }

    /// A prompt-integration input, or a model's output, against a schema
    /// that passed [`Self::check_integration_schema`]: its violations.
    pub async fn validate_integration(
        &self,
        account: &AccountId,
        schema_key: String,
        schema: String,
        value: String,
    ) -> Result<Vec<Violation>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        run_blocking("validate-integration", move || {
            let schema = SchemaRef {
                key: &schema_key,
                text: &schema,
            };
            sandbox
                .validate_integration(&scope, schema, &value)
                .map(violations_of)
        })
        .await
    }

    /// A `host_interaction` result shaped into the closed interaction.
    pub async fn shape_interaction(
        &self,
        account: &AccountId,
        result: String,
    ) -> Result<Result<ShapedInteraction, Vec<Violation>>, SandboxError> {
        let (sandbox, scope) = (self.sandbox.clone(), scope(account));
        run_blocking("shape-interaction", move || {
            sandbox.shape_interaction(&scope, &result)
        })
        .await
    }
}

fn answer_batch(
    sandbox: &Sandbox,
    scope: &str,
    memo: &Mutex<PatternMemo>,
    questions: Vec<PatternQuestion>,
) -> Vec<PatternVerdict> {
    let started = Instant::now();
    // Verdicts found in this batch, for questions repeating an earlier one.
    let mut fresh: HashMap<(String, Arc<str>, String), HashMap<String, bool>> = HashMap::new();
    let mut out = Vec::with_capacity(questions.len());
    for q in questions {
        let key = (scope.to_owned(), q.input_schema.clone(), q.property.clone());
        let known = |token: &str| -> Option<bool> {
            if let Some(v) = fresh.get(&key).and_then(|m| m.get(token)) {
                return Some(*v);
            }
            let memo = memo.lock().ok()?;
            memo.get(&key).and_then(|m| m.get(token)).copied()
        };
        let verdicts: Vec<Option<bool>> = q.candidates.iter().map(|c| known(c)).collect();
        let unknown: Vec<&String> = q
            .candidates
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.is_none())
            .map(|(c, _)| c)
            .collect();
        let asked = if unknown.is_empty() {
            Vec::new()
        } else if started.elapsed() > PATTERN_BATCH_BUDGET {
            out.push(Err(SandboxError::Deadline(PATTERN_BATCH_BUDGET)));
            continue;
        } else {
            let schema = SchemaRef {
                key: &q.schema_key,
                text: &q.input_schema,
            };
            match sandbox.match_pattern(scope, schema, &q.property, &unknown) {
                Ok(Ok(indexes)) => {
                    let answered: Vec<(String, bool)> = unknown
                        .iter()
                        .enumerate()
                        .map(|(i, c)| ((*c).clone(), indexes.contains(&i)))
                        .collect();
                    if let Ok(mut memo) = memo.lock() {
                        memo.put(key.clone(), answered.clone());
                    }
                    fresh
                        .entry(key.clone())
                        .or_default()
                        .extend(answered.iter().cloned());
                    answered
                }
                // Refusals and faults are not remembered: asked again next turn.
                Ok(Err(violations)) => {
                    out.push(Ok(Err(violations)));
                    continue;
                }
                Err(err) => {
                    out.push(Err(err));
                    continue;
                }
            }
        };
        let matched = q
            .candidates
            .iter()
            .zip(verdicts)
            .enumerate()
            .filter(|(_, (c, v))| v.unwrap_or_else(|| asked.iter().any(|(t, m)| *m && t == *c)))
            .map(|(i, _)| i)
            .collect();
        out.push(Ok(Ok(matched)));
    }
    out
}

/// The sandbox scope of an account: opaque to the guest.
fn scope(account: &AccountId) -> String {
    format!("acct_{}", account.number())
}

fn violations_of(verdict: Result<(), Vec<Violation>>) -> Vec<Violation> {
    verdict.err().unwrap_or_default()
}

/// One guest call on the blocking pool: the one place guest calls are
/// measured (`warden_guest_calls_total`, a `guest {export}` span).
async fn run_blocking<T: GuestAnswer + Send + 'static>(
    export: &'static str,
    call: impl FnOnce() -> Result<T, SandboxError> + Send + 'static,
) -> Result<T, SandboxError> {
    let span = guest_span(export);
    let started = Instant::now();
    let answer = tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|join| {
            Err(SandboxError::Unavailable(format!(
                "sandbox call panicked: {join}"
            )))
        });
    drop(span);
    let outcome = match &answer {
        Ok(answer) if answer.refused() => "refused",
        Ok(_) => "ok",
        Err(err) => guest_fault(err),
    };
    crate::metrics::guest_call(export, outcome, started.elapsed());
    answer
}

/// The span of one guest call, named by its export: a leaf of the trace.
fn guest_span(export: &'static str) -> crate::trace_context::Leaf {
    crate::trace_context::Leaf::start(opentelemetry::trace::SpanKind::Internal, || {
        (
            export.into(),
            vec![opentelemetry::KeyValue::new("warden.guest.export", export)],
        )
    })
}

/// A guest fault as the guest-call metric's outcome.
fn guest_fault(err: &SandboxError) -> &'static str {
    match err {
        SandboxError::Deadline(_) => "deadline",
        SandboxError::MemoryLimit { .. } | SandboxError::TableLimit { .. } => "memory",
        SandboxError::Trap(_) => "trap",
        _ => "fault",
    }
}

/// Whether a guest's answer refused its input (violations found).
trait GuestAnswer {
    fn refused(&self) -> bool;
}

impl GuestAnswer for Vec<Violation> {
    fn refused(&self) -> bool {
        !self.is_empty()
    }
}

impl<T> GuestAnswer for Result<T, Vec<Violation>> {
    fn refused(&self) -> bool {
        self.is_err()
    }
}
