//! The messaging-platform channel as stored: registered numbers (their
//! access tokens sealed), the durable inbound queue, and the conversation
//! each platform user has with each number.
//!
//! The queue's life of a message: `queued` (accepted, no reply yet) →
//! `answered` (the turn ran; its commit recorded the reply, before the send) →
//! `replied` (the platform acknowledged the send) or `dead` (attempts used
//! up). A worker's claim is a lease (`lease_owner`, `lease_until`) taken in
//! one statement; a lapsed lease (a crashed server) is taken over. A
//! message is claimable only when no earlier message of the same user and
//! number is still unfinished, so each user is answered in arrival order.
//!
//! Claims are fair across numbers: each message carries a `claim_round`,
//! its number's last unfinished round + 1 but never below the highest
//! round claimed so far, and the lowest round is claimed first. Every
//! number with a backlog is served once per round, so a quiet number's
//! message is claimed after about one message of each other busy number,
//! whatever their backlogs and however many workers claim. A number holds
//! at most a configured count of unfinished messages; the insert checks it.

use super::credentials::ResealCounts;
use super::direct::{Param, ReadRow, Step, required};
use super::{Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::crypto::sealed::Sealed;
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;

closed_set! {
    /// Where an inbound message is in its life (see the module doc).
    pub enum InboundState {
        Queued = "queued",
        Answered = "answered",
        Replied = "replied",
        Dead = "dead",
    }
}

/// A registered number.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PlatformNumberRow {
    pub phone_number_id: String,
    account_id: i64,
    master_key_id: Option<String>,
    nonce: Option<Vec<u8>>,
    ciphertext: Option<Vec<u8>>,
    pub created_at: i64,
}

impl PlatformNumberRow {
    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(PlatformNumberRow {
            phone_number_id: required(row.text(0)?, 0)?,
            account_id: required(row.int(1)?, 1)?,
            master_key_id: row.text(2)?,
            nonce: row.bytes(3)?,
            ciphertext: row.bytes(4)?,
            created_at: required(row.int(5)?, 5)?,
        })
    }

    pub fn account(&self) -> AccountId {
        AccountId::from_stored(self.account_id)
    }

    /// The sealed access token, if the number was registered with one.
    pub fn sealed_token(&self) -> Option<Sealed> {
        Some(Sealed {
            key_id: self.master_key_id.clone()?,
            nonce: self.nonce.clone()?,
            ciphertext: self.ciphertext.clone()?,
        })
    }
}

/// An inbound text message to queue.
pub struct NewInbound<'a> {
    pub platform_message_id: &'a str,
    pub account: AccountId,
    pub phone_number_id: &'a str,
    pub user_pseudonym: &'a str,
    pub recipient: &'a str,
    pub body: &'a str,
    /// The queuing request's `traceparent`, when tracing is on.
    pub trace_parent: Option<&'a str>,
}

/// What became of a message offered to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    /// Its platform id was queued before.
    Duplicated,
    /// Its number already holds its cap of unfinished messages.
    QueueFull,
}

/// A message a worker holds the lease of.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedInbound {
    pub seq: i64,
    pub platform_message_id: String,
    account_id: i64,
    pub phone_number_id: String,
    pub user_pseudonym: String,
    pub recipient: Option<String>,
    pub body: Option<String>,
    pub state: InboundState,
    pub reply: Option<String>,
    /// Claims so far, this one included.
    pub attempts: i64,
    /// The queuing request's `traceparent`, when tracing was on.
    pub trace_parent: Option<String>,
}

impl ClaimedInbound {
    pub fn account(&self) -> AccountId {
        AccountId::from_stored(self.account_id)
    }
}

/// A platform turn's reply, recorded in the turn's own transaction while
/// the worker still holds the message's lease: the turn, the reply and the
/// user's conversation (if new) are written together or not at all, so a
/// message whose lease another worker took over leaves no second turn in
/// the user's conversation, and the drain waits for one commit less.
#[derive(Clone, Copy)]
pub struct LeasedReply<'a> {
    pub message: &'a ClaimedInbound,
    /// The worker holding the lease.
    pub owner: &'a str,
}

