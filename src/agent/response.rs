//! The message response of a turn (contract 2.2–2.4) as typed structs: what
//! `Engine::turn` answers and the HTTP channel serialises. Fields are
//! declared in alphabetical order, the order the response always had.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::domain::closed_set::closed_set;

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
    #[schema(value_type = Option<Interaction>)]
    pub interaction: Option<Map<String, Value>>,
    pub message: AssistantMessage,
}

closed_set! {
    /// Who wrote a message the service answers.
    pub enum MessageRole {
        Assistant = "assistant",
    }
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

/// `benchmark_observation` (2.4).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BenchmarkObservation {
    pub argument_category: &'static str,
    pub capability: String,
    pub correlation_id: String,
    pub fixture_result: &'static str,
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
    pub reason_code: String,
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

/// The interaction object (2.3) as the document describes it. At run time
/// it is the guest's closed shape (checked there) plus the id, owner and
/// the references, kept as the map the guest returned.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // Documentation only.
pub struct Interaction {
    interaction_id: String,
    /// `host`.
    owner: String,
    /// `confirm_operation` or `selection`.
    #[serde(rename = "type")]
    kind: String,
    operation: String,
    #[schema(format = DateTime)]
    expires_at: String,
    /// Confirmation: opaque, stays in the host flow.
    operation_ref: Option<String>,
    /// Confirmation: what the user confirms.
    preview: Option<InteractionPreview>,
    /// Selection: opaque.
    selection_ref: Option<String>,
    /// Selection: what the user chooses from.
    title: Option<String>,
    /// Selection: the options, each with its opaque `option_ref`.
    options: Option<Vec<InteractionOption>>,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct InteractionPreview {
    title: String,
    fields: Vec<PreviewField>,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct PreviewField {
    label: String,
    value: String,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct InteractionOption {
    option_ref: String,
    label: String,
    description: Option<String>,
}
