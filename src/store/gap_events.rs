//! Capability-gap events, listed newest first with a keyset cursor
//! `(occurred_at, id)` so pages stay stable when timestamps are equal.

use super::direct::Param;
use super::{Store, StoreResult, on_pool};
use crate::domain::account::AccountId;
use crate::domain::diagnostics::{GapKind, GapReason};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GapEvent {
    pub id: String,
    pub kind: GapKind,
    pub reason_code: GapReason,
    pub conversation_id: Option<String>,
    pub capability: Option<String>,
    pub message_text: Option<String>,
    pub occurred_at: i64,
}

/// The last event of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapCursor {
    pub occurred_at: i64,
    pub id: String,
}

const COLUMNS: &str =
    "id, kind, reason_code, conversation_id, capability, message_text, occurred_at";

/// The statement that records one gap event, with [`gap_event_params`].
pub(crate) const INSERT_GAP_EVENT: &str = "INSERT INTO gap_events (account_id, id, kind, reason_code, \
     conversation_id, capability, message_text, occurred_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// The parameters of [`INSERT_GAP_EVENT`] for `event`.
pub(crate) fn gap_event_params<'a>(account: &AccountId, event: &'a GapEvent) -> Vec<Param<'a>> {
    vec![
        Param::Int(account.number()),
        Param::Text(&event.id),
        Param::Text(event.kind.as_str()),
        Param::Text(event.reason_code.as_str()),
        Param::MaybeText(event.conversation_id.as_deref()),
        Param::MaybeText(event.capability.as_deref()),
        Param::MaybeText(event.message_text.as_deref()),
        Param::Int(event.occurred_at),
    ]
}

impl Store {
    pub async fn record_gap_event(&self, account: &AccountId, event: &GapEvent) -> StoreResult<()> {
        self.insert_record(INSERT_GAP_EVENT, gap_event_params(account, event))
            .await
    }

    /// Up to `limit` events older than `before` (or the newest), newest first.
    pub async fn list_gap_events(
        &self,
        account: &AccountId,
        limit: i64,
        before: Option<&GapCursor>,
    ) -> StoreResult<Vec<GapEvent>> {
        let (at, id) = match before {
            Some(c) => (c.occurred_at, c.id.as_str()),
            None => (i64::MAX, ""),
        };
        // Without a cursor every event is below (i64::MAX, ""). A row
        // comparison, not `a < x OR (a = x AND b < y)`: both databases use
        // it as the index condition, while PostgreSQL's generic plan for
        // the `OR` walked the account's whole index on a deep cursor
        // (220 ms at 1,000,000 events; docs/benchmarks.md, "Growth").
        let sql = format!(
            "SELECT {COLUMNS} FROM gap_events WHERE account_id = $1 \
             AND (occurred_at, id) < ($2, $3) \
             ORDER BY occurred_at DESC, id DESC LIMIT $4"
        );
        Ok(on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(account.number()).bind(at).bind(id).bind(limit).fetch_all(pool).await
        })?)
    }
}
