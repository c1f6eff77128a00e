//! The server's side of the policy sandbox: wraps `warden_host::Sandbox`
//! (which owns wasmtime, limits and instance pools) so the API layer never
//! touches it directly. Each account is its own sandbox scope: instances,
//! and the validators cached inside them, never serve two accounts.
//!
//! Guest calls are synchronous. The hot ones (validating arguments, pruning
//! a result, matching patterns) are usually tens of microseconds, less than
//! a trip to the blocking pool and back costs: those with small inputs run
//! first where they are asked, under a short budget ([`INLINE_BUDGET`]), and
//! only a call that overruns it is run again on the blocking pool with the
//! full deadline (guest calls are pure, so the second run answers as the
//! first would have). Its schema is then remembered as slow ([`SlowSchemas`])
//! and goes to the pool directly, so a tenant's slow schema or catastrophic
//! pattern costs a runtime thread one budget, not one per call. Every other
//! call runs on the blocking pool, so a guest at its deadline never holds
//! up a runtime thread.
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
    /// The same sandbox, its calls stopped at [`INLINE_BUDGET`].
    inline: Sandbox,
    options: DefinitionOptions,
    memo: Arc<Mutex<PatternMemo>>,
    slow: Arc<Mutex<SlowSchemas>>,
}

/// How long a guest call may run on the thread that asks for it before it
/// is stopped and run again on the blocking pool. A warm call with a small
/// input takes 10–100 µs; the epoch tick (2 ms) rounds this up, so a
/// runtime thread is held at most 4 ms by a call that turns out slow (a
/// pattern batch, which asks nothing more once its budget is spent, at
/// most about 6 ms).
const INLINE_BUDGET: Duration = Duration::from_millis(2);

/// Inputs (schema text, arguments, endpoint result, candidates) larger than
/// this go to the blocking pool at once: their call is not short.
const INLINE_INPUT_BYTES: usize = 16 << 10;

/// Schemas whose calls overran [`INLINE_BUDGET`]: (account scope, schema
/// key). Their calls go to the blocking pool without trying inline first.
/// Bounded: cleared whole when full (a cleared schema costs one budget more).
#[derive(Default)]
struct SlowSchemas {
    /// Account scope → its slow schema keys: looked up by `&str`, so the
    /// check on every hot call allocates nothing once some schema is slow.
    by_scope: HashMap<String, std::collections::HashSet<String>>,
    count: usize,
}

/// Schemas remembered as slow at most, over all accounts.
const SLOW_SCHEMAS: usize = 10_000;

impl SlowSchemas {
    fn contains(&self, scope: &str, schema_key: &str) -> bool {
        self.by_scope
            .get(scope)
            .is_some_and(|keys| keys.contains(schema_key))
    }

