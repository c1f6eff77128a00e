//! Writing a Warden policy guest in Rust: the `warden:policy` export layer,
//! written once, over the default rules (`warden-policy-rules`).
//!
//! A guest is a [`Policy`] and one [`export_policy!`]. Every method of the
//! trait has the default guest's behaviour; a guest overrides what it
//! changes and nothing else. The SDK does the rest: the WIT bindings
//! (`wit/policy.wit`, world `guest`), the conversion of violations, the
//! instance's cache of compiled schemas (by `schema-ref` key) and the
//! mapping of shaped interactions.
//!
//! The default guest (`guest-policy/src/lib.rs`) is
//!
//! ```ignore
//! warden_guest_sdk::export_policy!();
//! ```
//!
//! and a guest with one house rule on definitions
//! (`examples/guests/prefixed-names`) is
//!
//! ```ignore
//! use warden_guest_sdk::{Policy, Value, Violation};
//!
//! struct House;
//!
//! impl Policy for House {
//!     fn extra_definition_rules(definition: &Value) -> Vec<Violation> {
//!         match definition.get("name").and_then(Value::as_str) {
//!             Some(name) if !name.starts_with("acme_") => vec![Violation::new(
//!                 "/name",
//!                 "name-prefix-required",
//!                 "capability names must start with \"acme_\"",
//!             )],
//!             _ => Vec::new(),
//!         }
//!     }
//! }
//!
//! warden_guest_sdk::export_policy!(House);
//! ```
//!
//! The crate that calls `export_policy!` is the component: a `cdylib` built
//! with `cargo build --release --target wasm32-wasip2`. It needs no
//! `wit-bindgen` of its own.

use std::cell::RefCell;
use std::marker::PhantomData;

use warden_policy_rules::cache::SchemaCache;
use warden_policy_rules::{MAX_VIOLATIONS, candidates, definition, interaction};

pub use serde_json::Value;
/// The rule library itself, for guests that build on its pieces.
pub use warden_policy_rules as rules;
pub use warden_policy_rules::Violation;
pub use warden_policy_rules::definition::Options as DefinitionOptions;
pub use warden_policy_rules::interaction::{Kind as InteractionKind, Shaped};
pub use warden_policy_rules::schema::{self, Dialect, Schema};

/// The bindings of `wit/policy.wit` (world `guest`), generated once, here.
/// [`export_policy!`] exports a [`Policy`] through them; a guest never needs
/// them directly.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "guest",
        pub_export_macro: true,
        default_bindings_module: "warden_guest_sdk::bindings",
    });
}

use bindings::exports::warden::policy::validator as wit;

pub use wit::IntegrationSchemaKind;

/// A policy guest: the seven functions of `warden:policy/validator`, each
/// with the default guest's behaviour unless overridden. Violations follow
/// the contract of `wit/policy.wit`: bad input is reported, never a trap,
/// and at most [`MAX_VIOLATIONS`](warden_policy_rules::MAX_VIOLATIONS) per call.
///
/// Schemas arrive compiled (from the instance's cache); a schema that does
/// not compile is reported as one `schema-invalid` violation before any
/// method runs.
pub trait Policy {
    /// Rules a guest adds to the default definition rules (contract 2.5).
    /// Called with every definition that is valid JSON; the violations it
    /// returns come before the default rules'. None by default.
    fn extra_definition_rules(definition: &Value) -> Vec<Violation> {
        let _ = definition;
        Vec::new()
    }

