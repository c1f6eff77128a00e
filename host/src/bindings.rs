//! The one `bindgen!` of the crate: typed Rust bindings of `wit/policy.wit`.
//! Everything else in the crate converts to and from the types of
//! `crate::types` here, so the generated names stay in this file.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "guest",
    // Records passed *to* the guest borrow the caller's strings (no copy on
    // the host side before lowering into guest memory).
    ownership: Borrowing { duplicate_if_necessary: true },
});

pub use exports::warden::policy::validator as v;

use crate::types;

impl From<v::Violation> for types::Violation {
    fn from(x: v::Violation) -> Self {
        types::Violation {
            pointer: x.pointer,
            rule: x.rule,
            message: x.message,
        }
    }
}

impl From<types::DefinitionOptions> for v::DefinitionOptions {
    fn from(x: types::DefinitionOptions) -> Self {
        v::DefinitionOptions {
            allow_loopback_http: x.allow_loopback_http,
        }
    }
}

impl From<types::IntegrationSchemaKind> for v::IntegrationSchemaKind {
    fn from(x: types::IntegrationSchemaKind) -> Self {
        match x {
            types::IntegrationSchemaKind::Input => v::IntegrationSchemaKind::Input,
            types::IntegrationSchemaKind::Output => v::IntegrationSchemaKind::Output,
        }
    }
}

impl From<v::InteractionKind> for types::InteractionKind {
    fn from(x: v::InteractionKind) -> Self {
        match x {
            v::InteractionKind::ConfirmOperation => types::InteractionKind::ConfirmOperation,
            v::InteractionKind::Selection => types::InteractionKind::Selection,
            v::InteractionKind::NotFound => types::InteractionKind::NotFound,
        }
    }
}

pub fn schema_ref(x: types::SchemaRef<'_>) -> v::SchemaRef<'_> {
    v::SchemaRef {
        key: x.key,
        text: x.text,
    }
}