    fn insert(&mut self, scope: &str, schema_key: &str) {
        if self.count >= SLOW_SCHEMAS {
            self.by_scope.clear();
            self.count = 0;
        }
        if self
            .by_scope
            .entry(scope.to_owned())
            .or_default()
            .insert(schema_key.to_owned())
        {
            self.count += 1;
        }
    }
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
            inline: sandbox.within(INLINE_BUDGET),
            sandbox,
            options: DefinitionOptions {
                allow_loopback_http: args.dev_allow_loopback,
            },
            memo: Arc::default(),
            slow: Arc::default(),
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
        let scope = scope(account);
        let short = input_schema.len() + arguments.len() <= INLINE_INPUT_BYTES;
        self.run_short_or_blocking(
            "validate-arguments",
            short,
            scope,
            schema_key,
            move |sandbox, scope, key| {
                let schema = SchemaRef {
                    key,
                    text: &input_schema,
                };
                sandbox
                    .validate_arguments(scope, schema, &arguments)
                    .map(violations_of)
            },
        )
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
        let scope = scope(account);
        let short = output_schema.len() + result.len() <= INLINE_INPUT_BYTES;
        let pruned = self
            .run_short_or_blocking(
                "prune-output",
                short,
                scope,
                schema_key,
                move |sandbox, scope, key| {
                    let schema = SchemaRef {
                        key,
                        text: &output_schema,
                    };
                    sandbox.prune_output(scope, schema, &result)
                },
            )
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
        let scope = scope(account);
        let count = questions.len();
        let span = guest_span("match-pattern");
        let started = Instant::now();
        // Where it is asked first: usually every token is in the memo, or
        // the few new ones are short calls.
        let inline = answer_batch(
            &self.inline,
            &scope,
            &self.memo,
            &questions,
            BatchMode::Inline { slow: &self.slow },
        );
        let verdicts = match inline {
            Ok(verdicts) => verdicts,
            Err(Unfinished { overran }) => {
                if let Some(schema_key) = overran {
                    self.mark_slow("match-pattern", &scope, &schema_key);
                }
                // The rest on the blocking pool; verdicts found inline are
                // in the memo by now.
                let (sandbox, memo) = (self.sandbox.clone(), self.memo.clone());
                tokio::task::spawn_blocking(move || {
                    // The pool's batch always finishes (`Unfinished` is
                    // the inline mode's); were it not to, nothing is lost.
                    answer_batch(&sandbox, &scope, &memo, &questions, BatchMode::Pool)
                        .unwrap_or_else(|_| unavailable(count, "the batch did not finish"))
                })
                .await
                .unwrap_or_else(|join| {
                    unavailable(count, &format!("sandbox call panicked: {join}"))
                })
            }
        };
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

/// Where a batch of pattern questions is answered.
#[derive(Clone, Copy)]
enum BatchMode<'a> {
    /// On the blocking pool: every question answered within
    /// [`PATTERN_BATCH_BUDGET`], those left over with a deadline error.
    Pool,
    /// Where it is asked, with the [`INLINE_BUDGET`] sandbox: stops, to be
    /// finished on the pool, at the first question that is not short (its
    /// inputs, or its schema known slow), overruns, or finds the batch's
    /// time spent.
    Inline { slow: &'a Mutex<SlowSchemas> },
}

/// An inline batch left for the pool; `overran` names the schema whose
/// guest call overran the budget, if that was why.
struct Unfinished {
    overran: Option<String>,
}

fn answer_batch(
    sandbox: &Sandbox,
    scope: &str,
    memo: &Mutex<PatternMemo>,
    questions: &[PatternQuestion],
    mode: BatchMode<'_>,
) -> Result<Vec<PatternVerdict>, Unfinished> {
    let started = Instant::now();
    // Verdicts found in this batch, for questions repeating an earlier one.
    let mut fresh = FreshVerdicts::new();
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
        } else {
            match mode {
                BatchMode::Inline { slow } => {
                    let size =
                        q.input_schema.len() + unknown.iter().map(|c| c.len()).sum::<usize>();
                    let known_slow = slow
                        .lock()
                        .map(|slow| slow.contains(scope, &q.schema_key))
                        .unwrap_or(true);
                    if size > INLINE_INPUT_BYTES || known_slow || started.elapsed() > INLINE_BUDGET
                    {
                        return Err(Unfinished { overran: None });
                    }
                }
                BatchMode::Pool if started.elapsed() > PATTERN_BATCH_BUDGET => {
                    out.push(Err(SandboxError::Deadline(PATTERN_BATCH_BUDGET)));
                    continue;
                }
                BatchMode::Pool => {}
            }
            match ask_guest(sandbox, scope, memo, &mut fresh, &key, q, &unknown) {
                Ok(Ok(answered)) => answered,
                // Only the inline handle stops at a budget.
                Err(SandboxError::OverBudget(_)) => {
                    return Err(Unfinished {
                        overran: Some(q.schema_key.clone()),
                    });
                }
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
    Ok(out)
}

/// What the memo is keyed by: (account scope, schema text, property).
type MemoKey = (String, Arc<str>, String);

/// The verdicts a batch found, by memo key and token.
type FreshVerdicts = HashMap<MemoKey, HashMap<String, bool>>;

/// The guest's verdict on each asked token, or its refusal.
type Answered = Result<Vec<(String, bool)>, Vec<Violation>>;

/// Asks the guest about a question's `unknown` tokens; what it answers is
/// remembered in the memo and in `fresh`. Refusals and faults are not
/// remembered: they are asked again next turn.
fn ask_guest(
    sandbox: &Sandbox,
    scope: &str,
    memo: &Mutex<PatternMemo>,
    fresh: &mut FreshVerdicts,
    key: &MemoKey,
    q: &PatternQuestion,
    unknown: &[&String],
) -> Result<Answered, SandboxError> {
    let schema = SchemaRef {
        key: &q.schema_key,
        text: &q.input_schema,
    };
    let indexes = match sandbox.match_pattern(scope, schema, &q.property, unknown)? {
        Ok(indexes) => indexes,
        Err(violations) => return Ok(Err(violations)),
    };
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
    Ok(Ok(answered))
}

/// `count` verdicts saying the sandbox could not answer.
fn unavailable(count: usize, why: &str) -> Vec<PatternVerdict> {
    (0..count)
        .map(|_| Err(SandboxError::Unavailable(why.to_owned())))
        .collect()
}

/// The sandbox scope of an account: opaque to the guest.
fn scope(account: &AccountId) -> String {
    format!("acct_{}", account.number())
}

fn violations_of(verdict: Result<(), Vec<Violation>>) -> Vec<Violation> {
    verdict.err().unwrap_or_default()
}

impl PolicySandbox {
    /// One hot guest call on `scope` and the schema `schema_key`: where it
    /// is asked, under [`INLINE_BUDGET`], when its inputs are `short` and
    /// the schema is not known to be slow; on the blocking pool otherwise,
    /// and again there (with the full deadline) when the short run overran.
    async fn run_short_or_blocking<T: GuestAnswer + Send + 'static>(
        &self,
        export: &'static str,
        short: bool,
        scope: String,
        schema_key: String,
        call: impl Fn(&Sandbox, &str, &str) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        if short && !self.is_slow(&scope, &schema_key) {
            let span = guest_span(export);
            let started = Instant::now();
            match call(&self.inline, &scope, &schema_key) {
                Err(SandboxError::OverBudget(_)) => {
                    drop(span);
                    self.mark_slow(export, &scope, &schema_key);
                }
                answer => {
                    drop(span);
                    observe_guest_call(export, started, &answer);
                    return answer;
                }
            }
        }
        let sandbox = self.sandbox.clone();
        run_blocking(export, move || call(&sandbox, &scope, &schema_key)).await
    }

    fn is_slow(&self, scope: &str, schema_key: &str) -> bool {
        self.slow
            .lock()
            .map(|slow| slow.contains(scope, schema_key))
            .unwrap_or(true)
    }

    /// Remembers that a call on `schema_key` overran [`INLINE_BUDGET`].
    fn mark_slow(&self, export: &'static str, scope: &str, schema_key: &str) {
        tracing::debug!(export, schema_key, budget = ?INLINE_BUDGET,
            "a guest call overran its inline budget; its schema now goes to the blocking pool");
        if let Ok(mut slow) = self.slow.lock() {
            slow.insert(scope, schema_key);
        }
    }
}

/// One guest call on the blocking pool.
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
    observe_guest_call(export, started, &answer);
    answer
}

