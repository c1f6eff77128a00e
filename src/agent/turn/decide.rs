//! The second stage: the runtime rules of contract section 1, in the order
//! they apply, one function per rule family, each reading only the
//! context. The first rule that answers ends the turn's decision; the
//! planner is asked only when none does, and what it proposes is checked
//! (rules 7 and 8) before anything is called.

use std::time::Instant;

use serde_json::{Map, Value};

use super::context::{Context, Loaded, NOT_JUDGED, Target, Waiting, judge};
use super::outcome::Outcome;
use super::{Engine, TurnError, fill};
use crate::agent::grounding::answer_is_safe;
use crate::agent::language::{Said, lexicon, texts};
use crate::agent::pending::PendingOperation;
use crate::agent::planner::{CapabilityOffer, Plan};
use crate::agent::response::ArgumentCategory;
use crate::agent::trace::{Reason, SelectionReason, Trace};
use crate::domain::diagnostics::{GapKind, GapReason};
use crate::store::conversations::PendingChange;

/// What this turn answers: the first rule that applies, else the planner's
/// proposal as the rules allow it.
pub(super) async fn decide(
    engine: &Engine,
    cx: &Context<'_>,
    trace: &mut Trace,
) -> Result<Outcome, TurnError> {
    if let Some(outcome) = rule_13_exclusion(cx) {
        return Ok(outcome);
    }
    let waiting = cx.waiting();
    if let Some(outcome) = rule_12_cancel_or_close(cx)
        .or_else(|| rule_12_image_alone(cx))
        .or_else(|| rule_03_proposal_refused(engine, cx, waiting.as_ref()))
    {
        return Ok(outcome);
    }
    if let Some(waiting) = waiting
        && let Some(args) = rule_12_pending_answered(&cx.said, &waiting)
    {
        let target = waiting.target;
        trace.selected(
            &target.loaded.offer.name,
            target.loaded.at.revision,
            SelectionReason::PendingOperation,
        );
        return fill::complete_and_call(
            engine,
            cx,
            trace,
            &target,
            args,
            ArgumentCategory::Clarified,
        )
        .await;
    }
    plan(engine, cx, trace).await
}

/// Rule 13: an explicit capability-exclusion clause; no planner, no
/// executor, the bounded fallback.
fn rule_13_exclusion(cx: &Context<'_>) -> Option<Outcome> {
    cx.said.has_exclusion_clause().then(|| {
        Outcome::reply(
            texts::exclusion_fallback(cx.language),
            Reason::CapabilityExcluded,
        )
    })
}

/// Rule 12: `cancelar` discards a pending operation without calling the
/// host (a bare `cancelar` with nothing waiting says so); thanks or a
/// goodbye end whatever was waiting.
fn rule_12_cancel_or_close(cx: &Context<'_>) -> Option<Outcome> {
    let said = &cx.said;
    if said.is_cancel() && (cx.pending.is_some() || said.words().len() <= 3) {
        return Some(if cx.pending.is_some() {
            Outcome::reply(texts::cancelled(cx.language), Reason::Cancelled)
                .with_pending(PendingChange::Clear)
        } else {
            Outcome::reply(
                texts::nothing_to_cancel(cx.language),
                Reason::NothingToCancel,
            )
        });
    }
    said.is_closing().then(|| {
        Outcome::reply(texts::closing(cx.language), Reason::Closing)
            .with_pending(PendingChange::Clear)
    })
}

/// Rule 12: an image alone does not say what to extract from it.
fn rule_12_image_alone(cx: &Context<'_>) -> Option<Outcome> {
    (cx.said.is_blank() && cx.inbound.image.is_some()).then(|| {
        Outcome::reply(
            texts::image_needs_instructions(cx.language),
            Reason::ImageNeedsInstructions,
        )
    })
}

/// Rule 3: a bare "no" to "do you mean A-1002?" (no other value named,
/// not "the other one") asks which, offering every value history held.
fn rule_03_proposal_refused(
    engine: &Engine,
    cx: &Context<'_>,
    waiting: Option<&Waiting<'_>>,
) -> Option<Outcome> {
    let waiting = waiting?;
    let proposed = waiting.operation.proposed.clone()?;
    if !cx.said.is_no() || cx.said.refers_to_other() {
        return None;
    }
    let missing = waiting.missing();
    if !missing
        .candidates(cx.said.text(), waiting.target.loaded.patterns)
        .is_empty()
    {
        return None;
    }
    let mut options = vec![proposed];
    options.extend(waiting.operation.alternatives.iter().cloned());
    Some(fill::ask(
        engine,
        cx,
        &waiting.target,
        waiting.operation.arguments.clone(),
        missing,
        fill::Question::WhichOf(options),
    ))
}

