//! Conversations of the HTTP channel: messages (history), the name-like
//! references of rule 4, the pending operation of rule 12, interactions and
//! client event identifiers. A turn is written by [`Store::commit_turn`] in
//! one transaction, so a failed turn leaves nothing half-written.
//!
//! What is never written here: images or their extractions, opaque
//! interaction references, raw endpoint results, credentials (rules 10, 11).

use super::direct::{Param, ReadRow, Step, required, word};
use super::{Store, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::crypto::sealed::Sealed;
use crate::domain::account::AccountId;
use crate::domain::interaction::{InteractionStatus, InteractionType};
use crate::domain::language::Language;

/// A conversation the store found for an account. Only
/// [`Store::find_conversation`] makes one (the fields are private), so the
/// reads that take it need no account: holding it proves ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRow {
    id: String,
    account_id: i64,
    user_id: Option<String>,
    created_at: i64,
    language: Option<Language>,
    last_capability: Option<String>,
}

impl ConversationRow {
    const SELECT: &str = "SELECT id, account_id, user_id, created_at, language, last_capability \
                          FROM conversations WHERE account_id = $1 AND id = $2";

    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(ConversationRow {
            id: required(row.text(0)?, 0)?,
            account_id: required(row.int(1)?, 1)?,
            user_id: row.text(2)?,
            created_at: required(row.int(3)?, 3)?,
            language: match row.text(4)? {
                Some(_) => Some(word(row, 4, Language::parse)?),
                None => None,
            },
            last_capability: row.text(5)?,
        })
    }

    /// The language its first message with text fixed (`None` before one
    /// came, e.g. after an image alone, or for one older than the column).
    pub fn language(&self) -> Option<Language> {
        self.language
    }

    /// The name of the capability the conversation's last call used.
    pub fn last_capability(&self) -> Option<&str> {
        self.last_capability.as_deref()
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    pub fn created_at(&self) -> i64 {
        self.created_at
    }
}

pub use crate::domain::message::MessageRole;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub role: MessageRole,
    pub body: String,
}

impl StoredMessage {
    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(StoredMessage {
            role: word(row, 0, MessageRole::parse)?,
            body: required(row.text(1)?, 1)?,
        })
    }
}

/// A rule-4 reference: a bounded name-like value a capability returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReference {
    pub capability: String,
    pub field: String,
    pub value: String,
}

impl StoredReference {
    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(StoredReference {
            capability: required(row.text(0)?, 0)?,
            field: required(row.text(1)?, 1)?,
            value: required(row.text(2)?, 2)?,
        })
    }
}

/// A pending operation as stored: its arguments are sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPending {
    pub capability_id: String,
    pub revision: i64,
    pub sealed: Sealed,
    pub expires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InteractionRow {
    pub id: String,
    pub conversation_id: String,
    pub kind: InteractionType,
    pub operation: String,
    pub status: InteractionStatus,
    pub expires_at: i64,
    pub created_at: i64,
}

pub struct NewMessage<'a> {
    pub id: &'a str,
    pub body: &'a str,
    /// The host's metadata, as JSON text (user messages only).
    pub metadata: Option<&'a str>,
}

pub struct NewInteraction<'a> {
    pub id: &'a str,
    pub kind: InteractionType,
    pub operation: &'a str,
    pub expires_at: i64,
}

/// What a turn changes in the conversation's pending operation.
pub enum PendingChange {
    Keep,
    Clear,
    Set(StoredPending),
}

/// A conversation this turn starts.
pub struct NewConversation<'a> {
    pub user_id: Option<&'a str>,
}

