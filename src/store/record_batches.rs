//! PostgreSQL's lone records (a contract test's, a gap event) written
//! together: the records that arrive while one write of their statement is
//! on its way go as one multi-row `INSERT` when it is done.
//!
//! Why: on PostgreSQL each lone `INSERT` is a transaction of its own, and
//! the server's side of it (a backend woken, the executor started, the
//! commit's WAL flushed) cost as much CPU as the rest of a contract test on
//! a 2-core machine; the same tests without their record ran half again as
//! many a second (docs/benchmarks.md, "A contract test's record, written
//! with the others'"). With one request at a time nothing changes (a batch
//! of one); under load each commit carries the records that queued behind
//! the one before, at most [`MAX_ROWS`].
//!
//! Each caller still answers only once its own record is committed, or
//! with its own record's error: a batch that fails is written again row by
//! row, so one refused row (a duplicate id) fails only its own caller. The
//! writing runs in a task of its own, so a caller that goes away (a client
//! hang-up, a deadline) neither cuts a batch off half-way nor loses the
//! others' records; its own record is still written, as the call it
//! records was made. A statement's text is still the one SQLite runs: the
//! batch's text is made from it ([`batched_text`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::direct::{Param, Step};
use super::error::DriverError;
use super::pg_lane::PgLane;
use super::{StoreError, StoreResult};

/// The most records one `INSERT` carries. Each size is a statement of its
/// own, prepared once per lane connection.
pub(crate) const MAX_ROWS: usize = 16;

pub(crate) struct RecordBatches {
    lane: Arc<PgLane>,
    queues: Mutex<HashMap<&'static str, Queue>>,
}

/// The records of one statement waiting for the write in flight.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// Whether a writer task is running for this statement.
    writing: bool,
}

struct Waiting {
    row: Vec<OwnedParam>,
    written: oneshot::Sender<StoreResult<()>>,
}

/// A [`Param`] that outlives its caller's borrow, to wait in a queue.
enum OwnedParam {
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
    MaybeText(Option<String>),
    MaybeInt(Option<i64>),
}

impl OwnedParam {
    fn of(param: &Param<'_>) -> Self {
        match *param {
            Param::Int(value) => OwnedParam::Int(value),
            Param::Text(value) => OwnedParam::Text(value.to_owned()),
            Param::Bytes(value) => OwnedParam::Bytes(value.to_vec()),
            Param::MaybeText(value) => OwnedParam::MaybeText(value.map(str::to_owned)),
            Param::MaybeInt(value) => OwnedParam::MaybeInt(value),
        }
    }

    fn param(&self) -> Param<'_> {
        match self {
            OwnedParam::Int(value) => Param::Int(*value),
            OwnedParam::Text(value) => Param::Text(value),
            OwnedParam::Bytes(value) => Param::Bytes(value),
            OwnedParam::MaybeText(value) => Param::MaybeText(value.as_deref()),
            OwnedParam::MaybeInt(value) => Param::MaybeInt(*value),
        }
    }
}

impl std::fmt::Debug for RecordBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatches").finish_non_exhaustive()
    }
}

impl RecordBatches {
    pub(crate) fn new(lane: Arc<PgLane>) -> Self {
        RecordBatches {
            lane,
            queues: Mutex::new(HashMap::new()),
        }
    }