/// A claimed message was no longer this worker's (another took the lease
/// over): nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseLost;

impl<'a> LeasedReply<'a> {
    /// Adds to a turn's steps what records `reply`: the message answered,
    /// or `lost` when its lease is no longer ours, and the user's
    /// conversation with the number when the turn starts it. A continued
    /// conversation's row is left alone: it is where the turn found the
    /// conversation, and an insert meeting it would wait for an erasure
    /// deleting it while this transaction holds the conversation's row
    /// that the erasure deletes next.
    pub(super) fn push_steps<O>(
        self,
        steps: &mut Vec<Step<'a, O>>,
        reply: &'a str,
        started_conversation: Option<&'a str>,
        now: i64,
        lost: O,
    ) {
        steps.push(Step {
            sql: "UPDATE platform_inbound SET state = $3, reply = $4, body = NULL, updated_at = $5 \
                  WHERE seq = $1 AND lease_owner = $2 AND state = $6",
            params: vec![
                Param::Int(self.message.seq),
                Param::Text(self.owner),
                Param::Text(InboundState::Answered.as_str()),
                Param::Text(reply),
                Param::Int(now),
                Param::Text(InboundState::Queued.as_str()),
            ],
            unless_one_row: Some(lost),
        });
        if let Some(conversation_id) = started_conversation {
            steps.push(Step::new(
                "INSERT INTO platform_conversations (phone_number_id, user_pseudonym, conversation_id) \
                 VALUES ($1, $2, $3) ON CONFLICT (phone_number_id, user_pseudonym) DO NOTHING",
                vec![
                    Param::Text(&self.message.phone_number_id),
                    Param::Text(&self.message.user_pseudonym),
                    Param::Text(conversation_id),
                ],
            ));
        }
    }
}

/// Messages per state; `claimed` are the queued or answered ones a worker
/// holds right now (counted there, not in `queued` or `answered`).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounts {
    pub queued: i64,
    pub claimed: i64,
    pub answered: i64,
    pub replied: i64,
    pub dead: i64,
}

/// A number's columns, in [`PlatformNumberRow::read`]'s order; a macro so
/// that the hot read below is one literal.
macro_rules! number_columns {
    () => {
        "phone_number_id, account_id, master_key_id, nonce, ciphertext, created_at"
    };
}
const NUMBER_COLUMNS: &str = number_columns!();
const SELECT_NUMBER: &str = concat!(
    "SELECT ",
    number_columns!(),
    " FROM platform_numbers WHERE phone_number_id = $1"
);
const CLAIMED_COLUMNS: &str = "seq, platform_message_id, account_id, phone_number_id, user_pseudonym, recipient, body, state, reply, attempts, trace_parent";

/// `alias.state IN ('queued', 'answered')`, with the states written out:
/// the partial indexes of migration 0013 carry this predicate, and a
/// planner uses them only when the query spells it the same (a bound
/// parameter would not match).
fn unfinished(alias: &str) -> String {
    format!(
        "{alias}.state IN ('{}', '{}')",
        InboundState::Queued.as_str(),
        InboundState::Answered.as_str()
    )
}

impl Store {
    /// Registers a number for an account, or replaces its token. Returns
    /// false when the number belongs to another account (nothing changed).
    pub async fn register_platform_number(
        &self,
        account: &AccountId,
        phone_number_id: &str,
        token: Option<&Sealed>,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let affected = on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO platform_numbers (phone_number_id, account_id, master_key_id, nonce, ciphertext, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (phone_number_id) DO UPDATE SET master_key_id = excluded.master_key_id, \
                 nonce = excluded.nonce, ciphertext = excluded.ciphertext \
                 WHERE platform_numbers.account_id = excluded.account_id",
            )
            .bind(phone_number_id)
            .bind(account.number())
            .bind(token.map(|t| t.key_id.as_str()))
            .bind(token.map(|t| t.nonce.as_slice()))
            .bind(token.map(|t| t.ciphertext.as_slice()))
            .bind(now_millis())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(affected == 1)
    }

