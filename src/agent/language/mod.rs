//! The language room: how the agent reads what users write and says what
//! it answers, in Spanish and English.
//!
//! - `words`: folded words (lowercase, accents removed), stopwords;
//! - `clauses`: the clauses the engine recognises itself (exclusion,
//!   `cancelar`, operation intent, yes and no, thanks, greetings);
//! - `sentences`: sentences, clauses and the focus of a message;
//! - `lexicon`: the domain's words by concept in both languages;
//! - `detect`: which language a text is in;
//! - `texts`: the fixed replies.
//!
//! [`Said`] is a message read once: its words are taken when it is made,
//! and whatever is derived from them (clauses, concepts, focus) the first
//! time a stage asks, so a turn tokenises its message once.

pub mod clauses;
pub mod detect;
pub mod lexicon;
pub mod sentences;
pub mod texts;
pub mod words;

use std::sync::OnceLock;

pub use crate::domain::language::Language;
pub use clauses::{asks_something, is_interrogative, without_lead_in};
pub use words::{fold, has_phrase, is_stopword, words};

/// A message as the agent reads it (see the module doc).
pub struct Said {
    text: String,
    words: Vec<String>,
    exclusion: OnceLock<bool>,
    intent: OnceLock<bool>,
    operations: OnceLock<Vec<&'static str>>,
    focus: OnceLock<Vec<Focus>>,
}

/// One part of a message a planner selects for (`sentences::focus`), with
/// its words and their keys taken once.
pub struct Focus {
    pub text: String,
    /// Folded words.
    pub words: Vec<String>,
    /// Content words as `(key, word)` (`lexicon::content_words`).
    pub content: Vec<(String, String)>,
    /// The lexicon's concepts of its words.
    pub concepts: Vec<&'static lexicon::Concept>,
}

impl Focus {
    fn of(text: &str, words: Vec<String>) -> Self {
        Focus {
            text: text.to_owned(),
            content: lexicon::content_words(&words),
            concepts: lexicon::concepts_of(&words),
            words,
        }
    }
}

