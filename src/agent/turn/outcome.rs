//! What a turn decided, as the later stages read it: the reply and why, an
//! interaction to issue, the references and pending change to store, a gap
//! event to record, and what the benchmark observation reports.

use super::interaction::IssuedInteraction;
use crate::agent::response::{ArgumentCategory, FixtureResult};
use crate::agent::trace::Reason;
use crate::domain::diagnostics::{GapKind, GapReason};
use crate::store::conversations::{PendingChange, StoredReference};

pub(super) struct Outcome {
    pub text: String,
    pub reason: Reason,
    pub interaction: Option<IssuedInteraction>,
    pub set_references: Vec<StoredReference>,
    pub clear_references: Vec<(String, String)>,
    pub pending: PendingChange,
    pub gap: Option<Gap>,
    pub observation: Observation,
    /// The capability this turn called (its name), if one was called.
    pub called: Option<String>,
}

/// A diagnostics gap event this turn records.
pub(super) struct Gap {
    pub kind: GapKind,
    pub reason: GapReason,
    pub capability: Option<String>,
}

/// What `benchmark_observation` reports of the turn.
pub(super) struct Observation {
    pub capability: String,
    pub argument_category: ArgumentCategory,
    pub fixture_result: FixtureResult,
}

impl Outcome {
    /// A reply and why; nothing called, nothing else changed.
    pub fn reply(text: impl Into<String>, reason: Reason) -> Self {
        Outcome {
            text: text.into(),
            reason,
            interaction: None,
            set_references: Vec::new(),
            clear_references: Vec::new(),
            pending: PendingChange::Keep,
            gap: None,
            called: None,
            observation: Observation {
                capability: String::new(),
                argument_category: ArgumentCategory::None,
                fixture_result: FixtureResult::NotCalled,
            },
        }
    }

    pub fn with_gap(mut self, kind: GapKind, reason: GapReason, capability: Option<&str>) -> Self {
        self.gap = Some(Gap {
            kind,
            reason,
            capability: capability.map(str::to_owned),
        });
        self
    }

    pub fn with_pending(mut self, pending: PendingChange) -> Self {
        self.pending = pending;
        self
    }

    pub fn observed(mut self, observation: Observation) -> Self {
        self.observation = observation;
        self
    }
}
