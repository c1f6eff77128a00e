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
//! The process's connections (`direct`'s and sqlx's) therefore do not
//! checkpoint on commit; only a safety net
//! ([`super::direct::WAL_SAFETY_NET_PAGES`]) is kept,
//! for a WAL that would otherwise grow without end. Each database file's
//! write turns (`Store::write_turn`, the direct path's and sqlx's) are
//! counted instead, and every [`COMMITS_PER_CHECKPOINT`]
//! one PASSIVE checkpoint runs on the blocking pool, holding no gate:
//! writers go on appending while it copies, and readers are never waited
//! for (a frame a reader still needs is left for the next one). sqlx's
//! connections once kept SQLite's default, and their writes (a retention
//! purge's batches) each checkpointed under the gate with two `fsync`s.
//!
//! A PASSIVE checkpoint under steady writes never lets the WAL start over:
//! SQLite rewrites the WAL from its start only when a write begins with
//! every frame copied and no reader inside it, and some commit always
//! lands between the copy and the next write. So the WAL used to grow to
//! the safety net, whose checkpoint then ran inside a commit, on a runtime
//! thread, under the write gate: every ~10,000 pages both were held for
//! 30–50 ms (two `fsync`s), and the turn's p99 at half capacity doubled
//! (docs/benchmarks.md, "The WAL's safety net on the request's thread").
//! Now, once a PASSIVE checkpoint finds the WAL past [`RESTART_WAL_PAGES`],
//! the next commit hands its write gate to a RESTART checkpoint on the
//! blocking pool: writers wait for the gate (asleep, off the runtime's
//! threads) while it copies the few frames the PASSIVE one could not and
//! readers leave the WAL, and the commit after it writes the WAL from its
//! start. (Queueing the RESTART for the gate instead let the writers
//! outrun it on a busy machine: the WAL still reached the safety net.)
//!
//! SQLite syncs the database file only at the end of a checkpoint that
//! copied the whole WAL, which a PASSIVE one under steady writes never
//! does: every page the PASSIVE ones copied stayed dirty in the OS's cache
//! until the RESTART's sync, under the gate, wrote them all (4 ms on a new
//! file, 30 ms once it had grown, docs/benchmarks.md). So the PASSIVE
//! checkpoint that makes a RESTART due syncs the file itself, off the
//! gate, and copies the commits made meanwhile, twice
//! ([`SYNCS_BEFORE_RESTART`]): the RESTART copies and syncs only the last
//! few.
//!
//! That sync takes as long as the disk takes, and writers go on meanwhile:
//! a burst of small commits on a slow disk took the WAL past the safety
//! net before the RESTART was due. So each direct commit also reports the
//! WAL's length (`direct`'s WAL hook), and the one that finds it past
//! [`RESTART_NOW_WAL_PAGES`] hands its gate to a RESTART at once: the
//! writers wait for the disk, asleep, rather than outrun it. While a
//! checkpoint copies (a PASSIVE one held up by the disk), that RESTART
//! waits for the copy to end, holding the gate, before it asks: SQLite
//! refuses a second checkpoint at once (tried at once, every commit handed
//! its gate over for nothing, 60 in a row in one benchmark run), and
//! letting the commits go on instead let them outrun the checkpoints (the
//! WAL at 41–92 MiB, past the net, on a faster machine under a test run's
//! load: `storage::a_sqlite_wal_starts_over_before_its_safety_net_while_readers_stay`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use sqlx::sqlite::SqlitePool;
use tokio::sync::OwnedMutexGuard;

use super::direct::{
    Checkpoint, CheckpointMode, Checkpointed, Direct, checkpoint, sync_database_file,
};
use super::error::{DriverError, StoreError};

/// Direct commits between two checkpoints: about as often as SQLite's own
/// 1,000 pages for a turn's transactions. Measured (docs/benchmarks.md):
/// every 100, the turn's p99 at 8 connections fell from 15.2 to 11.1 ms;
/// every 500, it rose to 19.6 ms, as each larger checkpoint held a core for
/// longer beside the two the requests run on.
pub(crate) const COMMITS_PER_CHECKPOINT: u32 = 100;

/// WAL pages past which a checkpoint also starts the WAL over (~20 MiB of
/// 4 KiB pages): half the safety net, so that commits made while the
/// RESTART waits for the gate never reach it.
pub(crate) const RESTART_WAL_PAGES: u32 = super::direct::WAL_SAFETY_NET_PAGES / 2;

