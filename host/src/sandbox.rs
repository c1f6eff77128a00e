//! The public API: one method per world function, each scoped to an account.

use std::sync::Arc;
use std::time::Duration;

use crate::bindings::{self, v};
use crate::config::SandboxConfig;
use crate::error::{LoadError, SandboxError};
use crate::guest::{self, GuestInfo, GuestSource};
use crate::pool::{CallStop, Fault, Pool, PoolStats};
use crate::types::{
    DefinitionOptions, GuestJson, IntegrationSchemaKind, JsonObject, SchemaRef, ShapedInteraction,
    Verdict, Violation,
};

/// Most violations a guest may return from one call (WIT error contract).
const MAX_VIOLATIONS: usize = 100;
/// Longest schema key.
const MAX_KEY_BYTES: usize = 256;

/// A loaded policy guest with its engine, limits and instance pool.
///
/// Cheap to clone (an `Arc`); `Send + Sync`. Every method takes `account`,
/// an opaque string naming the account the call is for: instances (and the
/// compiled schemas they cache) are never shared between two accounts.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
    /// Where this handle's calls stop: the configured deadline, or the
    /// short budget of a handle made by [`Sandbox::within`].
    stop: CallStop,
}

struct Inner {
    pool: Pool,
    info: GuestInfo,
}

impl Sandbox {
    /// Loads a guest with the default limits.
    pub fn load(source: GuestSource) -> Result<Sandbox, LoadError> {
        Self::load_with(source, SandboxConfig::default())
    }

    /// Loads a guest with explicit limits. Compiles it (or loads the cached
    /// compilation), refuses it if it does not export the world, and
    /// instantiates it once to make sure it starts within its limits.
    pub fn load_with(source: GuestSource, config: SandboxConfig) -> Result<Sandbox, LoadError> {
        let engine = config
            .engine()
            .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let loaded = guest::load(&engine, &source, &config)?;
        let name = loaded.info.name.clone();
        let sandbox = Sandbox {
            inner: Arc::new(Inner {
                pool: Pool::new(engine, loaded.pre, config),
                info: loaded.info,
            }),
            stop: CallStop::Deadline,
        };
        sandbox
            .call("warden:load-probe", |_, _| Ok(()))
            .map_err(|e| LoadError::Link {
                name,
                reason: format!("the guest does not start: {e}"),
            })?;
        sandbox.inner.pool.forget("warden:load-probe");
        Ok(sandbox)
    }

    /// The same guest, limits and instances, but every call of the returned
    /// handle stops once it has run for `budget` (rounded up to the epoch
    /// tick, plus at most one tick) and answers
    /// [`SandboxError::OverBudget`] instead of running on to the deadline.
    /// For callers that would rather run a short call where they are (on an
    /// async runtime's thread, say) than hand it to another thread, and run
    /// it again elsewhere with the full deadline when it turns out not to
    /// be short: guest calls are pure, so the second run gives the answer
    /// the first would have. The overrunning instance is discarded, as
    /// after any interruption.
    pub fn within(&self, budget: Duration) -> Sandbox {
        Sandbox {
            inner: self.inner.clone(),
            stop: CallStop::Budget(budget),
        }
    }

    /// What was loaded.
    pub fn info(&self) -> &GuestInfo {
        &self.inner.info
    }

    /// The limits in force.
    pub fn config(&self) -> &SandboxConfig {
        self.inner.pool.config()
    }

