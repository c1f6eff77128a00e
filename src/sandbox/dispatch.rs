//! Where a hot guest call runs: on the thread that asks for it under
//! [`INLINE_BUDGET`] when it is short, on the blocking pool otherwise (and
//! again there when the short run overran, its schema then remembered as
//! slow); and the one place every guest call is observed (metric, span).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use warden_host::{Sandbox, SandboxError, Violation};

use super::PolicySandbox;

/// How long a guest call may run on the thread that asks for it before it
/// is stopped and run again on the blocking pool. A warm call with a small
/// input takes 10–100 µs; the epoch tick (2 ms) rounds this up, so a
/// runtime thread is held at most 4 ms by a call that turns out slow (a
/// pattern batch, which asks nothing more once its budget is spent, at
/// most about 6 ms).
pub(super) const INLINE_BUDGET: Duration = Duration::from_millis(2);

/// The CPU time an overrun call must use for its schema to be remembered
/// as slow: a quarter of the budget. The budget is kept by wall-clock
/// epoch ticks, so a call is also stopped when its thread waited for a
/// CPU (cores shared by more runnable threads, under load); a warm call
/// that was uses its 10–100 µs. The argument and output calls judge by
/// their retry on the pool, which runs to its end (a slow schema's uses
/// far more); a pattern batch by the stopped inline call, which a slow
/// schema's reaches unless its thread had less than a quarter of a CPU
/// meanwhile (then it is asked again on the pool, and tried inline again
/// next time).
const SLOW_CALL_CPU: Duration = Duration::from_micros(500);

/// Inputs (schema text, arguments, endpoint result, candidates) larger than
/// this go to the blocking pool at once: their call is not short.
pub(super) const INLINE_INPUT_BYTES: usize = 16 << 10;

/// Schemas whose calls overran [`INLINE_BUDGET`]: (account scope, schema
/// key). Their calls go to the blocking pool without trying inline first.
/// Bounded: cleared whole when full (a cleared schema costs one budget more).
#[derive(Default)]
pub(super) struct SlowSchemas {
    /// Account scope → its slow schema keys: looked up by `&str`, so the
    /// check on every hot call allocates nothing once some schema is slow.
    by_scope: HashMap<String, std::collections::HashSet<String>>,
    count: usize,
}

/// Schemas remembered as slow at most, over all accounts.
const SLOW_SCHEMAS: usize = 10_000;

impl SlowSchemas {
    pub(super) fn contains(&self, scope: &str, schema_key: &str) -> bool {
        self.by_scope
            .get(scope)
            .is_some_and(|keys| keys.contains(schema_key))
    }

    pub(super) fn insert(&mut self, scope: &str, schema_key: &str) {
        if self.count >= SLOW_SCHEMAS {
            self.by_scope.clear();
            self.count = 0;
        }
        if self
            .by_scope
            .entry(scope.to_owned())
            .or_default()
            .insert(schema_key.to_owned())
        {
            self.count += 1;
        }
    }
}

impl PolicySandbox {
    /// One hot guest call on `scope` and the schema `schema_key`: where it
    /// is asked, under [`INLINE_BUDGET`], when its inputs are `short` and
    /// the schema is not known to be slow; on the blocking pool otherwise,
    /// and again there (with the full deadline) when the short run overran.
    pub(super) async fn run_short_or_blocking<T: GuestAnswer + Send + 'static>(
        &self,
        export: &'static str,
        short: bool,
        scope: String,
        schema_key: String,
        call: impl Fn(&Sandbox, &str, &str) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        let mut overran = false;
        if short && !self.is_slow(&scope, &schema_key) {
            let span = guest_span(export);
            let started = Instant::now();
            match call(&self.inline, &scope, &schema_key) {
                Err(SandboxError::OverBudget(_)) => {
                    drop(span);
                    overran = true;
                }
                answer => {
                    drop(span);
                    observe_guest_call(export, started, &answer);
                    return answer;
                }
            }
        }
        let sandbox = self.sandbox.clone();
        // After an overrun, the same call again to its end: the CPU it uses
        // on the pool's thread says whether the schema is slow or the
        // inline attempt's thread only waited for a CPU (the thread's clock
        // is read on this rare path only: a system call, ~1 % of a contract
        // test).
        let judge = overran.then(|| self.slow.clone());
        run_blocking(export, move || {
            let timed = judge.map(|slow| (slow, ThreadCpu::start()));
            let answer = call(&sandbox, &scope, &schema_key);
            if let Some((slow, cpu)) = timed {
                judge_overrun(&slow, export, &scope, &schema_key, cpu.used());
            }
            answer
        })
        .await
    }

    pub(super) fn is_slow(&self, scope: &str, schema_key: &str) -> bool {
        self.slow
            .lock()
            .map(|slow| slow.contains(scope, schema_key))
            .unwrap_or(true)
    }
}

