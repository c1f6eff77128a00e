//! Work for the database gathered while one piece of its kind is on its
//! way: the queue and the writer task that `record_batches` (lone records,
//! one multi-row `INSERT`), `write_groups` (turns, one transaction) and
//! `read_batches` (point reads, one statement; its "writer" reads) share.
//! Each piece of work waits in its kind's queue with the channel its
//! caller awaits; the first piece to find no writer starts one (a task of
//! its own), which takes the queue in batches until it is empty.
//!
//! A writer is a task, not the caller's future: a caller that goes away (a
//! client hang-up, a deadline) drops only its wait, never a batch half-way
//! or another caller's work.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::{StoreError, StoreResult};

/// The queues of work, one per kind `K`, each of items `T` answered `A`.
pub(crate) struct Gathering<K, T, A> {
    queues: Mutex<HashMap<K, Queue<T, A>>>,
}

struct Queue<T, A> {
    waiting: Vec<Waiting<T, A>>,
    /// Whether a writer task is running for this kind.
    writing: bool,
}

impl<T, A> Default for Queue<T, A> {
    fn default() -> Self {
        Queue {
            waiting: Vec::new(),
            writing: false,
        }
    }
}

/// One piece of work in a batch, and where its caller waits for it.
pub(crate) struct Waiting<T, A> {
    pub(crate) item: T,
    answer: oneshot::Sender<StoreResult<A>>,
}

impl<T, A> Waiting<T, A> {
    /// Whether its caller has gone (a client hang-up, a deadline).
    pub(crate) fn abandoned(&self) -> bool {
        self.answer.is_closed()
    }

    /// Tells the caller how its work went (a caller gone hears nothing).
    pub(crate) fn answer(self, outcome: StoreResult<A>) {
        let _ = self.answer.send(outcome);
    }
}

impl<K, T, A> Default for Gathering<K, T, A> {
    fn default() -> Self {
        Gathering {
            queues: Mutex::new(HashMap::new()),
        }
    }
}

impl<K, T, A> Gathering<K, T, A>
where
    K: Eq + Hash + Copy,
{
    /// Queues `item` under `kind` and waits for its answer. When no
    /// writer runs for `kind`, `start_writer` is called to spawn one (it
    /// must end by taking batches with [`Writer::next`] until `None`).
    pub(crate) async fn submit(
        &self,
        kind: K,
        item: T,
        start_writer: impl FnOnce(),
    ) -> StoreResult<A> {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut queues = self.lock();
            let queue = queues.entry(kind).or_default();
            queue.waiting.push(Waiting { item, answer });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start {
            start_writer();
        }
        // The writer answers every piece it takes; only a runtime shutting
        // down drops it first.
        answered.await.unwrap_or(Err(StoreError::Timeout))
    }

    /// The writer of `kind`, for the task [`Gathering::submit`] started.
    pub(crate) fn writer(&self, kind: K) -> Writer<'_, K, T, A> {
        Writer {
            gathering: self,
            kind,
            finished: false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Queue<T, A>>> {
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The one writer of a kind: takes its queue in batches. If it stops
/// before the queue is empty (a panic, a runtime shutting down), its drop
/// lets the kind's next piece start a new writer and drops the pieces left
/// waiting, whose callers then hear an error instead of waiting for a
/// writer that will not come.
pub(crate) struct Writer<'g, K: Eq + Hash + Copy, T, A> {
    gathering: &'g Gathering<K, T, A>,
    kind: K,
    finished: bool,
}

impl<K: Eq + Hash + Copy, T, A> Writer<'_, K, T, A> {
    /// The next batch (at most `most` pieces, in arrival order), or `None`
    /// when the queue is empty, which ends this writer. The end is marked
    /// under the same lock that found the queue empty: a piece arriving
    /// just after then starts a new writer rather than wait for this one.
    pub(crate) fn next(&mut self, most: usize) -> Option<Vec<Waiting<T, A>>> {
        if self.finished {
            return None;
        }
        let mut queues = self.gathering.lock();
        let queue = queues.entry(self.kind).or_default();
        if queue.waiting.is_empty() {
            queue.writing = false;
            self.finished = true;
            return None;
        }
        let take = queue.waiting.len().min(most);
        Some(queue.waiting.drain(..take).collect())
    }
}

impl<K: Eq + Hash + Copy, T, A> Drop for Writer<'_, K, T, A> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut queues = self.gathering.lock();
        if let Some(queue) = queues.get_mut(&self.kind) {
            queue.writing = false;
            queue.waiting.clear();
        }
    }
}

