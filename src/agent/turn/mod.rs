//! One user turn, from the parsed message to the stored reply, as a
//! pipeline of stages, one file each. The planner proposes; the stages
//! decide, and enforce contract section 1 whatever was proposed:
//!
//! 1. `context`: load the conversation, the policy (with platform
//!    defaults), the active capabilities, history, references and the
//!    pending operation, and derive once what later stages read: the
//!    message read once (`language::Said`), its language, the pending
//!    capability and the property it waits for, each capability's input
//!    properties, the guest's pattern verdicts;
//! 2. `decide`: the runtime rules, one function per rule family, reading
//!    only the context; `fill` completes a call's arguments, `ask` asks
//!    for what it cannot and keeps the operation pending;
//!    `execute` makes the one call and writes the reply; `interaction`
//!    builds the host's confirmation or selection as typed objects;
//! 3. `commit`: the turn's messages, interaction, references and pending
//!    change in one transaction, then the gap event and the response.
//!
//! | rule | where |
//! |---|---|
//! | 1 one call per turn | `decide` reaches `execute::call` at most once |
//! | 2 no invented arguments | `fill::grounded`, `fill::complete`; the executor revalidates in the guest |
//! | 3 history reuse, confirmation | `fill::complete` (history candidates), `decide::rule_03_proposal_refused` |
//! | 4 name-like references | `fill::complete` + `references::harvest` |
//! | 5 no internal identifiers | `grounding`, offers carry names only |
//! | 6 grounded replies | `execute::reply_from_result`, fixed texts on empty or failed results |
//! | 7 read-only | `decide::rule_07_offered`: only active (read-only) capabilities are offered or callable |
//! | 8 just-in-time preparation | `decide::rule_08_preparation` |
//! | 9 not-found text | `interaction::issue` |
//! | 10 opaque refs | only in the response's typed interaction; never stored or sent to a model |
//! | 11 images | held in `InboundMessage` for the turn only |
//! | 12 pending operations, `cancelar` | `decide::rule_12_*`, `pending` |
//! | 13 exclusion clause | `decide::rule_13_exclusion`, first, no executor I/O |

mod ask;
mod commit;
mod context;
mod decide;
mod execute;
mod fill;
mod interaction;
mod outcome;

use std::time::Instant;

use crate::trace_context::{Parent, Scope};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use warden_channel::inbound::InboundMessage;

use super::catalog::Catalog;
use super::planner::{Planner, PlannerError};
use super::response::{MessageResponse, Reason};
use super::trace::Trace;
use crate::crypto::master_key::Keyring;
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;
use crate::executor::Executor;
use crate::store::platform::LeasedReply;
use crate::store::policy::TurnBasis;
use crate::store::{Store, StoreError};

pub use context::HISTORY_MESSAGES;
pub use interaction::MAX_INTERACTION_MILLIS;

