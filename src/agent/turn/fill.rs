//! A call's arguments: only values the user wrote (rule 2), completed from
//! the conversation's references (rule 4) and the user's earlier messages
//! when those are unambiguous (rule 3); otherwise the turn asks, and keeps
//! the operation pending for the next message (rule 12).

use serde_json::{Map, Value};

use super::context::{Context, Target};
use super::outcome::{Observation, Outcome};
use super::{Engine, TurnError, execute};
use crate::agent::arguments::{self, Property};
use crate::agent::grounding::written_in;
use crate::agent::language::{Language, lexicon, texts};
use crate::agent::pending::{self, PendingOperation};
use crate::agent::planner::Planner;
use crate::agent::references;
use crate::agent::response::{ArgumentCategory, FixtureResult};
use crate::agent::trace::{Reason, Trace};
use crate::agent::verdicts::PatternMatches;
use crate::store::conversations::PendingChange;

/// What a clarification asks: to confirm a value from history (none: ask
/// for it outright), or which of several values the user means.
pub(super) enum Question {
    Candidates(Vec<Value>),
    WhichOf(Vec<Value>),
}

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

/// A clarification: the question, and the operation kept pending, so
/// the next message can complete it (rule 3: nothing called, nothing
/// assumed).
pub(super) fn ask(
    engine: &Engine,
    cx: &Context<'_>,
    target: &Target<'_>,
    args: Map<String, Value>,
    property: &Property<'_>,
    question: Question,
) -> Outcome {
    let what = what_to_ask(cx.language, property);
    let (text, proposed, alternatives, reason) = match question {
        // The most recent candidate from history is proposed for
        // confirmation; the others stay as the alternatives.
        Question::Candidates(candidates) => match candidates.split_first() {
            Some((first, rest)) => {
                let shown = candidates.iter().map(shown).collect::<Vec<_>>();
                (
                    texts::confirm_value(cx.language, &what, &shown[0], &shown[1..]),
                    Some(first.clone()),
                    rest.to_vec(),
                    Reason::Confirmation,
                )
            }
            None => (
                texts::ask_for(cx.language, &what),
                None,
                Vec::new(),
                Reason::Clarification,
            ),
        },
        Question::WhichOf(options) => {
            let shown = options.iter().map(shown).collect::<Vec<_>>();
            (
                texts::which_one(cx.language, &what, &shown),
                None,
                options,
                Reason::Clarification,
            )
        }
    };
    let loaded = &target.loaded;
    let pending = PendingOperation {
        capability_id: loaded.at.id.clone(),
        revision: loaded.at.revision,
        arguments: args,
        missing: property.name.to_owned(),
        proposed,
        alternatives,
    };
    let mut outcome = Outcome::reply(text, reason).with_pending(PendingChange::Set(pending::seal(
        &engine.keyring,
        cx.account,
        &cx.conversation_id,
        &pending,
    )));
    outcome.observation = Observation {
        capability: loaded.offer.name.clone(),
        argument_category: ArgumentCategory::Missing,
        fixture_result: FixtureResult::NotCalled,
    };
    outcome
}

/// How a question names `property`: its description when it is written in
/// the conversation's language; else the lexicon's words for what it names;
/// else its name in words. An English question never embeds "el número de
/// pedido", nor a Spanish one "card".
fn what_to_ask(language: Language, property: &Property<'_>) -> String {
    let name = property.name.replace(['_', '-'], " ");
    match property.description() {
        Some(d) if written_in(d, language) => d.trim_end_matches('.').to_owned(),
        _ => match lexicon::ask_label(&name, language) {
            Some(label) => label.to_owned(),
            None if language == Language::English && !name.starts_with("the ") => {
                format!("the {name}")
            }
            None => name,
        },
    }
}

/// A value as the user reads it in a question.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
