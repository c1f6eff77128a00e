//! What a verified delivery says. The body is a JSON object with free
//! properties (contract 2.12); from it only `entry[].changes[].value` is
//! read: `metadata.phone_number_id` routes it, `messages[]` of type `text`
//! are queued, and everything else (status updates, other message types,
//! items out of bounds) is reported as intentionally ignored.
//!
//! Nothing that cannot be stored the same way on both databases reaches
//! one: a message whose text holds NUL, or whose id or sender id holds any
//! control character (an id also becomes the reply's `Idempotency-Key`
//! header), is ignored as `invalid_message`; a `phone_number_id` that is
//! not 1 to 32 digits cannot be registered and is never looked up.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::closed_set::closed_set;

/// The platform's own bound on a text message.
pub const MAX_TEXT_CHARS: usize = 4096;
pub const MAX_MESSAGE_ID_CHARS: usize = 256;
pub const MAX_SENDER_CHARS: usize = 64;
pub const MAX_PHONE_NUMBER_ID_DIGITS: usize = 32;
/// Items (messages and status updates) read from one delivery.
pub const MAX_ITEMS: usize = 1000;

closed_set! {
    /// Why an item of a delivery is not queued.
    pub enum IgnoredReason {
        /// A sent message's delivery or read receipt.
        StatusUpdate = "status_update",
        /// Not a text message (image, audio, reaction…).
        NotText = "not_text",
        /// A message without the fields a reply needs, or out of bounds.
        Malformed = "malformed",
        /// A change for a number that is not registered (in a delivery that
        /// also names a registered one).
        NumberNotRegistered = "number_not_registered",
        /// The delivery carries no message at all.
        NoMessage = "no_message",
        /// A field that cannot be stored or sent: NUL in the text, a control
        /// character in the message id or the sender id. Nothing of it is kept.
        InvalidMessage = "invalid_message",
    }
}

/// One item of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Text {
        id: String,
        /// The sender's platform id: needed to reply, never stored in a conversation.
        from: String,
        body: String,
    },
    Ignored {
        id: Option<String>,
        reason: IgnoredReason,
    },
}

/// One `entry[].changes[]` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub phone_number_id: Option<String>,
    pub items: Vec<Item>,
}

#[derive(Debug, thiserror::Error)]
#[error("the body is not a platform event: {0}")]
pub struct NotAnEvent(String);

#[derive(Deserialize)]
struct Payload {
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<ChangeIn>,
}

#[derive(Deserialize)]
struct ChangeIn {
    #[serde(default)]
    value: Option<ValueIn>,
}

#[derive(Deserialize)]
struct ValueIn {
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    statuses: Vec<Value>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    phone_number_id: Option<String>,
}

/// Reads a delivery (already verified and parsed as a JSON object).
pub fn parse(body: Value) -> Result<Vec<Change>, NotAnEvent> {
    let payload: Payload = serde_json::from_value(body).map_err(|e| NotAnEvent(e.to_string()))?;
    let mut changes = Vec::new();
    let mut items_seen = 0usize;
    for value in payload
        .entry
        .into_iter()
        .flat_map(|e| e.changes)
        .filter_map(|c| c.value)
    {
        items_seen += value.messages.len() + value.statuses.len();
        if items_seen > MAX_ITEMS {
            return Err(NotAnEvent(format!("more than {MAX_ITEMS} items")));
        }
        let mut items: Vec<Item> = value.messages.iter().map(message).collect();
        items.extend(value.statuses.iter().map(|s| Item::Ignored {
            id: bounded_str(s.get("id"), MAX_MESSAGE_ID_CHARS),
            reason: IgnoredReason::StatusUpdate,
        }));
        changes.push(Change {
            phone_number_id: value.metadata.and_then(|m| m.phone_number_id),
            items,
        });
    }
    Ok(changes)
}

