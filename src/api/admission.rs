//! Admission: how much work may be running at once, overall and per
//! account, counting the work whose client has hung up. A hang-up does not
//! end a request's work (`lifetime::run_to_completion` detaches it so that
//! nothing is left half-written), so without these bounds a client that
//! hangs up on every request could start any number of slow outbound calls
//! behind the connection cap. A request beyond either bound is answered 503
//! `SERVICE_UNAVAILABLE` with `Retry-After` before any of its work starts.
//!
//! - Overall: `run_to_completion` takes a place before it spawns the
//!   request's task, and the task holds it to its end. Health and the key
//!   set are never refused: they do no work worth bounding, and probes and
//!   hosts verifying signatures must reach them under any load.
//! - Per account (a `fair_share`): the `Caller` extractor takes a place as
//!   soon as the key has resolved to an account (before the body is read),
//!   and the handler holds it, through the `Caller`, until it returns. A
//!   request whose key this server lately admitted (`known_keys`) is
//!   refused on arrival when its account holds every place it may, before
//!   it waits for a local place or reads its key.
//! - Local work (`local_work`): right after its overall place, a request
//!   waits a short time at most (100 ms for a burst, behind at most four
//!   others per place; none while shedding) for a place among those using
//!   the server's own resources, or is refused; it gives that place up
//!   while it waits for anyone else. This is what sheds load past capacity. A
//!   request admitted past capacity runs on threads of its own
//!   (`shedding_threads`), away from those that refuse.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;
use super::known_keys::KnownKeys;
use crate::domain::account::AccountId;
use crate::fair_share::{FairShare, Place};
use crate::local_work::{self, LocalWork};

/// Seconds a refused client is asked to wait: work here lasts seconds at
/// most (the whole-request deadline, call time-outs).
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// The two bounds and what is running now.
pub struct Admission {
    overall: Arc<Semaphore>,
    per_account: Arc<FairShare<AccountId>>,
    local: Arc<LocalWork>,
    known_keys: KnownKeys,
}

/// A place among the requests being worked on.
pub struct WorkPermit {
    _place: OwnedSemaphorePermit,
}

/// A place among one account's requests being worked on.
pub type AccountPermit = Place<AccountId>;

impl Admission {
    pub fn from_limits(limits: &crate::cli::ClientLimits) -> Arc<Self> {
        Arc::new(Admission {
            overall: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            per_account: FairShare::new(limits.max_in_flight_per_account.max(1)),
            local: LocalWork::new(
                limits.local_work_places(),
                std::time::Duration::from_millis(limits.admission_wait_ms),
            ),
            known_keys: KnownKeys::default(),
        })
    }

    /// The accounts of the keys lately admitted here.
    pub fn known_keys(&self) -> &KnownKeys {
        &self.known_keys
    }

    /// A place among the requests using local resources, or the 503 that
    /// refuses this one when none frees within the admission wait.
    pub async fn admit_local(&self) -> Result<Arc<local_work::Place>, ApiError> {
        self.local.enter().await.ok_or_else(|| {
            tracing::debug!("request refused: the server is at capacity");
            ApiError::Overloaded {
                reason: "the server is at capacity; retry after the time given in Retry-After",
                retry_after_secs: RETRY_AFTER_SECONDS,
            }
        })
    }

    /// A place for one more request, or the 503 that refuses it.
    pub fn admit_work(&self) -> Result<WorkPermit, ApiError> {
        match self.overall.clone().try_acquire_owned() {
            Ok(place) => Ok(WorkPermit { _place: place }),
            Err(_) => {
                tracing::warn!(
                    "request refused: the server is working on as many requests as it may"
                );
                Err(ApiError::Overloaded {
                    reason: "the server is busy; retry after the time given in Retry-After",
                    retry_after_secs: RETRY_AFTER_SECONDS,
                })
            }
        }
    }

    /// A place for one more request of `account`, or the 503 that refuses it.
    pub fn admit_account(&self, account: AccountId) -> Result<AccountPermit, ApiError> {
        self.per_account
            .take(account)
            .ok_or_else(|| self.account_refusal(account))
    }

    /// The 503 that refuses a request of `account` on arrival, when the
    /// account holds as many places as it may already (a look, not a place:
    /// the request takes its place once its key is read).
    pub fn refuse_account_at_bound(&self, account: AccountId) -> Result<(), ApiError> {
        if self.per_account.full(account) {
            return Err(self.account_refusal(account));
        }
        Ok(())
    }

    fn account_refusal(&self, account: AccountId) -> ApiError {
        tracing::warn!(
            account = account.number(),
            limit = self.per_account.limit(),
            "request refused: this account has as many requests in progress as it may"
        );
        ApiError::Overloaded {
            reason: "this account has too many requests in progress; retry after the time given in Retry-After",
            retry_after_secs: RETRY_AFTER_SECONDS,
        }
    }
}
