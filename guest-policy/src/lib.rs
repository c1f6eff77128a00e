//! The default policy guest: a thin export layer over `warden-policy-rules`.
//!
//! All rules live in the `rules/` library; this file only converts between
//! the WIT types and the library's, and keeps the instance's cache of
//! compiled schemas. The host keeps an instance to one account and recycles
//! it after a bounded number of calls, so the cache never crosses accounts.

use std::cell::RefCell;

use warden_policy_rules::cache::SchemaCache;
use warden_policy_rules::schema::{self, Dialect};
use warden_policy_rules::{Violation as RuleViolation, candidates, definition, interaction};

wit_bindgen::generate!({
    path: "../wit",
    world: "guest",
});

use exports::warden::policy::validator::{
    DefinitionOptions, Guest, IntegrationSchemaKind, InteractionKind, SchemaRef, ShapedInteraction,
    Violation,
};

thread_local! {
    static CACHE: RefCell<SchemaCache> = RefCell::new(SchemaCache::new());
}

fn convert(list: Vec<RuleViolation>) -> Vec<Violation> {
    list.into_iter()
        .map(|v| Violation {
            pointer: v.pointer,
            rule: v.rule,
            message: v.message,
        })
        .collect()
}

fn with_schema<T>(
    dialect: Dialect,
    schema: &SchemaRef,
    f: impl FnOnce(&schema::Schema) -> Result<T, Vec<RuleViolation>>,
) -> Result<T, Vec<Violation>> {
    let compiled = CACHE
        .with(|c| c.borrow_mut().get(dialect, &schema.key, &schema.text))
        .map_err(|errors| {
            // The schema should have passed the import-time check; report
            // that it did not, with the first reason, at the root.
            let first = errors.into_iter().next();
            vec![Violation {
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

struct Policy;

impl Guest for Policy {
    fn check_definition(
        definition: String,
        options: DefinitionOptions,
    ) -> Result<(), Vec<Violation>> {
        let opts = definition::Options {
            allow_loopback_http: options.allow_loopback_http,
        };
        definition::check_text(&definition, opts).map_err(convert)
    }

    fn validate_arguments(
        input_schema: SchemaRef,
        arguments: String,
    ) -> Result<(), Vec<Violation>> {
        with_schema(Dialect::Input, &input_schema, |s| {
            s.validate_text(&arguments)
        })
    }

    fn prune_output(
        output_schema: SchemaRef,
        endpoint_result: String,
    ) -> Result<String, Vec<Violation>> {
        with_schema(Dialect::Output, &output_schema, |s| {
            s.prune_text(&endpoint_result)
        })
    }

    fn shape_interaction(endpoint_result: String) -> Result<ShapedInteraction, Vec<Violation>> {
        let shaped = interaction::shape_text(&endpoint_result).map_err(convert)?;
        Ok(ShapedInteraction {
            kind: match shaped.kind {
                interaction::Kind::ConfirmOperation => InteractionKind::ConfirmOperation,
                interaction::Kind::Selection => InteractionKind::Selection,
                interaction::Kind::NotFound => InteractionKind::NotFound,
            },
            public: shaped.public.to_string(),
            refs: shaped.refs.to_string(),
            assistant_text: shaped.assistant_text.map(str::to_string),
        })
    }

    fn check_integration_schema(
        _kind: IntegrationSchemaKind,
        schema: String,
    ) -> Result<(), Vec<Violation>> {
        // Input and output schemas of a prompt integration share one subset.
        schema::compile_text(Dialect::Integration, &schema)
            .map(|_| ())
            .map_err(convert)
    }

    fn validate_integration(schema: SchemaRef, value: String) -> Result<(), Vec<Violation>> {
        with_schema(Dialect::Integration, &schema, |s| s.validate_text(&value))
    }

    fn match_pattern(
        input_schema: SchemaRef,
        property: String,
        candidates: Vec<String>,
    ) -> Result<Vec<u32>, Vec<Violation>> {
        with_schema(Dialect::Input, &input_schema, |s| {
            candidates::match_pattern(s, &property, &candidates)
        })
    }
}

export!(Policy);