    /// Instance counters.
    pub fn stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }

    /// Ids of the idle instances kept for `account` (for tests and
    /// diagnostics: an id never reappears after its instance faulted).
    #[doc(hidden)]
    pub fn idle_instance_ids(&self, account: &str) -> Vec<u64> {
        self.inner.pool.idle_ids(account)
    }

    /// `check-definition`: contract 2.5 and 2.6 on one capability definition.
    pub fn check_definition(
        &self,
        account: &str,
        definition: &str,
        options: DefinitionOptions,
    ) -> Result<Verdict<()>, SandboxError> {
        self.input(
            "the capability definition",
            definition,
            self.config().max_document_bytes,
        )?;
        let opts = v::DefinitionOptions::from(options);
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_check_definition(store, definition, opts)?;
            verdict(r, max_out, |_| 0)
        })
    }

    /// `validate-arguments`: the arguments of a call against an input schema.
    pub fn validate_arguments(
        &self,
        account: &str,
        input_schema: SchemaRef<'_>,
        arguments: &str,
    ) -> Result<Verdict<()>, SandboxError> {
        self.schema(input_schema)?;
        self.input("the arguments", arguments, self.config().max_schema_bytes)?;
        let s = bindings::schema_ref(input_schema);
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_validate_arguments(store, s, arguments)?;
            verdict(r, max_out, |_| 0)
        })
    }

    /// `prune-output`: drops undeclared fields of an endpoint result and
    /// validates the rest; returns the pruned JSON text, to be checked by
    /// whoever parses it ([`GuestJson`]).
    pub fn prune_output(
        &self,
        account: &str,
        output_schema: SchemaRef<'_>,
        endpoint_result: &str,
    ) -> Result<Verdict<GuestJson>, SandboxError> {
        self.schema(output_schema)?;
        self.input(
            "the endpoint result",
            endpoint_result,
            self.config().max_document_bytes,
        )?;
        let s = bindings::schema_ref(output_schema);
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_prune_output(store, s, endpoint_result)?;
            Ok(verdict(r, max_out, String::len)?.map(GuestJson::new))
        })
    }

    /// `shape-interaction`: a `host_interaction` result into the closed
    /// interaction, references apart.
    pub fn shape_interaction(
        &self,
        account: &str,
        endpoint_result: &str,
    ) -> Result<Verdict<ShapedInteraction>, SandboxError> {
        self.input(
            "the endpoint result",
            endpoint_result,
            self.config().max_document_bytes,
        )?;
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_shape_interaction(store, endpoint_result)?;
            let size = |s: &v::ShapedInteraction| {
                s.public.len() + s.refs.len() + s.assistant_text.as_ref().map_or(0, String::len)
            };
            Ok(match verdict(r, max_out, size)? {
                // Both parts are small; parsing them here is the check, and a
                // guest that breaks it is dropped like any other fault.
                Ok(s) => Ok(ShapedInteraction {
                    kind: s.kind.into(),
                    public: json_object(&s.public, "shape-interaction public")?,
                    refs: json_object(&s.refs, "shape-interaction refs")?,
                    assistant_text: s.assistant_text,
                }),
                Err(v) => Err(v),
            })
        })
    }

    /// `check-integration-schema`: the 2.13 subset.
    pub fn check_integration_schema(
        &self,
        account: &str,
        kind: IntegrationSchemaKind,
        schema: &str,
    ) -> Result<Verdict<()>, SandboxError> {
        self.input("the schema", schema, self.config().max_schema_bytes)?;
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g.warden_policy_validator().call_check_integration_schema(
                store,
                kind.into(),
                schema,
            )?;
            verdict(r, max_out, |_| 0)
        })
    }

    /// `validate-integration`: an integration input (or model output).
    pub fn validate_integration(
        &self,
        account: &str,
        schema: SchemaRef<'_>,
        value: &str,
    ) -> Result<Verdict<()>, SandboxError> {
        self.schema(schema)?;
        self.input("the value", value, self.config().max_schema_bytes)?;
        let s = bindings::schema_ref(schema);
        let max_out = self.config().max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_validate_integration(store, s, value)?;
            verdict(r, max_out, |_| 0)
        })
    }

    /// `match-pattern`: which of `candidates` match the `pattern` of the
    /// top-level property `property` of an input schema. Returns their
    /// indexes, ascending. One call judges a whole batch (all the candidate
    /// values of one turn), so a tenant's pattern runs only here, under the
    /// deadline, however many candidates there are.
    pub fn match_pattern<S: AsRef<str>>(
        &self,
        account: &str,
        input_schema: SchemaRef<'_>,
        property: &str,
        candidates: &[S],
    ) -> Result<Verdict<Vec<usize>>, SandboxError> {
        self.schema(input_schema)?;
        let config = self.config();
        self.input("the property name", property, config.max_schema_bytes)?;
        if candidates.len() > config.max_candidates {
            return Err(SandboxError::InputTooLarge {
                what: "the candidate list (in strings)",
                size: candidates.len(),
                limit: config.max_candidates,
            });
        }
        let total: usize = candidates.iter().map(|c| c.as_ref().len()).sum();
        if total > config.max_schema_bytes {
            return Err(SandboxError::InputTooLarge {
                what: "the candidates",
                size: total,
                limit: config.max_schema_bytes,
            });
        }
        let list: Vec<&str> = candidates.iter().map(AsRef::as_ref).collect();
        let s = bindings::schema_ref(input_schema);
        let max_out = config.max_output_bytes;
        self.call(account, |store, g| {
            let r = g
                .warden_policy_validator()
                .call_match_pattern(store, s, property, &list)?;
            match verdict(r, max_out, |v| v.len() * 4)? {
                Ok(indexes) => Ok(Ok(checked_indexes(indexes, list.len())?)),
                Err(v) => Ok(Err(v)),
            }
        })
    }

    fn call<R>(
        &self,
        account: &str,
        f: impl FnOnce(
            &mut wasmtime::Store<crate::pool::StoreState>,
            &bindings::Guest,
        ) -> Result<R, Fault>,
    ) -> Result<R, SandboxError> {
        self.inner.pool.call(account, self.stop, f)
    }

    fn input(&self, what: &'static str, text: &str, limit: usize) -> Result<(), SandboxError> {
        if text.len() > limit {
            return Err(SandboxError::InputTooLarge {
                what,
                size: text.len(),
                limit,
            });
        }
        Ok(())
    }

    fn schema(&self, s: SchemaRef<'_>) -> Result<(), SandboxError> {
        self.input("the schema key", s.key, MAX_KEY_BYTES)?;
        self.input("the schema", s.text, self.config().max_schema_bytes)
    }
}