    /// `check-definition`: [`extra_definition_rules`](Policy::extra_definition_rules),
    /// then the default rules.
    fn check_definition(
        definition: &str,
        options: DefinitionOptions,
    ) -> Result<(), Vec<Violation>> {
        let value = warden_policy_rules::parse_json(definition)?;
        let mut violations = Self::extra_definition_rules(&value);
        if let Err(list) = definition::check(&value, options) {
            violations.extend(list);
        }
        violations.truncate(MAX_VIOLATIONS);
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// `validate-arguments`: the arguments of a call against its input schema.
    fn validate_arguments(input_schema: &Schema, arguments: &str) -> Result<(), Vec<Violation>> {
        input_schema.validate_text(arguments)
    }

    /// `prune-output`: the endpoint's result, pruned to its output schema.
    fn prune_output(
        output_schema: &Schema,
        endpoint_result: &str,
    ) -> Result<String, Vec<Violation>> {
        output_schema.prune_text(endpoint_result)
    }

    /// `shape-interaction`: the closed host-interaction result (2.3).
    fn shape_interaction(endpoint_result: &str) -> Result<Shaped, Vec<Violation>> {
        interaction::shape_text(endpoint_result)
    }

    /// `check-integration-schema`: input and output schemas of a prompt
    /// integration share one subset.
    fn check_integration_schema(
        kind: IntegrationSchemaKind,
        schema: &str,
    ) -> Result<(), Vec<Violation>> {
        let _ = kind;
        schema::compile_text(Dialect::Integration, schema).map(|_| ())
    }

    /// `validate-integration`: a value against a prompt integration's schema.
    fn validate_integration(schema: &Schema, value: &str) -> Result<(), Vec<Violation>> {
        schema.validate_text(value)
    }

    /// `match-pattern`: which candidates fit the `pattern` of a property.
    fn match_pattern(
        input_schema: &Schema,
        property: &str,
        candidates: &[String],
    ) -> Result<Vec<u32>, Vec<Violation>> {
        candidates::match_pattern(input_schema, property, candidates)
    }
}

/// Warden's default guest: every default, nothing added.
pub struct DefaultPolicy;

impl Policy for DefaultPolicy {}

/// Exports a [`Policy`] as the component's `warden:policy/validator`:
/// `export_policy!(MyPolicy)`, or `export_policy!()` for [`DefaultPolicy`].
/// Call it once, in the `cdylib` crate that is the component.
#[macro_export]
macro_rules! export_policy {
    () => {
        $crate::export_policy!($crate::DefaultPolicy);
    };
    ($policy:ty) => {
        #[doc(hidden)]
        type __WardenPolicyExport = $crate::Export<$policy>;
        $crate::bindings::export!(__WardenPolicyExport with_types_in $crate::bindings);
    };
}

/// The WIT side of a [`Policy`]; named only by [`export_policy!`].
#[doc(hidden)]
pub struct Export<P>(PhantomData<P>);

thread_local! {
    // One per instance. The host keeps an instance to one account and
    // recycles it after a bounded number of calls, so the cache never
    // crosses accounts.
    static CACHE: RefCell<SchemaCache> = RefCell::new(SchemaCache::new());
}

fn convert(list: Vec<Violation>) -> Vec<wit::Violation> {
    list.into_iter()
        .map(|v| wit::Violation {
            pointer: v.pointer,
            rule: v.rule,
            message: v.message,
        })
        .collect()
}

/// Runs `f` on the compiled form of `schema`, compiling it on a cache miss.
fn with_schema<T>(
    dialect: Dialect,
    schema: &wit::SchemaRef,
    f: impl FnOnce(&Schema) -> Result<T, Vec<Violation>>,
) -> Result<T, Vec<wit::Violation>> {
    let compiled = CACHE
        .with(|c| c.borrow_mut().get(dialect, &schema.key, &schema.text))
        .map_err(|errors| {
            // The schema should have passed the import-time check; report
            // that it did not, with the first reason, at the root.
            let first = errors.into_iter().next();
            vec![wit::Violation {
                pointer: String::new(),
                rule: "schema-invalid".to_string(),
                message: match first {
                    Some(v) => format!("the schema does not compile: {v}"),
                    None => "the schema does not compile".to_string(),
                },
            }]
        })?;
    f(&compiled).map_err(convert)
}

impl<P: Policy> wit::Guest for Export<P> {
    fn check_definition(
        definition: String,
        options: wit::DefinitionOptions,
    ) -> Result<(), Vec<wit::Violation>> {
        let options = DefinitionOptions {
            allow_loopback_http: options.allow_loopback_http,
        };
        P::check_definition(&definition, options).map_err(convert)
    }

    fn validate_arguments(
        input_schema: wit::SchemaRef,
        arguments: String,
    ) -> Result<(), Vec<wit::Violation>> {
        with_schema(Dialect::Input, &input_schema, |s| {
            P::validate_arguments(s, &arguments)
        })
    }

    fn prune_output(
        output_schema: wit::SchemaRef,
        endpoint_result: String,
    ) -> Result<String, Vec<wit::Violation>> {
        with_schema(Dialect::Output, &output_schema, |s| {
            P::prune_output(s, &endpoint_result)
        })
    }

    fn shape_interaction(
        endpoint_result: String,
    ) -> Result<wit::ShapedInteraction, Vec<wit::Violation>> {
        let shaped = P::shape_interaction(&endpoint_result).map_err(convert)?;
        Ok(wit::ShapedInteraction {
            kind: match shaped.kind {
                InteractionKind::ConfirmOperation => wit::InteractionKind::ConfirmOperation,
                InteractionKind::Selection => wit::InteractionKind::Selection,
                InteractionKind::NotFound => wit::InteractionKind::NotFound,
            },
            public: shaped.public.to_string(),
            refs: shaped.refs.to_string(),
            assistant_text: shaped.assistant_text.map(str::to_string),
        })
    }

    fn check_integration_schema(
        kind: IntegrationSchemaKind,
        schema: String,
    ) -> Result<(), Vec<wit::Violation>> {
        P::check_integration_schema(kind, &schema).map_err(convert)
    }

    fn validate_integration(
        schema: wit::SchemaRef,
        value: String,
    ) -> Result<(), Vec<wit::Violation>> {
        with_schema(Dialect::Integration, &schema, |s| {
            P::validate_integration(s, &value)
        })
    }

    fn match_pattern(
        input_schema: wit::SchemaRef,
        property: String,
        candidates: Vec<String>,
    ) -> Result<Vec<u32>, Vec<wit::Violation>> {
        with_schema(Dialect::Input, &input_schema, |s| {
            P::match_pattern(s, &property, &candidates)
        })
    }
}