/// The one place a guest call's answer is counted
/// (`warden_guest_calls_total` and its duration), wherever it ran.
fn observe_guest_call<T: GuestAnswer>(
    export: &'static str,
    started: Instant,
    answer: &Result<T, SandboxError>,
) {
    let outcome = match answer {
        Ok(answer) if answer.refused() => "refused",
        Ok(_) => "ok",
        Err(err) => guest_fault(err),
    };
    crate::metrics::guest_call(export, outcome, started.elapsed());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> PolicySandbox {
        PolicySandbox::load(&SandboxArgs {
            policy_guest: None,
            guest_cache_dir: None,
            guest_memory_reservation_mib: None,
            dev_allow_loopback: false,
        })
        .expect("the default guest loads")
    }

    /// A pattern the guest's engine needs seconds for on 600 `a`s: the guest is
    /// stopped, first at the inline budget, then at the deadline.
    const SLOW: &str = r#"{"type":"object","additionalProperties":false,"properties":{"code":{"type":"string","maxLength":1000,"pattern":"a*a*a*b"}}}"#;
    const QUICK: &str = r#"{"type":"object","additionalProperties":false,"properties":{"code":{"type":"string","maxLength":20,"pattern":"^M[0-9]+$"}}}"#;

    fn question(schema_key: &str, schema: &str, candidates: &[&str]) -> PatternQuestion {
        PatternQuestion {
            schema_key: schema_key.into(),
            input_schema: schema.into(),
            property: "code".into(),
            candidates: candidates.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    #[tokio::test]
    async fn a_slow_schema_overruns_its_inline_budget_once_then_goes_to_the_pool() {
        let sandbox = sandbox();
        // An account as the server has one: made by the store.
        let store = crate::store::Store::connect("sqlite::memory:")
            .await
            .unwrap();
        let account = store.create_account("tenant").await.unwrap();
        let scope = scope(&account);
        let long = "a".repeat(600);

        // Quick questions are answered where they are asked, correctly.
        let verdicts = sandbox
            .match_patterns(
                &account,
                vec![question("cap_q@1/input", QUICK, &["M12", "x"])],
            )
            .await;
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].as_ref().unwrap().as_ref().unwrap(), &vec![0]);
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 0);

        // The slow one overruns inline (one instance dropped), is asked
        // again on the pool with the full deadline (a second one), and its
        // schema is remembered as slow.
        let verdicts = sandbox
            .match_patterns(&account, vec![question("cap_s@1/input", SLOW, &[&long])])
            .await;
        assert!(
            matches!(verdicts[0], Err(SandboxError::Deadline(_))),
            "{:?}",
            verdicts[0].as_ref().err()
        );
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 2);
        assert!(sandbox.is_slow(&scope, "cap_s@1/input"));
        assert!(!sandbox.is_slow(&scope, "cap_q@1/input"));

        // From then on the schema goes to the pool at once: one more
        // interruption per call, not two, for arguments as for patterns.
        let arguments = format!(r#"{{"code":"{long}"}}"#);
        let err = sandbox
            .validate_arguments(&account, "cap_s@1/input".into(), SLOW.into(), arguments)
            .await
            .unwrap_err();
        assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 3);

        // Another account's same schema is its own: not known slow there.
        assert!(!sandbox.is_slow("acct_other", "cap_s@1/input"));

        // And a quick call still answers inline, with violations as data.
        let violations = sandbox
            .validate_arguments(
                &account,
                "cap_q@1/input".into(),
                QUICK.into(),
                r#"{"code":"x"}"#.into(),
            )
            .await
            .unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 3);
    }

    #[test]
    fn the_slow_set_is_bounded() {
        let mut slow = SlowSchemas::default();
        for i in 0..SLOW_SCHEMAS + 5 {
            slow.insert("acct_1", &format!("cap_{i}@1/input"));
        }
        assert!(slow.count <= SLOW_SCHEMAS);
        assert!(slow.contains("acct_1", &format!("cap_{}@1/input", SLOW_SCHEMAS + 4)));
    }
}
