//! Receipt of a verified delivery: each change is routed by its
//! `phone_number_id` to the registered account, each text message is
//! queued once (dedup on the platform message id), and the answer reports
//! every item as `accepted`, `duplicated` or `ignored`.
//!
//! The answer (documented in docs/contract-decisions.md):
//! `{"status": "accepted"|"duplicated"|"ignored", "messages": [{"id": "wamid…",
//! "status": "accepted"|"duplicated"|"ignored", "reason"?: "status_update"|…}]}`.
//! The top-level status is `accepted` if any message was, else `duplicated`
//! if any was, else `ignored` (also for a delivery with no item at all).

use std::collections::HashMap;

use serde::Serialize;

use super::inbound::{Change, IgnoredReason, Item};
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;
use crate::signing::context::user_subject;
use crate::store::platform::NewInbound;
use crate::store::{Store, StoreError};

closed_set! {
    /// What became of a delivery or one of its items (contract 2.12, 6).
    pub enum Outcome {
        Accepted = "accepted",
        Duplicated = "duplicated",
        Ignored = "ignored",
    }
}

/// The webhook's JSON answer: `accepted` if any item is, else `duplicated`
/// if any is, else `ignored`; one entry per message and status update.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookAnswer {
    pub status: Outcome,
    pub messages: Vec<ItemOutcome>,
}

/// One message or status update of the delivery.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemOutcome {
    /// The platform's id of the message (or of the message a status is about).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 256)]
    pub id: Option<String>,
    pub status: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<IgnoredReason>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The delivery names numbers, none of them registered (404).
    #[error("the phone number is not registered")]
    NotRegistered,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Queues what a delivery carries; returns the answer and how many were accepted.
pub async fn receive(store: &Store, changes: Vec<Change>) -> Result<WebhookAnswer, ReceiveError> {
    // Route first: nothing is queued from a delivery that answers 404.
    let mut routes: HashMap<String, Option<AccountId>> = HashMap::new();
    for number in changes.iter().filter_map(|c| c.phone_number_id.as_ref()) {
        if !routes.contains_key(number) {
            let account = store
                .find_platform_number(number)
                .await?
                .map(|n| n.account());
            routes.insert(number.clone(), account);
        }
    }
    if !routes.is_empty() && routes.values().all(Option::is_none) {
        return Err(ReceiveError::NotRegistered);
    }
    let mut salts: HashMap<AccountId, String> = HashMap::new();
    let mut messages = Vec::new();
    for change in changes {
        let account = change
            .phone_number_id
            .as_ref()
            .and_then(|n| routes.get(n).copied().flatten());
        for item in change.items {
            let outcome = match (item, account, &change.phone_number_id) {
                (Item::Text { id, from, body }, Some(account), Some(number)) => {
                    let salt = match salts.get(&account) {
                        Some(salt) => salt.clone(),
                        None => {
                            let (_, salt) = store.account_identity(&account).await?;
                            salts.insert(account, salt.clone());
                            salt
                        }
                    };
                    let pseudonym = user_subject(&salt, &from);
                    let fresh = store
                        .enqueue_platform_message(&NewInbound {
                            platform_message_id: &id,
                            account,
                            phone_number_id: number,
                            user_pseudonym: &pseudonym,
                            recipient: &from,
                            body: &body,
                        })
                        .await?;
                    let status = if fresh {
                        Outcome::Accepted
                    } else {
                        Outcome::Duplicated
                    };
                    ItemOutcome {
                        id: Some(id),
                        status,
                        reason: None,
                    }
                }
                (Item::Text { id, .. }, _, _) => {
                    ignored(Some(id), IgnoredReason::NumberNotRegistered)
                }
                (Item::Ignored { id, reason }, _, _) => ignored(id, reason),
            };
            messages.push(outcome);
        }
    }
    let status = [Outcome::Accepted, Outcome::Duplicated]
        .into_iter()
        .find(|wanted| messages.iter().any(|m| m.status == *wanted))
        .unwrap_or(Outcome::Ignored);
    if messages.is_empty() {
        messages.push(ignored(None, IgnoredReason::NoMessage));
    }
    Ok(WebhookAnswer { status, messages })
}

fn ignored(id: Option<String>, reason: IgnoredReason) -> ItemOutcome {
    ItemOutcome {
        id,
        status: Outcome::Ignored,
        reason: Some(reason),
    }
}
