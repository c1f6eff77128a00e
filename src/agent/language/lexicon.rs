//! The service domain's words in Spanish and English, grouped by concept:
//! "puntos de fidelidad" and "loyalty points" are the same two concepts, so
//! a Spanish question finds a capability described in English and the other
//! way round. Words are folded (`words::fold`); a word belongs to a
//! concept when it starts with one of the concept's stems.
//!
//! Used by the built-in planner to select capabilities, by `arguments` to
//! tell a store's name from a city's, and by the engine to ask for a value
//! in the conversation's language when the schema describes it in the other.

use std::collections::HashSet;

use super::words::{is_stopword, words};
use crate::domain::language::Language;

/// One concept of the lexicon.
#[derive(Debug)]
pub struct Concept {
    pub key: &'static str,
    stems: &'static [&'static str],
    /// A specific thing a user asks for: when no offered capability
    /// mentions it, none fits ("¿cuánto cuesta?" is not an order status).
    pub topic: bool,
    /// An operation a preparation capability may prepare (rule 8 selects a
    /// preparation only for the operation the user asks for).
    pub operation: bool,
    /// How to ask for a value of this concept: Spanish, English.
    pub ask: Option<(&'static str, &'static str)>,
    /// The concept as a label of a result's field: Spanish, English.
    pub label: Option<(&'static str, &'static str)>,
    /// The narrower concepts one word of this concept may mean: Spanish
    /// "devolución" is a return or a refund, English keeps the two apart.
    covers: &'static [&'static str],
}

const fn c(key: &'static str, stems: &'static [&'static str]) -> Concept {
    Concept {
        key,
        stems,
        topic: false,
        operation: false,
        ask: None,
        label: None,
        covers: &[],
    }
}

const fn topic(key: &'static str, stems: &'static [&'static str]) -> Concept {
    Concept {
        topic: true,
        ..c(key, stems)
    }
}

const fn operation(key: &'static str, stems: &'static [&'static str]) -> Concept {
    Concept {
        topic: true,
        operation: true,
        ..c(key, stems)
    }
}

/// An operation whose word may mean any of `covers` (see [`widen`]).
const fn broad_operation(
    key: &'static str,
    stems: &'static [&'static str],
    covers: &'static [&'static str],
) -> Concept {
    Concept {
        covers,
        ..operation(key, stems)
    }
}

const fn asked(
    key: &'static str,
    stems: &'static [&'static str],
    es: &'static str,
    en: &'static str,
) -> Concept {
    Concept {
        ask: Some((es, en)),
        ..c(key, stems)
    }
}

/// `concept` with its label as a result's field.
const fn labelled(concept: Concept, es: &'static str, en: &'static str) -> Concept {
    Concept {
        label: Some((es, en)),
        ..concept
    }
}

