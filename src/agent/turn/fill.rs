//! A call's arguments: only values the user wrote (rule 2), completed from
//! the conversation's references (rule 4) and the user's earlier messages
//! when those are unambiguous (rule 3); otherwise the turn asks (`ask`).

use serde_json::{Map, Value};

use super::ask::{Question, ask};
use super::context::{Context, Target};
use super::outcome::Outcome;
use super::{Engine, TurnError, execute};
use crate::agent::arguments::{self, Property};
use crate::agent::planner::Planner;
use crate::agent::references;
use crate::agent::response::ArgumentCategory;
use crate::agent::trace::Trace;
use crate::agent::verdicts::PatternMatches;

/// Rule 2: keep only declared properties whose values the user wrote
/// (this message or an earlier one). With an image attached to this
/// turn, a model may read values from it: those cannot be checked
/// against text and are kept (the guest still validates them).
pub(super) fn grounded(
    engine: &Engine,
    cx: &Context<'_>,
    target: &Target<'_>,
    proposed: Map<String, Value>,
) -> Map<String, Value> {
    let sources = cx.user_texts();
    let from_image = cx.inbound.image.is_some() && matches!(engine.planner, Planner::OpenAi(_));
    proposed
        .into_iter()
        .filter(|(name, value)| {
            let Some(property) = target.property(name) else {
                return false;
            };
            let in_message = arguments::is_grounded(value, &sources[..1]);
            // Rule 3: a value only history holds is taken when history
            // is unambiguous; otherwise the turn asks to confirm.
            let from_history = !in_message
                && arguments::is_grounded(value, &sources[1..])
                && history_candidates(cx, target.loaded.patterns, property).len() <= 1;
            let ok = property.schema.get("const") == Some(value)
                || from_image
                || in_message
                || from_history;
            if !ok {
                tracing::info!(property = %name, "argument dropped: not in the user's words");
            }
            ok
        })
        .collect()
}

/// Fills what is missing from references (rule 4) and history (rule 3),
/// asks when it cannot (rule 2), then makes the one call (rule 1).
pub(super) async fn complete_and_call(
    engine: &Engine,
    cx: &Context<'_>,
    trace: &mut Trace,
    target: &Target<'_>,
    mut args: Map<String, Value>,
    mut category: ArgumentCategory,
) -> Result<Outcome, TurnError> {
    let message = cx.said.text();
    let patterns = target.loaded.patterns;
    for property in &target.properties {
        // Rule 4: a value the user names now wins over one carried from
        // earlier ("¿Y a qué hora abre la Tienda Triana?" after Centro).
        let mut named = property.candidates(message, patterns);
        // A proposed value the user wrote stays, unless the property is
        // patterned and the guest did not judge that form to match: a
        // model copying "a-1002" gets the "A-1002" the guest accepted.
        let proposed_now = args.get(property.name).is_some_and(|v| {
            arguments::is_grounded(v, &[message])
                && (!property.is_patterned() || named.contains(v) || named.is_empty())
        });
        if named.len() == 1 && !proposed_now {
            args.insert(property.name.to_owned(), named.remove(0));
        }
    }
    for name in target.required() {
        if args.contains_key(name) {
            continue;
        }
        let Some(property) = target.property(name) else {
            continue;
        };
        // "The status of orders B-2001 and B-2002?": one call per turn
        // (rule 1), so which one — never a reference or history value
        // in place of what the user just wrote.
        let named = property.candidates(message, patterns);
        if named.len() > 1 {
            return Ok(ask(
                engine,
                cx,
                target,
                args,
                property,
                Question::WhichOf(named),
            ));
        }
        if let Some(value) = reference_for(cx, target, name) {
            args.insert(name.to_owned(), Value::String(value));
            category = ArgumentCategory::Reference;
            continue;
        }
        let candidates = history_candidates(cx, patterns, property);
        match candidates.as_slice() {
            [one] => {
                args.insert(name.to_owned(), one.clone());
                category = ArgumentCategory::History;
            }
            _ => {
                return Ok(ask(
                    engine,
                    cx,
                    target,
                    args,
                    property,
                    Question::Candidates(candidates),
                ));
            }
        }
    }
    execute::call(engine, cx, trace, target, args, category).await
}

/// Rule 4: the bound reference for `input`, if this conversation holds one.
fn reference_for(cx: &Context<'_>, target: &Target<'_>, input: &str) -> Option<String> {
    let (from, field) = references::binding(&target.loaded.at.definition, input)?;
    cx.references
        .iter()
        .find(|r| r.capability == from && r.field == field)
        .map(|r| r.value.clone())
}

/// Rule 3: distinct values for `property` in earlier user messages, most
/// recent first (patterned ones as the guest judged them this turn).
fn history_candidates(
    cx: &Context<'_>,
    patterns: &PatternMatches,
    property: &Property<'_>,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for text in cx.user_texts().into_iter().skip(1) {
        for value in property.remembered(text, patterns) {
            if !out.contains(&value) {
                out.push(value);
            }
        }
    }
    out
}
