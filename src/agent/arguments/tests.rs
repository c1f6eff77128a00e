//! `arguments`' unit tests: candidates, whole answers, names, grounding.

use super::*;
use serde_json::json;

fn schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["order"],
    "properties": {
        "order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]+$"},
        "channel": {"type": "string", "maxLength": 10, "enum": ["web", "tienda física"]},
        "customer": {"type": "string", "maxLength": 60},
        "count": {"type": "integer"}
    }})
}

/// The guest's verdicts for the tokens these tests use.
fn judged() -> PatternMatches {
    PatternMatches::default().with("order", &["A-1001", "A-1", "B-2"])
}

#[test]
fn fills_only_from_the_users_words() {
    let got = extract(
        &schema(),
        &judged(),
        "¿Dónde está mi pedido A-1001? Lo compré en la tienda física, customer: Ana Pérez",
    );
    assert_eq!(got["order"], "A-1001");
    assert_eq!(got["channel"], "tienda física");
    assert_eq!(got["customer"], "Ana Pérez");
    assert!(!got.contains_key("count"));
    assert!(extract(&schema(), &judged(), "¿Dónde está mi pedido?").is_empty());
}

#[test]
fn several_candidates_are_ambiguous() {
    let got = extract(&schema(), &judged(), "pedidos A-1 y B-2");
    assert!(!got.contains_key("order"));
}

#[test]
fn a_pattern_is_never_run_here_only_the_guests_verdict_counts() {
    let s = schema();
    let order = properties(&s)
        .into_iter()
        .find(|p| p.name == "order")
        .unwrap();
    assert!(order.is_patterned());
    assert_eq!(
        order.pattern_tokens("¿Dónde está mi pedido A-1001?"),
        ["Dónde", "pedido", "A-1001"]
    );
    // Not judged: no candidate, whatever the token looks like.
    assert!(
        order
            .candidates("pedido A-1001", &PatternMatches::default())
            .is_empty()
    );
    // Judged to match: taken, even if a native engine would disagree.
    let odd = PatternMatches::default().with("order", &["pedido"]);
    assert_eq!(order.candidates("mi pedido", &odd), vec![json!("pedido")]);
}

#[test]
fn a_whole_answer_is_a_short_statement() {
    let s = schema();
    let customer = properties(&s)
        .into_iter()
        .find(|p| p.name == "customer")
        .unwrap();
    assert_eq!(
        customer.whole_answer(&Said::new(" Ana Pérez. ")),
        Some(json!("Ana Pérez"))
    );
    assert_eq!(
        customer.whole_answer(&Said::new("¿Dónde está mi pedido A-1001?")),
        None
    );
    let order = properties(&s)
        .into_iter()
        .find(|p| p.name == "order")
        .unwrap();
    assert_eq!(
        order.whole_answer(&Said::new("A-1001")),
        None,
        "patterned values come from candidates"
    );
}

#[test]
fn a_proper_name_fills_the_only_free_text_property() {
    let s = json!({"type": "object", "properties": {
        "store": {"type": "string", "maxLength": 60},
        "day": {"type": "string", "maxLength": 10, "enum": ["lunes", "monday"]}}});
    let none = PatternMatches::default();
    assert_eq!(
        extract(&s, &none, "¿Y a qué hora abre la Tienda Triana?")["store"],
        "Tienda Triana"
    );
    assert_eq!(
        extract(&s, &none, "What time does Tienda Centro open on monday?")["store"],
        "Tienda Centro"
    );
    assert!(extract(&s, &none, "¿A qué hora abre?").is_empty());
    assert!(extract(&s, &none, "When does it close?").is_empty());
    // With two free-text properties a name is not guessed.
    let two = json!({"type": "object", "properties": {
        "store": {"type": "string"}, "city": {"type": "string"}}});
    assert!(extract(&two, &none, "la Tienda Triana").is_empty());
}

#[test]
fn a_lowercase_code_is_offered_in_capitals_too() {
    let s = schema();
    let order = properties(&s)
        .into_iter()
        .find(|p| p.name == "order")
        .unwrap();
    assert_eq!(order.pattern_tokens("a-1001"), ["a-1001", "A-1001"]);
    assert_eq!(order.candidates("a-1001", &judged()), vec![json!("A-1001")]);
}

