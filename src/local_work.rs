//! Local work: how many requests may be using this server's own resources
//! (its CPU, the database, the policy guest) at once, and how briefly a new
//! request may wait for room before it is refused. Past capacity this is
//! what keeps admitted requests fast: the excess is refused at once instead
//! of joining queues inside the server (the runtime's, the pool's, the
//! SQLite write gate's), where every request would wait behind all the
//! others.
//!
//! How long a new request may wait for a place follows CoDel (Nichols and
//! Jacobson's controlled delay): a queue that drains within an interval
//! (100 ms) is a burst, and arrivals may wait up to the interval for room.
//! A queue that stands is overload: an interval in which every admitted
//! request waited longer than the target ([`TARGET`], 5 ms), or a request
//! that waited the whole interval in vain. Then the server sheds: an
//! arrival that finds no place free is refused at once (or after
//! `WARDEN_ADMISSION_WAIT_MS`, when an operator sets one), until an
//! interval passes without a refusal and with short waits. Bursts are
//! absorbed; a standing queue is cut at once, and the server is back to
//! normal an interval after the overload ends. (Refusals keep the shedding
//! on by themselves: refusing keeps every admitted wait short, so short
//! waits alone say nothing about the load.)
//!
//! The queue of arrivals is bounded too: at most [`ARRIVALS_PER_PLACE`]
//! new requests per place wait for one; one more is refused at once (and
//! the server sheds). Without it, the first interval of an overload let
//! every arrival wait up to 100 ms: a thousand requests in the queue, each
//! on a connection the client had to open, and for 200 ms refusals took
//! 20–50 ms and admitted requests up to 100 (docs/benchmarks.md, "A
//! bounded queue of arrivals").
//!
//! Why a refusal waits for nothing by default: at twice capacity on two
//! cores, a 5 ms wait was half of a refusal's time, and clients that resend
//! at once (a closed loop of 128 connections) got as much done without it
//! (docs/benchmarks.md, "Past capacity").
//!
//! A request holds its place only while it works here. Waiting for someone
//! else does not count: a call to a host endpoint, to the model or to the
//! challenge verifier ([`outside`]), and a client slow to send its body
//! (`api::lifetime`) give the place up for as long as they wait, so a slow
//! tenant endpoint or a trickling upload never takes room from the others
//! (those waits have bounds of their own: the call time-outs, the body-read
//! deadline, the per-account and overall bounds on work in progress). When
//! the wait ends the request takes a place again, without a time limit:
//! work already started is finished, never refused half-way.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// CoDel's interval: a queue that does not empty within it is standing.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// CoDel's target: an interval whose every admission waited longer than
/// this is a standing queue.
pub const TARGET: Duration = Duration::from_millis(5);

/// New requests that may wait for a place, per place. Enough that a
/// stall of the database under normal load (a slow WAL sync: tens of
/// milliseconds) is waited out rather than refused (one place per waiting
/// arrival refused such a stall at half capacity, docs/benchmarks.md, "A
/// bounded queue of arrivals"); few enough that an overload's first
/// interval does not queue a thousand.
pub const ARRIVALS_PER_PLACE: usize = 4;

/// The places and the wait a new request may spend for one.
#[derive(Debug)]
pub struct LocalWork {
    places: Arc<Semaphore>,
    /// New requests waiting for a place now, and the most that may
    /// ([`ARRIVALS_PER_PLACE`] per place).
    arrivals_waiting: AtomicUsize,
    most_waiting: usize,
    /// The wait a new request may spend once a queue stands (zero: none).
    shedding_wait: Duration,
    queue: Mutex<QueueWatch>,
}

/// What the admissions of the current interval waited, and the last
/// refusal.
#[derive(Debug)]
struct QueueWatch {
    interval_start: Instant,
    /// The shortest wait of an admission this interval (`None`: none yet).
    shortest: Option<Duration>,
    /// Whether every admission of the last interval waited past the target.
    standing: bool,
    last_refusal: Option<Instant>,
}

impl QueueWatch {
    fn shedding(&self, now: Instant) -> bool {
        self.standing
            || self
                .last_refusal
                .is_some_and(|at| now.duration_since(at) < INTERVAL)
    }
}

/// One request's place: held, given up while it waits elsewhere, taken
/// again after. Shared by the request's task and its body.
#[derive(Debug)]
pub struct Place {
    places: Arc<Semaphore>,
    /// Whether the request came past capacity: no place was free when it
    /// arrived, or the server was shedding.
    past_capacity: bool,
    state: Mutex<PlaceState>,
}

