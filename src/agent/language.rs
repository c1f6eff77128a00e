//! The few clauses the engine must recognise itself, in Spanish and
//! English, whatever the planner: capability exclusion (rule 13), `cancelar`
//! (rule 12), operation intent (rule 8), yes and no (rule 3), greetings.
//! Matching is on folded text: lowercase, accents removed.

/// Lowercase with Spanish accents and diaeresis removed (`ñ` stays `ñ`).
pub fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'ä' | 'â' => 'a',
            'é' | 'è' | 'ë' | 'ê' => 'e',
            'í' | 'ì' | 'ï' | 'î' => 'i',
            'ó' | 'ò' | 'ö' | 'ô' => 'o',
            'ú' | 'ù' | 'ü' | 'û' => 'u',
            other => other,
        })
        .collect()
}

/// Folded words: runs of letters and digits.
pub fn words(text: &str) -> Vec<String> {
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `phrase` (folded words) occurs as consecutive words of `text`.
pub fn has_phrase(text_words: &[String], phrase: &str) -> bool {
    let needle: Vec<&str> = phrase.split(' ').collect();
    text_words
        .windows(needle.len())
        .any(|w| w.iter().zip(&needle).all(|(a, b)| a == b))
}

fn any_phrase(text: &str, phrases: &[&str]) -> bool {
    let w = words(text);
    phrases.iter().any(|p| has_phrase(&w, p))
}

/// Rule 13: "no uses ninguna herramienta", "sin consultar el sistema",
/// "don't use the orders tool", "without calling any capability"…
pub fn has_exclusion_clause(text: &str) -> bool {
    const CLAUSES: &[&str] = &[
        "no uses",
        "no utilices",
        "no llames",
        "no consultes",
        "no invoques",
        "no ejecutes",
        "sin usar",
        "sin utilizar",
        "sin llamar",
        "sin consultar",
        "sin invocar",
        "sin herramientas",
        "sin ninguna herramienta",
        "dont use",
        "don t use",
        "do not use",
        "dont call",
        "don t call",
        "do not call",
        "do not invoke",
        "without using",
        "without calling",
        "without any tool",
        "without tools",
        "no tools",
    ];
    any_phrase(text, CLAUSES)
}

/// Rule 12: the word that discards a pending operation.
pub fn is_cancel(text: &str) -> bool {
    words(text)
        .iter()
        .any(|w| matches!(w.as_str(), "cancelar" | "cancela" | "cancel"))
}

/// Rule 8: the user expresses that they want an operation done.
pub fn has_operation_intent(text: &str) -> bool {
    const VERBS: &[&str] = &[
        "quiero",
        "quisiera",
        "deseo",
        "necesito",
        "gustaria",
        "puedes",
        "podrias",
        "cambiar",
        "cambia",
        "modificar",
        "modifica",
        "anular",
        "anula",
        "devolver",
        "devolucion",
        "reembolso",
        "reembolsar",
        "reprogramar",
        "actualizar",
        "cancelar",
        "want",
        "would",
        "need",
        "change",
        "modify",
        "cancel",
        "return",
        "refund",
        "reschedule",
        "update",
        "please",
    ];
    words(text).iter().any(|w| VERBS.contains(&w.as_str()))
}

pub fn is_yes(text: &str) -> bool {
    let w = words(text);
    w.len() <= 6
        && w.iter().any(|x| {
            matches!(
                x.as_str(),
                "si" | "sí"
                    | "claro"
                    | "correcto"
                    | "confirmo"
                    | "exacto"
                    | "vale"
                    | "yes"
                    | "yep"
                    | "correct"
                    | "confirm"
                    | "ok"
                    | "okay"
            )
        })
}

pub fn is_no(text: &str) -> bool {
    let w = words(text);
    w.len() <= 6
        && w.iter()
            .any(|x| matches!(x.as_str(), "no" | "nope" | "incorrecto"))
}

pub fn is_greeting(text: &str) -> bool {
    let w = words(text);
    w.len() <= 4
        && w.iter().any(|x| {
            matches!(
                x.as_str(),
                "hola" | "buenas" | "buenos" | "hello" | "hi" | "hey" | "gracias" | "thanks"
            )
        })
}

/// Words that carry no topic: never used to match capabilities or topics,
/// never taken as argument values.
pub fn is_stopword(word: &str) -> bool {
    const STOP: &[&str] = &[
        "a", "al", "como", "con", "cual", "cuales", "de", "del", "el", "en", "es", "esta", "este",
        "esto", "hay", "la", "las", "lo", "los", "me", "mi", "mis", "muy", "no", "para", "pero",
        "por", "que", "se", "si", "sin", "su", "sus", "te", "tengo", "tu", "un", "una", "uno", "y",
        "ya", "yo", "quiero", "saber", "dime", "puedes", "favor", "hola", "an", "and", "are",
        "can", "do", "does", "for", "from", "how", "i", "is", "it", "me", "my", "of", "on", "or",
        "please", "the", "this", "to", "what", "which", "who", "with", "you", "your", "want",
        "know", "tell", "about", "use", "user", "asks", "pregunta", "usuario",
    ];
    word.chars().count() < 3 || STOP.contains(&word)
}

/// English or Spanish, for the engine's own fixed texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Spanish,
    English,
}

impl Language {
    /// Spanish unless the message is clearly English (platform default).
    pub fn of(text: &str) -> Language {
        const EN: &[&str] = &[
            "the", "is", "my", "what", "where", "which", "please", "order", "when", "how", "do",
            "does", "can", "you", "i", "want", "show", "hello", "hi", "thanks", "and", "of",
        ];
        const ES: &[&str] = &[
            "el", "la", "mi", "que", "donde", "cual", "por", "favor", "pedido", "cuando", "como",
            "puedes", "quiero", "hola", "gracias", "y", "de", "los", "las", "es", "esta",
        ];
        let w = words(text);
        let en = w.iter().filter(|x| EN.contains(&x.as_str())).count();
        let es = w.iter().filter(|x| ES.contains(&x.as_str())).count();
        if en > es {
            Language::English
        } else {
            Language::Spanish
        }
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
            assert!(has_exclusion_clause(yes), "{yes}");
        }
        for no in [
            "¿Dónde está mi pedido?",
            "I use the app daily",
            "No, gracias",
        ] {
            assert!(!has_exclusion_clause(no), "{no}");
        }
    }

    #[test]
    fn cancel_yes_no_and_intent() {
        assert!(is_cancel("cancelar"));
        assert!(is_cancel("Mejor CANCELAR todo"));
        assert!(!is_cancel("cancelado"));
        assert!(is_yes("Sí, ese"));
        assert!(is_yes("yes please"));
        assert!(!is_yes("¿Dónde está mi pedido?"));
        assert!(is_no("no"));
        assert!(has_operation_intent(
            "Quiero cambiar la dirección del pedido"
        ));
        assert!(!has_operation_intent("¿Dónde está mi pedido?"));
    }

    #[test]
    fn folding_and_language() {
        assert_eq!(fold("Dirección ÁRBOL"), "direccion arbol");
        assert_eq!(Language::of("Where is my order?"), Language::English);
        assert_eq!(Language::of("¿Dónde está mi pedido?"), Language::Spanish);
    }
}
