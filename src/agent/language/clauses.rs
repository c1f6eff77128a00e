//! The few clauses the engine must recognise itself, in Spanish and
//! English, whatever the planner: capability exclusion (rule 13),
//! `cancelar` (rule 12), operation intent (rule 8), yes and no (rule 3),
//! thanks and greetings, questions and the lead-ins of short answers. Each
//! reads folded words (`words`), taken once per text.

use super::words::{has_phrase, words};

/// Rule 13: the user asks the service not to consult its systems — "no
/// uses ninguna herramienta", "sin consultar el sistema", "don't use the
/// orders tool", "without calling any capability". An exclusion is about
/// systems or tools: "un pantalón sin usar", "un cupón sin utilizar" or
/// "don't use the app" are not one.
pub fn has_exclusion_clause(w: &[String]) -> bool {
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
    if BARE.iter().any(|p| has_phrase(w, p)) {
        return true;
    }
    (0..w.len()).any(|at| {
        let Some(after) = negation_end(w, at) else {
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
pub fn is_cancel(w: &[String]) -> bool {
    w.iter()
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
pub fn has_operation_intent(w: &[String]) -> bool {
    let w: Vec<String> = w.iter().map(|x| without_enclitics(x).to_owned()).collect();
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
    asks_something_in(text, &words(text))
}

/// [`asks_something`] of a text whose words are already taken.
pub fn asks_something_in(text: &str, w: &[String]) -> bool {
    text.contains(['?', '¿']) || w.iter().any(|w| is_interrogative(w) || is_request_word(w))
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
pub fn is_closing(w: &[String]) -> bool {
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
    !w.is_empty()
        && w.len() <= 10
        && w.iter().any(|x| CLOSING.contains(&x.as_str()))
        && w.iter()
            .all(|x| CLOSING.contains(&x.as_str()) || FILLER.contains(&x.as_str()))
}

/// "no, el otro", "the other one": the user picks the other of two values.
pub fn refers_to_other(w: &[String]) -> bool {
    [
        "el otro",
        "la otra",
        "other one",
        "the other",
        "otro",
        "otra",
    ]
    .iter()
    .any(|p| has_phrase(w, p))
}

pub fn is_yes(w: &[String]) -> bool {
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

pub fn is_no(w: &[String]) -> bool {
    w.len() <= 6
        && w.iter()
            .any(|x| matches!(x.as_str(), "no" | "nope" | "incorrecto"))
}

pub fn is_greeting(w: &[String]) -> bool {
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
pub fn is_only_greeting(w: &[String]) -> bool {
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
    is_greeting(w) && w.iter().all(|w| WORDS.contains(&w.as_str()))
}
