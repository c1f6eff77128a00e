//! SQLite's WAL checkpoints, off the request path.
//!
//! In WAL mode a commit appends its pages to the `-wal` file, and a
//! checkpoint copies them back into the database file and syncs it. SQLite
//! by default checkpoints inside the commit that takes the WAL past 1,000
//! pages: on the request's own thread, under the process's write gate, so
//! every writer queued behind that commit waited for the copy and the
//! `fsync` (4.4 % of a SQLite turn's CPU samples, docs/benchmarks.md,
//! "The WAL checkpoint off the request path").
//!
//! The process's own write connections (`direct`) therefore do not
//! checkpoint on commit; only a safety net
//! ([`super::direct::WAL_SAFETY_NET_PAGES`]) is kept,
//! for a WAL that would otherwise grow without end. Each database file's
//! direct commits are counted instead, and every [`COMMITS_PER_CHECKPOINT`]
//! one PASSIVE checkpoint runs on the blocking pool, holding no gate:
//! writers go on appending while it copies, and readers are never waited
//! for (a frame a reader still needs is left for the next one). sqlx's
//! connections keep SQLite's default: their writes are the cold ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use sqlx::sqlite::SqlitePool;

use super::direct::{Checkpointed, Direct, checkpoint_passive};
use super::error::{DriverError, StoreError};

/// Direct commits between two checkpoints: about as often as SQLite's own
/// 1,000 pages for a turn's transactions. Measured (docs/benchmarks.md):
/// every 100, the turn's p99 at 8 connections fell from 15.2 to 11.1 ms;
/// every 500, it rose to 19.6 ms, as each larger checkpoint held a core for
/// longer beside the two the requests run on.
pub(crate) const COMMITS_PER_CHECKPOINT: u32 = 100;

/// One database file's commits since its last checkpoint.
#[derive(Debug, Default)]
pub(crate) struct WalCheckpoints {
    commits: AtomicU32,
    running: AtomicBool,
}

/// A checkpoint's outcome, as the metric's `outcome` label says it.
fn label(outcome: &super::StoreResult<Checkpointed>) -> &'static str {
    match outcome {
        Ok(Checkpointed::Complete) => "complete",
        Ok(Checkpointed::Partial) => "partial",
        Ok(Checkpointed::Busy) => "busy",
        Err(_) => "error",
    }
}

impl WalCheckpoints {
    /// Counts one commit to `pool`'s file and, when a checkpoint is due and
    /// none is running, starts one on the blocking pool.
    pub(crate) fn committed(self: &Arc<Self>, pool: &SqlitePool) {
        let commits = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if commits < COMMITS_PER_CHECKPOINT || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        // Commits made while it runs count toward the next one.
        self.commits.store(0, Ordering::Relaxed);
        let (running, pool) = (Running(self.clone()), pool.clone());
        tokio::task::spawn_blocking(move || {
            let _running = running;
            // `None`: the file could not be opened directly (logged there).
            let outcome = Direct::open(&pool, checkpoint_passive)
                .unwrap_or_else(|| Err(StoreError::Other(DriverError::new(Unopened))));
            if let Err(error) = &outcome {
                tracing::warn!(%error, "WAL checkpoint failed; the next one will try again");
            }
            crate::metrics::wal_checkpoint(label(&outcome));
        });
    }
}

/// A checkpoint started: dropped when it ends, however it ends (done, a
/// panic inside it, or never run because the runtime was shutting down),
/// so that the next one can start.
struct Running(Arc<WalCheckpoints>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// The database file could not be opened directly for a checkpoint.
#[derive(Debug, thiserror::Error)]
#[error("the database file could not be opened for a checkpoint")]
struct Unopened;

#[cfg(test)]
mod tests {
    use super::*;

    /// Were `running` left set, no checkpoint of the file would start again
    /// and its WAL would grow to the safety net.
    #[test]
    fn a_checkpoint_that_panics_lets_the_next_one_start() {
        let checkpoints = Arc::new(WalCheckpoints::default());
        checkpoints.running.store(true, Ordering::Release);
        let running = Running(checkpoints.clone());
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _running = running;
            panic!("a checkpoint that panics");
        }));
        assert!(ended.is_err());
        assert!(!checkpoints.running.load(Ordering::Acquire));
    }

    #[test]
    fn a_checkpoint_that_never_ran_lets_the_next_one_start() {
        let checkpoints = Arc::new(WalCheckpoints::default());
        checkpoints.running.store(true, Ordering::Release);
        // A task dropped unrun (the runtime shutting down) drops its closure.
        drop(Running(checkpoints.clone()));
        assert!(!checkpoints.running.load(Ordering::Acquire));
    }
}