/// Rule 12: the pending operation answered by this message: the value it
/// waited for (one candidate, "sí" to a proposal, "no, el otro", or the
/// whole message as a free-text answer), with whatever else it names.
fn rule_12_pending_answered(said: &Said, waiting: &Waiting<'_>) -> Option<Map<String, Value>> {
    let PendingOperation {
        arguments,
        missing: missing_name,
        proposed,
        alternatives,
        ..
    } = waiting.operation;
    let missing = waiting.missing();
    let loaded = &waiting.target.loaded;
    let mut candidates = missing.candidates(said.text(), loaded.patterns);
    let answer = if candidates.len() == 1 {
        candidates.pop()
    } else if candidates.is_empty() && proposed.is_some() && said.is_yes() {
        proposed.clone()
    } else if candidates.is_empty()
        && said.is_no()
        && said.refers_to_other()
        && alternatives.len() == 1
    {
        // "no, el otro": the one value left.
        alternatives.first().cloned()
    } else if candidates.is_empty() && !said.is_no() {
        missing.whole_answer(said)
    } else {
        None
    }?;
    let mut args = arguments.clone();
    args.insert(missing_name.clone(), answer);
    for (k, v) in
        crate::agent::arguments::extract(&loaded.offer.input_schema, loaded.patterns, said.text())
    {
        args.entry(k).or_insert(v);
    }
    Some(args)
}

/// No rule answered: the planner proposes, and its proposal is held to
/// the rules.
async fn plan(engine: &Engine, cx: &Context<'_>, trace: &mut Trace) -> Result<Outcome, TurnError> {
    let lang = cx.language;
    let started = Instant::now();
    let offered = cx.capabilities.offered();
    let planned = engine.planner.plan(&cx.plan_request(&offered)).await;
    drop(offered);
    trace.timing.selection_inference = started.elapsed();
    let planned = planned?;
    trace.timing.selection_inference_attempts = planned.attempts;
    trace.timing.selection_retry_delay = planned.retry_delay;

    match planned.plan {
        Plan::Answer { text } => Ok(if answer_is_safe(&text, cx.said.text()) {
            Outcome::reply(text, Reason::Answered)
        } else {
            tracing::warn!("planner answer refused: it states data no capability returned");
            Outcome::reply(texts::no_capability(lang), Reason::AnswerRefused)
        }),
        Plan::OutOfScope => Ok(Outcome::reply(
            cx.policy.out_of_scope_response.clone(),
            Reason::OutOfScope,
        )),
        // An operation asked for that nothing prepares ("Cancel my
        // order") is said as such; either way a coverage gap.
        Plan::NoCapability
            if cx.said.has_operation_intent() && !cx.said.asked_operations().is_empty() =>
        {
            Ok(Outcome::reply(
                texts::operation_not_offered(lang),
                Reason::OperationNotOffered,
            )
            .with_gap(GapKind::CoverageGap, GapReason::NoMatchingCapability, None))
        }
        Plan::NoCapability => Ok(
            Outcome::reply(texts::no_capability(lang), Reason::NoCapability).with_gap(
                GapKind::CoverageGap,
                GapReason::NoMatchingCapability,
                None,
            ),
        ),
        Plan::Call {
            capability,
            arguments,
        } => call_proposed(engine, cx, trace, &capability, arguments).await,
    }
}

/// A proposed call, held to rules 7 and 8, then completed and made.
async fn call_proposed(
    engine: &Engine,
    cx: &Context<'_>,
    trace: &mut Trace,
    capability: &str,
    arguments: Map<String, Value>,
) -> Result<Outcome, TurnError> {
    let at = match rule_07_offered(cx, capability) {
        Ok(at) => at,
        Err(refused) => return Ok(refused),
    };
    let loaded = cx.capabilities.get(at);
    if let Some(refused) = rule_08_preparation(cx, &loaded.offer) {
        return Ok(refused);
    }
    trace.selected(
        &loaded.offer.name,
        loaded.at.revision,
        SelectionReason::Matched,
    );
    // A capability the planner proposed without consulting its patterns
    // (a model's proposal) is judged now.
    let judged_now;
    let loaded = if cx.capabilities.judged.contains_key(&at) {
        loaded
    } else {
        judged_now = judge(engine, cx, &[at]).await;
        Loaded {
            cataloged: loaded.cataloged,
            patterns: judged_now.get(&at).unwrap_or(&NOT_JUDGED),
        }
    };
    let target = Target::of(loaded);
    let args = fill::grounded(engine, cx, &target, arguments);
    fill::complete_and_call(engine, cx, trace, &target, args, ArgumentCategory::Known).await
}

