//! What a verified delivery says. The body is a JSON object with free
//! properties (contract 2.12); from it only `entry[].changes[].value` is
//! read: `metadata.phone_number_id` routes it, `messages[]` of type `text`
//! are queued, and everything else (status updates, other message types,
//! items out of bounds) is reported as intentionally ignored.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::closed_set::closed_set;

/// The platform's own bound on a text message.
pub const MAX_TEXT_CHARS: usize = 4096;
pub const MAX_MESSAGE_ID_CHARS: usize = 256;
pub const MAX_SENDER_CHARS: usize = 64;
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
    let from = bounded_str(m.get("from"), MAX_SENDER_CHARS)
        .filter(|f| f.bytes().all(|b| b.is_ascii_graphic()));
    let body = m
        .pointer("/text/body")
        .and_then(Value::as_str)
        .filter(|b| !b.trim().is_empty() && b.chars().count() <= MAX_TEXT_CHARS);
    match (&id, from, body) {
        (Some(id), Some(from), Some(body)) => Item::Text {
            id: id.clone(),
            from,
            body: body.to_owned(),
        },
        _ => ignored(IgnoredReason::Malformed),
    }
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
    fn a_body_of_the_wrong_shape_is_not_an_event() {
        assert!(parse(json!({"entry": "x"})).is_err());
        assert!(parse(json!({"object": "x"})).unwrap().is_empty());
    }
}
