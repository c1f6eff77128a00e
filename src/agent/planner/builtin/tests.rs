//! The built-in planner's unit tests: selection, focus, eligibility, the index.

use super::*;
use crate::agent::planner::CapabilityOffer;
use crate::agent::planner::EffectivePolicy;
use serde_json::json;
use std::sync::Arc;

fn offer(name: &str, description: &str, preparation: bool) -> CapabilityOffer {
    CapabilityOffer {
        name: name.into(),
        description: description.into(),
        when_to_use: String::new(),
        examples: Arc::from(Vec::new()),
        input_schema: Arc::new(json!({"type": "object", "properties": {
            "order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]+$"}}})),
        output_schema: Arc::new(json!({})),
        preparation,
        fingerprint: Default::default(),
    }
}

/// What the guest would judge of `^[A-Z]-[0-9]+$` on these messages.
fn judged() -> crate::agent::patterns::PatternMatches {
    crate::agent::patterns::PatternMatches::default().with("order", &["A-12", "A-1"])
}

fn request<'a>(
    policy: &'a EffectivePolicy,
    offered: &'a [Offered<'a>],
    said: &'a Said,
) -> PlanRequest<'a> {
    PlanRequest {
        policy,
        capabilities: offered,
        history: &[],
        said,
        image: None,
        previous_capability: None,
    }
}

fn plan(message: &str, caps: &[CapabilityOffer], topics: Vec<(String, String)>) -> Plan {
    let policy = EffectivePolicy {
        instructions: String::new(),
        topics,
        out_of_scope_response: String::new(),
    };
    let patterns = judged();
    let offered: Vec<Offered<'_>> = caps
        .iter()
        .map(|offer| Offered {
            offer,
            patterns: &patterns,
        })
        .collect();
    BuiltinPlanner
        .plan(&request(&policy, &offered, &Said::new(message)))
        .plan
}

#[test]
fn only_capabilities_sharing_words_are_consulted() {
    let mut caps: Vec<CapabilityOffer> = (0..500)
        .map(|i| {
            offer(
                &format!("catalogue_lookup_{i}"),
                "Busca artículos del catálogo",
                false,
            )
        })
        .collect();
    caps.insert(321, offer("order_status", "Estado de un pedido", false));
    let policy = EffectivePolicy {
        instructions: String::new(),
        topics: vec![],
        out_of_scope_response: String::new(),
    };
    let none = crate::agent::patterns::PatternMatches::default();
    let offered: Vec<Offered<'_>> = caps
        .iter()
        .map(|offer| Offered {
            offer,
            patterns: &none,
        })
        .collect();
    let message = Said::new("¿Dónde está mi pedido A-12?");
    let asked = request(&policy, &offered, &message);
    assert_eq!(
        consults(&asked),
        vec![321],
        "only the order capability speaks of orders"
    );
    // What it decides with the verdicts of the consulted one only is
    // what it decides with every verdict.
    let patterns = judged();
    let mut some = offered.clone();
    some[321].patterns = &patterns;
    let all: Vec<Offered<'_>> = caps
        .iter()
        .map(|offer| Offered {
            offer,
            patterns: &patterns,
        })
        .collect();
    assert_eq!(
        BuiltinPlanner.plan(&request(&policy, &some, &message)).plan,
        BuiltinPlanner.plan(&request(&policy, &all, &message)).plan,
    );
    let catalogue = Said::new("Busca en el catálogo");
    let catalogue = request(&policy, &offered, &catalogue);
    assert_eq!(
        consults(&catalogue).len(),
        500,
        "every catalogue look-up shares those words"
    );
}

#[test]
fn selects_by_shared_words_and_fills_from_the_message() {
    let caps = [
        offer("order_status", "Estado de un pedido", false),
        offer("store_hours", "Horario de las tiendas", false),
    ];
    assert_eq!(
        plan("¿Cuál es el estado de mi pedido A-12?", &caps, vec![]),
        Plan::Call {
            capability: "order_status".into(),
            arguments: serde_json::from_value(json!({"order": "A-12"})).unwrap()
        }
    );
    assert!(
        matches!(plan("¿Qué horario tienen las tiendas?", &caps, vec![]),
        Plan::Call { capability, .. } if capability == "store_hours")
    );
}

#[test]
fn preparation_needs_intent_and_topics_bound_scope() {
    let caps = [offer(
        "prepare_address_change",
        "Prepara el cambio de dirección de un pedido",
        true,
    )];
    assert_eq!(
        plan("dirección del pedido", &caps, vec![]),
        Plan::NoCapability
    );
    assert!(matches!(
        plan("Quiero cambiar la dirección del pedido A-1", &caps, vec![]),
        Plan::Call { .. }
    ));
    let topics = vec![("pedidos".to_owned(), "Estado de pedidos".to_owned())];
    assert_eq!(
        plan("¿Quién ganó el partido?", &caps, topics.clone()),
        Plan::OutOfScope
    );
    assert_eq!(
        plan("Tengo una duda sobre pedidos", &[], topics),
        Plan::NoCapability
    );
}

