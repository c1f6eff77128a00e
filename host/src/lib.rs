//! `warden-host`: Warden's policy sandbox.
//!
//! Runs a policy guest (a WebAssembly component exporting
//! `warden:policy/validator`, see `wit/policy.wit`) under wasmtime with hard
//! limits, and gives the server a typed, synchronous API over it. This crate
//! knows nothing of HTTP or SQL.
//!
//! ```no_run
//! use warden_host::{GuestSource, Sandbox, SchemaRef};
//! let sandbox = Sandbox::load(GuestSource::Default)?;
//! let schema = SchemaRef { key: "cap_ab12cd34@3/input", text: r#"{"type":"object","additionalProperties":false}"# };
//! let verdict = sandbox.validate_arguments("acct_1", schema, "{}")?;
//! assert!(verdict.is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Calls are synchronous and short (microseconds warm; never longer than the
//! configured deadline, 50 ms by default). From tokio, wrap them in
//! `tokio::task::spawn_blocking` never to block a runtime thread longer
//! than a trip to the blocking pool costs, or call them directly on a
//! handle made by [`Sandbox::within`], which stops a call at a short budget
//! so that it can be run again off the runtime (what Warden's server does);
//! [`Sandbox`] is `Clone + Send + Sync` and cheap to clone.
//!
//! Security properties and the tests that prove them: `docs/sandbox.md`.

mod bindings;
mod cache;
mod check;
mod config;
mod error;
mod guest;
mod pool;
mod sandbox;
mod types;

pub use cache::CacheWarning;
pub use check::{GuestCheckReport, SelfTestCase, check_guest, check_guest_with};
pub use config::SandboxConfig;
pub use error::{LoadError, SandboxError};
pub use guest::{GuestInfo, GuestSource, WORLD_EXPORT, WORLD_FUNCTIONS};
pub use pool::PoolStats;
pub use sandbox::Sandbox;
pub use types::{
    DefinitionOptions, GuestJson, IntegrationSchemaKind, InteractionKind, JsonObject, SchemaRef,
    ShapedInteraction, Verdict, Violation,
};
