//! `warden-channel`: what a host sends for one user turn on the HTTP message
//! channel (contract 2.1, 4.2), parsed and bounded before the engine sees it.
//!
//! This crate knows bytes, a content type and a body stream, nothing of the
//! server's HTTP framework: the server's request extractor
//! (`warden::api::message_body`) and its engine use it directly, and
//! `fuzz/` fuzzes the same functions the server calls without building the
//! server.

pub mod bounds;
mod error;
pub mod image;
pub mod inbound;

pub use error::InboundError;
