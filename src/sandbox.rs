//! The server's side of the policy sandbox: wraps `warden_host::Sandbox`
//! (which owns wasmtime, limits and instance pools) so the API layer never
//! touches it directly. Each account is its own sandbox scope: instances,
//! and the validators cached inside them, never serve two accounts.
//!
//! Guest calls are short but synchronous; they run on the blocking pool so a
//! guest at its deadline never holds up a runtime thread.

use serde_json::Value;

use warden_host::{DefinitionOptions, GuestSource, Sandbox, SandboxConfig, SchemaRef};
pub use warden_host::{InteractionKind, SandboxError, ShapedInteraction, Violation};

use crate::cli::SandboxArgs;
use crate::domain::account::AccountId;

#[derive(Clone)]
pub struct PolicySandbox {
    sandbox: Sandbox,
    options: DefinitionOptions,
}

impl PolicySandbox {
    /// Loads the configured guest (or the embedded default) and checks it
    /// against the world; a guest that does not fit is refused here.
    pub fn load(args: &SandboxArgs) -> anyhow::Result<Self> {
        let source = GuestSource::from_option(args.policy_guest.as_deref());
        let config = SandboxConfig {
            cache_dir: args.guest_cache_dir.clone(),
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
        })
    }

    pub fn allows_loopback(&self) -> bool {
        self.options.allow_loopback_http
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
        run_blocking(move || {
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
        run_blocking(move || {
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
        let pruned = run_blocking(move || {
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
        run_blocking(move || {
            let schema = SchemaRef {
                key: &schema_key,
                text: &input_schema,
            };
            sandbox.match_pattern(&scope, schema, &property, &candidates)
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
        run_blocking(move || sandbox.shape_interaction(&scope, &result)).await
    }
}

/// The sandbox scope of an account: opaque to the guest.
fn scope(account: &AccountId) -> String {
    format!("acct_{}", account.number())
}

fn violations_of(verdict: Result<(), Vec<Violation>>) -> Vec<Violation> {
    verdict.err().unwrap_or_default()
}

async fn run_blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, SandboxError> + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|join| {
            Err(SandboxError::Unavailable(format!(
                "sandbox call panicked: {join}"
            )))
        })
}
