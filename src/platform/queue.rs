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
//!
//! Everything that can refuse the delivery whole is decided before the
//! first insert (what each item is, the routes, the pseudonym salts), so a
//! delivery is never half-queued and then failed: after the first insert
//! only a database failure (503) or a full number can interrupt it, and a
//! retry then finds what was queued `duplicated`. A number holding its cap
//! of unfinished messages takes no more; the rest of the delivery is still
//! queued and the answer is 503 with `Retry-After`, so the platform retries.

use std::collections::HashMap;

use serde::Serialize;

use super::inbound::{Change, IgnoredReason, Item, is_phone_number_id};
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;
use crate::signing::context::user_subject;
use crate::store::platform::{Enqueued, NewInbound};
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

/// What a delivery left in the queue.
#[derive(Debug)]
pub struct Receipt {
    pub answer: WebhookAnswer,
    /// A number was full: some of its messages were not queued (503).
    pub queue_full: bool,
}

/// Queues what a delivery carries, at most `per_number` unfinished messages
/// per number.
pub async fn receive(
    store: &Store,
    changes: Vec<Change>,
    per_number: i64,
) -> Result<Receipt, ReceiveError> {
    // Route first: nothing is queued from a delivery that answers 404. A
    // number id that cannot be a registered one is not looked up.
    let mut routes: HashMap<String, Option<AccountId>> = HashMap::new();
    for number in changes.iter().filter_map(|c| c.phone_number_id.as_ref()) {
        if !routes.contains_key(number) {
            let account = if is_phone_number_id(number) {
                store
                    .find_platform_number(number)
                    .await?
                    .map(|n| n.account())
            } else {
                None
            };
            routes.insert(number.clone(), account);
        }
    }
    if !routes.is_empty() && routes.values().all(Option::is_none) {
        return Err(ReceiveError::NotRegistered);
    }
    let route = |change: &Change| {
        change
            .phone_number_id
            .as_ref()
            .and_then(|n| routes.get(n).copied().flatten())
    };
    // The salts of the accounts that will queue something.
    let mut salts: HashMap<AccountId, String> = HashMap::new();
    for change in &changes {
        let Some(account) = route(change) else {
            continue;
        };
        let texts = change.items.iter().any(|i| matches!(i, Item::Text { .. }));
        if texts && !salts.contains_key(&account) {
            let (_, salt) = store.account_identity(&account).await?;
            salts.insert(account, salt);
        }
    }
    let mut messages = Vec::new();
    let mut full: Vec<String> = Vec::new();
    // The worker's turn links back to this request's trace.
    let trace_parent = crate::trace_context::current_traceparent();
    for change in &changes {
        let account = route(change);
        for item in &change.items {
            let outcome = match (item, account, &change.phone_number_id) {
                (Item::Text { id, from, body }, Some(account), Some(number)) => {
                    if full.contains(number) {
                        // Not offered again: the platform retries the delivery.
                        continue;
                    }
                    let pseudonym = user_subject(&salts[&account], from);
                    let enqueued = store
                        .enqueue_platform_message(
                            &NewInbound {
                                platform_message_id: id,
                                account,
                                phone_number_id: number,
                                user_pseudonym: &pseudonym,
                                recipient: from,
                                body,
                                trace_parent: trace_parent.as_deref(),
                            },
                            per_number,
                        )
                        .await?;
                    let status = match enqueued {
                        Enqueued::Accepted => Outcome::Accepted,
                        Enqueued::Duplicated => Outcome::Duplicated,
                        Enqueued::QueueFull => {
                            crate::metrics::platform_delivery("full");
                            full.push(number.clone());
                            continue;
                        }
                    };
                    ItemOutcome {
                        id: Some(id.clone()),
                        status,
                        reason: None,
                    }
                }
                (Item::Text { id, .. }, _, _) => {
                    crate::metrics::platform_delivery("unknown_number");
                    messages.push(ignored(
                        Some(id.clone()),
                        IgnoredReason::NumberNotRegistered,
                    ));
                    continue;
                }
                (Item::Ignored { id, reason }, _, _) => ignored(id.clone(), *reason),
            };
            // The platform layer's one count of what a delivery carried.
            crate::metrics::platform_delivery(outcome.status.as_str());
            messages.push(outcome);
        }
    }
    if !full.is_empty() {
        tracing::warn!(numbers = ?full, per_number, "platform queue full for a number; delivery refused with 503");
    }
    let status = [Outcome::Accepted, Outcome::Duplicated]
        .into_iter()
        .find(|wanted| messages.iter().any(|m| m.status == *wanted))
        .unwrap_or(Outcome::Ignored);
    if messages.is_empty() {
        messages.push(ignored(None, IgnoredReason::NoMessage));
    }
    Ok(Receipt {
        answer: WebhookAnswer { status, messages },
        queue_full: !full.is_empty(),
    })
}

fn ignored(id: Option<String>, reason: IgnoredReason) -> ItemOutcome {
    ItemOutcome {
        id,
        status: Outcome::Ignored,
        reason: Some(reason),
    }
}
