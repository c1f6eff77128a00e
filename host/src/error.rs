//! Typed errors: loading a guest, and faults of a call.

use std::path::PathBuf;
use std::time::Duration;

/// Why a guest could not be loaded. Every variant is fatal at start-up.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the policy guest {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the policy guest {name} is not a valid WebAssembly component: {reason}")]
    NotAComponent { name: String, reason: String },
    #[error("the policy guest {name} does not implement the `warden:policy` world: {}", missing.join("; "))]
    WorldMismatch { name: String, missing: Vec<String> },
    #[error("the policy guest {name} cannot be linked: {reason}")]
    Link { name: String, reason: String },
    #[error("the sandbox engine could not be created: {0}")]
    Engine(String),
}

/// Why a call produced no verdict. The instance involved is discarded for
/// every variant but `InputTooLarge` and `Unavailable` (which never enter a
/// guest); the next call gets a fresh instance.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the policy guest ran past its deadline of {0:?}")]
    Deadline(Duration),
    /// Only from a handle made by `Sandbox::within`: the call ran past the
    /// caller's short budget and was stopped; run it again with the full
    /// deadline for its answer.
    #[error("the policy guest ran past the call's budget of {0:?}")]
    OverBudget(Duration),
    #[error("the policy guest exceeded its memory limit of {limit} bytes")]
    MemoryLimit { limit: usize },
    #[error("the policy guest exceeded its table limit of {limit} elements")]
    TableLimit { limit: usize },
    #[error("the policy guest trapped: {0}")]
    Trap(String),
    #[error("the policy guest returned {size} bytes; at most {limit} are accepted")]
    OutputTooLarge { size: usize, limit: usize },
    #[error("the policy guest broke the world's contract: {0}")]
    Contract(String),
    #[error("{what} is {size} bytes; at most {limit} are accepted")]
    InputTooLarge {
        what: &'static str,
        size: usize,
        limit: usize,
    },
    #[error("no sandbox instance is available: {0}")]
    Unavailable(String),
}

impl SandboxError {
    /// A stable code for logs and metrics (the API maps every sandbox fault
    /// to a 5xx; `InputTooLarge` to 413).
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::Deadline(_) => "GUEST_DEADLINE",
            SandboxError::OverBudget(_) => "GUEST_OVER_BUDGET",
            SandboxError::MemoryLimit { .. } => "GUEST_MEMORY_LIMIT",
            SandboxError::TableLimit { .. } => "GUEST_TABLE_LIMIT",
            SandboxError::Trap(_) => "GUEST_TRAP",
            SandboxError::OutputTooLarge { .. } => "GUEST_OUTPUT_TOO_LARGE",
            SandboxError::Contract(_) => "GUEST_CONTRACT",
            SandboxError::InputTooLarge { .. } => "INPUT_TOO_LARGE",
            SandboxError::Unavailable(_) => "SANDBOX_UNAVAILABLE",
        }
    }

    /// True when a guest misbehaved (as opposed to input refused up front).
    pub fn is_guest_fault(&self) -> bool {
        !matches!(
            self,
            SandboxError::InputTooLarge { .. } | SandboxError::Unavailable(_)
        )
    }
}
