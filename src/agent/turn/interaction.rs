//! Rules 9 and 10: a preparation's result as the contract's closed
//! interaction object (2.3), typed. The guest shapes the host's result
//! into its public part and its opaque references; here they become a
//! [`Confirmation`] or a [`Selection`] for the response, the only place the
//! references go (never stored, logged, put in history or sent to a model).
//! A guest's output that does not fit (a custom guest answering options
//! that are not objects, say) is refused, located, as a failed call.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::outcome::Outcome;
use crate::agent::language::{Language, texts};
use crate::agent::trace::Reason;
use crate::clock::{now_millis, to_rfc3339};
use crate::domain::diagnostics::{GapKind, GapReason};
use crate::domain::interaction::InteractionType;
use crate::sandbox::{InteractionKind, ShapedInteraction};
use crate::store::conversations::PendingChange;

/// Interactions never outlive this, whatever the host's `expires_at`.
pub const MAX_INTERACTION_MILLIS: i64 = 24 * 60 * 60 * 1000;

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

/// An option as the guest's public part holds it (its ref comes apart).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublicOption {
    label: String,
    description: Option<String>,
}

/// An interaction this turn issues: the response object (the only place
/// its opaque refs go) and what is stored of it.
pub(super) struct IssuedInteraction {
    pub response: Interaction,
    pub id: String,
    pub kind: InteractionType,
    pub operation: String,
    pub expires_at: i64,
}

/// Why the guest's interaction cannot be given to the host: where, and what.
#[derive(Debug)]
pub(super) struct Refusal {
    pub pointer: String,
    pub message: String,
}

fn refuse(pointer: impl Into<String>, message: impl Into<String>) -> Refusal {
    Refusal {
        pointer: pointer.into(),
        message: message.into(),
    }
}

fn text_at(map: &Map<String, Value>, key: &str) -> Result<String, Refusal> {
    map.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| refuse(format!("/{key}"), format!("`{key}` is not a string")))
}

/// The turn's outcome for a shaped preparation result: the not-found text,
/// an expired preparation as a failure, or the interaction to issue.
pub(super) fn issue(language: Language, shaped: ShapedInteraction) -> Result<Outcome, Refusal> {
    if shaped.kind == InteractionKind::NotFound {
        return Ok(
            Outcome::reply(texts::NOT_FOUND, Reason::NotFound).with_pending(PendingChange::Clear)
        );
    }
    let (public, refs) = (shaped.public, shaped.refs);
    let operation = text_at(&public, "operation")?;
    let now = now_millis();
    let host_expiry = public
        .get("expires_at")
        .and_then(Value::as_str)
        .and_then(parse_any_offset);
    if host_expiry.is_some_and(|at| at <= now) {
        // Nothing the user could still confirm: a failed preparation.
        tracing::warn!(operation = %operation, "the host prepared an interaction that had already expired");
        return Ok(
            Outcome::reply(texts::failed(language), Reason::InteractionExpired)
                .with_gap(GapKind::AgentDeadEnd, GapReason::InteractionExpired, None)
                .with_pending(PendingChange::Clear),
        );
    }
    let expires_at = host_expiry
        .unwrap_or(now + MAX_INTERACTION_MILLIS)
        .min(now + MAX_INTERACTION_MILLIS);
    let interaction_id = crate::agent::new_id("int_");
    let (response, kind, text) = match shaped.kind {
        InteractionKind::Selection => {
            let selection = selection(&public, &refs, &interaction_id, &operation, expires_at)?;
            let text = texts::choose_option(language, &selection.title);
            (
                Interaction::Selection(selection),
                InteractionType::Selection,
                text,
            )
        }
        _ => {
            let preview: Preview =
                serde_json::from_value(public.get("preview").cloned().unwrap_or(Value::Null))
                    .map_err(|e| refuse("/preview", format!("not a preview: {e}")))?;
            let text = texts::confirm_interaction(language, &preview.title);
            let confirmation = Confirmation {
                expires_at: to_rfc3339(expires_at),
                interaction_id: interaction_id.clone(),
                operation: operation.clone(),
                operation_ref: text_at(&refs, "operation_ref")?,
                owner: "host",
                preview,
                kind: InteractionType::ConfirmOperation,
            };
            (
                Interaction::Confirmation(confirmation),
                InteractionType::ConfirmOperation,
                text,
            )
        }
    };
    let mut outcome =
        Outcome::reply(text, Reason::InteractionRequired).with_pending(PendingChange::Clear);
    outcome.interaction = Some(IssuedInteraction {
        response,
        id: interaction_id,
        kind,
        operation,
        expires_at,
    });
    Ok(outcome)
}

