//! Instances: scoped to one account, reused within bounds, discarded on any
//! fault. Also the epoch ticker that enforces deadlines.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use wasmtime::{Engine, ResourceLimiter, Store, Trap};

use crate::bindings::{Guest, GuestPre};
use crate::config::SandboxConfig;
use crate::error::SandboxError;

/// Which limit a store hit during the current call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitHit {
    Memory,
    Table,
}

/// Per-store limiter: refuses growth past the configured limits and records
/// that it did, so the fault is reported precisely.
pub(crate) struct Limiter {
    memory_limit: usize,
    table_elements: usize,
    pub hit: Option<LimitHit>,
    /// Largest linear memory size granted so far (memories never shrink).
    pub memory_size: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.hit = Some(LimitHit::Memory);
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        self.memory_size = self.memory_size.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.hit = Some(LimitHit::Table);
            return Err(wasmtime::Error::msg("table limit exceeded"));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        32
    }
    fn tables(&self) -> usize {
        16
    }
    fn memories(&self) -> usize {
        4
    }
}

/// The data of every store: only the limiter. A guest can reach nothing else.
pub(crate) struct StoreState {
    pub limiter: Limiter,
}

/// One live guest instance, owned by one account.
pub(crate) struct Live {
    pub store: Store<StoreState>,
    pub guest: Guest,
    pub calls: u32,
    pub id: u64,
}

#[derive(Default)]
struct Idle {
    by_account: HashMap<String, (u64, Vec<Live>)>,
    total: usize,
    clock: u64,
}

/// Counters, for tests, metrics and the benchmark.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PoolStats {
    /// Instances created since start.
    pub instantiated: u64,
    /// Instances dropped after a fault (never reused).
    pub discarded_after_fault: u64,
    /// Instances dropped after `max_calls_per_instance` calls, or because
    /// their memory grew past `max_idle_memory`.
    pub recycled: u64,
    /// Instances currently idle.
    pub idle: usize,
}

pub(crate) struct Pool {
    engine: Engine,
    pre: GuestPre<StoreState>,
    config: SandboxConfig,
    idle: Mutex<Idle>,
    next_id: AtomicU64,
    instantiated: AtomicU64,
    discarded: AtomicU64,
    recycled: AtomicU64,
    ticker_stop: Arc<AtomicBool>,
}

/// Where a call is stopped by epoch interruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallStop {
    /// The configured deadline: an interruption is [`SandboxError::Deadline`].
    Deadline,
    /// A caller's shorter budget: an interruption is
    /// [`SandboxError::OverBudget`] (see `Sandbox::within`).
    Budget(Duration),
}

/// A fault inside a call: a wasmtime error, or an output the host refuses.
pub(crate) enum Fault {
    Wasm(wasmtime::Error),
    Refused(SandboxError),
}

impl From<wasmtime::Error> for Fault {
    fn from(e: wasmtime::Error) -> Self {
        Fault::Wasm(e)
    }
}