/// Metadata key that asks for a `benchmark_observation` (its value is the
/// correlation id).
pub const BENCHMARK_METADATA_KEY: &str = "benchmark_correlation_id";

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("no such conversation")]
    ConversationNotFound,
    /// The user's data was erased while this turn ran; nothing was kept.
    #[error("the user's data was erased during the turn")]
    UserErased,
    /// A platform turn's message was taken over by another worker (its
    /// lease had lapsed) while the turn ran; nothing was kept.
    #[error("the platform message's lease was lost during the turn")]
    LeaseLost,
    #[error(transparent)]
    Inference(#[from] PlannerError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a turn needs from the rest of the service.
#[derive(Clone)]
pub struct Engine {
    store: Store,
    executor: Executor,
    planner: Planner,
    keyring: Keyring,
    catalog: Catalog,
}

impl Engine {
    pub fn new(store: Store, executor: Executor, planner: Planner, keyring: Keyring) -> Self {
        Engine {
            store,
            executor,
            planner,
            keyring,
            catalog: Catalog::default(),
        }
    }

    pub fn planner(&self) -> &Planner {
        &self.planner
    }

    /// Runs one turn and answers the message response (contract 2.2), on
    /// the account's `basis` as read with the caller's key.
    ///
    /// The turn layer's one instrumentation point: the `invoke_agent` span
    /// (OpenTelemetry GenAI conventions) and `warden_turns_total` /
    /// `warden_turn_duration_seconds`, by channel and outcome.
    pub async fn turn(
        &self,
        channel: TurnChannel,
        account: &AccountId,
        basis: TurnBasis,
        inbound: &InboundMessage,
    ) -> Result<MessageResponse, TurnError> {
        self.turn_recording(channel, account, Some(basis), inbound, None)
            .await
    }

    /// A platform message's turn, its reply recorded in the turn's own
    /// transaction under the message's lease
    /// ([`crate::store::platform::LeasedReply`]).
    pub async fn platform_turn(
        &self,
        account: &AccountId,
        inbound: &InboundMessage,
        reply: LeasedReply<'_>,
    ) -> Result<MessageResponse, TurnError> {
        self.turn_recording(TurnChannel::Platform, account, None, inbound, Some(reply))
            .await
    }

    async fn turn_recording(
        &self,
        channel: TurnChannel,
        account: &AccountId,
        basis: Option<TurnBasis>,
        inbound: &InboundMessage,
        platform_reply: Option<LeasedReply<'_>>,
    ) -> Result<MessageResponse, TurnError> {
        let span = Scope::start(SpanKind::Internal, Parent::Current, || {
            (
                "invoke_agent".into(),
                crate::trace_context::attributes(
                    [
                        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                        KeyValue::new("warden.channel", channel.as_str()),
                    ],
                    2,
                ),
            )
        });
        let started = Instant::now();
        let answered = span
            .run(self.run(account, basis, inbound, platform_reply, started))
            .await;
        let outcome = match &answered {
            Ok((response, reason)) => {
                span.set_attribute(|| {
                    KeyValue::new(
                        "gen_ai.conversation.id",
                        response.conversation_id.to_string(),
                    )
                });
                TurnOutcome::of(*reason)
            }
            Err(_) => TurnOutcome::Error,
        };
        span.set_attribute(|| KeyValue::new("warden.turn.outcome", outcome.as_str()));
        crate::metrics::turn(channel.as_str(), outcome.as_str(), started.elapsed());
        answered.map(|(response, _)| response)
    }

    async fn run(
        &self,
        account: &AccountId,
        basis: Option<TurnBasis>,
        inbound: &InboundMessage,
        platform_reply: Option<LeasedReply<'_>>,
        started: Instant,
    ) -> Result<(MessageResponse, Reason), TurnError> {
        let mut trace = Trace::default();
        let context = context::load(self, account, basis, inbound).await?;
        trace.timing.preparation = started.elapsed();
        let outcome = decide::decide(self, &context, &mut trace).await?;
        let reason = outcome.reason;
        trace.responded(reason);
        let response =
            commit::commit(self, &context, outcome, trace, platform_reply, started).await?;
        Ok((response, reason))
    }
}

closed_set! {
    /// Which channel a turn came in by (the turn metric's `channel`).
    pub enum TurnChannel {
        Http = "http",
        Platform = "platform",
    }
}

closed_set! {
    /// What a turn came to, coarsely (the turn metric's `outcome`): an
    /// operator's "how many turns failed, and why" is this, then the
    /// capability calls' failure reasons.
    pub enum TurnOutcome {
        /// A reply from a result (grounded, templated, empty or not found).
        Answered = "answered",
        /// A question back for a missing argument.
        Asked = "asked",
        /// A confirmation or selection for the host.
        Interaction = "interaction",
        /// Nothing offered could serve the message (a capability gap).
        Gap = "gap",
        /// The rules refused what was asked or proposed.
        Refused = "refused",
        /// The capability call failed, or the interaction expired.
        Failed = "failed",
        /// Cancellations, closings, thanks: no call needed.
        Closed = "closed",
        /// The turn could not run (database, inference backend).
        Error = "error",
    }
}

impl TurnOutcome {
    fn of(reason: Reason) -> Self {
        match reason {
            Reason::Answered
            | Reason::Grounded
            | Reason::GroundedTemplate
            | Reason::EmptyResult
            | Reason::NotFound => TurnOutcome::Answered,
            Reason::Clarification => TurnOutcome::Asked,
            Reason::Confirmation | Reason::InteractionRequired => TurnOutcome::Interaction,
            Reason::NoCapability | Reason::OutOfScope | Reason::OperationNotOffered => {
                TurnOutcome::Gap
            }
            Reason::CapabilityExcluded
            | Reason::CapabilityRefused
            | Reason::AnswerRefused
            | Reason::PreparationWithoutIntent
            | Reason::ImageNeedsInstructions => TurnOutcome::Refused,
            Reason::CapabilityFailed | Reason::InteractionExpired => TurnOutcome::Failed,
            Reason::Cancelled | Reason::NothingToCancel | Reason::Closing => TurnOutcome::Closed,
        }
    }
}