/// A selection: each public option with its ref, in order; as many refs as
/// options, each a string.
fn selection(
    public: &Map<String, Value>,
    refs: &Map<String, Value>,
    interaction_id: &str,
    operation: &str,
    expires_at: i64,
) -> Result<Selection, Refusal> {
    let options = public
        .get("options")
        .and_then(Value::as_array)
        .ok_or_else(|| refuse("/options", "`options` is not an array"))?;
    let option_refs = refs
        .get("option_refs")
        .and_then(Value::as_array)
        .ok_or_else(|| refuse("/option_refs", "`option_refs` is not an array"))?;
    if options.len() != option_refs.len() {
        return Err(refuse(
            "/options",
            format!(
                "{} options but {} option references",
                options.len(),
                option_refs.len()
            ),
        ));
    }
    let options = options
        .iter()
        .zip(option_refs)
        .enumerate()
        .map(|(i, (option, option_ref))| {
            let PublicOption { label, description } = serde_json::from_value(option.clone())
                .map_err(|e| refuse(format!("/options/{i}"), format!("not an option: {e}")))?;
            let option_ref = option_ref
                .as_str()
                .ok_or_else(|| {
                    refuse(
                        format!("/option_refs/{i}"),
                        "an option reference is not a string",
                    )
                })?
                .to_owned();
            Ok(InteractionOption {
                description,
                label,
                option_ref,
            })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    Ok(Selection {
        expires_at: to_rfc3339(expires_at),
        interaction_id: interaction_id.to_owned(),
        operation: operation.to_owned(),
        options,
        owner: "host",
        selection_ref: text_at(refs, "selection_ref")?,
        title: text_at(public, "title")?,
        kind: InteractionType::Selection,
    })
}

fn parse_any_offset(text: &str) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shaped(kind: InteractionKind, public: Value, refs: Value) -> ShapedInteraction {
        let object = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        ShapedInteraction {
            kind,
            public: object(public),
            refs: object(refs),
            assistant_text: None,
        }
    }

    #[test]
    fn a_selection_carries_each_options_ref_and_nothing_else_does() {
        let outcome = issue(
            Language::English,
            shaped(
                InteractionKind::Selection,
                json!({"type": "selection", "operation": "return_items", "title": "Which items?",
                    "expires_at": "2999-01-01T00:00:00Z",
                    "options": [{"label": "Boots"}, {"label": "Hat", "description": "Blue"}]}),
                json!({"selection_ref": "sel_1", "option_refs": ["o1", "o2"]}),
            ),
        )
        .unwrap();
        let issued = outcome.interaction.unwrap();
        let body = serde_json::to_value(&issued.response).unwrap();
        assert_eq!(body["type"], "selection");
        assert_eq!(body["owner"], "host");
        assert_eq!(body["selection_ref"], "sel_1");
        assert_eq!(body["options"][1]["option_ref"], "o2");
        assert_eq!(body["options"][1]["description"], "Blue");
        assert!(!outcome.text.contains("sel_1") && !outcome.text.contains("o1"));
        assert_eq!(issued.kind, InteractionType::Selection);
    }

    fn refusal(issued: Result<Outcome, Refusal>) -> Refusal {
        match issued {
            Err(refusal) => refusal,
            Ok(outcome) => panic!("issued: {}", outcome.text),
        }
    }

    #[test]
    fn options_that_are_not_objects_are_refused_where_they_are() {
        let refused = refusal(issue(
            Language::Spanish,
            shaped(
                InteractionKind::Selection,
                json!({"type": "selection", "operation": "return_items", "title": "¿Cuál?",
                    "options": [{"label": "Botas"}, "sombrero"]}),
                json!({"selection_ref": "sel_1", "option_refs": ["o1", "o2"]}),
            ),
        ));
        assert_eq!(refused.pointer, "/options/1");
        let refused = refusal(issue(
            Language::Spanish,
            shaped(
                InteractionKind::Selection,
                json!({"type": "selection", "operation": "x", "title": "t", "options": [{"label": "a"}]}),
                json!({"selection_ref": "sel_1", "option_refs": []}),
            ),
        ));
        assert_eq!(refused.pointer, "/options");
    }
}
