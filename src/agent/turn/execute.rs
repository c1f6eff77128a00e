//! The turn's one call (rule 1) and what it answers: a reply grounded in
//! the pruned result (rule 6; the model's when grounded, else the
//! deterministic summary), fixed texts for empty or failed results, an
//! interaction for a preparation (rules 9, 10), or a question for an
//! argument the guest refused (rule 2).

use std::time::Instant;

use serde_json::{Map, Value};

use super::ask::{Question, ask};
use super::context::{Context, Target};
use super::interaction;
use super::outcome::{Observation, Outcome};
use super::{Engine, TurnError};
use crate::agent::grounding::{is_empty_result, labelled_facts, reply_is_grounded};
use crate::agent::language::texts;
use crate::agent::planner::ReplyRequest;
use crate::agent::references;
use crate::agent::response::{ArgumentCategory, FixtureResult};
use crate::agent::response::{ExecutionReason, Reason};
use crate::agent::trace::Trace;
use crate::domain::diagnostics::{GapKind, GapReason};
use crate::executor::{Call, CallFailure, CallKind, CallResult};
use crate::store::conversations::PendingChange;

/// Makes the call and turns its report into the turn's outcome.
pub(super) async fn call(
    engine: &Engine,
    cx: &Context<'_>,
    trace: &mut Trace,
    target: &Target<'_>,
    args: Map<String, Value>,
    category: ArgumentCategory,
) -> Result<Outcome, TurnError> {
    let loaded = &target.loaded;
    let arguments = Value::Object(args.clone());
    let started = Instant::now();
    let report = engine
        .executor
        .call(Call {
            kind: CallKind::Turn,
            account: cx.account,
            user_id: cx.inbound.user_id.as_deref(),
            capability: &loaded.at,
            arguments: &arguments,
            credential: Some(cx.capabilities.active.credential_of(&loaded.at)),
        })
        .await;
    trace.timing.execution = started.elapsed();
    trace.timing.executor_attempts = report.attempts;
    let name = loaded.offer.name.as_str();
    let revision = loaded.at.revision;
    let observe = |fixture_result| Observation {
        capability: name.to_owned(),
        argument_category: category,
        fixture_result,
    };
    let mut outcome = match report.outcome {
        Ok(CallResult::Data(result)) => {
            let empty = is_empty_result(&result);
            trace.executed(
                name,
                revision,
                if empty {
                    ExecutionReason::Empty
                } else {
                    ExecutionReason::Ok
                },
            );
            let consumers = cx
                .capabilities
                .active
                .capabilities
                .iter()
                .map(|c| &*c.at.definition);
            let (set, clear) = references::harvest(name, &result, consumers);
            let mut outcome = if empty {
                Outcome::reply(texts::empty_result(cx.language), Reason::EmptyResult)
                    .observed(observe(FixtureResult::Empty))
            } else {
                reply_from_result(engine, cx, trace, target, &result)
                    .await
                    .observed(observe(FixtureResult::NonEmpty))
            };
            outcome.set_references = set;
            outcome.clear_references = clear;
            outcome
        }
        Ok(CallResult::Interaction(shaped)) => {
            let issued = interaction::issue(cx.language, shaped);
            let executed = match &issued {
                Err(_) => {
                    ExecutionReason::Failed(crate::executor::FailureReason::InteractionInvalid)
                }
                Ok(_) => ExecutionReason::Ok,
            };
            trace.executed(name, revision, executed);
            match issued {
                Ok(outcome) => {
                    let fixture = if outcome.interaction.is_some() {
                        FixtureResult::Interaction
                    } else {
                        FixtureResult::NotFound
                    };
                    outcome.observed(observe(fixture))
                }
                Err(refusal) => {
                    // A guest's interaction the service cannot give the
                    // host as the contract's closed object: a failed call.
                    tracing::warn!(capability = %name, pointer = %refusal.pointer, reason = %refusal.message,
                        "the guest's interaction was refused");
                    Outcome::reply(texts::failed(cx.language), Reason::CapabilityFailed)
                        .with_gap(
                            GapKind::AgentDeadEnd,
                            GapReason::InteractionInvalid,
                            Some(name),
                        )
                        .observed(observe(FixtureResult::Failed))
                }
            }
        }
        Err(CallFailure::ArgumentsInvalid(violations)) => {
            // The guest refused an argument: ask for it, never guess.
            trace.executed(
                name,
                revision,
                ExecutionReason::Failed(crate::executor::FailureReason::ArgumentsInvalid),
            );
            let bad = violations
                .iter()
                .find_map(|v| {
                    let top = v.pointer.trim_start_matches('/').split('/').next()?;
                    target.property(top)
                })
                .or_else(|| {
                    let required = target.required();
                    target
                        .properties
                        .iter()
                        .find(|p| required.contains(&p.name))
                });
            let mut args = args;
            match bad {
                Some(property) => {
                    args.remove(property.name);
                    ask(
                        engine,
                        cx,
                        target,
                        args,
                        property,
                        Question::Candidates(Vec::new()),
                    )
                }
                None => Outcome::reply(texts::failed(cx.language), Reason::CapabilityFailed)
                    .with_gap(
                        GapKind::AgentDeadEnd,
                        GapReason::ArgumentsInvalid,
                        Some(name),
                    ),
            }
        }
        Err(failure) => {
            let reason = failure.reason();
            trace.executed(name, revision, ExecutionReason::Failed(reason));
            Outcome::reply(texts::failed(cx.language), Reason::CapabilityFailed)
                .with_gap(GapKind::AgentDeadEnd, reason.into(), Some(name))
                .observed(observe(FixtureResult::Failed))
        }
    };
    if matches!(outcome.pending, PendingChange::Keep) {
        // The pending operation (if any) was answered or replaced.
        outcome.pending = PendingChange::Clear;
    }
    outcome.called = Some(name.to_owned());
    Ok(outcome)
}

/// Rule 6: the planner's reply when it is grounded in the result, the
/// deterministic summary otherwise.
async fn reply_from_result(
    engine: &Engine,
    cx: &Context<'_>,
    trace: &mut Trace,
    target: &Target<'_>,
    result: &Value,
) -> Outcome {
    let loaded = &target.loaded;
    let message = cx.said.text();
    let started = Instant::now();
    let written = engine
        .planner
        .reply(&ReplyRequest {
            policy: &cx.policy,
            message,
            capability: &loaded.offer,
            result,
        })
        .await;
    trace.timing.grounded_inference = started.elapsed();
    let template = || {
        let facts = labelled_facts(
            result,
            &loaded.at.definition.output_schema,
            cx.language,
            &cx.said,
            &loaded.offer.name,
        );
        texts::result_summary(cx.language, &facts)
    };
    match written {
        Ok(Some(text))
            if reply_is_grounded(&text, result, message) && !cx.language.is_plainly_not(&text) =>
        {
            Outcome::reply(text, Reason::Grounded)
        }
        Ok(Some(_)) => {
            // Ungrounded, or in the other language than the
            // conversation's (kept since its first message).
            tracing::warn!(
                "model reply refused: not grounded in the result or not in the conversation's language"
            );
            Outcome::reply(template(), Reason::GroundedTemplate)
        }
        Ok(None) => Outcome::reply(template(), Reason::Grounded),
        Err(err) => {
            tracing::warn!(error = %err, "grounded reply unavailable; using the template");
            Outcome::reply(template(), Reason::GroundedTemplate)
        }
    }
}
