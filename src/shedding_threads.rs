//! Where admitted work runs past capacity: on runtime threads of its own,
//! so that the threads which read requests, refuse the excess and write
//! answers never queue behind it.
//!
//! Past capacity every runtime thread is busy with admitted requests (their
//! SQLite statements and short guest calls run on the thread that asks,
//! `store::direct`, `sandbox::dispatch`). A refusal costs ~25 µs, but the
//! connection task that decides it waited its turn behind every admitted
//! task ready on the same threads: on two cores the refusals' p99 was
//! 11–26 ms on SQLite (docs/benchmarks.md, "Past capacity"). A request
//! admitted past capacity (no place among those doing local work was free
//! when it came, or the server was shedding: `local_work`) is spawned here
//! instead; the server's own runtime then holds mostly connections, whose
//! polls are short, and its threads, mostly asleep, are run by the kernel
//! soon after a request arrives (a thread that slept is owed CPU time, one
//! that ran is not). Below capacity nothing changes: a request runs on the
//! thread that read it, with no hand-off between threads.
//!
//! The runtime is made when the server starts ([`start`]; on first use
//! otherwise), not when the load comes, and lives as long as the process
//! (its threads sleep when there is nothing to do). It has as many threads
//! as the machine has cores, each with the stack of the server's own
//! ([`RUNTIME_THREAD_STACK`]).

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// The stack of each runtime thread, here and in the server's runtime.
/// Short guest calls run on the thread that asks (`src/sandbox/`) and may
/// use the sandbox's whole 1 MiB wasm stack below the request's own frames;
/// 4 MiB keeps at least the margin a fresh blocking-pool thread of tokio's
/// default 2 MiB had.
pub const RUNTIME_THREAD_STACK: usize = 4 << 20;

/// The runtime work admitted past capacity runs on; `None` when it could
/// not be made (the work then stays where it is).
static SHEDDING: OnceLock<Option<Runtime>> = OnceLock::new();

/// Spawns `work` on the shedding threads when it came `past_capacity`, on
/// the current runtime otherwise (or when the shedding threads could not
/// be made).
pub fn spawn<F>(past_capacity: bool, work: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match past_capacity.then(runtime).flatten() {
        Some(threads) => threads.spawn(work),
        None => tokio::spawn(work),
    }
}

/// Makes the shedding threads now, so that the first overload does not
/// wait for them.
pub fn start() {
    runtime();
}

/// The shedding threads' runtime, made on first use.
fn runtime() -> Option<&'static Runtime> {
    SHEDDING
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
            match Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("warden-shedding")
                .thread_stack_size(RUNTIME_THREAD_STACK)
                .enable_all()
                .build()
            {
                Ok(runtime) => {
                    tracing::debug!(threads, "threads for work admitted past capacity started");
                    Some(runtime)
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot start the shedding threads; admitted requests stay on the server's");
                    None
                }
            }
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shedding_work_runs_on_threads_of_its_own() {
        let name = || std::thread::current().name().map(str::to_owned);
        let here = name();
        let shed = spawn(true, async move { name() }).await.unwrap();
        assert_eq!(shed.as_deref(), Some("warden-shedding"));
        let kept = spawn(false, async move { name() }).await.unwrap();
        assert_eq!(kept, here);
    }
}
