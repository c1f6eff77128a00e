//! The conversation engine: one user turn from message to grounded reply,
//! with every runtime rule of contract section 1 enforced in `turn`,
//! whichever planner proposed what.
//!
//! - `turn`: the turn as a pipeline (context → decide → fill, execute,
//!   interaction → commit), one stage per file;
//! - `planner`: the built-in and the OpenAI-compatible planners;
//! - `language`: how the agent reads and says things in Spanish and
//!   English (words, clauses, sentences, the lexicon, language detection,
//!   fixed texts; `Said`, a message read once);
//! - `catalog`: the account's active capabilities, built once per revision;
//! - `arguments`: values from the user's words; `patterns`: which of them
//!   fit a property's `pattern`, judged by the policy guest (`verdicts`
//!   holds the answers); `references`: rule 4; `pending`: rule 12;
//!   `grounding`: rules 5 and 6; `trace`: the capability trace (2.4);
//!   `response`: the message response (2.2) as typed structs.

pub mod arguments;
pub mod catalog;
pub mod grounding;
pub mod language;
pub mod patterns;
pub mod pending;
pub mod planner;
pub mod references;
pub mod response;
pub mod trace;
pub mod turn;
pub mod verdicts;

pub use turn::{Engine, TurnChannel, TurnError};

pub use crate::domain::id::random_id as new_id;
