//! The capability trace of a turn (contract 2.4, version `v1`): ordered
//! events and where the time went, measured for real.

use std::time::Duration;

use super::response::{CapabilityTrace, TraceEvent, TraceStage, TraceStatus, TraceTiming};
use crate::domain::closed_set::closed_set;
use crate::executor::FailureReason;

closed_set! {
    /// Why a turn answered as it did: the `reason_code` of the trace's
    /// response event and of the operator's log line.
    pub enum Reason {
        CapabilityExcluded = "capability_excluded",
        Cancelled = "cancelled",
        NothingToCancel = "nothing_to_cancel",
        Closing = "closing",
        Answered = "answered",
        AnswerRefused = "answer_refused",
        OutOfScope = "out_of_scope",
        NoCapability = "no_capability",
        CapabilityRefused = "capability_refused",
        PreparationWithoutIntent = "preparation_without_intent",
        OperationNotOffered = "operation_not_offered",
        ImageNeedsInstructions = "image_needs_instructions",
        Clarification = "clarification",
        Confirmation = "confirmation",
        EmptyResult = "empty_result",
        InteractionRequired = "interaction_required",
        NotFound = "not_found",
        InteractionExpired = "interaction_expired",
        CapabilityFailed = "capability_failed",
        Grounded = "grounded",
        GroundedTemplate = "grounded_template",
    }
}

closed_set! {
    /// Why a capability was selected: the `reason_code` of a selection event.
    pub enum SelectionReason {
        /// The planner proposed it and the rules allowed it.
        Matched = "matched",
        /// It was waiting for this message (rule 12).
        PendingOperation = "pending_operation",
    }
}

/// What a call gave: the `reason_code` of an execution event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionReason {
    Ok,
    Empty,
    Failed(FailureReason),
}

impl ExecutionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionReason::Ok => "ok",
            ExecutionReason::Empty => "empty",
            ExecutionReason::Failed(reason) => reason.as_str(),
        }
    }
}

/// The `reason_code` of a trace event, by stage: each stage's own closed
/// set, written as its word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasonCode {
    Selection(SelectionReason),
    Execution(ExecutionReason),
    Response(Reason),
}

impl ReasonCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::Selection(r) => r.as_str(),
            ReasonCode::Execution(r) => r.as_str(),
            ReasonCode::Response(r) => r.as_str(),
        }
    }
}

impl serde::Serialize for ReasonCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[derive(Debug, Default, Clone)]
pub struct Timing {
    pub preparation: Duration,
    pub selection_inference: Duration,
    pub selection_retry_delay: Duration,
    pub execution: Duration,
    pub grounded_inference: Duration,
    pub selection_inference_attempts: u32,
    pub executor_attempts: u32,
}

#[derive(Debug, Default)]
pub struct Trace {
    events: Vec<TraceEvent>,
    pub timing: Timing,
}

impl Trace {
    fn push(
        &mut self,
        stage: TraceStage,
        status: TraceStatus,
        capability: Option<(&str, i64)>,
        reason_code: ReasonCode,
    ) {
        self.events.push(TraceEvent {
            capability: capability.map(|(name, _)| name.to_owned()),
            ordinal: self.events.len() + 1,
            reason_code,
            revision: capability.map(|(_, revision)| revision),
            stage,
            status,
        });
    }

    pub fn selected(&mut self, capability: &str, revision: i64, reason: SelectionReason) {
        self.push(
            TraceStage::Selection,
            TraceStatus::Selected,
            Some((capability, revision)),
            ReasonCode::Selection(reason),
        );
    }

    pub fn executed(&mut self, capability: &str, revision: i64, reason: ExecutionReason) {
        self.push(
            TraceStage::Execution,
            TraceStatus::ResultReceived,
            Some((capability, revision)),
            ReasonCode::Execution(reason),
        );
    }

    pub fn responded(&mut self, reason: Reason) {
        self.push(
            TraceStage::ResponseGeneration,
            TraceStatus::ResponseGenerated,
            None,
            ReasonCode::Response(reason),
        );
    }

    pub fn render(&self, run_id: &str, message_id: &str, e2e: Duration) -> CapabilityTrace {
        let ms = |d: Duration| d.as_millis() as u64;
        let t = &self.timing;
        CapabilityTrace {
            events: self.events.clone(),
            message_id: message_id.to_owned(),
            run_id: run_id.to_owned(),
            timing: TraceTiming {
                e2e_processing_ms: ms(e2e),
                execution_ms: ms(t.execution),
                executor_attempts: t.executor_attempts,
                grounded_inference_ms: ms(t.grounded_inference),
                preparation_ms: ms(t.preparation),
                selection_inference_attempts: t.selection_inference_attempts,
                selection_inference_ms: ms(t.selection_inference),
                selection_retry_delay_ms: ms(t.selection_retry_delay),
            },
            version: "v1",
        }
    }
}