    /// Inserts one row of `sql` (an `INSERT … VALUES (…)` of one row) and
    /// returns once it is committed, or with its error.
    pub(crate) async fn insert(
        self: &Arc<Self>,
        sql: &'static str,
        row: &[Param<'_>],
    ) -> StoreResult<()> {
        let (written, answer) = oneshot::channel();
        let row = row.iter().map(OwnedParam::of).collect();
        let start_writer = {
            let mut queues = self.lock();
            let queue = queues.entry(sql).or_default();
            queue.waiting.push(Waiting { row, written });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start_writer {
            let batches = Arc::clone(self);
            tokio::spawn(async move { batches.write_until_empty(sql).await });
        }
        // The writer answers every row it takes; only a runtime shutting
        // down drops it first.
        answer.await.unwrap_or(Err(StoreError::Timeout))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, Queue>> {
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `sql`'s queue, batch after batch, until it is empty.
    async fn write_until_empty(self: &Arc<Self>, sql: &'static str) {
        let writer = Writer { batches: self, sql };
        loop {
            let batch = {
                let mut queues = self.lock();
                let queue = queues.entry(sql).or_default();
                if queue.waiting.is_empty() {
                    queue.writing = false;
                    std::mem::forget(writer);
                    return;
                }
                let take = queue.waiting.len().min(MAX_ROWS);
                queue.waiting.drain(..take).collect::<Vec<_>>()
            };
            self.write_batch(sql, batch).await;
        }
    }

    /// Writes `batch` in one statement. A batch the database could not
    /// take (unreachable, or no connection in time) answers each caller so,
    /// as its row alone would have been; one it refused is written again
    /// row by row (at once, each on a connection of its own), so each
    /// caller gets its own row's outcome.
    async fn write_batch(self: &Arc<Self>, sql: &'static str, batch: Vec<Waiting>) {
        if batch.len() > 1
            && let Some(text) = batched_text(sql, batch.len())
        {
            let outcome = {
                let rows: Vec<&[OwnedParam]> = batch.iter().map(|w| w.row.as_slice()).collect();
                self.write(&text, &rows).await
            };
            match outcome {
                Ok(()) => {
                    tracing::debug!(rows = batch.len(), "records written in one statement");
                    return answer_each(batch, || Ok(()));
                }
                Err(StoreError::Timeout) => return answer_each(batch, || Err(StoreError::Timeout)),
                Err(StoreError::Unavailable(error)) => {
                    let said = error.to_string();
                    return answer_each(batch, || {
                        Err(StoreError::Unavailable(DriverError::new(
                            std::io::Error::other(said.clone()),
                        )))
                    });
                }
                Err(_) => {}
            }
        }
        let mut alone = tokio::task::JoinSet::new();
        for waiting in batch {
            let batches = Arc::clone(self);
            alone.spawn(async move {
                let outcome = batches.write(sql, &[waiting.row.as_slice()]).await;
                let _ = waiting.written.send(outcome);
            });
        }
        alone.join_all().await;
    }

    /// `text` with `rows`' parameters, one after the other, on a lane
    /// connection: one statement, atomic on its own.
    async fn write(&self, text: &str, rows: &[&[OwnedParam]]) -> StoreResult<()> {
        let params: Vec<Param<'_>> = rows
            .iter()
            .flat_map(|row| row.iter().map(OwnedParam::param))
            .collect();
        let step = Step::<()>::new(text, params);
        let mut lease = self.lane.lease().await?;
        let outcome = lease.write(std::slice::from_ref(&step)).await;
        lease.settle(outcome).map(|_| ())
    }
}

/// Answers every caller of `batch` with an `outcome` of its own.
fn answer_each(batch: Vec<Waiting>, outcome: impl Fn() -> StoreResult<()>) {
    for waiting in batch {
        let _ = waiting.written.send(outcome());
    }
}

/// Ends a writer that stopped before its queue was empty (a panic, or a
/// runtime shutting down): the statement's next record starts a new one,
/// and the records left waiting are answered with an error by their
/// senders' drop, instead of waiting for a writer that will not come.
struct Writer<'a> {
    batches: &'a RecordBatches,
    sql: &'static str,
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        let mut queues = self.batches.lock();
        if let Some(queue) = queues.get_mut(self.sql) {
            queue.writing = false;
            queue.waiting.clear();
        }
    }
}

/// `sql`, an `INSERT … VALUES (<row>)` ending with its one row, as the
/// same `INSERT` of `rows` rows: the row repeated, its parameters
/// numbered on (`$1` … `$n`, then `$n+1` … `$2n`, …). `None` for a text
/// of any other shape (written row by row instead).
pub(crate) fn batched_text(sql: &str, rows: usize) -> Option<String> {
    let start = sql.rfind("VALUES (")? + "VALUES ".len();
    let (head, row) = sql.split_at(start);
    if !row.ends_with(')') {
        return None;
    }
    let per_row = parameters_in(row);
    let mut text = String::with_capacity(head.len() + rows * (row.len() + 8));
    text.push_str(head);
    for index in 0..rows {
        if index > 0 {
            text.push_str(", ");
        }
        renumbered(row, index * per_row, &mut text);
    }
    Some(text)
}

/// The highest `$n` in `text`.
fn parameters_in(text: &str) -> usize {
    pieces(text)
        .filter_map(|(_, number)| number)
        .max()
        .unwrap_or(0)
}

/// `text` with every `$n` written as `$(n + offset)`, appended to `out`.
fn renumbered(text: &str, offset: usize, out: &mut String) {
    for (stretch, number) in pieces(text) {
        out.push_str(stretch);
        if let Some(number) = number {
            out.push('$');
            out.push_str(&(number + offset).to_string());
        }
    }
}

/// `text` as stretches of text, each followed by the number of the `$n`
/// after it (`None` after the last stretch).
fn pieces(text: &str) -> impl Iterator<Item = (&str, Option<usize>)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut from = 0;
        while let Some(found) = rest[from..].find('$') {
            let at = from + found;
            let digits = rest[at + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            // A `$` with no digits after it is text.
            if let Ok(number) = rest[at + 1..at + 1 + digits].parse::<usize>() {
                let stretch = &rest[..at];
                rest = &rest[at + 1 + digits..];
                return Some((stretch, Some(number)));
            }
            from = at + 1;
        }
        Some((std::mem::take(&mut rest), None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_repeats_the_row_with_its_parameters_numbered_on() {
        let sql = "INSERT INTO t (a, b, c) VALUES ($1, $2, $3)";
        assert_eq!(batched_text(sql, 1).as_deref(), Some(sql));
        assert_eq!(
            batched_text(sql, 3).as_deref(),
            Some("INSERT INTO t (a, b, c) VALUES ($1, $2, $3), ($4, $5, $6), ($7, $8, $9)")
        );
    }

    #[test]
    fn a_parameter_used_twice_and_past_nine_is_numbered_once_per_row() {
        let sql = "INSERT INTO t (a, b, c) VALUES ($10, $1, (SELECT x FROM u WHERE y = $1))";
        assert_eq!(
            batched_text(sql, 2).as_deref(),
            Some(
                "INSERT INTO t (a, b, c) VALUES ($10, $1, (SELECT x FROM u WHERE y = $1)), \
                 ($20, $11, (SELECT x FROM u WHERE y = $11))"
            )
        );
    }

    #[test]
    fn the_records_statements_have_the_shape_a_batch_needs() {
        for sql in [
            super::super::capability_tests::INSERT_TEST_RECORD,
            super::super::gap_events::INSERT_GAP_EVENT,
        ] {
            let two = batched_text(sql, 2).expect("an INSERT ending with its row");
            assert_eq!(parameters_in(&two), 2 * parameters_in(sql), "{two}");
        }
    }

    #[test]
    fn a_text_of_another_shape_is_not_batched() {
        assert_eq!(batched_text("UPDATE t SET a = $1", 2), None);
        assert_eq!(
            batched_text("INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING", 2),
            None
        );
    }
}
