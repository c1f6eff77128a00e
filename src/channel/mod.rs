//! The HTTP message channel (contract 2.1, 4.2): what a host sends for one
//! user turn, parsed and bounded before the engine sees it.

pub mod image;
pub mod inbound;
