//! A clarification (rules 2, 3 and 12): the question, in the
//! conversation's language, and the operation kept pending (sealed) so the
//! next message can complete it. Nothing is called, nothing assumed.

use serde_json::{Map, Value};

use super::Engine;
use super::context::{Context, Target};
use super::outcome::{Observation, Outcome};
use crate::agent::arguments::Property;
use crate::agent::grounding::written_in;
use crate::agent::language::{Language, lexicon, texts};
use crate::agent::pending::{self, PendingOperation};
use crate::agent::response::{ArgumentCategory, FixtureResult, Reason};
use crate::store::conversations::PendingChange;

/// What a clarification asks: to confirm a value from history (none: ask
/// for it outright), or which of several values the user means.
pub(super) enum Question {
    Candidates(Vec<Value>),
    WhichOf(Vec<Value>),
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