impl Pool {
    pub fn new(engine: Engine, pre: GuestPre<StoreState>, config: SandboxConfig) -> Pool {
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), config.epoch_tick, ticker_stop.clone());
        Pool {
            engine,
            pre,
            config,
            idle: Mutex::new(Idle::default()),
            next_id: AtomicU64::new(1),
            instantiated: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            recycled: AtomicU64::new(0),
            ticker_stop,
        }
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            instantiated: self.instantiated.load(Ordering::Relaxed),
            discarded_after_fault: self.discarded.load(Ordering::Relaxed),
            recycled: self.recycled.load(Ordering::Relaxed),
            idle: self.idle.lock().map(|i| i.total).unwrap_or(0),
        }
    }

    /// Runs `f` on an instance of `account`: an idle one of the same account
    /// or a new one. On success the instance goes back to the account's idle
    /// list (unless it has served its quota); on any fault it is dropped.
    pub fn call<R>(
        &self,
        account: &str,
        stop: CallStop,
        f: impl FnOnce(&mut Store<StoreState>, &Guest) -> Result<R, Fault>,
    ) -> Result<R, SandboxError> {
        let ticks = match stop {
            CallStop::Deadline => self.config.deadline_ticks(),
            CallStop::Budget(budget) => self.config.budget_ticks(budget),
        };
        let mut live = match self.checkout(account) {
            Some(l) => l,
            None => self.instantiate(ticks).map_err(|e| stopped(e, stop))?,
        };
        live.store.data_mut().limiter.hit = None;
        live.store.set_epoch_deadline(ticks);
        let result = f(&mut live.store, &live.guest);
        match result {
            Ok(v) => {
                live.calls += 1;
                // An instance that served its quota, or whose memory grew
                // past what an idle instance may hold, is not kept.
                if live.calls >= self.config.max_calls_per_instance
                    || live.store.data().limiter.memory_size > self.config.max_idle_memory
                {
                    self.recycled.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.checkin(account, live);
                }
                Ok(v)
            }
            Err(fault) => {
                // Never reused: a trapped instance may be in any state.
                self.discarded.fetch_add(1, Ordering::Relaxed);
                let err = match fault {
                    Fault::Refused(e) => e,
                    Fault::Wasm(e) => {
                        stopped(self.classify(e, live.store.data().limiter.hit), stop)
                    }
                };
                drop(live);
                Err(err)
            }
        }
    }

    fn classify(&self, e: wasmtime::Error, hit: Option<LimitHit>) -> SandboxError {
        match hit {
            Some(LimitHit::Memory) => {
                return SandboxError::MemoryLimit {
                    limit: self.config.memory_limit,
                };
            }
            Some(LimitHit::Table) => {
                return SandboxError::TableLimit {
                    limit: self.config.table_elements,
                };
            }
            None => {}
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => SandboxError::Deadline(self.config.deadline),
            Some(trap) => SandboxError::Trap(trap.to_string()),
            None => {
                // The root cause names what failed (e.g. the import a guest
                // called); the wasm backtrace follows in the chain.
                let mut s = format!("{}", e.root_cause());
                s.truncate(s.char_indices().nth(500).map(|(i, _)| i).unwrap_or(s.len()));
                SandboxError::Trap(s)
            }
        }
    }

    /// A new instance; its start functions run within `ticks`.
    fn instantiate(&self, ticks: u64) -> Result<Live, SandboxError> {
        let mut attempt = 0;
        loop {
            let mut store = Store::new(
                &self.engine,
                StoreState {
                    limiter: Limiter {
                        memory_limit: self.config.memory_limit,
                        table_elements: self.config.table_elements,
                        hit: None,
                        memory_size: 0,
                    },
                },
            );
            store.limiter(|s| &mut s.limiter);
            // Instantiation runs the guest's start functions: bound it too.
            store.set_epoch_deadline(ticks);
            match self.pre.instantiate(&mut store) {
                Ok(guest) => {
                    self.instantiated.fetch_add(1, Ordering::Relaxed);
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    return Ok(Live {
                        store,
                        guest,
                        calls: 0,
                        id,
                    });
                }
                Err(e) if attempt == 0 && self.evict_one() => {
                    // The pool was full of idle instances of other accounts.
                    let _ = e;
                    attempt += 1;
                }
                Err(e) => {
                    let hit = store.data().limiter.hit;
                    return Err(match self.classify(e, hit) {
                        SandboxError::Trap(msg) => SandboxError::Unavailable(msg),
                        other => other,
                    });
                }
            }
        }
    }

    fn checkout(&self, account: &str) -> Option<Live> {
        let mut idle = self.idle.lock().ok()?;
        let (_, list) = idle.by_account.get_mut(account)?;
        let live = list.pop()?;
        // The account's entry stays, even empty: the instance usually comes
        // back at once (`checkin`), and keeping the entry spares a removal,
        // a key allocation and an insertion per call. Empty entries are
        // swept when new accounts arrive (`checkin`).
        idle.total -= 1;
        Some(live)
    }

    fn checkin(&self, account: &str, live: Live) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        idle.clock += 1;
        let clock = idle.clock;
        // No allocation on the hot path: the account's entry usually exists.
        if !idle.by_account.contains_key(account) {
            // Bound the entries kept empty by `checkout` (amortised: a
            // sweep at most every `max_idle_total` new accounts).
            if idle.by_account.len() >= 2 * self.config.max_idle_total.max(1) {
                idle.by_account.retain(|_, (_, list)| !list.is_empty());
            }
            idle.by_account
                .insert(account.to_string(), (clock, Vec::new()));
        }
        let Some(entry) = idle.by_account.get_mut(account) else {
            return;
        };
        entry.0 = clock;
        if entry.1.len() >= self.config.max_idle_per_account {
            return; // dropped: enough idle instances for this account
        }
        entry.1.push(live);
        idle.total += 1;
        while idle.total > self.config.max_idle_total {
            if !evict_lru(&mut idle) {
                break;
            }
        }
    }

    fn evict_one(&self) -> bool {
        self.idle
            .lock()
            .map(|mut i| evict_lru(&mut i))
            .unwrap_or(false)
    }

    /// Drops the idle instances of `account`.
    pub fn forget(&self, account: &str) {
        if let Ok(mut idle) = self.idle.lock() {
            if let Some((_, list)) = idle.by_account.remove(account) {
                idle.total -= list.len();
            }
        }
    }

    /// The id of the instance an account's next call would reuse (tests).
    pub fn idle_ids(&self, account: &str) -> Vec<u64> {
        self.idle
            .lock()
            .map(|i| {
                i.by_account
                    .get(account)
                    .map(|(_, l)| l.iter().map(|x| x.id).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }
}

/// An interruption as the caller asked for it: past a short budget it is
/// [`SandboxError::OverBudget`], not the deadline.
fn stopped(err: SandboxError, stop: CallStop) -> SandboxError {
    match (err, stop) {
        (SandboxError::Deadline(_), CallStop::Budget(budget)) => SandboxError::OverBudget(budget),
        (err, _) => err,
    }
}

fn evict_lru(idle: &mut Idle) -> bool {
    let Some(account) = idle
        .by_account
        .iter()
        .filter(|(_, (_, list))| !list.is_empty())
        .min_by_key(|(_, (t, _))| *t)
        .map(|(k, _)| k.clone())
    else {
        return false;
    };
    if let Some((_, list)) = idle.by_account.get_mut(&account) {
        if list.pop().is_some() {
            idle.total -= 1;
        }
        if list.is_empty() {
            idle.by_account.remove(&account);
        }
    }
    true
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// Advances the engine's epoch every `tick`; a call whose deadline passes
/// traps with `Trap::Interrupt` at its next loop header or function entry.
fn spawn_ticker(engine: Engine, tick: Duration, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("warden-sandbox-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                engine.increment_epoch();
            }
        })
        .expect("spawn the sandbox epoch thread");
}
