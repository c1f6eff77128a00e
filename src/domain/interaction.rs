//! Interactions (contract 2.3, 2.11): a host interaction stays `pending`
//! until the host reports one terminal status for it.

use super::closed_set::closed_set;

closed_set! {
    /// The kind of an interaction the service issues (its `type`): a
    /// confirmation of one prepared operation, or a selection among several.
    pub enum InteractionType {
        ConfirmOperation = "confirm_operation",
        Selection = "selection",
    }
}

closed_set! {
    /// An interaction's state: `pending`, then one terminal status.
    pub enum InteractionStatus {
        Pending = "pending",
        Succeeded = "succeeded",
        Failed = "failed",
        Cancelled = "cancelled",
        Rejected = "rejected",
        Expired = "expired",
    }
}

impl InteractionStatus {
    /// A status a host may report (every one but `pending`).
    pub fn parse_terminal(text: &str) -> Option<Self> {
        Self::parse(text).filter(|s| *s != InteractionStatus::Pending)
    }

    /// The statuses a host may report, for error messages.
    pub fn terminal() -> impl Iterator<Item = Self> {
        Self::ALL
            .iter()
            .copied()
            .filter(|s| *s != InteractionStatus::Pending)
    }
}
