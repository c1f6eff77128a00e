//! Making room for a waiting client. When every connection slot is taken,
//! exactly one connection ends its keep-alive for each client that waits:
//! the one idle longest, closed at once if it has been idle at least
//! `IDLE_BEFORE_CLOSE`, or else the next one to finish an answer, whose
//! answer then says `connection: close` (or, if none answers first, the
//! one idle longest once it has been idle that long).
//!
//! Why one and why the longest idle: ending every connection's keep-alive
//! whenever a client waited (the earlier rule) turned a burst past the cap
//! into a storm. Every client reconnected at once, each reconnection past
//! the cap ended everyone's keep-alive again, and requests already on
//! their way over an idle connection met its close (a client sees an
//! incomplete message). A pool reuses its most recently used connection
//! first, so the one idle longest is the least likely to carry a request
//! at the moment it is closed; a busy connection is told in its answer, so
//! its client never sends on a closing connection at all. A connection
//! idle only briefly is spared: its client may have sent a request that
//! the server has not read yet (a new connection's first request waits in
//! the socket until its task first runs, and past capacity that can take
//! tens of milliseconds), and closing a socket with unread bytes resets
//! it under the request.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a connection must have been idle (since its last answer, or
/// since it was accepted) before it may be closed to make room: longer
/// than a request waits, past capacity, for its connection's task to read
/// it.
pub const IDLE_BEFORE_CLOSE: Duration = Duration::from_millis(250);

/// The open connections that could make room, and whether a client waits.
#[derive(Debug)]
pub struct Release {
    state: Mutex<ReleaseState>,
    next_id: AtomicU64,
    /// `IDLE_BEFORE_CLOSE`, shorter in tests.
    idle_before_close: Duration,
}

#[derive(Debug, Default)]
struct ReleaseState {
    /// A client waits for a slot, and no connection has been asked yet to
    /// make it: the next answer closes its connection.
    wanted: bool,
    /// Idle connections, the longest idle first.
    idle: BTreeMap<IdleKey, Arc<Ask>>,
}

/// When a connection's idle began, then which one it is.
type IdleKey = (Instant, u64);

/// What `Release` can tell one connection.
#[derive(Debug, Default)]
struct Ask {
    /// Set once this connection's keep-alive is to end, for whatever reason.
    ending: AtomicBool,
    /// Woken when this idle connection is asked to close.
    close: Notify,
}

/// One connection's place in `Release`: idle or busy, and whether it has
/// been asked to end. Dropped with its connection.
#[derive(Debug)]
pub struct Member {
    release: Arc<Release>,
    id: u64,
    /// `Some` while idle: the key it is filed under. Locked only under the
    /// release's own lock, after it.
    idle_since: Mutex<Option<Instant>>,
    ask: Arc<Ask>,
}

impl Release {
    pub fn new() -> Arc<Self> {
        Self::with_idle_before_close(IDLE_BEFORE_CLOSE)
    }

    fn with_idle_before_close(idle_before_close: Duration) -> Arc<Self> {
        Arc::new(Release {
            state: Mutex::default(),
            next_id: AtomicU64::new(0),
            idle_before_close,
        })
    }

    /// A new connection, idle until its first request.
    pub fn join(self: &Arc<Self>) -> Member {
        let member = Member {
            release: self.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            idle_since: Mutex::new(None),
            ask: Arc::default(),
        };
        member.file_idle(&mut self.lock());
        member
    }

    /// A client waits for a slot. The connection idle longest is asked to
    /// close if it has been idle long enough; otherwise the next answer
    /// closes its connection, and the instant returned is when to ask
    /// again (the one idle longest is then idle long enough), in case no
    /// answer comes first. Asking again is harmless.
    pub fn make_room(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut state = self.lock();
        let oldest = state.idle.first_key_value().map(|(&(since, _), _)| since);
        match oldest {
            Some(since) if now.duration_since(since) >= self.idle_before_close => {
                if let Some((_, ask)) = state.idle.pop_first() {
                    ask.ending.store(true, Ordering::Relaxed);
                    ask.close.notify_one();
                }
                state.wanted = false;
                None
            }
            _ => {
                state.wanted = true;
                oldest.map(|since| since + self.idle_before_close)
            }
        }
    }

    /// The waiting client has its slot (from whichever connection closed):
    /// no more room is wanted for it.
    pub fn room_made(&self) {
        self.lock().wanted = false;
    }

    fn lock(&self) -> MutexGuard<'_, ReleaseState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Member {
    /// A request has begun on this connection (or it has closed): it is no
    /// longer idle.
    pub fn busy(&self) {
        let mut state = self.release.lock();
        let since = self.lock_idle().take();
        if let Some(since) = since {
            state.idle.remove(&(since, self.id));
        }
    }