fn message(m: &Value) -> Item {
    let id = bounded_str(m.get("id"), MAX_MESSAGE_ID_CHARS);
    let ignored = |reason| Item::Ignored {
        id: id.clone(),
        reason,
    };
    if m.get("type").and_then(Value::as_str) != Some("text") {
        return ignored(IgnoredReason::NotText);
    }
    let from = bounded_str(m.get("from"), MAX_SENDER_CHARS);
    let body = m.pointer("/text/body").and_then(Value::as_str);
    let unstorable = id.as_deref().is_some_and(has_control)
        || from.as_deref().is_some_and(has_control)
        || body.is_some_and(|b| b.contains('\0'));
    if unstorable {
        return ignored(IgnoredReason::InvalidMessage);
    }
    let from = from.filter(|f| f.bytes().all(|b| b.is_ascii_graphic()));
    let body = body.filter(|b| !b.trim().is_empty() && b.chars().count() <= MAX_TEXT_CHARS);
    match (&id, from, body) {
        (Some(id), Some(from), Some(body)) => Item::Text {
            id: id.clone(),
            from,
            body: body.to_owned(),
        },
        _ => ignored(IgnoredReason::Malformed),
    }
}

/// NUL, CR, LF and every other C0 or C1 control character, and DEL.
fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// A `phone_number_id` as registered (`warden admin webhook register`): 1 to
/// 32 ASCII digits. Anything else is not a registered number.
pub fn is_phone_number_id(id: &str) -> bool {
    (1..=MAX_PHONE_NUMBER_ID_DIGITS).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit())
}

fn bounded_str(value: Option<&Value>, max: usize) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.chars().count() <= max)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_text_messages_and_ignores_the_rest() {
        let changes = parse(json!({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [{
            "field": "messages",
            "value": {
                "metadata": {"phone_number_id": "1234"},
                "messages": [
                    {"from": "34600111222", "id": "wamid.A", "type": "text", "text": {"body": "hola"}},
                    {"from": "34600111222", "id": "wamid.B", "type": "image", "image": {}},
                    {"from": "34600111222", "type": "text", "text": {"body": "no id"}}
                ],
                "statuses": [{"id": "wamid.S", "status": "read"}]
            }
        }]}]}))
        .unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].phone_number_id.as_deref(), Some("1234"));
        assert_eq!(
            changes[0].items,
            vec![
                Item::Text {
                    id: "wamid.A".into(),
                    from: "34600111222".into(),
                    body: "hola".into()
                },
                Item::Ignored {
                    id: Some("wamid.B".into()),
                    reason: IgnoredReason::NotText
                },
                Item::Ignored {
                    id: None,
                    reason: IgnoredReason::Malformed
                },
                Item::Ignored {
                    id: Some("wamid.S".into()),
                    reason: IgnoredReason::StatusUpdate
                },
            ]
        );
    }

    #[test]
    fn unstorable_fields_make_the_message_invalid() {
        let text = |from: &str, id: &str, body: &str| json!({"from": from, "id": id, "type": "text", "text": {"body": body}});
        let changes = parse(json!({"entry": [{"changes": [{"value": {
            "metadata": {"phone_number_id": "1"},
            "messages": [
                text("346", "wamid.A", "hola\u{0}mundo"),
                text("346", "wamid.\u{0}", "hola"),
                text("3\u{0}46", "wamid.C", "hola"),
                text("346", "wamid.D\r\n", "hola"),
                text("346", "wamid.E\u{85}", "hola"),
                text("346", "wamid.F", "línea\nsiguiente\t\u{1}"),
            ]
        }}]}]}))
        .unwrap();
        let reasons: Vec<_> = changes[0]
            .items
            .iter()
            .map(|item| match item {
                Item::Ignored { reason, .. } => Some(*reason),
                Item::Text { .. } => None,
            })
            .collect();
        let invalid = Some(IgnoredReason::InvalidMessage);
        assert_eq!(
            reasons,
            [invalid, invalid, invalid, invalid, invalid, None],
            "text may hold line breaks and other controls, never NUL"
        );
        assert!(is_phone_number_id("1029384756"));
        for bad in ["", "12a", "1\u{0}2", "١٢", &"1".repeat(33)] {
            assert!(!is_phone_number_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_body_of_the_wrong_shape_is_not_an_event() {
        assert!(parse(json!({"entry": "x"})).is_err());
        assert!(parse(json!({"object": "x"})).unwrap().is_empty());
    }
}