/// Everything one turn writes.
pub struct TurnRecord<'a> {
    pub conversation_id: &'a str,
    /// Set when this turn starts the conversation.
    pub new_conversation: Option<NewConversation<'a>>,
    /// The language this turn's text fixes, when the conversation has none
    /// yet (its first message with text; an image alone fixes nothing).
    pub decided_language: Option<Language>,
    /// The capability this turn called, kept for the next turn's follow-ups.
    pub called_capability: Option<&'a str>,
    pub user_message: NewMessage<'a>,
    pub assistant_message: NewMessage<'a>,
    pub interaction: Option<NewInteraction<'a>>,
    /// References to store (replacing any of the same capability and field).
    pub set_references: Vec<StoredReference>,
    /// `(capability, field)` references to forget (fail closed, rule 4).
    pub clear_references: Vec<(String, String)>,
    pub pending: PendingChange,
    /// The turn's capability-gap event, written with it (so an erasure
    /// that removes the conversation also finds its event).
    pub gap_event: Option<&'a super::gap_events::GapEvent>,
    /// When the turn began (Unix ms): an erasure of this user after it
    /// keeps the turn from starting a conversation ([`super::data_requests`]).
    pub started_at: i64,
    /// A platform turn's reply, recorded with it under the message's lease.
    pub platform_reply: Option<super::platform::LeasedReply<'a>>,
}

/// What became of a turn's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// The conversation the turn continued is gone (purged by retention or
    /// erased while the turn ran): nothing was written.
    ConversationGone,
    /// The user was erased after the turn began: the conversation it would
    /// start is not written back.
    UserErased,
    /// The platform message the turn answers is no longer its worker's
    /// (another took the lease over): nothing was written.
    LeaseLost,
}

/// The outcome of closing an interaction with a host's terminal report.
#[derive(Debug, PartialEq, Eq)]
pub enum CloseOutcome {
    Closed,
    /// Someone closed it first (or the idempotency claim was lost).
    AlreadyClosed,
    /// The conversation was purged or erased meanwhile.
    ConversationGone,
}

impl Store {
    pub async fn find_conversation(
        &self,
        account: &AccountId,
        id: &str,
    ) -> StoreResult<Option<ConversationRow>> {
        self.read_optional(
            ConversationRow::SELECT,
            &[Param::Int(account.number()), Param::Text(id)],
            ConversationRow::read,
        )
        .await
    }

    pub async fn recent_messages(
        &self,
        conversation: &ConversationRow,
        limit: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let mut rows = self
            .read_all(
                "SELECT role, body FROM conversation_messages WHERE conversation_id = $1 \
                 ORDER BY seq DESC LIMIT $2",
                &[Param::Text(&conversation.id), Param::Int(limit)],
                StoredMessage::read,
            )
            .await?;
        rows.reverse();
        Ok(rows)
    }

    pub async fn conversation_references(
        &self,
        conversation: &ConversationRow,
    ) -> StoreResult<Vec<StoredReference>> {
        self.read_all(
            "SELECT capability, field, value FROM conversation_references WHERE conversation_id = $1 \
             ORDER BY created_at",
            &[Param::Text(&conversation.id)],
            StoredReference::read,
        )
        .await
    }

    pub async fn pending_operation(
        &self,
        conversation: &ConversationRow,
    ) -> StoreResult<Option<StoredPending>> {
        self.read_optional(
            "SELECT capability_id, revision, master_key_id, nonce, ciphertext, expires_at \
             FROM pending_operations WHERE conversation_id = $1 AND expires_at > $2",
            &[Param::Text(&conversation.id), Param::Int(now_millis())],
            |row| {
                Ok(StoredPending {
                    capability_id: required(row.text(0)?, 0)?,
                    revision: required(row.int(1)?, 1)?,
                    sealed: Sealed {
                        key_id: required(row.text(2)?, 2)?,
                        nonce: required(row.bytes(3)?, 3)?,
                        ciphertext: required(row.bytes(4)?, 4)?,
                    },
                    expires_at: required(row.int(5)?, 5)?,
                })
            },
        )
        .await
    }

    pub async fn claim_channel_event(
        &self,
        account: &AccountId,
        event_id: &str,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let inserted = on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO channel_events (account_id, event_id, received_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (account_id, event_id) DO NOTHING",
            )
            .bind(account.number())
            .bind(event_id)
            .bind(now_millis())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(inserted == 1)
    }