#[test]
fn thanks_and_yes_are_not_answers() {
    let s = schema();
    let customer = properties(&s)
        .into_iter()
        .find(|p| p.name == "customer")
        .unwrap();
    for not_an_answer in ["Vale, muchas gracias", "gracias", "sí", "no", "Hola"] {
        assert_eq!(
            customer.whole_answer(&Said::new(not_an_answer)),
            None,
            "{not_an_answer}"
        );
    }
}

#[test]
fn grounding() {
    assert!(is_grounded(&json!("A-1001"), &["mi pedido a-1001"]));
    assert!(!is_grounded(&json!("A-9999"), &["mi pedido A-1001"]));
    assert!(is_grounded(&json!(3), &["quiero 3 unidades"]));
    assert!(!is_grounded(&json!(30), &["quiero 3 unidades"]));
    assert!(!is_grounded(&json!(true), &["sí"]));
}

fn property<'s>(schema: &'s Value, name: &str) -> Property<'s> {
    properties(schema)
        .into_iter()
        .find(|p| p.name == name)
        .unwrap()
}

#[test]
fn a_place_names_a_city_not_a_store_and_a_store_is_no_city() {
    let none = PatternMatches::default();
    let store = json!({"type": "object", "properties": {
        "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
    let city = json!({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 60, "description": "the city"}}});
    assert!(extract(&store, &none, "¿Qué tienda hay en Madrid?").is_empty());
    assert_eq!(
        extract(&city, &none, "¿Qué tienda hay en Madrid?")["city"],
        "Madrid"
    );
    assert_eq!(
        extract(&city, &none, "Which store is there in London?")["city"],
        "London"
    );
    assert!(extract(&city, &none, "What time does Covent Garden Store open?").is_empty());
    assert_eq!(
        extract(&store, &none, "What time does Covent Garden Store open?")["store"],
        "Covent Garden Store"
    );
    assert_eq!(
        extract(&store, &none, "¿Abre hoy en la Tienda Centro?")["store"],
        "Tienda Centro"
    );
}

#[test]
fn history_gives_a_free_text_value_only_when_it_says_what_it_is() {
    let none = PatternMatches::default();
    let store = json!({"type": "object", "properties": {
        "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
    let p = property(&store, "store");
    assert!(
        p.remembered("Which stores are there in Manchester?", &none)
            .is_empty()
    );
    assert!(
        p.remembered("Tengo una duda sobre Luis Gómez", &none)
            .is_empty()
    );
    assert_eq!(
        p.remembered("Quería preguntar por la Tienda Triana", &none),
        vec![json!("Tienda Triana")]
    );
    assert_eq!(p.remembered("store: Centro", &none), vec![json!("Centro")]);
}

#[test]
fn a_whole_answer_without_its_lead_in_and_never_a_new_request() {
    let city = json!({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 60, "description": "la ciudad"}}});
    let store = json!({"type": "object", "properties": {
        "store": {"type": "string", "maxLength": 60, "description": "el nombre de la tienda"}}});
    assert_eq!(
        property(&city, "city").whole_answer(&Said::new("En Madrid")),
        Some(json!("Madrid"))
    );
    assert_eq!(
        property(&city, "city").whole_answer(&Said::new("in London.")),
        Some(json!("London"))
    );
    assert_eq!(
        property(&store, "store").whole_answer(&Said::new("Es la Tienda Diagonal")),
        Some(json!("Tienda Diagonal"))
    );
    assert_eq!(
        property(&store, "store").whole_answer(&Said::new("El Corte Inglés")),
        Some(json!("El Corte Inglés"))
    );
    assert_eq!(
        property(&store, "store").whole_answer(&Said::new("En Madrid")),
        None
    );
    assert_eq!(
        property(&store, "store")
            .whole_answer(&Said::new("Mejor dime dónde está mi pedido A-1001")),
        None
    );
    assert_eq!(
        property(&store, "store").whole_answer(&Said::new("Tell me where my order is")),
        None
    );
}
