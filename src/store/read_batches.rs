//! PostgreSQL's point reads gathered: the reads of one statement that
//! arrive while one read of it is on its way go to the server as one
//! statement when it is done.
//!
//! Why: on a loaded 2-core machine the server's cost of a read is mostly
//! the read's being a statement of its own (a backend woken, the protocol's
//! round, the executor started), not the index lookups in it; a statement
//! carrying the reads that queued behind the one before costs the server
//! one wake-up for all of them (docs/benchmarks.md, "Reads gathered").
//! With one request at a time nothing changes (a read alone, in its own
//! text).
//!
//! Each read is still its own: the gathered text is the statement's text
//! once per read (its parameters numbered on), each in parentheses with at
//! most its first row and its place in the batch, joined by `UNION ALL`
//! ([`gathered_text`]); one statement is one snapshot, so every read in it
//! sees the database as of the same moment. A batch the server refuses is
//! read again one by one, so that each caller gets its own read's error.
//! The reading runs in a task of its own: a caller that goes away drops
//! only its wait, and a read whose caller went before it was sent is not
//! sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::direct::{OwnedParam, Param, ReadRow};
use super::gathering::{Gathering, Waiting, answer_each, each_alone, outage_for_each};
use super::pg_lane::{PgLane, SentRow};
use super::placeholders::{parameters_in, renumbered};
use super::{StoreError, StoreResult};

/// The most reads one statement carries (a power of two). Each size is a
/// statement of its own, prepared once per lane connection.
pub(crate) const MAX_READS: usize = 8;

pub(crate) struct ReadBatches {
    lane: Arc<PgLane>,
    queues: Gathering<&'static str, Vec<OwnedParam>, Option<SentRow>>,
    /// Each statement's gathered text for each batch size read so far.
    texts: Mutex<HashMap<(&'static str, usize), Arc<str>>>,
    /// Reads answered from a statement that carried others' too.
    gathered: AtomicU64,
}

type Batch = Vec<Waiting<Vec<OwnedParam>, Option<SentRow>>>;

impl std::fmt::Debug for ReadBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadBatches").finish_non_exhaustive()
    }
}

impl ReadBatches {
    pub(crate) fn new(lane: Arc<PgLane>) -> Self {
        ReadBatches {
            lane,
            queues: Gathering::default(),
            texts: Mutex::new(HashMap::new()),
            gathered: AtomicU64::new(0),
        }
    }

    /// How many reads were answered from a statement that carried others'
    /// too, since the store was opened.
    pub(crate) fn gathered(&self) -> u64 {
        self.gathered.load(Ordering::Relaxed)
    }

    /// The first row of `sql` with `params`, decoded by `decode`.
    pub(crate) async fn read_optional<T>(
        self: &Arc<Self>,
        sql: &'static str,
        params: &[Param<'_>],
        decode: fn(&dyn ReadRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let params = params.iter().map(OwnedParam::of).collect();
        let row = self
            .queues
            .submit(sql, params, || {
                let batches = Arc::clone(self);
                tokio::spawn(async move { batches.read_until_empty(sql).await });
            })
            .await?;
        row.map(|row| row.decoded(decode)).transpose()
    }

    /// Reads `sql`'s queue, batch after batch, until it is empty.
    async fn read_until_empty(&self, sql: &'static str) {
        let mut reader = self.queues.writer(sql);
        while let Some(batch) = reader.next(MAX_READS) {
            // A read nobody waits for any more is not sent.
            let batch: Batch = batch.into_iter().filter(|w| !w.abandoned()).collect();
            match batch.len() {
                0 => {}
                1 => each_alone(batch, |params| self.alone(sql, params)).await,
                _ => self.read_batch(sql, batch).await,
            }
        }
    }

    /// One read in its own text, on a connection of its own.
    fn alone(
        &self,
        sql: &'static str,
        params: Vec<OwnedParam>,
    ) -> impl Future<Output = StoreResult<Option<SentRow>>> + Send + 'static {
        let lane = Arc::clone(&self.lane);
        async move {
            let params: Vec<Param<'_>> = params.iter().map(OwnedParam::param).collect();
            let mut lease = lane.lease().await?;
            let rows = lease.rows(sql, &params).await;
            Ok(lease.settle(rows)?.into_iter().next())
        }
    }

    /// Reads `batch` in one statement and answers each caller with its own
    /// row. A batch the database could not take answers each caller so; one
    /// it refused is read again one by one.
    async fn read_batch(&self, sql: &'static str, batch: Batch) {
        // Sizes are powers of two (the last read asked again to fill one),
        // so that each statement has few texts to prepare per connection.
        let size = batch.len().next_power_of_two().min(MAX_READS);
        let text = self.text(sql, size);
        let outcome = {
            let last = batch.len() - 1;
            let params: Vec<Param<'_>> = (0..size)
                .flat_map(|place| batch[place.min(last)].item.iter().map(OwnedParam::param))
                .collect();
            async {
                let mut lease = self.lane.lease().await?;
                let rows = lease.rows(&text, &params).await;
                lease.settle(rows)
            }
            .await
        };
        match outcome.and_then(|rows| by_place(rows, size)) {
            Ok(rows) => {
                self.gathered
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                for (waiting, row) in batch.into_iter().zip(rows) {
                    waiting.answer(Ok(row));
                }
            }
            Err(error) => match outage_for_each(&error) {
                Some(outage) => answer_each(batch, || Err(outage())),
                None => each_alone(batch, |params| self.alone(sql, params)).await,
            },
        }
    }

    fn text(&self, sql: &'static str, reads: usize) -> Arc<str> {
        let mut texts = self
            .texts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        texts
            .entry((sql, reads))
            .or_insert_with(|| Arc::from(gathered_text(sql, reads)))
            .clone()
    }
}

/// The rows of a gathered read, each at the place its last column names.
fn by_place(rows: Vec<SentRow>, reads: usize) -> StoreResult<Vec<Option<SentRow>>> {
    let mut places: Vec<Option<SentRow>> = (0..reads).map(|_| None).collect();
    for row in rows {
        let place = row
            .last_int()
            .and_then(|place| usize::try_from(place).ok())
            .filter(|place| *place < reads)
            .ok_or_else(|| StoreError::Corrupt("a gathered read's row has no place".into()))?;
        places[place] = Some(row);
    }
    Ok(places)
}

/// `sql`, a read, as one statement of `reads` reads: each its own
/// parameters (numbered on, as a batch of records' are), at most its first
/// row, and its place in the batch as the last column.
pub(crate) fn gathered_text(sql: &str, reads: usize) -> String {
    let per_read = parameters_in(sql);
    let mut text = String::with_capacity(reads * (sql.len() + 48));
    for place in 0..reads {
        if place > 0 {
            text.push_str(" UNION ALL ");
        }
        text.push_str("(SELECT g.*, ");
        text.push_str(&place.to_string());
        text.push_str("::int8 FROM (");
        renumbered(sql, place * per_read, &mut text);
        text.push_str(") g LIMIT 1)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_read_keeps_its_parameters_its_first_row_and_its_place() {
        assert_eq!(
            gathered_text("SELECT a FROM t WHERE k = $1 AND j = $2", 2),
            "(SELECT g.*, 0::int8 FROM (SELECT a FROM t WHERE k = $1 AND j = $2) g LIMIT 1) \
             UNION ALL (SELECT g.*, 1::int8 FROM (SELECT a FROM t WHERE k = $3 AND j = $4) g LIMIT 1)"
        );
    }
}
