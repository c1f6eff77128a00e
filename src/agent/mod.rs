//! The conversation engine: one user turn from message to grounded reply,
//! with every runtime rule of contract section 1 enforced in `engine`,
//! whichever planner proposed what.
//!
//! - `engine`: the turn (load → decide → call at most once → store → answer);
//! - `planner`: the built-in and the OpenAI-compatible planners;
//! - `arguments`: values from the user's words; `patterns`: which of them
//!   fit a property's `pattern`, judged by the policy guest (`verdicts`
//!   holds the answers); `references`: rule 4;
//!   `pending`: rule 12; `grounding`: rules 5 and 6; `language`: the
//!   clauses the engine recognises; `lexicon`: the domain's words by
//!   concept, in Spanish and English; `texts`: its fixed replies;
//!   `trace`: the capability trace (2.4); `response`: the message response
//!   (2.2) as typed structs.

pub mod arguments;
pub mod catalog;
pub mod engine;
pub mod grounding;
pub mod language;
pub mod lexicon;
pub mod patterns;
pub mod pending;
pub mod planner;
pub mod references;
pub mod response;
pub mod texts;
pub mod trace;
pub mod verdicts;

pub use engine::{Engine, TurnError};

pub use crate::domain::id::random_id as new_id;
