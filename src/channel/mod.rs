//! The HTTP message channel (contract 2.1, 4.2): what a host sends for one
//! user turn, parsed and bounded before the engine sees it. The parsing is
//! crate `warden-channel` (`channel/`, fuzzed by `fuzz/`); this module adds
//! the request extractor and maps its errors to the contract's.

pub use warden_channel::image;
pub mod inbound;
