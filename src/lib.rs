//! Warden: a self-hostable conversational agent service that calls a
//! business's own HTTP endpoints through a WebAssembly sandbox.
//!
//! See ARCHITECTURE.md for the map of the crate.

pub mod admin;
pub mod agent;
pub mod api;
pub mod cli;
pub mod client_address;
pub mod clock;
pub mod crypto;
pub mod domain;
pub mod executor;
pub mod fair_share;
pub mod http_server;
pub mod local_work;
pub mod mcp;
pub mod metrics;
pub mod platform;
pub mod prompt;
pub mod retention;
pub mod sandbox;
pub mod shedding_threads;
pub mod signing;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod trace_context;
pub mod vault;
