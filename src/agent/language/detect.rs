//! Which language a text is written in: Spanish, the platform's default,
//! unless it is clearly English.

use super::words::words;
use crate::domain::language::Language;

impl Language {
    /// Signs of each language in `text`: `(Spanish, English)`.
    fn evidence(text: &str, w: &[String]) -> (usize, usize) {
        const EN: &[&str] = &[
            "the",
            "is",
            "are",
            "my",
            "what",
            "where",
            "which",
            "please",
            "order",
            "orders",
            "when",
            "how",
            "do",
            "does",
            "can",
            "could",
            "would",
            "you",
            "your",
            "i",
            "want",
            "show",
            "hello",
            "hi",
            "thanks",
            "thank",
            "and",
            "of",
            "to",
            "for",
            "it",
            "this",
            "that",
            "have",
            "has",
            "need",
            "like",
            "get",
            "at",
            "with",
            "store",
            "open",
            "close",
            "opening",
            "hours",
            "points",
            "many",
            "much",
            "there",
            "don",
            "t",
            "s",
            "m",
            "yes",
            "other",
            "one",
            "just",
            "tell",
            "me",
            "a",
            "an",
            "be",
            "will",
            "check",
            "status",
            "address",
            "cancel",
            "thank",
            "bye",
            "good",
            "morning",
            "afternoon",
            "evening",
            "hey",
            "goodbye",
        ];
        const ES: &[&str] = &[
            "el",
            "la",
            "mi",
            "mis",
            "que",
            "donde",
            "cual",
            "por",
            "favor",
            "pedido",
            "pedidos",
            "cuando",
            "como",
            "puedes",
            "quiero",
            "hola",
            "gracias",
            "y",
            "de",
            "del",
            "los",
            "las",
            "es",
            "esta",
            "un",
            "una",
            "al",
            "hay",
            "se",
            "tengo",
            "tienda",
            "abre",
            "cierra",
            "hora",
            "horario",
            "cuantos",
            "cuantas",
            "necesito",
            "quisiera",
            "si",
            "para",
            "con",
            "puedo",
            "en",
            "lo",
            "le",
            "su",
            "sus",
            "muchas",
            "buenas",
            "buenos",
            "dias",
            "otro",
            "otra",
            "vale",
            "tardes",
            "noches",
            "adios",
            "ese",
            "esa",
            "estado",
            "direccion",
            "envio",
            "mas",
            "muy",
        ];
        let en = w.iter().filter(|x| EN.contains(&x.as_str())).count();
        let spanish_marks = text
            .chars()
            .filter(|c| {
                matches!(
                    c,
                    '¿' | '¡'
                        | 'á'
                        | 'é'
                        | 'í'
                        | 'ó'
                        | 'ú'
                        | 'ñ'
                        | 'Á'
                        | 'É'
                        | 'Í'
                        | 'Ó'
                        | 'Ú'
                        | 'Ñ'
                )
            })
            .count();
        let es = w.iter().filter(|x| ES.contains(&x.as_str())).count() + spanish_marks.min(2);
        (es, en)
    }

    /// Spanish unless the message is clearly English (the platform
    /// default): counts each language's common words, and `¿`, `¡` or an
    /// accented letter count for Spanish.
    pub fn of(text: &str) -> Language {
        Self::of_words(text, &words(text))
    }

    /// [`Language::of`] of a text whose words are already taken.
    pub fn of_words(text: &str, w: &[String]) -> Language {
        let (es, en) = Self::evidence(text, w);
        if en > es {
            Language::English
        } else {
            Language::Spanish
        }
    }

    /// Whether `text` is plainly written in the other language: at least
    /// two signs of it, and more than of this one.
    pub fn is_plainly_not(self, text: &str) -> bool {
        let (es, en) = Self::evidence(text, &words(text));
        let (mine, other) = match self {
            Language::Spanish => (es, en),
            Language::English => (en, es),
        };
        other >= 2 && other > mine
    }
}
