//! Limits and the wasmtime engine configuration.

use std::path::PathBuf;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

/// Every limit of the sandbox. The defaults are the values documented in
/// `docs/sandbox.md`; change them only with that document.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Wall-clock budget of one guest call (epoch interruption).
    pub deadline: Duration,
    /// Granularity of the deadline: the epoch ticker's period.
    pub epoch_tick: Duration,
    /// Linear memory of one instance, bytes (all of its memories together).
    pub memory_limit: usize,
    /// Elements of one table.
    pub table_elements: usize,
    /// Wasm stack of one call, bytes.
    pub max_wasm_stack: usize,
    /// Calls an instance serves before it is recycled.
    pub max_calls_per_instance: u32,
    /// An instance whose linear memory grew past this is dropped after its
    /// call instead of being kept idle (memory never shrinks).
    pub max_idle_memory: usize,
    /// Idle instances kept per account.
    pub max_idle_per_account: usize,
    /// Idle instances kept in all (least recently used accounts go first).
    pub max_idle_total: usize,
    /// Component instances alive at once (idle plus in a call): the size of
    /// the pooling allocator.
    pub max_instances: u32,
    /// Largest text passed in: definitions and endpoint results.
    pub max_document_bytes: usize,
    /// Largest schema text and argument text passed in.
    pub max_schema_bytes: usize,
    /// Largest total of strings a guest may return from one call.
    pub max_output_bytes: usize,
    /// Most candidate strings in one `match-pattern` call (their total size
    /// is bounded by `max_schema_bytes`).
    pub max_candidates: usize,
    /// Where compiled guests are cached; `None` compiles at every start. A
    /// cached file is native code the process will run: a directory not
    /// owned by the service's user, or writable by group or others, is not
    /// used at all, and every entry is verified before it is loaded (see
    /// `cache.rs` and `docs/sandbox.md`). Created with mode 0700 if missing.
    pub cache_dir: Option<PathBuf>,
    /// Address space reserved for each linear memory, bytes; `None` keeps
    /// wasmtime's default (4 GiB and guard pages, so compiled code needs no
    /// bounds checks: the pool reserves about a terabyte of virtual address
    /// space, none of it memory). A smaller reservation (at least
    /// `memory_limit`) compiles bounds checks in, for processes whose
    /// address space is bounded (`ulimit -v`, valgrind).
    pub memory_reservation: Option<u64>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            deadline: Duration::from_millis(50),
            epoch_tick: Duration::from_millis(2),
            memory_limit: 64 << 20,
            table_elements: 20_000,
            max_wasm_stack: 1 << 20,
            max_calls_per_instance: 10_000,
            max_idle_memory: 16 << 20,
            max_idle_per_account: 2,
            max_idle_total: 64,
            max_instances: 128,
            max_document_bytes: 2 << 20,
            max_schema_bytes: 256 << 10,
            max_output_bytes: 2 << 20,
            max_candidates: 1024,
            cache_dir: None,
            memory_reservation: None,
        }
    }
}

/// Guard pages after each linear memory when its reservation is bounded.
const GUARD_WITH_SMALL_RESERVATION: u64 = 64 << 10;

impl SandboxConfig {
    /// Epoch ticks from the start of a call to its deadline (at least 1).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        let tick = self.epoch_tick.as_nanos().max(1);
        (self.deadline.as_nanos().div_ceil(tick) as u64).max(1)
    }

    /// Epoch ticks for a caller's budget: one more than the budget rounds
    /// up to, since a call starts anywhere within a tick (so a call shorter
    /// than `budget` is never stopped), and never past the deadline.
    pub(crate) fn budget_ticks(&self, budget: Duration) -> u64 {
        let tick = self.epoch_tick.as_nanos().max(1);
        (budget.as_nanos().div_ceil(tick) as u64 + 1).min(self.deadline_ticks())
    }

    /// The engine every guest of this sandbox runs on.
    pub(crate) fn engine(&self) -> wasmtime::Result<Engine> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(self.max_instances)
            // A Rust wasm32-wasip2 component is a handful of core modules
            // (the program, adapter shims); leave room for small variations.
            .max_core_instances_per_component(32)
            .total_core_instances(self.max_instances * 32)
            .max_memories_per_component(4)
            .total_memories(self.max_instances * 2)
            .max_tables_per_component(16)
            .total_tables(self.max_instances * 8)
            .table_elements(self.table_elements)
            .max_memory_size(self.memory_limit);
        let mut cfg = Config::new();
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .epoch_interruption(true)
            .consume_fuel(false)
            .max_wasm_stack(self.max_wasm_stack)
            .cranelift_opt_level(OptLevel::Speed)
            // GC, threads, stack switching and async components are not
            // compiled into this build of wasmtime at all (Cargo features).
            .wasm_component_model(true)
            .parallel_compilation(true);
        if let Some(reservation) = self.memory_reservation {
            cfg.memory_reservation(reservation.max(self.memory_limit as u64))
                // Small guards: the reservation itself is what is bounded.
                .memory_guard_size(GUARD_WITH_SMALL_RESERVATION)
                .memory_reservation_for_growth(0);
        }
        Engine::new(&cfg)
    }
}
