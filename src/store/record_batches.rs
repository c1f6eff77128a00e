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

use super::StoreResult;
use super::direct::{OwnedParam, Param, Step};
use super::gathering::{Gathering, Waiting, answer_each, each_alone, outage_for_each};
use super::pg_lane::PgLane;
use super::placeholders::{parameters_in, renumbered};

/// The most records one `INSERT` carries. Each size is a statement of its
/// own, prepared once per lane connection.
pub(crate) const MAX_ROWS: usize = 16;

pub(crate) struct RecordBatches {
    lane: Arc<PgLane>,
    /// The records waiting, by statement.
    queues: Gathering<&'static str, Vec<OwnedParam>, ()>,
    /// Each statement's text for each batch size written so far, made
    /// once rather than for every batch (`None`: a shape that cannot be
    /// batched).
    texts: Mutex<HashMap<(&'static str, usize), BatchText>>,
}

/// A statement's text for a batch of some size (`None`: not batchable).
type BatchText = Option<Arc<str>>;

type Batch = Vec<Waiting<Vec<OwnedParam>, ()>>;

impl std::fmt::Debug for RecordBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatches").finish_non_exhaustive()
    }
}

impl RecordBatches {
    pub(crate) fn new(lane: Arc<PgLane>) -> Self {
        RecordBatches {
            lane,
            queues: Gathering::default(),
            texts: Mutex::new(HashMap::new()),
        }
    }

    /// Inserts one row of `sql` (an `INSERT … VALUES (…)` of one row) and
    /// returns once it is committed, or with its error.
    pub(crate) async fn insert(
        self: &Arc<Self>,
        sql: &'static str,
        row: &[Param<'_>],
    ) -> StoreResult<()> {
        let row = row.iter().map(OwnedParam::of).collect();
        self.queues
            .submit(sql, row, || {
                let batches = Arc::clone(self);
                tokio::spawn(async move { batches.write_until_empty(sql).await });
            })
            .await
    }

    /// Writes `sql`'s queue, batch after batch, until it is empty.
    async fn write_until_empty(&self, sql: &'static str) {
        let mut writer = self.queues.writer(sql);
        while let Some(batch) = writer.next(MAX_ROWS) {
            let text = self.text(sql, batch.len());
            self.write_batch(sql, batch, text).await;
        }
    }

    /// The text of `sql` for a batch of `rows` rows; `None` for one row,
    /// or for a statement of a shape that cannot be batched.
    fn text(&self, sql: &'static str, rows: usize) -> Option<Arc<str>> {
        if rows < 2 {
            return None;
        }
        let mut texts = self
            .texts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        texts
            .entry((sql, rows))
            .or_insert_with(|| batched_text(sql, rows).map(Arc::from))
            .clone()
    }

    /// Writes `batch` in one statement. A batch the database could not
    /// take (unreachable, or no connection in time) answers each caller so,
    /// as its row alone would have been; one it refused is written again
    /// row by row (at once, each on a connection of its own), so each
    /// caller gets its own row's outcome.
    async fn write_batch(&self, sql: &'static str, batch: Batch, text: Option<Arc<str>>) {
        if let Some(text) = text {
            let outcome = {
                let rows: Vec<&[OwnedParam]> = batch.iter().map(|w| w.item.as_slice()).collect();
                write(&self.lane, &text, &rows).await
            };
            match outcome {
                Ok(()) => {
                    tracing::debug!(rows = batch.len(), "records written in one statement");
                    return answer_each(batch, || Ok(()));
                }
                Err(error) => {
                    if let Some(outage) = outage_for_each(&error) {
                        return answer_each(batch, || Err(outage()));
                    }
                }
            }
        }
        each_alone(batch, |row| {
            let lane = Arc::clone(&self.lane);
            async move { write(&lane, sql, &[row.as_slice()]).await }
        })
        .await;
    }
}

/// `text` with `rows`' parameters, one after the other, on a lane
/// connection: one statement, atomic on its own.
async fn write(lane: &PgLane, text: &str, rows: &[&[OwnedParam]]) -> StoreResult<()> {
    let params: Vec<Param<'_>> = rows
        .iter()
        .flat_map(|row| row.iter().map(OwnedParam::param))
        .collect();
    let step = Step::<()>::new(text, params);
    lane.write(std::slice::from_ref(&step)).await.map(drop)
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