fn called(plan: &Plan) -> &str {
    match plan {
        Plan::Call { capability, .. } => capability,
        other => panic!("expected a call, got {other:?}"),
    }
}

fn shop() -> Vec<CapabilityOffer> {
    vec![
        offer("customer_orders", "Lista los pedidos de un cliente", false),
        offer("order_status", "Consulta el estado de un pedido", false),
        offer(
            "shipping_details",
            "Detalles del envío de un pedido: dirección de envío, número de seguimiento",
            false,
        ),
        offer("store_hours", "Horario de apertura de una tienda", false),
        offer("prepare_return", "Prepara la devolución de un pedido", true),
        offer(
            "prepare_address_change",
            "Prepares a change of the delivery address of an order",
            true,
        ),
    ]
}

#[test]
fn a_rare_shared_word_outweighs_a_common_one() {
    let caps = shop();
    // "order" is in almost every capability; "tracking" in one.
    assert_eq!(
        called(&plan(
            "What is the tracking number of order A-12?",
            &caps,
            vec![]
        )),
        "shipping_details"
    );
    // The very word decides a tie of concepts: "my order" is one order.
    assert_eq!(
        called(&plan("Can you check my order?", &caps, vec![])),
        "order_status"
    );
}

#[test]
fn the_first_question_is_answered_first() {
    let caps = shop();
    assert_eq!(
        crate::agent::language::sentences::focus(
            "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?"
        ),
        [
            "Dónde está mi pedido A-12",
            "a qué hora abre la Tienda Centro",
            "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?"
        ]
    );
    assert_eq!(
        called(&plan(
            "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?",
            &caps,
            vec![]
        )),
        "order_status"
    );
    // A statement gives context; the question is what is asked.
    assert_eq!(
        called(&plan(
            "Mi pedido es el A-12. ¿Cuál es el número de seguimiento?",
            &caps,
            vec![]
        )),
        "shipping_details"
    );
    assert_eq!(
        crate::agent::language::sentences::focus("Quiero devolver el pedido A-12"),
        ["Quiero devolver el pedido A-12"]
    );
}

#[test]
fn a_topic_no_capability_speaks_of_selects_nothing() {
    let caps = shop();
    assert_eq!(
        plan("¿Cuál es el precio del pedido A-12?", &caps, vec![]),
        Plan::NoCapability
    );
    assert_eq!(
        plan("Please delete my order A-12", &caps, vec![]),
        Plan::NoCapability
    );
    let without_hours: Vec<CapabilityOffer> = caps
        .into_iter()
        .filter(|c| c.name != "store_hours")
        .collect();
    assert_eq!(
        plan("¿A qué hora abre la Tienda Centro?", &without_hours, vec![]),
        Plan::NoCapability
    );
}

#[test]
fn a_preparation_only_for_the_operation_asked_for() {
    let caps = shop();
    assert_eq!(
        called(&plan(
            "Quiero devolver un pantalón del pedido A-12",
            &caps,
            vec![]
        )),
        "prepare_return"
    );
    assert_eq!(
        called(&plan(
            "Quiero cambiar la dirección de envío del pedido A-12",
            &caps,
            vec![]
        )),
        "prepare_address_change"
    );
    // "Cancel" prepares nothing here: neither a return nor an address change.
    assert_eq!(
        plan("Quiero cancelar mi pedido A-12", &caps, vec![]),
        Plan::NoCapability
    );
    // A mention is not a request (rule 8).
    assert_ne!(
        called(&plan(
            "¿Ya está hecha la devolución del pedido A-12?",
            &caps,
            vec![]
        )),
        "prepare_return"
    );
}

#[test]
fn a_question_about_a_returned_field_finds_its_capability() {
    let mut caps = shop();
    let mut points = offer("loyalty_points", "Loyalty points balance of a card", false);
    points.output_schema = Arc::new(json!({"type": "object", "properties": {
        "points": {"type": "integer"}, "tier": {"type": "string", "description": "Card tier"}}}));
    caps.push(points);
    assert_eq!(
        called(&plan("What tier is it?", &caps, vec![])),
        "loyalty_points"
    );
    // Half weight: a field does not outweigh what a capability is about.
    assert_eq!(
        called(&plan("¿Me dices cómo va mi pedido?", &caps, vec![])),
        "order_status"
    );
}
