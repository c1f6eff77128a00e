//! A custom policy guest: the default rules, plus "capability names must
//! start with the house prefix" (rule `name-prefix-required`).
//!
//! The prefix is fixed when the guest is built (`WARDEN_NAME_PREFIX`, default
//! `acme_`): a guest cannot read configuration at run time, because the
//! sandbox gives it no environment, file or clock.

use std::cell::RefCell;

use warden_policy_rules::cache::SchemaCache;
use warden_policy_rules::schema::{self, Dialect};
use warden_policy_rules::{Violation as RuleViolation, candidates, definition, interaction};

wit_bindgen::generate!({
    path: "../../../wit",
    world: "guest",
});

use exports::warden::policy::validator::{
    DefinitionOptions, Guest, IntegrationSchemaKind, InteractionKind, SchemaRef, ShapedInteraction,
    Violation,
};

/// The house prefix, baked in at build time.
const PREFIX: &str = match option_env!("WARDEN_NAME_PREFIX") {
    Some(p) => p,
    None => "acme_",
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

/// The house rule. Returns a violation when the definition has a string
/// `name` without the prefix (a missing or non-string name is already
/// reported by the default rules).
fn house_rule(definition: &str) -> Option<Violation> {
    let value = warden_policy_rules::parse_json(definition).ok()?;
    let name = value.get("name")?.as_str()?;
    if name.starts_with(PREFIX) {
        return None;
    }
    Some(Violation {
        pointer: "/name".to_string(),
        rule: "name-prefix-required".to_string(),
        message: format!("capability names must start with \"{PREFIX}\""),
    })
}

fn with_schema<T>(
    dialect: Dialect,
    schema: &SchemaRef,
    f: impl FnOnce(&schema::Schema) -> Result<T, Vec<RuleViolation>>,
) -> Result<T, Vec<Violation>> {
    let compiled = CACHE
        .with(|c| c.borrow_mut().get(dialect, &schema.key, &schema.text))
        .map_err(|_| {
            vec![Violation {
                pointer: String::new(),
                rule: "schema-invalid".to_string(),
                message: "the schema does not compile".to_string(),
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
        let mut violations = match definition::check_text(&definition, opts) {
            Ok(()) => Vec::new(),
            Err(list) => convert(list),
        };
        if let Some(v) = house_rule(&definition) {
            // Keep the error contract: at most 100 violations per call.
            if violations.len() < 100 {
                violations.insert(0, v);
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
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
