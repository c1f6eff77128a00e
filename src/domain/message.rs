//! Messages of a conversation (contract 2.1, 2.2).

use super::closed_set::closed_set;

closed_set! {
    /// Who wrote a message: the end user, or the assistant answering. One
    /// type for storage, history given to planners and the response.
    pub enum MessageRole {
        User = "user",
        Assistant = "assistant",
    }
}