/// Rounds of (sync the database file, copy the commits made meanwhile)
/// ahead of a RESTART, off the gate. Measured (docs/benchmarks.md, "Two
/// syncs ahead of the RESTART"): with one, the RESTART held the gate for
/// a median 2.5 ms (p90 4.6, most 8.8) at 8 connections, the pages
/// committed during the sync; with two, 1.5 ms (p90 2.5, most 5.2).
const SYNCS_BEFORE_RESTART: usize = 2;

/// WAL pages past which the commit that finds them hands its gate to a
/// RESTART at once, without the database file's sync ahead of it: three
/// quarters of the safety net. Reached only when writers outran the
/// checkpoints (a burst of small commits on a disk whose `fsync` of the
/// copied pages takes a tenth of a second: the WAL grew past the net while
/// the PASSIVE checkpoint synced); the writers then wait for the disk, as
/// they must, asleep off the runtime's threads rather than in a commit's
/// safety net on one of them.
pub(crate) const RESTART_NOW_WAL_PAGES: u32 = super::direct::WAL_SAFETY_NET_PAGES / 4 * 3;

/// One database file's commits since its last checkpoint.
#[derive(Debug, Default)]
pub(crate) struct WalCheckpoints {
    commits: AtomicU32,
    running: AtomicBool,
    /// A PASSIVE checkpoint found the WAL past [`RESTART_WAL_PAGES`]: the
    /// next commit hands its gate to a RESTART.
    restart_due: AtomicBool,
    /// A checkpoint is copying (it holds SQLite's checkpoint lock, not
    /// while it syncs): a RESTART would be refused at once, so the commits
    /// past [`RESTART_NOW_WAL_PAGES`] do not try one each.
    copying: AtomicBool,
}

/// A checkpoint's outcome, as the metric's `outcome` label says it.
fn label(outcome: &super::StoreResult<Checkpoint>) -> &'static str {
    match outcome.as_ref().map(|c| c.outcome) {
        Ok(Checkpointed::Complete) => "complete",
        Ok(Checkpointed::Partial) => "partial",
        Ok(Checkpointed::Busy) => "busy",
        Err(_) => "error",
    }
}

impl WalCheckpoints {
    /// Counts one commit to `pool`'s file, made under `gate` (the file's
    /// write gate, held until now), which left the WAL `wal_pages` long
    /// (0 when not known: sqlx's writes). When a RESTART is due, or the WAL
    /// has passed [`RESTART_NOW_WAL_PAGES`] while no checkpoint is copying
    /// (a PASSIVE one held up by the disk), it runs on the blocking pool
    /// holding `gate`, so the commits queued behind this one wait for it
    /// (asleep) and none outruns it; otherwise the gate is let go, and
    /// when a PASSIVE checkpoint is due and none is running, one starts,
    /// which makes a RESTART due if the WAL has grown past
    /// [`RESTART_WAL_PAGES`]. Outside a runtime (a write turn dropped as
    /// the runtime ends) the gate is only let go.
    pub(crate) fn committed(
        self: &Arc<Self>,
        pool: &SqlitePool,
        gate: OwnedMutexGuard<()>,
        wal_pages: u32,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let due = self.restart_due.swap(false, Ordering::AcqRel);
        let outrun = wal_pages >= RESTART_NOW_WAL_PAGES;
        if due || outrun {
            let (checkpoints, pool) = (self.clone(), pool.clone());
            runtime.spawn(async move {
                // A RESTART asked while another checkpoint copies is refused
                // at once: the gate is held until that copy ends.
                checkpoints.copy_ended().await;
                // Counted and logged by `run`; nothing waits on it.
                let _ = run(checkpoints, pool, CheckpointMode::Restart, Some(gate)).await;
            });
            return;
        }
        drop(gate);
        let commits = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if commits < COMMITS_PER_CHECKPOINT || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        // Commits made while it runs count toward the next one.
        self.commits.store(0, Ordering::Relaxed);
        let (running, pool) = (Running(self.clone()), pool.clone());
        runtime.spawn(async move {
            let checkpoints = running.0.clone();
            let passive = run(checkpoints, pool, CheckpointMode::Passive, None).await;
            if matches!(passive, Ok(c) if c.wal_pages >= RESTART_WAL_PAGES) {
                running.0.restart_due.store(true, Ordering::Release);
            }
        });
    }
}