impl Said {
    pub fn new(text: &str) -> Self {
        Said {
            text: text.to_owned(),
            words: words(text),
            exclusion: OnceLock::new(),
            intent: OnceLock::new(),
            operations: OnceLock::new(),
            focus: OnceLock::new(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its folded words.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// No text at all (an image sent alone).
    pub fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// The language it is written in ([`Language::of`]).
    pub fn language(&self) -> Language {
        Language::of_words(&self.text, &self.words)
    }

    /// Rule 13: it asks the service not to consult its systems.
    pub fn has_exclusion_clause(&self) -> bool {
        *self
            .exclusion
            .get_or_init(|| clauses::has_exclusion_clause(&self.words))
    }

    /// Rule 12: it says `cancelar`.
    pub fn is_cancel(&self) -> bool {
        clauses::is_cancel(&self.words)
    }

    /// Thanks or a goodbye, and nothing else.
    pub fn is_closing(&self) -> bool {
        clauses::is_closing(&self.words)
    }

    pub fn is_yes(&self) -> bool {
        clauses::is_yes(&self.words)
    }

    pub fn is_no(&self) -> bool {
        clauses::is_no(&self.words)
    }

    /// "no, el otro", "the other one".
    pub fn refers_to_other(&self) -> bool {
        clauses::refers_to_other(&self.words)
    }

    /// A new question or request rather than a bare value.
    pub fn asks_something(&self) -> bool {
        clauses::asks_something_in(&self.text, &self.words)
    }

    pub fn is_greeting(&self) -> bool {
        clauses::is_greeting(&self.words)
    }

    pub fn is_only_greeting(&self) -> bool {
        clauses::is_only_greeting(&self.words)
    }

    /// Rule 8: it asks for an operation to be done.
    pub fn has_operation_intent(&self) -> bool {
        *self
            .intent
            .get_or_init(|| clauses::has_operation_intent(&self.words))
    }

    /// The operations (lexicon concepts) it names: "devolver", "cancel".
    pub fn asked_operations(&self) -> &[&'static str] {
        self.operations.get_or_init(|| {
            lexicon::concepts_of(&self.words)
                .into_iter()
                .filter(|c| c.operation)
                .map(|c| c.key)
                .collect()
        })
    }

    /// The parts of it to select a capability for, most telling first; the
    /// whole message last (`sentences::focus`).
    pub fn focus(&self) -> &[Focus] {
        self.focus.get_or_init(|| {
            sentences::focus(&self.text)
                .into_iter()
                .map(|part| {
                    // The whole message is the one part already tokenised.
                    let words = if std::ptr::eq(part, self.text.as_str()) {
                        self.words.clone()
                    } else {
                        words(part)
                    };
                    Focus::of(part, words)
                })
                .collect()
        })
    }

    /// The whole message as a focus (the last of [`Said::focus`]).
    pub fn whole(&self) -> &Focus {
        self.focus()
            .last()
            .expect("the focus always ends with the whole message")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusion_clauses_in_both_languages() {
        for yes in [
            "¿Dónde está mi pedido A-1? No uses ninguna herramienta.",
            "Respóndeme sin consultar el sistema",
            "Don't use the orders tool, just tell me",
            "where is my order? do not call any capability",
            "answer without using tools",
        ] {
            assert!(Said::new(yes).has_exclusion_clause(), "{yes}");
        }
        for no in [
            "¿Dónde está mi pedido?",
            "I use the app daily",
            "No, gracias",
        ] {
            assert!(!Said::new(no).has_exclusion_clause(), "{no}");
        }
    }

    #[test]
    fn cancel_yes_no_and_intent() {
        assert!(Said::new("cancelar").is_cancel());
        assert!(Said::new("Mejor CANCELAR todo").is_cancel());
        assert!(!Said::new("cancelado").is_cancel());
        assert!(Said::new("Sí, ese").is_yes());
        assert!(Said::new("yes please").is_yes());
        assert!(!Said::new("¿Dónde está mi pedido?").is_yes());
        assert!(Said::new("no").is_no());
        assert!(Said::new("Quiero cambiar la dirección del pedido").has_operation_intent());
        assert!(!Said::new("¿Dónde está mi pedido?").has_operation_intent());
    }

    #[test]
    fn intent_with_pronouns_written_on_and_deletions() {
        assert!(Said::new("Quiero devolverlo").has_operation_intent());
        assert!(Said::new("¿Puedes cambiármela?").has_operation_intent());
        assert!(Said::new("Please delete my order B-2001").has_operation_intent());
        assert!(Said::new("Borra mi pedido A-1001").has_operation_intent());
        assert!(!Said::new("¿Ya está hecha la devolución?").has_operation_intent());
        assert!(!Said::new("Lo devolví la semana pasada").has_operation_intent());
    }

    #[test]
    fn greetings_alone() {
        assert!(Said::new("Buenos días").is_only_greeting());
        assert!(Said::new("Hola, ¿qué tal?").is_only_greeting());
        assert!(Said::new("Hi there").is_only_greeting());
        assert!(!Said::new("Hola, ¿dónde está mi pedido?").is_only_greeting());
    }

    #[test]
    fn questions_requests_and_lead_ins() {
        assert!(asks_something("Mejor dime dónde está mi pedido A-1001"));
        assert!(asks_something("what about the other one"));
        assert!(!asks_something("Tienda Diagonal"));
        assert!(!asks_something("Covent Garden Store"));
        assert_eq!(without_lead_in("En Madrid"), "Madrid");
        assert_eq!(without_lead_in("It's Trafford Store"), "Trafford Store");
        assert_eq!(without_lead_in("Es la Tienda Diagonal"), "Tienda Diagonal");
        assert_eq!(without_lead_in("La Tienda Diagonal"), "La Tienda Diagonal");
        assert_eq!(without_lead_in("en"), "en");
    }

    #[test]
    fn folding_and_language() {
        assert_eq!(fold("Dirección ÁRBOL"), "direccion arbol");
        assert_eq!(Language::of("Where is my order?"), Language::English);
        assert_eq!(Language::of("¿Dónde está mi pedido?"), Language::Spanish);
        assert_eq!(Language::of("cancel"), Language::English);
        assert!(Language::English.is_plainly_not("Tu pedido está entregado, lo llevó DHL."));
        assert!(
            Language::Spanish
                .is_plainly_not("Your order is being prepared and SEUR will deliver it.")
        );
        // Data alone is in neither language: not refused.
        assert!(!Language::English.is_plainly_not("Delivered by DHL."));
        assert!(!Language::Spanish.is_plainly_not("Covent Garden Store: 08:00"));
        assert_eq!(Language::of("cancelar"), Language::Spanish);
        assert_eq!(Language::of("Good morning"), Language::English);
        assert_eq!(Language::of("Buenas tardes"), Language::Spanish);
    }
}