#[derive(Debug)]
struct PlaceState {
    permit: Option<OwnedSemaphorePermit>,
    /// Waits in progress (nested or concurrent); the place is taken again
    /// when the last one ends.
    waits: usize,
}

tokio::task_local! {
    /// The place of the request whose task this is.
    static CURRENT: Arc<Place>;
}

impl LocalWork {
    pub fn new(places: usize, shedding_wait: Duration) -> Arc<Self> {
        Arc::new(LocalWork {
            places: Arc::new(Semaphore::new(places.max(1))),
            arrivals_waiting: AtomicUsize::new(0),
            most_waiting: places.max(1) * ARRIVALS_PER_PLACE,
            shedding_wait,
            queue: Mutex::new(QueueWatch {
                interval_start: Instant::now(),
                shortest: None,
                standing: false,
                last_refusal: None,
            }),
        })
    }

    /// A place for a new request, waiting at most the interval (a burst) or
    /// the shedding wait (while shedding); `None` when none freed in time
    /// (the caller refuses the request).
    pub async fn enter(&self) -> Option<Arc<Place>> {
        let (permit, past_capacity) = match self.places.clone().try_acquire_owned() {
            Ok(permit) => (permit, self.admitted_after(Duration::ZERO)),
            Err(_) => {
                let allowed = if self.shedding() {
                    self.shedding_wait
                } else {
                    INTERVAL
                };
                if allowed.is_zero() {
                    return self.refused();
                }
                let Some(_waiting) = ArrivalWaiting::join(self) else {
                    return self.refused();
                };
                let arrived = Instant::now();
                match tokio::time::timeout(allowed, self.places.clone().acquire_owned()).await {
                    Ok(Ok(permit)) => {
                        self.admitted_after(arrived.elapsed());
                        (permit, true)
                    }
                    _ => return self.refused(),
                }
            }
        };
        Some(Arc::new(Place {
            places: self.places.clone(),
            past_capacity,
            state: Mutex::new(PlaceState {
                permit: Some(permit),
                waits: 0,
            }),
        }))
    }

    /// Notes a refusal (the shedding goes on for an interval after it).
    fn refused(&self) -> Option<Arc<Place>> {
        self.watch().last_refusal = Some(Instant::now());
        None
    }

    /// Places free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.places.available_permits()
    }

    /// Whether the queue stood through the last interval or a request was
    /// refused within it: new arrivals then wait only the shedding wait.
    pub fn shedding(&self) -> bool {
        self.watch().shedding(Instant::now())
    }

    /// Counts one admission's wait into the interval, closing the interval
    /// when it is over; whether the server is shedding.
    fn admitted_after(&self, wait: Duration) -> bool {
        let mut watch = self.watch();
        let now = Instant::now();
        let since = now.duration_since(watch.interval_start);
        if since >= INTERVAL {
            // An interval with no admission at all, or one long past, says
            // nothing of the queue now.
            watch.standing = since < 2 * INTERVAL && watch.shortest.is_some_and(|s| s > TARGET);
            watch.interval_start = now;
            watch.shortest = None;
        }
        watch.shortest = Some(watch.shortest.map_or(wait, |s| s.min(wait)));
        watch.shedding(now)
    }

    fn watch(&self) -> std::sync::MutexGuard<'_, QueueWatch> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One new request among those waiting for a place; dropped (admitted,
/// refused or cancelled), it leaves the queue.
struct ArrivalWaiting<'a>(&'a AtomicUsize);

impl<'a> ArrivalWaiting<'a> {
    /// A place in the queue of arrivals, or `None` when it is full.
    fn join(work: &'a LocalWork) -> Option<Self> {
        let waiting = &work.arrivals_waiting;
        let joined = waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < work.most_waiting).then_some(n + 1)
            })
            .is_ok();
        // Made only when joined: its drop leaves the queue.
        joined.then(|| ArrivalWaiting(waiting))
    }
}

impl Drop for ArrivalWaiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Place {
    /// Whether the request came past capacity (no place free when it
    /// arrived, or the server shedding): its work then runs on threads of
    /// its own (`shedding_threads`).
    pub fn past_capacity(&self) -> bool {
        self.past_capacity
    }

    /// Runs `work` as this place's holder: [`outside`] within it gives the
    /// place up while it waits.
    pub async fn hold<F: Future>(self: Arc<Self>, work: F) -> F::Output {
        CURRENT.scope(self, work).await
    }

