//! The last stage: the turn written in one transaction (both messages, the
//! interaction record, references, the pending change, its gap event and,
//! on the platform channel, the reply's record under the message's lease),
//! then the operator's log line and the message response.

use std::time::Instant;

use serde_json::Value;

use super::context::Context;
use super::outcome::{Gap, Outcome};
use super::{BENCHMARK_METADATA_KEY, Engine, TurnError};
use crate::agent::response::{AssistantMessage, BenchmarkObservation, MessageResponse};
use crate::agent::trace::Trace;
use crate::clock::now_millis;
use crate::domain::diagnostics::DiagnosticMode;
use crate::store::conversations::{
    CommitOutcome, NewConversation, NewInteraction, NewMessage, TurnRecord,
};
use crate::store::gap_events::GapEvent;
use crate::store::platform::LeasedReply;

/// Writes the turn and answers it.
pub(super) async fn commit(
    engine: &Engine,
    cx: &Context<'_>,
    outcome: Outcome,
    trace: Trace,
    platform_reply: Option<LeasedReply<'_>>,
    started: Instant,
) -> Result<MessageResponse, TurnError> {
    let inbound = cx.inbound;
    let message_id = crate::agent::new_id("msg_");
    let user_message_id = crate::agent::new_id("msg_");
    let metadata =
        (!inbound.metadata.is_empty()).then(|| Value::Object(inbound.metadata.clone()).to_string());
    let Outcome {
        text,
        reason,
        interaction,
        set_references,
        clear_references,
        pending,
        gap,
        observation,
        called,
    } = outcome;
    let gap_event = match &gap {
        Some(gap) => Some(gap_event(engine, cx, gap).await?),
        None => None,
    };
    let record = TurnRecord {
        conversation_id: &cx.conversation_id,
        new_conversation: cx.existing.is_none().then_some(NewConversation {
            user_id: inbound.user_id.as_deref(),
        }),
        decided_language: cx.decides_language.then_some(cx.language),
        called_capability: called.as_deref(),
        user_message: NewMessage {
            id: &user_message_id,
            body: &inbound.body,
            metadata: metadata.as_deref(),
        },
        assistant_message: NewMessage {
            id: &message_id,
            body: &text,
            metadata: None,
        },
        interaction: interaction.as_ref().map(|i| NewInteraction {
            id: &i.id,
            kind: i.kind,
            operation: &i.operation,
            expires_at: i.expires_at,
        }),
        set_references,
        clear_references,
        pending,
        gap_event: gap_event.as_ref(),
        started_at: cx.started_at,
        platform_reply,
    };
    match engine.store.commit_turn(cx.account, &record).await? {
        CommitOutcome::Committed => {}
        // Purged or erased while the turn ran: as if it had never existed.
        CommitOutcome::ConversationGone => return Err(TurnError::ConversationNotFound),
        CommitOutcome::UserErased => return Err(TurnError::UserErased),
        CommitOutcome::LeaseLost => return Err(TurnError::LeaseLost),
    }

    let run_id = crate::agent::new_id("run_");
    // One line per turn for operators: what ran and why, never the text.
    tracing::info!(
        run = %run_id,
        conversation = %cx.conversation_id,
        capability = %observation.capability,
        reason = reason.as_str(),
        executor_attempts = trace.timing.executor_attempts,
        e2e_ms = started.elapsed().as_millis() as u64,
        "turn answered"
    );
    let benchmark_observation = match inbound.metadata.get(BENCHMARK_METADATA_KEY) {
        Some(Value::String(correlation)) => Some(BenchmarkObservation {
            argument_category: observation.argument_category,
            capability: observation.capability,
            correlation_id: correlation.clone(),
            fixture_result: observation.fixture_result,
            model: engine.planner.model().to_owned(),
            status: 200,
        }),
        _ => None,
    };
    Ok(MessageResponse {
        benchmark_observation,
        capability_trace: trace.render(&run_id, &message_id, started.elapsed()),
        conversation_id: cx.conversation_id.clone(),
        interaction: interaction.map(|i| i.response),
        message: AssistantMessage::text(message_id, text),
    })
}

/// The turn's gap event, with the message text only when the account's
/// diagnostic mode asks for it (written in the turn's transaction).
async fn gap_event(engine: &Engine, cx: &Context<'_>, gap: &Gap) -> Result<GapEvent, TurnError> {
    let mode = engine
        .store
        .get_diagnostic_mode(cx.account)
        .await?
        .unwrap_or_default();
    Ok(GapEvent {
        id: crate::agent::new_id("gap_"),
        kind: gap.kind,
        reason_code: gap.reason,
        conversation_id: Some(cx.conversation_id.clone()),
        capability: gap.capability.clone(),
        message_text: (mode == DiagnosticMode::Text).then(|| cx.inbound.body.clone()),
        occurred_at: now_millis(),
    })
}
