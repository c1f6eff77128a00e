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

/// Rule 13: the user asks the service not to consult its systems — "no
/// uses ninguna herramienta", "sin consultar el sistema", "don't use the
/// orders tool", "without calling any capability". An exclusion is about
/// systems or tools: "un pantalón sin usar", "un cupón sin utilizar" or
/// "don't use the app" are not one.
pub fn has_exclusion_clause(text: &str) -> bool {
    let w = words(text);
    // "no tools", "sin herramientas", "without any tool".
    const BARE: &[&str] = &[
        "no tools",
        "no tool",
        "sin herramientas",
        "sin ninguna herramienta",
        "sin ningun sistema",
        "without tools",
        "without any tool",
        "without any tools",
        "without any system",
        "without any systems",
    ];
    if BARE.iter().any(|p| has_phrase(&w, p)) {
        return true;
    }
    (0..w.len()).any(|at| {
        let Some(after) = negation_end(&w, at) else {
            return false;
        };
        // The verb right after the negation (a pronoun may sit between).
        let verb_at = if w.get(after).is_some_and(|x| is_object_pronoun(x)) {
            after + 1
        } else {
            after
        };
        let Some(verb) = w.get(verb_at) else {
            return false;
        };
        match verb_kind(verb) {
            // Consulting or invoking is always about a system.
            Some(VerbKind::Consult) => true,
            // Using or calling needs a tool-like object next: "no uses la
            // herramienta de pedidos", "don't call any capability".
            Some(VerbKind::UseOrCall) => {
                w.iter().skip(verb_at + 1).take(4).any(|x| is_tool_word(x))
            }
            None => false,
        }
    })
}

/// Where the words after a negation at `at` start, if one starts there.
fn negation_end(w: &[String], at: usize) -> Option<usize> {
    let first = w[at].as_str();
    let second = w.get(at + 1).map(String::as_str);
    match (first, second) {
        ("do" | "please", Some("not")) => Some(at + 2),
        ("don", Some("t")) => Some(at + 2),
        ("no" | "sin" | "nunca" | "dont" | "without" | "never", _) => Some(at + 1),
        _ => None,
    }
}

fn is_object_pronoun(word: &str) -> bool {
    matches!(
        word,
        "lo" | "la" | "los" | "las" | "le" | "les" | "me" | "it" | "them"
    )
}

enum VerbKind {
    Consult,
    UseOrCall,
}

fn verb_kind(word: &str) -> Option<VerbKind> {
    const CONSULT: &[&str] = &[
        "consult", "invoc", "invok", "query", "queri", "look", "busqu", "busca", "ejecut",
    ];
    const USE: &[&str] = &["us", "utiliz", "llam", "call", "run", "emple"];
    if CONSULT.iter().any(|p| word.starts_with(p)) {
        Some(VerbKind::Consult)
    } else if USE.iter().any(|p| word.starts_with(p)) && word != "usted" && word != "usual" {
        Some(VerbKind::UseOrCall)
    } else {
        None
    }
}

fn is_tool_word(word: &str) -> bool {
    const TOOLS: &[&str] = &[
        "herramient",
        "sistem",
        "capacidad",
        "funcion",
        "api",
        "base",
        "servicio",
        "tool",
        "system",
        "capabilit",
        "function",
        "database",
        "service",
        "plugin",
        "endpoint",
        "integracion",
        "integration",
    ];
    TOOLS.iter().any(|p| word.starts_with(p))
        || word.ends_with("tool")
        || word == "ninguna"
        || word == "ningun"
        || word == "any"
}

/// Rule 12: the word that discards a pending operation.
pub fn is_cancel(text: &str) -> bool {
    words(text)
        .iter()
        .any(|w| matches!(w.as_str(), "cancelar" | "cancela" | "cancel"))
}

/// Operation verbs, as an infinitive, an imperative or a first person.
const OPERATION_VERBS: &[&str] = &[
    "cambiar",
    "cambia",
    "cambie",
    "cambio",
    "modificar",
    "modifica",
    "modifique",
    "anular",
    "anula",
    "anule",
    "devolver",
    "devuelve",
    "devuelva",
    "devuelvo",
    "reembolsar",
    "reembolsa",
    "reprogramar",
    "reprograma",
    "actualizar",
    "actualiza",
    "actualice",
    "cancelar",
    "cancela",
    "cancele",
    "tramitar",
    "tramita",
    "solicitar",
    "solicita",
    "hacer",
    "haz",
    "hazme",
    "change",
    "modify",
    "cancel",
    "return",
    "refund",
    "reschedule",
    "update",
    "make",
    "start",
    "request",
    "borrar",
    "borra",
    "borre",
    "eliminar",
    "elimina",
    "elimine",
    "delete",
    "remove",
];