    /// An answer is ready; `last` when the connection closes after it in
    /// any case. Returns whether the answer must say `connection: close`:
    /// the connection was asked to end, or a waiting client wants room and
    /// this connection makes it. Otherwise it is idle from now.
    pub fn answered(&self, last: bool) -> bool {
        if last {
            self.end();
        }
        if self.ask.ending.load(Ordering::Relaxed) {
            return true;
        }
        let mut state = self.release.lock();
        if state.wanted {
            state.wanted = false;
            self.ask.ending.store(true, Ordering::Relaxed);
            return true;
        }
        self.file_idle(&mut state);
        false
    }

    /// This connection's keep-alive ends for a reason of its own (its
    /// lifetime, shutdown): it is no longer one that could make room.
    pub fn end(&self) {
        self.ask.ending.store(true, Ordering::Relaxed);
        self.busy();
    }

    /// Resolves when this idle connection is asked to close for a waiting
    /// client (a request begun since is answered first, then it closes).
    pub async fn asked_to_close(&self) {
        self.ask.close.notified().await;
    }

    fn file_idle(&self, state: &mut ReleaseState) {
        let since = Instant::now();
        let before = self.lock_idle().replace(since);
        if let Some(before) = before {
            state.idle.remove(&(before, self.id));
        }
        state.idle.insert((since, self.id), self.ask.clone());
    }

    fn lock_idle(&self) -> MutexGuard<'_, Option<Instant>> {
        self.idle_since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.busy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `member` has been asked to close (without waiting).
    async fn asked(member: &Member) -> bool {
        tokio::time::timeout(Duration::from_millis(1), member.asked_to_close())
            .await
            .is_ok()
    }

    /// Short, so the tests wait for it in real time.
    const IDLE: Duration = Duration::from_millis(40);

    fn release() -> Arc<Release> {
        Release::with_idle_before_close(IDLE)
    }

    async fn idle_long_enough() {
        tokio::time::sleep(IDLE).await;
    }

    #[tokio::test]
    async fn the_connection_idle_longest_is_asked_and_no_other() {
        let release = release();
        let oldest = release.join();
        let newer = release.join();
        idle_long_enough().await;
        assert_eq!(release.make_room(), None);
        assert!(asked(&oldest).await);
        assert!(!asked(&newer).await);
        // A request begun on it since is answered with the close.
        oldest.busy();
        assert!(oldest.answered(false));
        // The other keeps its keep-alive.
        newer.busy();
        assert!(!newer.answered(false));
    }

    #[tokio::test]
    async fn a_connection_that_answered_is_idle_from_its_answer() {
        let release = release();
        let first = release.join();
        let second = release.join();
        idle_long_enough().await;
        // The first is used again: the second is now the one idle longest.
        first.busy();
        assert!(!first.answered(false));
        release.make_room();
        assert!(asked(&second).await);
        assert!(!asked(&first).await);
    }

    #[tokio::test]
    async fn a_connection_idle_briefly_is_spared_until_it_has_been_idle_long_enough() {
        let release = release();
        let before = Instant::now();
        let fresh = release.join();
        let ask_again = release.make_room().expect("a time to ask again");
        assert!((before + IDLE..=Instant::now() + IDLE).contains(&ask_again));
        assert!(!asked(&fresh).await, "its request may be unread yet");
        idle_long_enough().await;
        assert_eq!(release.make_room(), None);
        assert!(asked(&fresh).await);
    }

    #[tokio::test]
    async fn with_none_idle_long_enough_the_next_answer_makes_room_and_only_it() {
        let release = release();
        let a = release.join();
        let b = release.join();
        let idle = release.join();
        a.busy();
        b.busy();
        assert!(release.make_room().is_some());
        assert!(a.answered(false), "the next answer closes");
        assert!(!b.answered(false), "one close per waiting client");
        assert!(!asked(&a).await && !asked(&b).await && !asked(&idle).await);
    }

    #[tokio::test]
    async fn nothing_is_wanted_once_the_waiting_client_has_its_slot() {
        let release = release();
        let a = release.join();
        a.busy();
        assert_eq!(release.make_room(), None);
        release.room_made();
        assert!(!a.answered(false));
    }

    #[tokio::test]
    async fn connections_that_end_or_close_are_never_asked() {
        let release = release();
        let ended = release.join();
        let dropped = release.join();
        let open = release.join();
        ended.end();
        drop(dropped);
        idle_long_enough().await;
        release.make_room();
        assert!(asked(&open).await);
        assert!(!asked(&ended).await);
        // An ended connection's answers all close; a last answer too.
        ended.busy();
        assert!(ended.answered(false));
        let last = release.join();
        last.busy();
        assert!(last.answered(true));
        assert!(release.lock().idle.is_empty());
    }
}