/// A call on `schema_key` overran [`INLINE_BUDGET`] by the wall clock; it
/// used `cpu` of its thread's CPU (the inline attempt's, or the whole retry's
/// on the pool). Its schema is remembered as slow when that reached
/// [`SLOW_CALL_CPU`] (or the thread's clock cannot tell), not when the
/// inline attempt's thread was only waiting for a CPU meanwhile.
pub(super) fn judge_overrun(
    slow: &Mutex<SlowSchemas>,
    export: &'static str,
    scope: &str,
    schema_key: &str,
    cpu: Option<Duration>,
) {
    if cpu.is_some_and(|used| used < SLOW_CALL_CPU) {
        tracing::debug!(export, schema_key, budget = ?INLINE_BUDGET, ?cpu,
            "a guest call was stopped at its inline budget while its thread waited for a CPU; \
             its schema not remembered as slow");
        return;
    }
    tracing::debug!(export, schema_key, budget = ?INLINE_BUDGET, ?cpu,
        "a guest call overran its inline budget; its schema now goes to the blocking pool");
    if let Ok(mut slow) = slow.lock() {
        slow.insert(scope, schema_key);
    }
}

/// The CPU time the calling thread had used when a call began
/// (`CLOCK_THREAD_CPUTIME_ID`; one system call, not in the vDSO).
pub(super) struct ThreadCpu(Option<Duration>);

impl ThreadCpu {
    pub(super) fn start() -> ThreadCpu {
        ThreadCpu(thread_cpu_time())
    }

    /// The CPU time this thread has used since [`Self::start`], on the same
    /// thread; `None` when its clock cannot be read.
    pub(super) fn used(&self) -> Option<Duration> {
        Some(thread_cpu_time()?.saturating_sub(self.0?))
    }
}

#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's duration.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    (read == 0).then(|| {
        Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        )
    })
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// One guest call on the blocking pool.
pub(super) async fn run_blocking<T: GuestAnswer + Send + 'static>(
    export: &'static str,
    call: impl FnOnce() -> Result<T, SandboxError> + Send + 'static,
) -> Result<T, SandboxError> {
    let span = guest_span(export);
    let started = Instant::now();
    let answer = tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|join| {
            Err(SandboxError::Unavailable(format!(
                "sandbox call panicked: {join}"
            )))
        });
    drop(span);
    observe_guest_call(export, started, &answer);
    answer
}

/// The one place a guest call's answer is counted
/// (`warden_guest_calls_total` and its duration), wherever it ran.
pub(super) fn observe_guest_call<T: GuestAnswer>(
    export: &'static str,
    started: Instant,
    answer: &Result<T, SandboxError>,
) {
    let outcome = match answer {
        Ok(answer) if answer.refused() => "refused",
        Ok(_) => "ok",
        Err(err) => guest_fault(err),
    };
    crate::metrics::guest_call(export, outcome, started.elapsed());
}

/// The span of one guest call, named by its export: a leaf of the trace.
pub(super) fn guest_span(export: &'static str) -> crate::trace_context::Leaf {
    crate::trace_context::Leaf::start(opentelemetry::trace::SpanKind::Internal, || {
        (
            export.into(),
            vec![opentelemetry::KeyValue::new("warden.guest.export", export)],
        )
    })
}

/// A guest fault as the guest-call metric's outcome.
pub(super) fn guest_fault(err: &SandboxError) -> &'static str {
    match err {
        SandboxError::Deadline(_) => "deadline",
        SandboxError::MemoryLimit { .. } | SandboxError::TableLimit { .. } => "memory",
        SandboxError::Trap(_) => "trap",
        _ => "fault",
    }
}

/// Whether a guest's answer refused its input (violations found).
pub(super) trait GuestAnswer {
    fn refused(&self) -> bool;
}

impl GuestAnswer for Vec<Violation> {
    fn refused(&self) -> bool {
        !self.is_empty()
    }
}

impl<T> GuestAnswer for Result<T, Vec<Violation>> {
    fn refused(&self) -> bool {
        self.is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slow_set_is_bounded() {
        let mut slow = SlowSchemas::default();
        for i in 0..SLOW_SCHEMAS + 5 {
            slow.insert("acct_1", &format!("cap_{i}@1/input"));
        }
        assert!(slow.count <= SLOW_SCHEMAS);
        assert!(slow.contains("acct_1", &format!("cap_{}@1/input", SLOW_SCHEMAS + 4)));
    }
}