    /// Gives the place up: a wait elsewhere begins.
    pub fn step_out(&self) {
        let mut state = self.lock();
        state.waits += 1;
        state.permit = None;
    }

    /// A wait ended without [`Place::step_in`] (it was cancelled): counted
    /// out, the place not taken again.
    fn abandon_wait(&self) {
        let mut state = self.lock();
        state.waits = state.waits.saturating_sub(1);
    }

    /// A wait has ended: once none is left, the place is taken again (in
    /// turn with every other request waiting for one, without a time limit).
    pub async fn step_in(&self) {
        {
            let mut state = self.lock();
            state.waits = state.waits.saturating_sub(1);
            if state.waits > 0 || state.permit.is_some() {
                return;
            }
        }
        let Ok(permit) = self.places.clone().acquire_owned().await else {
            return;
        };
        let mut state = self.lock();
        if state.permit.is_none() && state.waits == 0 {
            state.permit = Some(permit);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlaceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Awaits `wait` (a call to another server, a pause between attempts)
/// without holding the current request's place, and takes it again after.
/// Outside a request (the platform worker, the admin commands) it only
/// awaits.
pub async fn outside<F: Future>(wait: F) -> F::Output {
    let Ok(place) = CURRENT.try_with(Arc::clone) else {
        return wait.await;
    };
    place.step_out();
    let mut pending = PendingWait(Some(place));
    let output = wait.await;
    if let Some(place) = pending.0.take() {
        place.step_in().await;
    }
    output
}

/// A wait in progress; dropped before it ends (the request's future was
/// cancelled), it counts the wait out.
struct PendingWait(Option<Arc<Place>>);

impl Drop for PendingWait {
    fn drop(&mut self) {
        if let Some(place) = self.0.take() {
            place.abandon_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds `place` for `for_ms`, then gives it up.
    fn release_after(place: Arc<Place>, for_ms: u64) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            drop(place);
        })
    }

    /// A place that frees 20 ms after a request arrives: a burst (waits up
    /// to the interval) gets it; while shedding (the default: no wait) the
    /// request is refused; an interval without refusals ends the shedding.
    #[tokio::test]
    async fn a_burst_waits_an_interval_a_standing_queue_is_refused_at_once() {
        let work = LocalWork::new(1, Duration::ZERO);
        let held = work.enter().await.expect("room");
        let release = release_after(held, 20);
        let burst = work.enter().await;
        assert!(burst.is_some(), "a burst waits for the place");
        release.await.unwrap();
        assert!(!work.shedding());

        // A queue that does not drain within the interval: refused, and
        // from then on arrivals that find no place are refused at once.
        let stuck = burst.unwrap();
        assert!(work.enter().await.is_none());
        assert!(work.shedding());
        // The place frees 1 ms later: any wait at all would take it.
        let release = release_after(stuck, 1);
        assert!(
            work.enter().await.is_none(),
            "while shedding a request that finds no place is refused at once"
        );
        release.await.unwrap();

        // An interval without refusals: back to absorbing bursts.
        tokio::time::sleep(INTERVAL + Duration::from_millis(10)).await;
        assert!(!work.shedding());
        let held = work.enter().await.expect("room at once");
        let release = release_after(held, 20);
        assert!(work.enter().await.is_some(), "a burst is absorbed again");
        release.await.unwrap();
    }

    /// A request is past capacity when no place was free as it came (it
    /// waited), or the server was shedding (a place was free, but others
    /// are being refused); not when a place was free and nothing is shed.
    #[tokio::test]
    async fn past_capacity_is_a_wait_for_a_place_or_shedding() {
        let work = LocalWork::new(1, Duration::ZERO);
        let held = work.enter().await.expect("room");
        assert!(!held.past_capacity(), "a place free at once, no shedding");
        let release = release_after(held, 20);
        let waited = work.enter().await.expect("a burst waits for the place");
        assert!(waited.past_capacity(), "it waited for its place");
        release.await.unwrap();
        drop(waited);
        assert!(work.refused().is_none());
        let shed = work.enter().await.expect("a place is free");
        assert!(shed.past_capacity(), "free, but the server sheds");
    }

    /// An operator's shedding wait (`WARDEN_ADMISSION_WAIT_MS`): while
    /// shedding, a place that frees within it is taken, one that frees
    /// later is not.
    #[tokio::test]
    async fn while_shedding_a_configured_wait_is_waited() {
        let work = LocalWork::new(1, Duration::from_millis(30));
        let held = work.enter().await.expect("room");
        assert!(work.refused().is_none());
        assert!(work.shedding());
        let release = release_after(held, 10);
        let admitted = work.enter().await;
        assert!(admitted.is_some(), "the place freed within the wait");
        release.await.unwrap();
        let release = release_after(admitted.unwrap(), 60);
        assert!(
            work.enter().await.is_none(),
            "the place freed after the wait"
        );
        release.await.unwrap();
    }

    /// Every admission waits 20 ms (under the burst wait, past the 5 ms
    /// target) for an interval: the queue is standing, and sheds.
    #[tokio::test]
    async fn a_queue_that_stands_through_an_interval_sheds() {
        let work = LocalWork::new(1, Duration::ZERO);
        let mut held = work.enter().await.unwrap();
        for _ in 0..20 {
            if work.shedding() {
                break;
            }
            let release = release_after(held, 20);
            held = work.enter().await.expect("admitted within the burst wait");
            release.await.unwrap();
        }
        assert!(work.shedding(), "a standing queue");
        let release = release_after(held, 20);
        assert!(work.enter().await.is_none(), "refused at once now");
        release.await.unwrap();
    }

    /// At most `ARRIVALS_PER_PLACE` arrivals per place wait: past that,
    /// one is refused at once (and the server sheds), though a place would
    /// free within the interval. A waiting arrival cancelled (its client
    /// hung up) leaves the queue.
    #[tokio::test]
    async fn arrivals_beyond_a_full_queue_are_refused_at_once() {
        let work = LocalWork::new(1, Duration::ZERO);
        let waiting = || work.arrivals_waiting.load(Ordering::Acquire);
        let held = work.enter().await.expect("room");
        let cancelled = tokio::time::timeout(Duration::from_millis(5), work.enter()).await;
        assert!(cancelled.is_err(), "it was waiting");
        assert_eq!(waiting(), 0);

        let release = release_after(held, 20);
        let queued: Vec<_> = (0..ARRIVALS_PER_PLACE)
            .map(|_| {
                let work = work.clone();
                tokio::spawn(async move { work.enter().await.map(drop).is_some() })
            })
            .collect();
        while waiting() < ARRIVALS_PER_PLACE {
            tokio::task::yield_now().await;
        }
        assert!(
            work.enter().await.is_none(),
            "the queue is full: the next arrival is refused"
        );
        assert!(work.shedding());
        for arrival in queued {
            assert!(arrival.await.unwrap(), "a waiting arrival got the place");
        }
        release.await.unwrap();
        assert_eq!(waiting(), 0);
    }

    #[tokio::test]
    async fn a_wait_outside_frees_the_place_and_takes_it_back() {
        let work = LocalWork::new(1, Duration::from_millis(20));
        let place = work.enter().await.unwrap();
        let during = {
            let work = work.clone();
            place
                .clone()
                .hold(outside(async move { work.free() }))
                .await
        };
        assert_eq!(during, 1, "free while the request waits elsewhere");
        assert_eq!(work.free(), 0, "taken back after the wait");
        drop(place);
        assert_eq!(work.free(), 1);
    }

    #[tokio::test]
    async fn nested_waits_take_the_place_back_once_after_the_last() {
        let work = LocalWork::new(2, Duration::from_millis(20));
        let place = work.enter().await.unwrap();
        let free = {
            let work = work.clone();
            place
                .clone()
                .hold(async move {
                    let inner = outside(outside(async { work.free() })).await;
                    (inner, work.free())
                })
                .await
        };
        assert_eq!(free, (2, 1));
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_place_given_up_and_nothing_leaked() {
        let work = LocalWork::new(1, Duration::from_millis(20));
        let place = work.enter().await.unwrap();
        let cancelled = tokio::time::timeout(
            Duration::from_millis(10),
            place.clone().hold(outside(std::future::pending::<()>())),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(work.free(), 1, "given up while waiting, not taken back");
        // A later wait of the same request still ends holding the place.
        place.clone().hold(outside(async {})).await;
        assert_eq!(work.free(), 0);
        drop(place);
        assert_eq!(work.free(), 1);
    }

    #[tokio::test]
    async fn outside_a_request_it_only_awaits() {
        assert_eq!(outside(async { 7 }).await, 7);
    }
}