/// "devolverlo", "cambiarla", "cancélamelo": a Spanish verb with the
/// pronouns written onto it, as the bare verb.
fn without_enclitics(word: &str) -> &str {
    const ENCLITICS: &[&str] = &[
        "selos", "selas", "melo", "mela", "melos", "melas", "selo", "sela", "los", "las", "les",
        "nos", "lo", "la", "le", "me", "te", "se",
    ];
    for e in ENCLITICS {
        if let Some(stem) = word.strip_suffix(e)
            && stem.chars().count() >= 4
            && (stem.ends_with('r') || OPERATION_VERBS.contains(&stem))
        {
            return stem;
        }
    }
    word
}

/// Operations named as nouns: they count only after a request word ("quiero
/// una devolución", "I'd like a refund"), never alone ("¿ya está hecha la
/// devolución?").
const OPERATION_NOUNS: &[&str] = &[
    "devolucion",
    "cambio",
    "reembolso",
    "anulacion",
    "cancelacion",
    "modificacion",
    "return",
    "refund",
    "change",
    "cancellation",
    "exchange",
];

/// Words that make what follows a request.
const REQUEST_WORDS: &[&str] = &[
    "quiero", "quisiera", "deseo", "necesito", "gustaria", "puedes", "podrias", "podria", "puedo",
    "pueden", "quieres", "want", "would", "like", "need", "can", "could", "please", "let", "lets",
    "help", "ayudame", "ayuda",
];

/// Rule 8: the user asks for an operation to be done — a request word
/// followed by an operation verb or noun ("quiero cambiar la dirección",
/// "I'd like a refund"), or a message that opens with an operation verb
/// ("Cambia la dirección del pedido A-1001", "cancel my order"). A mention
/// is not a request: "¿Ya está hecha la devolución?".
pub fn has_operation_intent(text: &str) -> bool {
    let w: Vec<String> = words(text)
        .iter()
        .map(|x| without_enclitics(x).to_owned())
        .collect();
    let opens_with_verb = w
        .iter()
        .find(|x| {
            !matches!(
                x.as_str(),
                "y" | "and" | "entonces" | "then" | "ok" | "vale"
            )
        })
        .is_some_and(|x| OPERATION_VERBS.contains(&x.as_str()));
    if opens_with_verb {
        return true;
    }
    // Between a request word and its noun only these may stand: "quiero
    // una devolución", "I'd like to make a return".
    const LEAD_IN: &[&str] = &[
        "un", "una", "el", "la", "mi", "me", "a", "an", "the", "my", "to", "hacer", "make", "do",
        "pedir", "get", "start", "i", "we", "yo",
    ];
    w.iter().enumerate().any(|(at, x)| {
        if !REQUEST_WORDS.contains(&x.as_str()) {
            return false;
        }
        let rest = &w[at + 1..];
        let verb = rest
            .iter()
            .take(5)
            .any(|x| OPERATION_VERBS.contains(&x.as_str()) && !LEAD_IN.contains(&x.as_str()));
        let noun = rest
            .iter()
            .skip_while(|x| LEAD_IN.contains(&x.as_str()))
            .take(1)
            .any(|x| OPERATION_NOUNS.contains(&x.as_str()));
        verb || noun
    })
}

/// A question word: "¿dónde…?", "what…", "is it…?".
pub fn is_interrogative(word: &str) -> bool {
    matches!(
        word,
        "que"
            | "cual"
            | "cuales"
            | "donde"
            | "adonde"
            | "cuando"
            | "como"
            | "cuanto"
            | "cuantos"
            | "cuanta"
            | "cuantas"
            | "quien"
            | "quienes"
            | "what"
            | "which"
            | "where"
            | "when"
            | "how"
            | "who"
            | "whose"
            | "why"
    )
}

/// Words that open a new request: "dime…", "tell me…", "quiero…".
fn is_request_word(word: &str) -> bool {
    REQUEST_WORDS.contains(&word)
        || matches!(
            word,
            "dime"
                | "dame"
                | "muestrame"
                | "ensename"
                | "tell"
                | "show"
                | "give"
                | "check"
                | "mira"
        )
}

/// A new question or request rather than a bare value: it holds a question
/// word or a request word ("Mejor dime dónde está mi pedido A-1001").
pub fn asks_something(text: &str) -> bool {
    text.contains(['?', '¿'])
        || words(text)
            .iter()
            .any(|w| is_interrogative(w) || is_request_word(w))
}

/// What a short answer says after its lead-in: "En Madrid" → "Madrid",
/// "Es la Tienda Diagonal" → "Tienda Diagonal", "It's Trafford Store" →
/// "Trafford Store". An article the value itself starts with stays
/// ("El Corte Inglés").
pub fn without_lead_in(text: &str) -> &str {
    const LEAD_INS: &[&str] = &[
        "en",
        "in",
        "at",
        "desde",
        "from",
        "es",
        "it's",
        "its",
        "it is",
        "is",
        "son",
        "seria",
        "sería",
        "i mean",
        "me refiero a",
        "la de",
        "el de",
        "the one in",
        "de",
    ];
    const ARTICLES: &[&str] = &["el", "la", "los", "las", "the"];
    let mut rest = text.trim();
    let mut stripped = false;
    loop {
        let lower = rest.to_lowercase();
        let Some(lead) = LEAD_INS.iter().find(|l| {
            lower.starts_with(*l)
                && lower[l.len()..].starts_with(char::is_whitespace)
                && rest.len() > l.len()
        }) else {
            break;
        };
        rest = rest[lead.len()..].trim_start();
        stripped = true;
    }
    if stripped {
        let lower = rest.to_lowercase();
        if let Some(article) = ARTICLES
            .iter()
            .find(|a| lower.starts_with(*a) && lower[a.len()..].starts_with(char::is_whitespace))
        {
            rest = rest[article.len()..].trim_start();
        }
    }
    rest
}