/// Checks what a guest returned against the error contract and the output
/// cap; a breach is a fault (the instance is discarded).
fn verdict<T>(
    r: Result<T, Vec<v::Violation>>,
    max_out: usize,
    size_of: impl Fn(&T) -> usize,
) -> Result<Verdict<T>, Fault> {
    match r {
        Ok(value) => {
            let size = size_of(&value);
            if size > max_out {
                return Err(Fault::Refused(SandboxError::OutputTooLarge {
                    size,
                    limit: max_out,
                }));
            }
            Ok(Ok(value))
        }
        Err(list) => {
            if list.is_empty() {
                return Err(Fault::Refused(SandboxError::Contract(
                    "an error with no violation".into(),
                )));
            }
            if list.len() > MAX_VIOLATIONS {
                return Err(Fault::Refused(SandboxError::Contract(format!(
                    "{} violations; at most {MAX_VIOLATIONS} are allowed",
                    list.len()
                ))));
            }
            let size: usize = list
                .iter()
                .map(|v| v.pointer.len() + v.rule.len() + v.message.len())
                .sum();
            if size > max_out {
                return Err(Fault::Refused(SandboxError::OutputTooLarge {
                    size,
                    limit: max_out,
                }));
            }
            Ok(Err(list.into_iter().map(Violation::from).collect()))
        }
    }
}

/// `match-pattern`'s answer must name each candidate at most once, in
/// ascending order, within the list: anything else is a broken contract.
fn checked_indexes(indexes: Vec<u32>, candidates: usize) -> Result<Vec<usize>, Fault> {
    let mut out = Vec::with_capacity(indexes.len());
    for i in indexes {
        let i = i as usize;
        if i >= candidates || out.last().is_some_and(|&last| last >= i) {
            return Err(Fault::Refused(SandboxError::Contract(format!(
                "match-pattern returned index {i}, not ascending within {candidates} candidates"
            ))));
        }
        out.push(i);
    }
    Ok(out)
}

fn json_object(text: &str, what: &str) -> Result<JsonObject, Fault> {
    serde_json::from_str(text).map_err(|e| {
        Fault::Refused(SandboxError::Contract(format!(
            "{what} is not a JSON object: {e}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_pattern_indexes_must_be_ascending_and_in_range() {
        assert_eq!(checked_indexes(vec![0, 2, 5], 6).ok(), Some(vec![0, 2, 5]));
        for bad in [vec![6], vec![1, 1], vec![3, 2]] {
            assert!(checked_indexes(bad.clone(), 6).is_err(), "{bad:?}");
        }
    }
}
