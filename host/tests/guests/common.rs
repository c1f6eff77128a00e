// Shared by the hostile guests that implement the real world: every function
// delegates to the guest's `hostile(function)` so that any call misbehaves
// (each guest may misbehave differently per function).
wit_bindgen::generate!({ path: "../../../../wit", world: "guest" });

use exports::warden::policy::validator::{
    DefinitionOptions, Guest, IntegrationSchemaKind, SchemaRef, ShapedInteraction, Violation,
};

struct Hostile;

impl Guest for Hostile {
    fn check_definition(_: String, _: DefinitionOptions) -> Result<(), Vec<Violation>> {
        hostile("check-definition").map(|_| ())
    }
    fn validate_arguments(_: SchemaRef, _: String) -> Result<(), Vec<Violation>> {
        hostile("validate-arguments").map(|_| ())
    }
    fn prune_output(_: SchemaRef, _: String) -> Result<String, Vec<Violation>> {
        hostile("prune-output")
    }
    fn shape_interaction(_: String) -> Result<ShapedInteraction, Vec<Violation>> {
        hostile("shape-interaction").map(|_| unreachable!())
    }
    fn check_integration_schema(_: IntegrationSchemaKind, _: String) -> Result<(), Vec<Violation>> {
        hostile("check-integration-schema").map(|_| ())
    }
    fn validate_integration(_: SchemaRef, _: String) -> Result<(), Vec<Violation>> {
        hostile("validate-integration").map(|_| ())
    }
    fn match_pattern(_: SchemaRef, _: String, _: Vec<String>) -> Result<Vec<u32>, Vec<Violation>> {
        hostile("match-pattern").map(|_| Vec::new())
    }
}

export!(Hostile);

#[allow(dead_code)]
fn violation(i: usize) -> Violation {
    Violation { pointer: format!("/{i}"), rule: "hostile".into(), message: "x".repeat(64) }
}