/// Rule 7: only an offered (active, read-only) capability is called.
fn rule_07_offered(cx: &Context<'_>, capability: &str) -> Result<usize, Outcome> {
    cx.capabilities
        .position(|c| c.offer.name == capability)
        .ok_or_else(|| {
            tracing::warn!("planner proposed a capability that is not offered; refused");
            Outcome::reply(texts::no_capability(cx.language), Reason::CapabilityRefused).with_gap(
                GapKind::AgentDeadEnd,
                GapReason::CapabilityRefused,
                None,
            )
        })
}

/// Rule 8: a preparation only after an operation intent, and only for the
/// operation asked for (a model preparing a return when the user asked to
/// cancel is refused).
fn rule_08_preparation(cx: &Context<'_>, offer: &CapabilityOffer) -> Option<Outcome> {
    if !offer.preparation {
        return None;
    }
    if !cx.said.has_operation_intent() {
        return Some(Outcome::reply(
            texts::preparation_without_intent(cx.language),
            Reason::PreparationWithoutIntent,
        ));
    }
    if !prepares_what_was_asked(cx.said.asked_operations(), offer) {
        tracing::warn!("planner proposed a preparation for another operation; refused");
        return Some(
            Outcome::reply(
                texts::operation_not_offered(cx.language),
                Reason::OperationNotOffered,
            )
            .with_gap(
                GapKind::AgentDeadEnd,
                GapReason::PreparationMismatch,
                Some(&offer.name),
            ),
        );
    }
    None
}

/// Rule 8 for a preparation: the message names no operation, or one the
/// capability speaks of, or the capability speaks of none (a domain the
/// lexicon does not know is never refused for it).
fn prepares_what_was_asked(asked: &[&str], offer: &CapabilityOffer) -> bool {
    let mut offered: std::collections::HashSet<String> = Said::new(&format!(
        "{} {} {}",
        offer.name.replace(['_', '-'], " "),
        offer.description,
        offer.when_to_use
    ))
    .asked_operations()
    .iter()
    .map(|k| (*k).to_owned())
    .collect();
    // Spanish "devolver" asks for a return or a refund; "refund" only for one.
    lexicon::widen(&mut offered);
    asked.is_empty() || offered.is_empty() || asked.iter().any(|a| offered.contains(*a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn preparation(name: &str, description: &str) -> CapabilityOffer {
        CapabilityOffer {
            name: name.into(),
            description: description.into(),
            when_to_use: String::new(),
            examples: Arc::from(Vec::new()),
            input_schema: Arc::new(json!({})),
            output_schema: Arc::new(json!({})),
            preparation: true,
            fingerprint: Default::default(),
        }
    }

    fn prepares(message: &str, offer: &CapabilityOffer) -> bool {
        prepares_what_was_asked(Said::new(message).asked_operations(), offer)
    }

    #[test]
    fn a_preparation_must_prepare_the_operation_asked_for() {
        let ret = preparation("prepare_return", "Prepara la devolución de un pedido");
        let change = preparation("prepare_address_change", "Prepares an address change");
        let unknown = preparation("prepare_thing", "Prepara la gestión solicitada");
        assert!(prepares("Quiero devolver el pedido A-1", &ret));
        assert!(!prepares("Cancel my order B-2001, please", &ret));
        assert!(!prepares("Quiero devolver el pedido A-1", &change));
        assert!(prepares("Quiero cambiar la dirección", &change));
        // A refund is not a return, and a return not a refund; Spanish
        // "devolución" may be either.
        let refund = preparation("prepare_refund", "Refunds the amount paid for an order");
        assert!(!prepares("Please refund my order A-1001", &ret));
        assert!(!prepares("I want to return order A-1", &refund));
        assert!(prepares("Please refund my order A-1001", &refund));
        assert!(prepares("Quiero la devolución del pedido A-1", &refund));
        // No operation named, or none the capability speaks of: not refused here.
        assert!(prepares("Hazlo con el pedido A-1", &ret));
        assert!(prepares("Cancel my order B-2001", &unknown));
    }
}
