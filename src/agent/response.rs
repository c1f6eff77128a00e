//! The message response of a turn (contract 2.2–2.4) as typed structs: what
//! `Engine::turn` answers and the HTTP channel serialises. Fields are
//! declared in alphabetical order, the order the response always had.

use serde::Serialize;

use super::trace::ReasonCode;
use super::turn::Interaction;
use crate::domain::closed_set::closed_set;
use crate::domain::message::MessageRole;

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