/// Thanks or a goodbye, and nothing else: "Muchas gracias", "Vale, gracias",
/// "thanks, that's all", "adiós".
pub fn is_closing(text: &str) -> bool {
    const CLOSING: &[&str] = &[
        "gracias", "thanks", "thank", "thx", "adios", "chao", "bye", "goodbye", "hasta",
    ];
    const FILLER: &[&str] = &[
        "muchas", "mil", "vale", "ok", "okay", "perfecto", "genial", "bien", "muy", "pues",
        "entonces", "eso", "es", "todo", "nada", "mas", "de", "acuerdo", "luego", "pronto", "you",
        "so", "much", "that", "s", "all", "great", "perfect", "fine", "good", "very", "nothing",
        "else", "see", "later", "a", "lot", "cheers", "y", "and", "por", "tu", "ayuda", "for",
        "the", "help", "your", "buen", "dia", "day", "nice", "have",
    ];
    let w = words(text);
    !w.is_empty()
        && w.len() <= 10
        && w.iter().any(|x| CLOSING.contains(&x.as_str()))
        && w.iter()
            .all(|x| CLOSING.contains(&x.as_str()) || FILLER.contains(&x.as_str()))
}

/// "no, el otro", "the other one": the user picks the other of two values.
pub fn refers_to_other(text: &str) -> bool {
    let w = words(text);
    [
        "el otro",
        "la otra",
        "other one",
        "the other",
        "otro",
        "otra",
    ]
    .iter()
    .any(|p| has_phrase(&w, p))
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
                "hola" | "buenas" | "buenos" | "hello" | "hi" | "hey" | "morning" | "evening"
            )
        })
}

/// A greeting and nothing else: "Buenos días", "Hola, ¿qué tal?", "Hi
/// there". ("Días" is no request for opening days.)
pub fn is_only_greeting(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "hola",
        "buenas",
        "buenos",
        "buen",
        "dia",
        "dias",
        "tardes",
        "noches",
        "que",
        "tal",
        "hello",
        "hi",
        "hey",
        "good",
        "morning",
        "afternoon",
        "evening",
        "there",
        "how",
        "are",
        "you",
        "all",
        "everyone",
        "saludos",
        "greetings",
    ];
    is_greeting(text) && words(text).iter().all(|w| WORDS.contains(&w.as_str()))
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
        "know", "tell", "about", "use", "user", "asks", "pregunta", "usuario", "there", "any",
        "some", "one", "have", "has", "had", "will", "was", "were", "been", "just", "also",
        "tambien", "alguna", "alguno", "algun", "tiene", "tienen", "teneis", "otros", "otras",
        "otro", "otra", "other", "others", "that", "dices",
    ];
    word.chars().count() < 3 || STOP.contains(&word)
}

pub use crate::domain::language::Language;

impl Language {
    /// Signs of each language in `text`: `(Spanish, English)`.
    fn evidence(text: &str) -> (usize, usize) {
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
        let w = words(text);
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
        let (es, en) = Self::evidence(text);
        if en > es {
            Language::English
        } else {
            Language::Spanish
        }
    }

    /// Whether `text` is plainly written in the other language: at least
    /// two signs of it, and more than of this one.
    pub fn is_plainly_not(self, text: &str) -> bool {
        let (es, en) = Self::evidence(text);
        let (mine, other) = match self {
            Language::Spanish => (es, en),
            Language::English => (en, es),
        };
        other >= 2 && other > mine
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
    fn intent_with_pronouns_written_on_and_deletions() {
        assert!(has_operation_intent("Quiero devolverlo"));
        assert!(has_operation_intent("¿Puedes cambiármela?"));
        assert!(has_operation_intent("Please delete my order B-2001"));
        assert!(has_operation_intent("Borra mi pedido A-1001"));
        assert!(!has_operation_intent("¿Ya está hecha la devolución?"));
        assert!(!has_operation_intent("Lo devolví la semana pasada"));
    }

    #[test]
    fn greetings_alone() {
        assert!(is_only_greeting("Buenos días"));
        assert!(is_only_greeting("Hola, ¿qué tal?"));
        assert!(is_only_greeting("Hi there"));
        assert!(!is_only_greeting("Hola, ¿dónde está mi pedido?"));
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