/// Answers every piece of `batch` with an outcome of its own.
pub(crate) fn answer_each<T, A>(batch: Vec<Waiting<T, A>>, outcome: impl Fn() -> StoreResult<A>) {
    for waiting in batch {
        waiting.answer(outcome());
    }
}

/// Writes every piece of `batch` on its own, at once (each on a task of
/// its own, so one slow piece holds up none of the others; a lone piece
/// on the writer's own task), and answers each with its own outcome.
pub(crate) async fn each_alone<T, A, F>(mut batch: Vec<Waiting<T, A>>, write: impl Fn(T) -> F)
where
    F: std::future::Future<Output = StoreResult<A>> + Send + 'static,
    A: Send + 'static,
{
    if batch.len() == 1
        && let Some(Waiting { item, answer }) = batch.pop()
    {
        let _ = answer.send(write(item).await);
        return;
    }
    let mut alone = tokio::task::JoinSet::new();
    for Waiting { item, answer } in batch {
        let written = write(item);
        alone.spawn(async move {
            let _ = answer.send(written.await);
        });
    }
    alone.join_all().await;
}

/// An outage's error (no connection in time, the server unreachable) for
/// each of a batch's callers, as each piece alone would have met it;
/// `None` for any other error (a refusal, which one piece alone may have
/// caused).
pub(crate) fn outage_for_each(error: &StoreError) -> Option<impl Fn() -> StoreError + use<>> {
    let said = match error {
        StoreError::Timeout => None,
        StoreError::Unavailable(error) => Some(error.to_string()),
        _ => return None,
    };
    Some(move || match &said {
        None => StoreError::Timeout,
        Some(said) => StoreError::Unavailable(super::error::DriverError::new(
            std::io::Error::other(said.clone()),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_writer_takes_what_queued_behind_it_in_batches_and_ends_when_empty() {
        let gathering: Arc<Gathering<&str, u32, u32>> = Arc::default();
        let mut callers = tokio::task::JoinSet::new();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let mut go = Some(go);
        let mut wait = Some(wait);
        let batches = Arc::new(Mutex::new(Vec::new()));
        for item in 0..5u32 {
            let gathering = Arc::clone(&gathering);
            let wait = wait.take();
            let batches = Arc::clone(&batches);
            callers.spawn(async move {
                let writer_gathering = Arc::clone(&gathering);
                gathering
                    .submit("k", item, move || {
                        tokio::spawn(async move {
                            // The first writer waits until all five queued.
                            if let Some(wait) = wait {
                                let _ = wait.await;
                            }
                            let mut writer = writer_gathering.writer("k");
                            while let Some(batch) = writer.next(2) {
                                batches.lock().unwrap().push(batch.len());
                                for waiting in batch {
                                    let item = waiting.item;
                                    waiting.answer(Ok(item * 10));
                                }
                            }
                        });
                    })
                    .await
            });
            tokio::task::yield_now().await;
        }
        while gathering.lock().get("k").map_or(0, |q| q.waiting.len()) < 5 {
            tokio::task::yield_now().await;
        }
        go.take().unwrap().send(()).unwrap();
        let mut answers: Vec<u32> = callers
            .join_all()
            .await
            .into_iter()
            .map(|a| a.unwrap())
            .collect();
        answers.sort_unstable();
        assert_eq!(answers, [0, 10, 20, 30, 40]);
        assert_eq!(*batches.lock().unwrap(), [2, 2, 1]);
        assert!(!gathering.lock()["k"].writing, "the writer ended");
    }

    #[tokio::test]
    async fn a_writer_that_stops_early_lets_the_next_piece_start_another() {
        let gathering: Gathering<&str, u32, u32> = Gathering::default();
        {
            let mut queues = gathering.lock();
            let queue = queues.entry("k").or_default();
            queue.writing = true;
        }
        let writer = gathering.writer("k");
        drop(writer);
        let mut started = false;
        let answer = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            gathering.submit("k", 1, || started = true),
        )
        .await;
        assert!(started, "a new writer was asked for");
        assert!(answer.is_err(), "nobody answered the piece in this test");
    }
}