    /// Forgets an event identifier whose turn failed, so a retry can run.
    pub async fn release_channel_event(
        &self,
        account: &AccountId,
        event_id: &str,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM channel_events WHERE account_id = $1 AND event_id = $2")
                .bind(account.number())
                .bind(event_id)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Writes one whole turn, or nothing. A conversation the turn
    /// continues must still be there (its row is updated first, which on
    /// PostgreSQL also locks it against an erasure or purge until the turn
    /// commits); one it starts is not written for a user erased since the
    /// turn began.
    pub async fn commit_turn(
        &self,
        account: &AccountId,
        turn: &TurnRecord<'_>,
    ) -> StoreResult<CommitOutcome> {
        let now = now_millis();
        let erased_since = turn.started_at - super::data_requests::CLOCK_SKEW_ALLOWANCE_MS;
        let account_number = account.number();
        let conversation = Param::Text(turn.conversation_id);
        let language = Param::MaybeText(turn.decided_language.map(Language::as_str));
        let called = Param::MaybeText(turn.called_capability);
        let mut steps: Vec<Step<'_, CommitOutcome>> = Vec::with_capacity(10);
        match &turn.new_conversation {
            Some(new) => {
                if let (Some(user), Store::Postgres(_)) = (new.user_id, self) {
                    steps.push(Step::new(
                        super::data_requests::HOLD_USER_SHARED,
                        vec![Param::Text(user), Param::Int(account_number)],
                    ));
                }
                steps.push(Step {
                    sql: "INSERT INTO conversations (id, account_id, user_id, created_at, updated_at, language, last_capability) \
                          SELECT $1, $2, $3, $4, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM erased_users e \
                          WHERE e.account_id = $2 AND e.user_id = $3 AND e.erased_at >= $7)",
                    params: vec![
                        conversation,
                        Param::Int(account_number),
                        Param::MaybeText(new.user_id),
                        Param::Int(now),
                        language,
                        called,
                        Param::Int(erased_since),
                    ],
                    unless_one_row: Some(CommitOutcome::UserErased),
                });
            }
            None => steps.push(Step {
                sql: "UPDATE conversations SET updated_at = $3, last_capability = COALESCE($4, last_capability), \
                      language = COALESCE(language, $5) WHERE id = $1 AND account_id = $2",
                params: vec![
                    conversation,
                    Param::Int(account_number),
                    Param::Int(now),
                    called,
                    language,
                ],
                unless_one_row: Some(CommitOutcome::ConversationGone),
            }),
        }
        // Both messages in one statement: every statement here is held
        // under SQLite's single writer.
        let (user, assistant) = (&turn.user_message, &turn.assistant_message);
        steps.push(Step::new(
            "INSERT INTO conversation_messages (id, conversation_id, role, body, metadata, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6), ($7, $2, $8, $9, $10, $6)",
            vec![
                Param::Text(user.id),
                conversation,
                Param::Text(MessageRole::User.as_str()),
                Param::Text(user.body),
                Param::MaybeText(user.metadata),
                Param::Int(now),
                Param::Text(assistant.id),
                Param::Text(MessageRole::Assistant.as_str()),
                Param::Text(assistant.body),
                Param::MaybeText(assistant.metadata),
            ],
        ));
        if let Some(interaction) = &turn.interaction {
            steps.push(Step::new(
                "INSERT INTO interactions (id, account_id, conversation_id, kind, operation, status, expires_at, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                vec![
                    Param::Text(interaction.id),
                    Param::Int(account_number),
                    conversation,
                    Param::Text(interaction.kind.as_str()),
                    Param::Text(interaction.operation),
                    Param::Text(InteractionStatus::Pending.as_str()),
                    Param::Int(interaction.expires_at),
                    Param::Int(now),
                ],
            ));
        }
        for (capability, field) in &turn.clear_references {
            steps.push(Step::new(
                "DELETE FROM conversation_references WHERE conversation_id = $1 AND capability = $2 AND field = $3",
                vec![conversation, Param::Text(capability), Param::Text(field)],
            ));
        }
        for reference in &turn.set_references {
            steps.push(Step::new(
                "INSERT INTO conversation_references (conversation_id, capability, field, value, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversation_id, capability, field) \
                 DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                vec![
                    conversation,
                    Param::Text(&reference.capability),
                    Param::Text(&reference.field),
                    Param::Text(&reference.value),
                    Param::Int(now),
                ],
            ));
        }
        match &turn.pending {
            PendingChange::Keep => {}
            // A conversation this turn creates has nothing pending yet.
            PendingChange::Clear if turn.new_conversation.is_some() => {}
            PendingChange::Clear => steps.push(Step::new(
                "DELETE FROM pending_operations WHERE conversation_id = $1",
                vec![conversation],
            )),
            PendingChange::Set(p) => steps.push(Step::new(
                "INSERT INTO pending_operations (conversation_id, capability_id, revision, master_key_id, nonce, ciphertext, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (conversation_id) DO UPDATE SET \
                 capability_id = excluded.capability_id, revision = excluded.revision, master_key_id = excluded.master_key_id, \
                 nonce = excluded.nonce, ciphertext = excluded.ciphertext, created_at = excluded.created_at, expires_at = excluded.expires_at",
                vec![
                    conversation,
                    Param::Text(&p.capability_id),
                    Param::Int(p.revision),
                    Param::Text(&p.sealed.key_id),
                    Param::Bytes(&p.sealed.nonce),
                    Param::Bytes(&p.sealed.ciphertext),
                    Param::Int(now),
                    Param::Int(p.expires_at),
                ],
            )),
        }
        if let Some(event) = turn.gap_event {
            steps.push(Step::new(
                super::gap_events::INSERT_GAP_EVENT,
                super::gap_events::gap_event_params(account, event),
            ));
        }
        if let Some(reply) = turn.platform_reply {
            reply.push_steps(
                &mut steps,
                turn.assistant_message.body,
                turn.new_conversation
                    .is_some()
                    .then_some(turn.conversation_id),
                now,
                CommitOutcome::LeaseLost,
            );
        }
        // A turn starting a conversation writes only rows nobody else sees
        // yet: on PostgreSQL it may share a transaction (`write_groups`).
        let written = match self {
            Store::Postgres(postgres)
                if turn.new_conversation.is_some() && turn.platform_reply.is_none() =>
            {
                postgres.turns.write(&steps).await?
            }
            _ => self.write_steps(&steps).await?,
        };
        Ok(written.unwrap_or(CommitOutcome::Committed))
    }

    pub async fn find_interaction(
        &self,
        conversation: &ConversationRow,
        interaction_id: &str,
    ) -> StoreResult<Option<InteractionRow>> {
        Ok(on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, conversation_id, kind, operation, status, expires_at, created_at FROM interactions \
                 WHERE account_id = $1 AND conversation_id = $2 AND id = $3",
            )
            .bind(conversation.account_id)
            .bind(&conversation.id)
            .bind(interaction_id)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// Closes a pending interaction with the host's terminal status, appends
    /// the deterministic assistant text and completes the idempotency claim,
    /// in one transaction (compare-and-set on the pending status).
    pub async fn close_interaction(
        &self,
        account: &AccountId,
        interaction: &InteractionRow,
        status: InteractionStatus,
        message: &NewMessage<'_>,
        completion: &super::idempotency::Completion<'_>,
    ) -> StoreResult<CloseOutcome> {
        let now = now_millis();
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            // The conversation first: the order an erasure or a purge takes
            // (PostgreSQL row locks), so neither waits on the other in a cycle.
            let touched = sqlx::query(
                "UPDATE conversations SET updated_at = $3 WHERE id = $1 AND account_id = $2",
            )
            .bind(&interaction.conversation_id)
            .bind(account.number())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if touched != 1 {
                return Ok(CloseOutcome::ConversationGone);
            }
            let closed = sqlx::query(
                "UPDATE interactions SET status = $4, closed_at = $5 \
                 WHERE account_id = $1 AND conversation_id = $2 AND id = $3 AND status = $6",
            )
            .bind(account.number())
            .bind(&interaction.conversation_id)
            .bind(&interaction.id)
            .bind(status)
            .bind(now)
            .bind(InteractionStatus::Pending)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if closed != 1 {
                return Ok(CloseOutcome::AlreadyClosed);
            }
            sqlx::query(
                "INSERT INTO conversation_messages (id, conversation_id, role, body, metadata, created_at) \
                 VALUES ($1, $2, $3, $4, NULL, $5)",
            )
            .bind(message.id)
            .bind(&interaction.conversation_id)
            .bind(MessageRole::Assistant)
            .bind(message.body)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if !super::idempotency::complete_in_tx!(tx, account, completion)? {
                return Ok(CloseOutcome::AlreadyClosed);
            }
            tx.commit().await?;
            Ok(CloseOutcome::Closed)
        })
    }
}
