//! The server's side of the policy sandbox: wraps `warden_host::Sandbox`
//! (which owns wasmtime, limits and instance pools) so the API layer never
//! touches it directly. Each account is its own sandbox scope: instances,
//! and the validators cached inside them, never serve two accounts.
//!
//! Guest calls are synchronous. The hot ones (validating arguments, pruning
//! a result, matching patterns) are usually tens of microseconds, less than
//! a trip to the blocking pool and back costs: those with small inputs run
//! first where they are asked, under a short budget ([`dispatch`]), and
//! only a call that overruns it is run again on the blocking pool with the
//! full deadline (guest calls are pure, so the second run answers as the
//! first would have). Its schema is then remembered as slow
//! and goes to the pool directly, so a tenant's slow schema or catastrophic
//! pattern costs a runtime thread one budget, not one per call. Slow means
//! the call used its thread's CPU for most of the budget: one stopped
//! because its thread waited for a CPU (the budget is kept in wall-clock
//! ticks) is asked again on the pool without marking its schema, which
//! would otherwise send every later call of a quick schema to the pool
//! after one busy moment. Every other
//! call runs on the blocking pool, so a guest at its deadline never holds
//! up a runtime thread.
//!
//! A turn asks `match-pattern` about every patterned property of every
//! capability: [`PolicySandbox::match_patterns`] takes them in one trip to
//! the blocking pool, asks the guest once per distinct schema text, and
//! remembers the guest's verdict per token ([`patterns`]), so a turn
//! with 1,000 capabilities costs the guest only the words it has not judged
//! yet. The memo holds verdicts, never patterns: a tenant's pattern still
//! runs only in the guest.

use serde_json::Value;
use std::sync::{Arc, Mutex};

mod dispatch;
mod patterns;

use dispatch::{INLINE_BUDGET, INLINE_INPUT_BYTES, SlowSchemas, run_blocking};
pub use patterns::{PatternMemo, PatternQuestion, PatternVerdict};

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

/// The sandbox scope of an account: opaque to the guest.
fn scope(account: &AccountId) -> String {
    format!("acct_{}", account.number())
}

fn violations_of(verdict: Result<(), Vec<Violation>>) -> Vec<Violation> {
    verdict.err().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    /// An account as the server has one: made by the store.
    async fn tenant() -> AccountId {
        let store = crate::store::Store::connect("sqlite::memory:")
            .await
            .unwrap();
        store.create_account("tenant").await.unwrap()
    }

    /// Spins on this thread until it has used `cpu` of CPU time.
    fn spin_for(cpu: Duration) {
        let begun = dispatch::ThreadCpu::start();
        while begun.used().unwrap() < cpu {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn the_threads_cpu_clock_counts_work_not_waiting() {
        let cpu = dispatch::ThreadCpu::start();
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            cpu.used().unwrap() < Duration::from_millis(5),
            "{:?}",
            cpu.used()
        );
        spin_for(Duration::from_millis(3));
        assert!(cpu.used().unwrap() >= Duration::from_millis(3));
    }

    /// An overrun is the schema's when the call used the CPU for it, not
    /// when its thread only waited for a CPU past the budget's wall-clock
    /// ticks (as under load on shared cores): then the schema keeps being
    /// tried where it is asked.
    #[test]
    fn only_an_overrun_on_the_cpu_marks_a_schema_slow() {
        let sandbox = sandbox();
        let judge = |cpu: dispatch::ThreadCpu| {
            let used = cpu.used();
            dispatch::judge_overrun(
                &sandbox.slow,
                "match-pattern",
                "acct_1",
                "cap_w@1/input",
                used,
            )
        };
        let waited = dispatch::ThreadCpu::start();
        std::thread::sleep(INLINE_BUDGET * 2);
        judge(waited);
        assert!(!sandbox.is_slow("acct_1", "cap_w@1/input"));

        let worked = dispatch::ThreadCpu::start();
        spin_for(INLINE_BUDGET);
        judge(worked);
        assert!(sandbox.is_slow("acct_1", "cap_w@1/input"));
    }

    /// An argument or output call that overran inline is judged by its
    /// retry on the pool, which runs to its end: a slow schema's is marked
    /// at once (the retry used the CPU), and its next call goes to the
    /// pool without an inline attempt.
    #[tokio::test]
    async fn a_slow_argument_schema_is_judged_by_its_retry_on_the_pool() {
        let sandbox = sandbox();
        let account = tenant().await;
        let arguments = format!(r#"{{"code":"{}"}}"#, "a".repeat(600));
        let validate = || {
            sandbox.validate_arguments(
                &account,
                "cap_s@1/input".into(),
                SLOW.into(),
                arguments.clone(),
            )
        };

        let err = validate().await.unwrap_err();
        assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
        // Stopped inline at the budget, then at the pool's deadline.
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 2);
        assert!(sandbox.is_slow(&scope(&account), "cap_s@1/input"));

        let err = validate().await.unwrap_err();
        assert!(matches!(err, SandboxError::Deadline(_)), "{err:?}");
        assert_eq!(sandbox.sandbox.stats().discarded_after_fault, 3);
    }

    #[tokio::test]
    async fn a_slow_schema_overruns_its_inline_budget_once_then_goes_to_the_pool() {
        let sandbox = sandbox();
        let account = tenant().await;
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
}