    /// Re-seals every number's access token (`reseal` returns the new
    /// sealed value, `None` when already current, or an error that aborts
    /// everything), in one transaction.
    pub async fn reseal_platform_tokens<F>(&self, mut reseal: F) -> StoreResult<ResealCounts>
    where
        F: FnMut(&PlatformNumberRow) -> Result<Option<Sealed>, String>,
    {
        let _gate = self.write_turn().await;
        let sql =
            format!("SELECT {NUMBER_COLUMNS} FROM platform_numbers WHERE ciphertext IS NOT NULL");
        let begin = self.write_transaction_statement();
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut counts = ResealCounts::default();
            let rows: Vec<PlatformNumberRow> = sqlx::query_as(&sql).fetch_all(&mut *tx).await?;
            for row in &rows {
                let Some(sealed) = reseal(row).map_err(StoreError::Corrupt)? else {
                    counts.already_current += 1;
                    continue;
                };
                sqlx::query(
                    "UPDATE platform_numbers SET master_key_id = $2, nonce = $3, ciphertext = $4 WHERE phone_number_id = $1",
                )
                .bind(&row.phone_number_id)
                .bind(&sealed.key_id)
                .bind(&sealed.nonce)
                .bind(&sealed.ciphertext)
                .execute(&mut *tx)
                .await?;
                counts.resealed += 1;
            }
            tx.commit().await?;
            Ok(counts)
        })
    }

    /// Returns false when the number was not registered.
    pub async fn unregister_platform_number(&self, phone_number_id: &str) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let affected = on_pool!(self, pool => {
            sqlx::query("DELETE FROM platform_numbers WHERE phone_number_id = $1")
                .bind(phone_number_id)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(affected == 1)
    }

    pub async fn list_platform_numbers(
        &self,
        account: &AccountId,
    ) -> StoreResult<Vec<PlatformNumberRow>> {
        let sql = format!(
            "SELECT {NUMBER_COLUMNS} FROM platform_numbers WHERE account_id = $1 ORDER BY phone_number_id"
        );
        Ok(on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(account.number()).fetch_all(pool).await
        })?)
    }

    pub async fn find_platform_number(
        &self,
        phone_number_id: &str,
    ) -> StoreResult<Option<PlatformNumberRow>> {
        // Every delivery and every claimed message reads it: a hot read.
        self.read_optional(
            SELECT_NUMBER,
            &[Param::Text(phone_number_id)],
            PlatformNumberRow::read,
        )
        .await
    }

    /// Queues a message once, in one statement that also takes its claim
    /// round and checks its number's cap (`per_number` unfinished messages).
    /// SQLite: exact (one writer). PostgreSQL: each statement counts what
    /// was committed before it, so concurrent deliveries for one number can
    /// pass the cap by at most one message each.
    pub async fn enqueue_platform_message(
        &self,
        message: &NewInbound<'_>,
        per_number: i64,
    ) -> StoreResult<Enqueued> {
        let _gate = self.write_turn().await;
        let greatest = match self {
            Store::Postgres(_) => "GREATEST",
            Store::Sqlite(_) => "MAX",
        };
        let (o, c) = (unfinished("o"), unfinished("c"));
        let sql = format!(
            "INSERT INTO platform_inbound (platform_message_id, account_id, phone_number_id, user_pseudonym, \
             recipient, body, state, claim_round, next_attempt_at, received_at, updated_at, trace_parent) \
             SELECT $1, $2, $3, $4, $5, $6, $7, {greatest}(\
               COALESCE((SELECT MAX(o.claim_round) FROM platform_inbound o WHERE o.phone_number_id = $3 AND {o}), 0) + 1, \
               COALESCE((SELECT MAX(r.claim_round) FROM platform_inbound r WHERE r.attempts > 0), 0)), \
             $8, $8, $8, $10 \
             WHERE (SELECT COUNT(*) FROM platform_inbound c WHERE c.phone_number_id = $3 AND {c}) < $9 \
             ON CONFLICT (platform_message_id) DO NOTHING"
        );
        let now = now_millis();
        let affected = on_pool!(self, pool => {
            sqlx::query(&sql)
                .bind(message.platform_message_id)
                .bind(message.account.number())
                .bind(message.phone_number_id)
                .bind(message.user_pseudonym)
                .bind(message.recipient)
                .bind(message.body)
                .bind(InboundState::Queued)
                .bind(now)
                .bind(per_number)
                .bind(message.trace_parent)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if affected == 1 {
            return Ok(Enqueued::Accepted);
        }
        // Nothing inserted: seen before, or the number is full.
        let seen: i64 = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM platform_inbound WHERE platform_message_id = $1")
                .bind(message.platform_message_id)
                .fetch_one(pool)
                .await
        })?;
        Ok(if seen > 0 {
            Enqueued::Duplicated
        } else {
            Enqueued::QueueFull
        })
    }

    /// Takes the lease of the ready message of the lowest claim round (then
    /// the oldest) whose user has nothing earlier unfinished, in one
    /// statement (PostgreSQL: rows another replica is claiming are skipped,
    /// not waited for; SQLite: the statement holds the single write lock).
    /// Counts the attempt.
    pub async fn claim_platform_message(
        &self,
        owner: &str,
        lease_millis: i64,
    ) -> StoreResult<Option<ClaimedInbound>> {
        let _gate = self.write_turn().await;
        let lock = match self {
            Store::Postgres(_) => "FOR UPDATE SKIP LOCKED",
            Store::Sqlite(_) => "",
        };
        let (m, e) = (unfinished("m"), unfinished("e"));
        let sql = format!(
            "UPDATE platform_inbound SET lease_owner = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3 \
             WHERE seq = (SELECT m.seq FROM platform_inbound m \
               WHERE {m} AND m.next_attempt_at <= $3 \
               AND (m.lease_until IS NULL OR m.lease_until < $3) \
               AND NOT EXISTS (SELECT 1 FROM platform_inbound e WHERE e.phone_number_id = m.phone_number_id \
                 AND e.user_pseudonym = m.user_pseudonym AND e.seq < m.seq AND {e}) \
               ORDER BY m.claim_round, m.seq LIMIT 1 {lock}) \
             RETURNING {CLAIMED_COLUMNS}"
        );
        let now = now_millis();
        Ok(on_pool!(self, pool => {
            sqlx::query_as(&sql)
                .bind(owner)
                .bind(now + lease_millis)
                .bind(now)
                .fetch_optional(pool)
                .await
        })?)
    }

    /// The send was acknowledged: the message is done and the sender's id
    /// is erased. False when the lease was lost meanwhile.
    pub async fn mark_platform_replied(&self, seq: i64, owner: &str) -> StoreResult<bool> {
        self.finish_platform_message(seq, owner, InboundState::Replied, None)
            .await
    }

    /// Gives up on a message (attempts used up, or it can never be sent).
    pub async fn dead_letter_platform_message(
        &self,
        seq: i64,
        owner: &str,
        error: &str,
    ) -> StoreResult<bool> {
        self.finish_platform_message(seq, owner, InboundState::Dead, Some(error))
            .await
    }

    async fn finish_platform_message(
        &self,
        seq: i64,
        owner: &str,
        state: InboundState,
        error: Option<&str>,
    ) -> StoreResult<bool> {
        let mut steps = self.bookkeeping_steps();
        steps.push(Step {
            sql: "UPDATE platform_inbound SET state = $3, recipient = NULL, body = NULL, reply = NULL, \
                  lease_owner = NULL, lease_until = NULL, last_error = $4, updated_at = $5 \
                  WHERE seq = $1 AND lease_owner = $2",
            params: vec![
                Param::Int(seq),
                Param::Text(owner),
                Param::Text(state.as_str()),
                Param::MaybeText(error),
                Param::Int(now_millis()),
            ],
            unless_one_row: Some(LeaseLost),
        });
        Ok(self.write_steps(&steps).await?.is_none())
    }

    /// Releases the lease for a later attempt, not before `next_attempt_at`.
    pub async fn retry_platform_message(
        &self,
        seq: i64,
        owner: &str,
        next_attempt_at: i64,
        error: &str,
    ) -> StoreResult<()> {
        let mut steps = self.bookkeeping_steps();
        steps.push(Step::new(
            "UPDATE platform_inbound SET lease_owner = NULL, lease_until = NULL, next_attempt_at = $3, \
             last_error = $4, updated_at = $5 WHERE seq = $1 AND lease_owner = $2",
            vec![
                Param::Int(seq),
                Param::Text(owner),
                Param::Int(next_attempt_at),
                Param::Text(error),
                Param::Int(now_millis()),
            ],
        ));
        self.write_steps(&steps).await?;
        Ok(())
    }

    /// The first steps of a transaction that only moves a claimed message
    /// on after its turn (replied, dead, released for a retry). On
    /// PostgreSQL it commits without waiting for the WAL to reach the disk
    /// (`synchronous_commit` off for this transaction alone; the WAL writer
    /// syncs it within a fraction of a second): a crash that loses it
    /// leaves the message as its turn's commit left it, answered with its
    /// reply recorded, and the next claim sends that reply again under the
    /// same idempotency key, which the platform drops as a duplicate, or
    /// retries or dead-letters it again. Half the drain's waits for the
    /// disk were these. The claim and the turn's commit still wait: a lost
    /// claim would lose its attempt's count, which is what stops a message
    /// that crashes the server from being claimed for ever. SQLite in WAL
    /// mode with `synchronous=NORMAL` already syncs no commit.
    fn bookkeeping_steps<'a>(&self) -> Vec<Step<'a, LeaseLost>> {
        match self {
            Store::Postgres(_) => {
                vec![Step::new("SET LOCAL synchronous_commit TO OFF", Vec::new())]
            }
            Store::Sqlite(_) => Vec::new(),
        }
    }

    /// The conversation a platform user has with a number, if any.
    pub async fn find_platform_conversation(
        &self,
        phone_number_id: &str,
        user_pseudonym: &str,
    ) -> StoreResult<Option<String>> {
        self.read_optional(
            "SELECT conversation_id FROM platform_conversations WHERE phone_number_id = $1 AND user_pseudonym = $2",
            &[Param::Text(phone_number_id), Param::Text(user_pseudonym)],
            |row| required(row.text(0)?, 0),
        )
        .await
    }

    /// Forgets a user's conversation (it no longer exists); the next
    /// message starts a new one.
    pub async fn forget_platform_conversation(
        &self,
        phone_number_id: &str,
        user_pseudonym: &str,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM platform_conversations WHERE phone_number_id = $1 AND user_pseudonym = $2")
                .bind(phone_number_id)
                .bind(user_pseudonym)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Counts per state, of every account or one.
    pub async fn platform_queue_counts(
        &self,
        account: Option<&AccountId>,
    ) -> StoreResult<QueueCounts> {
        let now = now_millis();
        let rows: Vec<(InboundState, i64, i64)> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT state, CAST(CASE WHEN lease_until >= $1 THEN 1 ELSE 0 END AS BIGINT) AS leased, COUNT(*) \
                 FROM platform_inbound WHERE ($2 IS NULL OR account_id = $2) GROUP BY state, leased",
            )
            .bind(now)
            .bind(account.map(|a| a.number()))
            .fetch_all(pool)
            .await
        })?;
        let mut counts = QueueCounts::default();
        for (state, leased, n) in rows {
            let slot = match state {
                InboundState::Queued | InboundState::Answered if leased == 1 => &mut counts.claimed,
                InboundState::Queued => &mut counts.queued,
                InboundState::Answered => &mut counts.answered,
                InboundState::Replied => &mut counts.replied,
                InboundState::Dead => &mut counts.dead,
            };
            *slot += n;
        }
        Ok(counts)
    }

    /// How many messages are unfinished (queued or answered, not yet
    /// replied or dead) and when the oldest of them arrived (Unix ms), for
    /// the queue gauges read at scrape time.
    pub async fn platform_queue_backlog(&self) -> StoreResult<(i64, Option<i64>)> {
        let sql = format!(
            "SELECT COUNT(*), MIN(p.received_at) FROM platform_inbound p WHERE {}",
            unfinished("p")
        );
        let row: (i64, Option<i64>) =
            on_pool!(self, pool => sqlx::query_as(&sql).fetch_one(pool).await)?;
        Ok(row)
    }
}
