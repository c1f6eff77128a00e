//! The messaging-platform channel (contract 2.12, 4.3): a WhatsApp-Cloud-API
//! style webhook in, the platform's send API out, a durable queue between.
//!
//! - `webhook`: the handshake and `X-Hub-Signature-256`, checked in constant time;
//! - `inbound`: what a delivery says (text messages; the rest is ignored);
//! - `queue`: routing by `phone_number_id`, pseudonyms, dedup, the cap per
//!   number, the answer;
//! - `worker`: claims one message at a time (fairly across numbers), runs
//!   the turn, sends the reply;
//! - `send_api`: the one client of the platform's send API;
//! - `access_token`: a number's token, sealed under the master keyring.
//!
//! Nothing but the enqueue happens in the webhook request; the turn runs
//! in the worker of whichever `warden serve` claims the message.

use std::sync::Arc;
use tokio::sync::Notify;

pub mod access_token;
pub mod inbound;
pub mod queue;
pub mod send_api;
pub mod webhook;
pub mod worker;

/// What the webhook routes need when the channel is configured.
pub struct PlatformChannel {
    pub secrets: webhook::WebhookSecrets,
    /// Wakes this server's workers when a message was queued.
    pub wake: Arc<Notify>,
    /// Unfinished messages one number may hold (`WARDEN_PLATFORM_QUEUE_PER_NUMBER`).
    pub queue_per_number: i64,
}
