//! The worker every `warden serve` runs: claims one queued message at a
//! time, runs the same turn engine as the HTTP channel, and sends the reply.
//!
//! Exactly one reply per accepted message, across crashes:
//! - the turn's reply is recorded (`answered`) before the send, so a retry
//!   after a crash sends the recorded reply and never runs the turn again;
//!   a crash during the turn runs it again (its first run may have left a
//!   turn in the conversation, never a reply to the user);
//! - the message is marked `replied` right after the platform acknowledges;
//!   a crash between the two resends, carrying the inbound message's id as
//!   `Idempotency-Key` so a send API that deduplicates drops the resend.
//!
//! Claims count attempts; a message past the bound is dead-lettered.

use std::sync::Arc;
use std::time::Duration;

use crate::trace_context::{Parent, Scope};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use rand::Rng;
use serde_json::Map;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use zeroize::Zeroizing;

use super::access_token;
use super::send_api::{SendApi, SendError};
use crate::agent::{Engine, TurnError};
use crate::crypto::master_key::Keyring;
use crate::store::Store;
use crate::store::platform::{ClaimedInbound, InboundState, LeasedReply};
use warden_channel::inbound::InboundMessage;

/// How the worker retries and how long a claim lasts.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub lease: Duration,
}

const MAX_DELAY: Duration = Duration::from_secs(300);
/// How often an idle worker looks for messages queued by other replicas.
const IDLE_POLL: Duration = Duration::from_millis(250);

#[derive(Clone)]
pub struct Worker {
    pub store: Store,
    pub engine: Engine,
    pub keyring: Keyring,
    pub send_api: SendApi,
    pub fallback_token: Option<Arc<Zeroizing<String>>>,
    pub policy: RetryPolicy,
    pub wake: Arc<Notify>,
}

/// What to do with a claimed message after a failure.
enum Failure {
    Retry(String),
    Dead(String),
}

