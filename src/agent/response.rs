//! The message response of a turn (contract 2.2–2.4) as typed structs: what
//! `Engine::turn` answers and the HTTP channel serialises. Fields are
//! declared in alphabetical order, the order the response always had.

use serde::{Deserialize, Serialize};

use crate::domain::closed_set::closed_set;
use crate::domain::interaction::InteractionType;
use crate::domain::message::MessageRole;
use crate::executor::FailureReason;

/// The message response (2.2).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MessageResponse {
    /// Only when `metadata.benchmark_correlation_id` is a string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark_observation: Option<BenchmarkObservation>,
    pub capability_trace: CapabilityTrace,
    pub conversation_id: String,
    /// Only when a host-owned confirmation or selection is required (2.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interaction: Option<Interaction>,
    pub message: AssistantMessage,
}

closed_set! {
    /// The kind of a message's content.
    pub enum MessageType {
        Text = "text",
    }
}

/// The assistant's message of a turn (also of an operation result).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AssistantMessage {
    pub body: String,
    pub id: String,
    /// `assistant`.
    #[schema(value_type = String, pattern = "^assistant$")]
    pub role: MessageRole,
    #[serde(rename = "type")]
    pub kind: MessageType,
}

impl AssistantMessage {
    pub fn text(id: String, body: String) -> Self {
        AssistantMessage {
            body,
            id,
            role: MessageRole::Assistant,
            kind: MessageType::Text,
        }
    }
}

closed_set! {
    /// Where a call's arguments came from (`benchmark_observation`).
    pub enum ArgumentCategory {
        /// Nothing was called.
        None = "none",
        /// The planner's, as the user wrote them.
        Known = "known",
        /// The answer to the turn's own question (rule 12).
        Clarified = "clarified",
        /// A required one is missing: the turn asked for it.
        Missing = "missing",
        /// A conversation reference filled one (rule 4).
        Reference = "reference",
        /// An earlier message filled one (rule 3).
        History = "history",
    }
}

closed_set! {
    /// What the call gave (`benchmark_observation`).
    pub enum FixtureResult {
        NotCalled = "not_called",
        Empty = "empty",
        NonEmpty = "non_empty",
        Interaction = "interaction",
        NotFound = "not_found",
        Failed = "failed",
    }
}

/// `benchmark_observation` (2.4).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BenchmarkObservation {
    pub argument_category: ArgumentCategory,
    pub capability: String,
    pub correlation_id: String,
    pub fixture_result: FixtureResult,
    pub model: String,
    pub status: u16,
}

/// `capability_trace` (2.4), version `v1`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CapabilityTrace {
    pub events: Vec<TraceEvent>,
    pub message_id: String,
    pub run_id: String,
    pub timing: TraceTiming,
    #[schema(value_type = String, pattern = "^v1$")]
    pub version: &'static str,
}

closed_set! {
    /// The stage of a trace event.
    pub enum TraceStage {
        Selection = "selection",
        Execution = "execution",
        ResponseGeneration = "response_generation",
    }
}

closed_set! {
    /// The status of a trace event, one per stage.
    pub enum TraceStatus {
        Selected = "selected",
        ResultReceived = "result_received",
        ResponseGenerated = "response_generated",
    }
}

/// One event of the trace.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct TraceEvent {
    /// On selection and execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// From 1.
    #[schema(minimum = 1)]
    pub ordinal: usize,
    #[schema(value_type = String)]
    pub reason_code: ReasonCode,
    /// On selection and execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    pub stage: TraceStage,
    pub status: TraceStatus,
}

/// Where the turn's time went, in whole milliseconds, and the attempts.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TraceTiming {
    pub e2e_processing_ms: u64,
    pub execution_ms: u64,
    pub executor_attempts: u32,
    pub grounded_inference_ms: u64,
    pub preparation_ms: u64,
    pub selection_inference_attempts: u32,
    pub selection_inference_ms: u64,
    pub selection_retry_delay_ms: u64,
}

/// The interaction object of a message response (2.3): route by `owner`
/// (`host`) and `type`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Interaction {
    Confirmation(Confirmation),
    Selection(Selection),
}

/// `confirm_operation`: one prepared operation for the user to confirm in
/// the host's application. Fields in alphabetical order, as always written.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Confirmation {
    #[schema(format = DateTime)]
    pub expires_at: String,
    pub interaction_id: String,
    pub operation: String,
    /// Opaque; stays in the host flow.
    pub operation_ref: String,
    /// `host`.
    #[schema(value_type = String, pattern = "^host$")]
    pub owner: &'static str,
    /// What the user confirms.
    pub preview: Preview,
    /// `confirm_operation`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^confirm_operation$")]
    pub kind: InteractionType,
}

/// `selection`: several prepared operations for the user to choose from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Selection {
    #[schema(format = DateTime)]
    pub expires_at: String,
    pub interaction_id: String,
    pub operation: String,
    pub options: Vec<InteractionOption>,
    /// `host`.
    #[schema(value_type = String, pattern = "^host$")]
    pub owner: &'static str,
    /// Opaque; stays in the host flow.
    pub selection_ref: String,
    pub title: String,
    /// `selection`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^selection$")]
    pub kind: InteractionType,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Preview {
    pub fields: Vec<PreviewField>,
    pub title: String,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewField {
    pub label: String,
    pub value: String,
}

/// One choice of a selection, with its opaque `option_ref`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct InteractionOption {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub label: String,
    pub option_ref: String,
}

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
