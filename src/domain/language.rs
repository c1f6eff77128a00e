//! The languages the engine writes its own texts in.

use super::closed_set::closed_set;

closed_set! {
    /// Spanish (the platform default) or English; stored with a conversation
    /// by its first message with text and kept for every fixed text of its
    /// later turns.
    pub enum Language {
        Spanish = "es",
        English = "en",
    }
}