impl Worker {
    /// Starts `count` worker tasks; each stops between messages once
    /// `stop` turns true.
    pub fn spawn(self, count: usize, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        (0..count)
            .map(|_| {
                let worker = self.clone();
                let stop = stop.clone();
                tokio::spawn(async move { worker.run(stop).await })
            })
            .collect()
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        // A new owner per task and start: a restarted server never mistakes
        // a lease of its previous life for its own.
        let owner = crate::domain::id::random_id("wrk_");
        let lease = i64::try_from(self.policy.lease.as_millis()).unwrap_or(i64::MAX);
        while !*stop.borrow() {
            match self.store.claim_platform_message(&owner, lease).await {
                Ok(Some(message)) => self.handle(&owner, message).await,
                Ok(None) => {
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(IDLE_POLL) => {}
                        _ = stop.changed() => {}
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "platform queue unavailable");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
        }
    }

    async fn handle(&self, owner: &str, message: ClaimedInbound) {
        let seq = message.seq;
        // A trace of its own (the worker is no request's child), linked to
        // the webhook request that queued the message.
        let span = Scope::start(
            SpanKind::Consumer,
            Parent::LinkedTo(message.trace_parent.as_deref()),
            || {
                (
                    "process platform_message".into(),
                    vec![
                        KeyValue::new("messaging.system", "platform"),
                        KeyValue::new("messaging.operation.type", "process"),
                        KeyValue::new("warden.platform.attempt", message.attempts),
                    ],
                )
            },
        );
        let outcome = span.run(self.process(owner, &message)).await;
        let stored = match outcome {
            Ok(()) => Ok(()),
            Err(Failure::Retry(why)) if message.attempts < i64::from(self.policy.max_attempts) => {
                tracing::info!(seq, attempts = message.attempts, reason = %why, "platform reply will be retried");
                let at = crate::clock::now_millis() + self.backoff(message.attempts);
                self.store
                    .retry_platform_message(seq, owner, at, &why)
                    .await
            }
            Err(Failure::Retry(why) | Failure::Dead(why)) => {
                tracing::warn!(seq, attempts = message.attempts, reason = %why, "platform message dead-lettered");
                self.store
                    .dead_letter_platform_message(seq, owner, &why)
                    .await
                    .map(|_| ())
            }
        };
        if let Err(err) = stored {
            // The lease lapses and another attempt takes over.
            tracing::warn!(seq, error = %err, "could not record a platform message's outcome");
        }
    }

    async fn process(&self, owner: &str, message: &ClaimedInbound) -> Result<(), Failure> {
        if message.attempts > i64::from(self.policy.max_attempts) {
            return Err(Failure::Dead("attempts used up".into()));
        }
        let Some(recipient) = message.recipient.as_deref() else {
            return Err(Failure::Dead("no recipient kept".into()));
        };
        let Some(number) = self
            .store
            .find_platform_number(&message.phone_number_id)
            .await
            .map_err(|e| Failure::Retry(e.to_string()))?
            .filter(|n| n.account() == message.account())
        else {
            return Err(Failure::Dead("the number is no longer registered".into()));
        };
        let reply = match message.state {
            InboundState::Queued => match self.turn(owner, message).await? {
                Some(reply) => reply,
                // Our lease lapsed and another worker has the message now.
                None => return Ok(()),
            },
            InboundState::Answered => message
                .reply
                .clone()
                .ok_or_else(|| Failure::Dead("an answered message has no reply".into()))?,
            InboundState::Replied | InboundState::Dead => return Ok(()),
        };
        let token = match number.sealed_token() {
            Some(sealed) => access_token::open(
                &self.keyring,
                number.account(),
                &number.phone_number_id,
                &sealed,
            )
            .map_err(|e| Failure::Retry(format!("the access token does not open: {e}")))?,
            None => self
                .fallback_token
                .as_deref()
                .cloned()
                .ok_or_else(|| Failure::Retry("no access token for this number".into()))?,
        };
        match self
            .send_api
            .send_text(
                &message.phone_number_id,
                &token,
                recipient,
                &reply,
                &message.platform_message_id,
            )
            .await
        {
            Ok(()) => crate::metrics::platform_send("sent"),
            Err(SendError::Transient(why)) => {
                crate::metrics::platform_send("transient_error");
                return Err(Failure::Retry(why));
            }
            Err(SendError::Refused(why)) => {
                crate::metrics::platform_send("refused");
                return Err(Failure::Dead(why));
            }
            Err(err @ SendError::Unbuildable(_)) => {
                crate::metrics::platform_send("unbuildable");
                return Err(Failure::Dead(err.to_string()));
            }
        }
        match self.store.mark_platform_replied(message.seq, owner).await {
            Ok(true) => tracing::info!(seq = message.seq, "platform reply sent"),
            Ok(false) => tracing::warn!(
                seq = message.seq,
                "platform reply sent after the claim lapsed"
            ),
            Err(err) => {
                tracing::warn!(seq = message.seq, error = %err, "platform reply sent but not recorded; it will be resent with the same idempotency key")
            }
        }
        Ok(())
    }

    /// Runs the turn, which records its reply. `None`: the lease was lost.
    async fn turn(&self, owner: &str, message: &ClaimedInbound) -> Result<Option<String>, Failure> {
        let retry = |e: &dyn std::fmt::Display| Failure::Retry(e.to_string());
        let account = message.account();
        let conversation_id = self
            .store
            .find_platform_conversation(&message.phone_number_id, &message.user_pseudonym)
            .await
            .map_err(|e| retry(&e))?;
        let inbound = InboundMessage {
            user_id: Some(message.user_pseudonym.clone()),
            conversation_id,
            body: message.body.clone().unwrap_or_default(),
            metadata: Map::new(),
            image: None,
        };
        let leased = LeasedReply { message, owner };
        let response = match self.engine.platform_turn(&account, &inbound, leased).await {
            Ok(response) => response,
            // Another worker has the message now; nothing of this turn was kept.
            Err(TurnError::LeaseLost) => return Ok(None),
            Err(TurnError::ConversationNotFound) => {
                // Deleted meanwhile: the next attempt starts a new one.
                self.store
                    .forget_platform_conversation(&message.phone_number_id, &message.user_pseudonym)
                    .await
                    .map_err(|e| retry(&e))?;
                return Err(Failure::Retry("the user's conversation is gone".into()));
            }
            Err(err) => return Err(retry(&err)),
        };
        // Only the message text goes to the platform: an interaction's
        // opaque refs stay out of it (its preview text is the body). The
        // turn's commit recorded it with the message's lease still ours.
        let reply = response.message.body;
        if reply.is_empty() {
            return Err(Failure::Dead("the turn gave no reply".into()));
        }
        Ok(Some(reply))
    }

    /// Doubling from the base delay, capped, with up to 20 % jitter.
    fn backoff(&self, attempts: i64) -> i64 {
        let exponent = u32::try_from(attempts.saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(20);
        let delay = self
            .policy
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(MAX_DELAY);
        let millis = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        millis + rand::thread_rng().gen_range(0..=millis / 5)
    }
}