/// First match wins: a longer, more specific stem goes before a shorter one
/// it starts with.
const LEXICON: &[Concept] = &[
    labelled(
        asked(
            "#order",
            &["pedido", "order", "compra", "purchase"],
            "el número de pedido",
            "the order number",
        ),
        "pedido",
        "order",
    ),
    labelled(
        c(
            "#shipping",
            &[
                "envio", "enviad", "envia", "ship", "entreg", "deliver", "paquet", "parcel",
                "llega", "llegar", "arriv",
            ],
        ),
        "envío",
        "shipping",
    ),
    labelled(
        topic("#tracking", &["seguim", "rastre", "track"]),
        "seguimiento",
        "tracking",
    ),
    labelled(
        c("#carrier", &["transport", "carrier", "mensajer", "courier"]),
        "transportista",
        "carrier",
    ),
    labelled(
        asked(
            "#store",
            &["tienda", "store", "shop", "sucursal", "branch"],
            "el nombre de la tienda",
            "the store's name",
        ),
        "tienda",
        "store",
    ),
    labelled(
        topic(
            "#hours",
            &[
                "horari", "hora", "hour", "abre", "abrir", "abren", "abiert", "open", "cierra",
                "cierran", "cerra", "cerrad", "close", "closing", "schedul",
            ],
        ),
        "horario",
        "hours",
    ),
    labelled(topic("#points", &["punto", "point"]), "puntos", "points"),
    labelled(
        topic(
            "#loyalty",
            &["fidelid", "lealtad", "loyal", "reward", "recompens"],
        ),
        "fidelidad",
        "loyalty",
    ),
    labelled(c("#balance", &["saldo", "balanc"]), "saldo", "balance"),
    labelled(
        asked(
            "#customer",
            &["client", "custom"],
            "el nombre del cliente",
            "the customer's name",
        ),
        "cliente",
        "customer",
    ),
    labelled(
        asked(
            "#address",
            &["direcc", "domicil", "address"],
            "la dirección",
            "the address",
        ),
        "dirección",
        "address",
    ),
    // A refund is not a return: English names each; Spanish "devolver"
    // may mean either, "reembolso" only a refund.
    operation("#return", &["return"]),
    operation("#refund", &["refund", "reembols"]),
    broad_operation(
        "#return_or_refund",
        &["devoluc", "devolv", "devuel"],
        &["#return", "#refund"],
    ),
    labelled(
        topic(
            "#invoice",
            &["factura", "invoice", "bill", "recibo", "receipt"],
        ),
        "factura",
        "invoice",
    ),
    labelled(
        topic("#payment", &["pago", "pagar", "pay"]),
        "pago",
        "payment",
    ),
    labelled(
        topic("#price", &["precio", "price", "cost", "cuesta"]),
        "precio",
        "price",
    ),
    labelled(
        c("#product", &["product", "articul", "item", "prenda"]),
        "artículo",
        "item",
    ),
    labelled(
        topic(
            "#stock",
            &["stock", "disponib", "availab", "inventar", "existenc"],
        ),
        "existencias",
        "stock",
    ),
    labelled(
        c("#status", &["estado", "status", "situac"]),
        "estado",
        "status",
    ),
    operation("#appointment", &["cita", "appoint"]),
    operation("#booking", &["reserv", "book"]),
    c("#account", &["cuenta", "account"]),
    operation("#change", &["cambi", "change", "modific", "modify"]),
    operation("#cancel", &["cancel", "anula"]),
    operation("#delete", &["borr", "elimin", "delet", "remov", "suprim"]),
    labelled(
        asked(
            "#city",
            &["ciudad", "city", "town"],
            "la ciudad",
            "the city",
        ),
        "ciudad",
        "city",
    ),
    c("#where", &["donde", "where", "ubicac", "locat"]),
    labelled(
        asked(
            "#card",
            &["tarjeta", "card"],
            "el número de tarjeta",
            "the card number",
        ),
        "tarjeta",
        "card",
    ),
    labelled(c("#number", &["numer", "number"]), "número", "number"),
    c("#check", &["consult", "check", "comprob"]),
];

/// The concept a folded word belongs to, if any.
pub fn concept(word: &str) -> Option<&'static Concept> {
    LEXICON
        .iter()
        .find(|c| c.stems.iter().any(|s| word.starts_with(s)))
}

/// The concepts of a text's words, in order, without repeats.
pub fn concepts(text: &str) -> Vec<&'static Concept> {
    concepts_of(&words(text))
}

/// The concepts of folded words, in order, without repeats.
pub fn concepts_of(words: &[String]) -> Vec<&'static Concept> {
    let mut out: Vec<&'static Concept> = Vec::new();
    for word in words {
        if let Some(found) = concept(word)
            && !out.iter().any(|c| c.key == found.key)
        {
            out.push(found);
        }
    }
    out
}

/// Content words as `(key, word)`: the key is the word's concept in the
/// bilingual lexicon ("puntos de fidelidad" meets "loyalty points") or its
/// short stem ("pedidos" meets "pedido"). Stopwords say nothing.
pub fn content_words(words: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for word in words.iter().filter(|w| !is_stopword(w)) {
        let key = concept(word).map_or_else(|| stem(word), |c| c.key.to_owned());
        if !out.iter().any(|(k, _)| *k == key) {
            out.push((key, word.clone()));
        }
    }
    out
}

