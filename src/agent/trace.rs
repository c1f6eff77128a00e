//! The capability trace of a turn (contract 2.4, version `v1`): ordered
//! events and where the time went, measured for real.

use std::time::Duration;

use super::response::{
    CapabilityTrace, ExecutionReason, Reason, ReasonCode, SelectionReason, TraceEvent, TraceStage,
    TraceStatus, TraceTiming,
};

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
