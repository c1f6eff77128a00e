//! PostgreSQL's turns that start a conversation, written together: the
//! turns that arrive while one group's transaction is on its way go, when
//! it is done, as one transaction (`BEGIN`, every turn's steps, `COMMIT`,
//! sent at once as one pipeline), at most [`MAX_TURNS`].
//!
//! Why: each turn's write was a transaction of its own, and on a 2-core
//! machine the server's side of a transaction (a backend woken, the
//! `BEGIN` and `COMMIT`, the commit's WAL record and flush) takes the cores
//! the turns themselves need (docs/benchmarks.md, "A turn's write, written
//! with the others'"). With one turn at a time nothing changes (a group of
//! one is the turn's own transaction).
//!
//! A turn's caller that goes away (a deadline, a task cancelled) before
//! its group is sent leaves nothing written, as before; once its group is
//! on its way the turn is written whole, as a turn whose `COMMIT` was
//! already sent alone is.
//!
//! Each turn still has its own outcome. A group commits whole or not at
//! all; when it does not (a turn's guard answered — the user was erased
//! since the turn began —, a refusal, a deadlock), every turn of it is
//! written again alone, at once, each in its own transaction, and answers
//! what its own transaction did. A group the database could not take (no
//! connection in time, unreachable) answers each turn so.
//!
//! Only turns that start a conversation (and answer no platform message)
//! are gathered: such a turn writes only rows of its own conversation,
//! which nobody else can see before it commits, and takes only the user's
//! advisory lock (shared) and the account's row (`KEY SHARE`, for the
//! foreign keys). A group takes every advisory lock first, before any row,
//! so it never waits for an erasure while holding a row that the erasure
//! needs: no lock cycle with an erasure, a purge or an account's deletion.
//! A turn continuing a conversation updates that conversation's row, which
//! a purge or an erasure may be deleting: two such turns in one group
//! could hold one row while waiting for another that a purge holds while
//! waiting for the first. Those are written alone, as before.

use std::sync::Arc;

use super::StoreResult;
use super::data_requests::HOLD_USER_SHARED;
use super::direct::{OwnedStep, Step};
use super::gathering::{Gathering, Waiting, answer_each, each_alone, outage_for_each};
use super::pg_lane::PgLane;

/// The most turns one transaction carries.
pub(crate) const MAX_TURNS: usize = 8;

/// The turns waiting, each as its steps; each answered as
/// [`PgLane::write`] answers one turn's.
pub(crate) struct WriteGroups<O> {
    lane: Arc<PgLane>,
    queue: Gathering<(), Vec<OwnedStep<O>>, Option<O>>,
}

type Group<O> = Vec<Waiting<Vec<OwnedStep<O>>, Option<O>>>;

impl<O> std::fmt::Debug for WriteGroups<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteGroups").finish_non_exhaustive()
    }
}

impl<O: Copy + Send + Sync + 'static> WriteGroups<O> {
    pub(crate) fn new(lane: Arc<PgLane>) -> Self {
        WriteGroups {
            lane,
            queue: Gathering::default(),
        }
    }

    /// Writes one turn's `steps` in a transaction, with the turns that
    /// queue meanwhile: committed (`None`), or rolled back with the answer
    /// of its first step that did not touch exactly one row, as
    /// [`PgLane::write`] alone.
    pub(crate) async fn write(self: &Arc<Self>, steps: &[Step<'_, O>]) -> StoreResult<Option<O>> {
        let steps = steps.iter().map(OwnedStep::of).collect();
        self.queue
            .submit((), steps, || {
                let groups = Arc::clone(self);
                tokio::spawn(async move { groups.write_until_empty().await });
            })
            .await
    }

    async fn write_until_empty(&self) {
        let mut writer = self.queue.writer(());
        while let Some(group) = writer.next(MAX_TURNS) {
            self.write_group(group).await;
        }
    }

    /// Writes `group` in one transaction, or each of its turns alone. A
    /// turn whose caller went away while it waited is not written, as its
    /// own transaction cut off would not have been; once sent, a turn is
    /// written whole with its group.
    async fn write_group(&self, mut group: Group<O>) {
        group.retain(|waiting| !waiting.abandoned());
        if group.len() > 1 {
            let outcome = self.lane.write(&Self::steps_of(&group)).await;
            match outcome {
                Ok(None) => {
                    tracing::debug!(turns = group.len(), "turns written in one transaction");
                    return answer_each(group, || Ok(None));
                }
                // A turn's guard: each alone tells whose.
                Ok(Some(_)) => {}
                Err(error) => {
                    if let Some(outage) = outage_for_each(&error) {
                        return answer_each(group, || Err(outage()));
                    }
                }
            }
        }
        each_alone(group, |steps| {
            let lane = Arc::clone(&self.lane);
            async move {
                let steps: Vec<Step<'_, O>> = steps.iter().map(OwnedStep::step).collect();
                lane.write(&steps).await
            }
        })
        .await;
    }

    /// Every turn's steps in arrival order, the advisory locks first.
    fn steps_of<'g>(group: &'g Group<O>) -> Vec<Step<'g, O>> {
        let all = || group.iter().flat_map(|waiting| waiting.item.iter());
        let locks = all().filter(|step| step.sql() == HOLD_USER_SHARED);
        let rest = all().filter(|step| step.sql() != HOLD_USER_SHARED);
        locks.chain(rest).map(OwnedStep::step).collect()
    }
}