/// The keys of a text's content words.
pub fn keys(text: &str) -> HashSet<String> {
    content_words(&words(text))
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn stem(word: &str) -> String {
    word.chars().take(5).collect()
}

/// What a capability's keys stand for when a user's words are matched
/// against them. A capability naming a narrow operation ("prepare_return")
/// is also found by the broad word that covers it (Spanish "devolver"); one
/// that says only the broad word ("Devolver el pedido") may be any of the
/// operations it covers. A user's own keys are never widened: "refund" does
/// not find a return.
pub fn widen(keys: &mut HashSet<String>) {
    for broad in LEXICON.iter().filter(|c| !c.covers.is_empty()) {
        if broad.covers.iter().any(|k| keys.contains(*k)) {
            keys.insert(broad.key.to_owned());
        } else if keys.contains(broad.key) {
            keys.extend(broad.covers.iter().map(|k| (*k).to_owned()));
        }
    }
}

/// How to ask for a value named `name` (a property's name, in words) in
/// `language`, when the lexicon knows its concept.
pub fn ask_label(name: &str, language: Language) -> Option<&'static str> {
    concepts(name)
        .into_iter()
        .find_map(|c| c.ask)
        .map(|(es, en)| match language {
            Language::Spanish => es,
            Language::English => en,
        })
}

/// A result's field name in words of `language`: "shipping_address" is
/// "dirección de envío" in Spanish (the head of the English compound comes
/// first). `None` when the lexicon knows none of its words.
pub fn field_label(name: &str, language: Language) -> Option<String> {
    let labels: Vec<&str> = concepts(&name.replace(['_', '-'], " "))
        .into_iter()
        .filter_map(|c| c.label)
        .map(|(es, en)| match language {
            Language::Spanish => es,
            Language::English => en,
        })
        .collect();
    if labels.is_empty() {
        return None;
    }
    Some(match language {
        Language::Spanish => labels.into_iter().rev().collect::<Vec<_>>().join(" de "),
        Language::English => labels.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<&'static str> {
        let mut keys: Vec<&str> = concepts(text).into_iter().map(|c| c.key).collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn the_same_concepts_in_both_languages() {
        assert_eq!(
            keys("¿Cuántos puntos de fidelidad tengo?"),
            keys("How many loyalty points do I have?")
        );
        assert_eq!(keys("¿Cuándo llega mi pedido?"), ["#order", "#shipping"]);
        assert_eq!(keys("When will my order arrive?"), ["#order", "#shipping"]);
        assert_eq!(keys("¿A qué hora abre?"), ["#hours"]);
        // A month is not an opening time.
        assert!(keys("el 3 de abril").is_empty());
    }

    #[test]
    fn topics_operations_and_questions() {
        assert!(concept("precio").is_some_and(|c| c.topic && !c.operation));
        assert!(concept("devolucion").is_some_and(|c| c.operation));
        assert!(concept("refund").is_some_and(|c| c.operation && c.key == "#refund"));
        assert!(concept("returns").is_some_and(|c| c.operation && c.key == "#return"));
        assert!(concept("borra").is_some_and(|c| c.operation));
        assert!(concept("pedido").is_some_and(|c| !c.topic));
        assert_eq!(
            ask_label("order", Language::English),
            Some("the order number")
        );
        assert_eq!(
            ask_label("card", Language::Spanish),
            Some("el número de tarjeta")
        );
        assert_eq!(ask_label("colour", Language::Spanish), None);
        assert_eq!(
            field_label("shipping_address", Language::Spanish).as_deref(),
            Some("dirección de envío")
        );
        assert_eq!(
            field_label("loyalty_points", Language::Spanish).as_deref(),
            Some("puntos de fidelidad")
        );
        assert_eq!(
            field_label("customer_name", Language::Spanish).as_deref(),
            Some("cliente")
        );
        assert_eq!(field_label("tier", Language::Spanish), None);
    }

    #[test]
    fn a_refund_is_not_a_return_but_devolucion_is_either() {
        let widened = |text: &str| {
            let mut keys: std::collections::HashSet<String> = concepts(text)
                .into_iter()
                .map(|c| c.key.to_owned())
                .collect();
            widen(&mut keys);
            keys
        };
        let ret = widened("prepare return Devolver artículos del pedido");
        assert!(ret.contains("#return") && ret.contains("#return_or_refund"));
        assert!(!ret.contains("#refund"), "{ret:?}");
        let refund = widened("prepare refund Reembolsar el importe");
        assert!(refund.contains("#refund") && refund.contains("#return_or_refund"));
        assert!(!refund.contains("#return"), "{refund:?}");
        // Only the broad word: either operation.
        let either = widened("Devolver un pedido");
        assert!(either.contains("#return") && either.contains("#refund"));
        // A user's words are taken as written.
        assert_eq!(keys("Please refund my order"), ["#order", "#refund"]);
        assert_eq!(
            keys("Quiero devolver el pedido"),
            ["#order", "#return_or_refund"]
        );
    }
}