/// How long a RESTART waits for another checkpoint's copy to end before it
/// asks anyway (a copy of the whole WAL takes milliseconds; this only
/// bounds a disk that stalls).
const COPY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl WalCheckpoints {
    /// Once no checkpoint copies (or after [`COPY_WAIT`]).
    async fn copy_ended(&self) {
        let started = tokio::time::Instant::now();
        while self.copying.load(Ordering::Acquire) && started.elapsed() < COPY_WAIT {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// One checkpoint on the blocking pool (holding `gate` until it ends, when
/// given), logged when it fails and counted by outcome.
async fn run(
    checkpoints: Arc<WalCheckpoints>,
    pool: SqlitePool,
    mode: CheckpointMode,
    gate: Option<OwnedMutexGuard<()>>,
) -> super::StoreResult<Checkpoint> {
    let outcome = tokio::task::spawn_blocking(move || {
        let _gate = gate;
        // `None`: the file could not be opened directly (logged there).
        Direct::open(&pool, |connection| {
            // Each checkpoint marked as copying while it runs.
            let mut done = Copying::during(&checkpoints, || checkpoint(connection, mode))?;
            // A RESTART will be due: write the pages this and the PASSIVE
            // checkpoints before it copied now, off the gate, then copy
            // the commits made meanwhile, so that the RESTART under the
            // gate copies and syncs only the few made after; each round
            // leaves fewer.
            if mode == CheckpointMode::Passive && done.wal_pages >= RESTART_WAL_PAGES {
                for _ in 0..SYNCS_BEFORE_RESTART {
                    sync_database_file(connection)?;
                    done = Copying::during(&checkpoints, || checkpoint(connection, mode))?;
                }
            }
            Ok(done)
        })
        .unwrap_or_else(|| Err(StoreError::Other(DriverError::new(Unopened))))
    })
    .await
    .unwrap_or_else(|panicked| Err(StoreError::Other(DriverError::new(panicked))));
    if let Err(error) = &outcome {
        tracing::warn!(%error, ?mode, "WAL checkpoint failed; the next one will try again");
    }
    crate::metrics::wal_checkpoint(label(&outcome));
    outcome
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

/// A checkpoint's copy under way: `copying` is set until it ends, however
/// it ends.
struct Copying<'a>(&'a WalCheckpoints);

impl<'a> Copying<'a> {
    fn start(checkpoints: &'a WalCheckpoints) -> Self {
        checkpoints.copying.store(true, Ordering::Release);
        Copying(checkpoints)
    }

    /// `copy` (a checkpoint), marked as copying while it runs.
    fn during<T>(checkpoints: &'a WalCheckpoints, copy: impl FnOnce() -> T) -> T {
        let _copying = Copying::start(checkpoints);
        copy()
    }
}

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        self.0.copying.store(false, Ordering::Release);
    }
}

/// The database file could not be opened directly for a checkpoint.
#[derive(Debug, thiserror::Error)]
#[error("the database file could not be opened for a checkpoint")]
struct Unopened;

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `committed` kept the gate (handed to a RESTART) for a commit
    /// that left the WAL `wal_pages` long. On a one-thread runtime the
    /// spawned RESTART has not run when `committed` returns.
    async fn gate_kept(checkpoints: &Arc<WalCheckpoints>, wal_pages: u32) -> bool {
        let pool = SqlitePool::connect_lazy("sqlite::memory:").unwrap();
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        checkpoints.committed(&pool, gate.clone().lock_owned().await, wal_pages);
        gate.try_lock().is_err()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_wal_past_three_quarters_of_the_net_restarts_once_any_copy_ends() {
        let checkpoints = Arc::new(WalCheckpoints::default());
        assert!(!gate_kept(&checkpoints, RESTART_NOW_WAL_PAGES - 1).await);
        assert!(gate_kept(&checkpoints, RESTART_NOW_WAL_PAGES).await);
        // While a PASSIVE checkpoint copies, a RESTART would be refused at
        // once: the commit's RESTART waits for the copy, holding the gate,
        // so that no writer outruns it meanwhile.
        let copying = Copying::start(&checkpoints);
        let pool = SqlitePool::connect_lazy("sqlite::memory:").unwrap();
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        checkpoints.committed(
            &pool,
            gate.clone().lock_owned().await,
            RESTART_NOW_WAL_PAGES,
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(gate.try_lock().is_err(), "the writers wait for the copy");
        drop(copying);
        // Then the RESTART runs (an in-memory database has no file to
        // checkpoint: it fails at once) and lets the gate go.
        let _released = tokio::time::timeout(std::time::Duration::from_secs(5), gate.lock())
            .await
            .expect("the gate is let go once the copy ended");
    }

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
