//! Contract section 1, one test per runtime rule, with the built-in planner,
//! through the real HTTP channel, against a real loopback host endpoint.

use crate::helpers::fixtures::new_key;
use crate::helpers::shop::*;
use crate::helpers::*;
use serde_json::{Value, json};

const NOT_FOUND_TEXT: &str = "No hay una operación disponible para esta consulta.";

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_01_at_most_one_capability_call_per_turn(backend: Backend) {
    let shop = Shop::open(backend).await;
    // The message speaks of an order's status and of a customer's orders.
    let (status, body) = shop
        .say(
            None,
            "¿Dónde está mi pedido A-1001 y qué pedidos tiene el cliente customer: Ana Pérez?",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        shop.calls().len(),
        1,
        "exactly one host call: {:?}",
        shop.calls()
    );
    let stages: Vec<String> = trace(&body).into_iter().map(|e| e.0).collect();
    assert_eq!(stages, ["selection", "execution", "response_generation"]);
    let ordinals: Vec<i64> = body["capability_trace"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ordinal"].as_i64().unwrap())
        .collect();
    assert_eq!(ordinals, [1, 2, 3]);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_02_a_missing_argument_is_asked_for_never_invented(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (status, body) = shop.say(None, "¿Dónde está mi pedido?").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        reply(&body).contains("el número de pedido"),
        "asks by the argument's description: {body}"
    );
    assert_eq!(
        shop.calls().len(),
        0,
        "nothing called with an invented value"
    );
    assert_eq!(trace(&body).last().unwrap().2, "clarification");
    // The answer completes the pending operation.
    let (_, body) = shop.say(Some(&conversation(&body)), "Es el A-1001").await;
    assert_eq!(
        shop.calls(),
        vec![("/orders/status".to_owned(), json!({"order": "A-1001"}))]
    );
    assert!(reply(&body).contains("enviado"), "{body}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_03_history_is_reused_when_unambiguous_and_confirmed_when_not(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    let c = conversation(&body);
    let (_, body) = shop.say(Some(&c), "¿Y cuál es el estado del envío?").await;
    assert_eq!(shop.calls().len(), 2, "reused without asking: {body}");
    assert_eq!(shop.calls()[1].1, json!({"order": "A-1001"}));
    assert_eq!(
        body["benchmark_observation"],
        Value::Null,
        "only when asked for"
    );

    // A second order in the history makes the follow-up ambiguous.
    shop.say(Some(&c), "¿Y el pedido A-2002?").await;
    let (_, body) = shop.say(Some(&c), "¿Cuál es el estado del envío?").await;
    assert_eq!(shop.calls().len(), 3, "asks before calling: {body}");
    assert!(
        reply(&body).contains("A-2002") && reply(&body).contains("A-1001"),
        "{body}"
    );
    assert_eq!(trace(&body).last().unwrap().2, "confirmation");
    let (_, body) = shop.say(Some(&c), "sí").await;
    assert_eq!(shop.calls().len(), 4, "{body}");
    assert_eq!(
        shop.calls()[3].1,
        json!({"order": "A-2002"}),
        "the proposed, most recent value"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_04_a_name_like_reference_is_reused_ids_and_conflicts_are_not(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    let c = conversation(&body);
    // "Ana Pérez" came back from order_status; customer_orders binds it.
    let (_, body) = shop.say(Some(&c), "¿Qué pedidos tiene ese cliente?").await;
    assert_eq!(
        shop.calls()[1],
        (
            "/customers/orders".to_owned(),
            json!({"customer": "Ana Pérez"})
        ),
        "{body}"
    );
    assert_eq!(body["benchmark_observation"], Value::Null);
    // Explicit conflicting context wins over the reference.
    let (_, _) = shop
        .say(
            Some(&c),
            "¿Qué pedidos tiene el cliente customer: Luis Gómez?",
        )
        .await;
    assert_eq!(shop.calls()[2].1, json!({"customer": "Luis Gómez"}));

    // An ID-like value (C-77812) is never kept as a reference: asked for instead.
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-2002?").await;
    let c2 = conversation(&body);
    let (_, body) = shop.say(Some(&c2), "¿Qué pedidos tiene ese cliente?").await;
    assert_eq!(shop.calls().len(), 4, "not called with the ID: {body}");
    assert!(reply(&body).contains("el nombre del cliente"), "{body}");
    assert_eq!(
        shop.references(&c2).await,
        vec![],
        "the ID-like value is not kept as a reference"
    );
    let kept = shop.references(&c).await;
    assert_eq!(
        kept.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(),
        ["Ana Pérez"],
        "the name-like one is"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_05_internal_identifiers_are_not_exposed(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    let text = reply(&body);
    for id in shop.ids.values() {
        assert!(
            !body.to_string().contains(id.as_str()),
            "capability id {id} leaked: {body}"
        );
    }
    assert!(
        !text.contains("cap_") && !text.contains("revision") && !text.contains("conv_"),
        "{text}"
    );
    let events = &body["capability_trace"]["events"];
    assert_eq!(
        events[0]["capability"], "order_status",
        "the trace names capabilities, not ids"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_06_replies_are_grounded_and_nothing_is_invented(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    let text = reply(&body);
    assert!(
        text.contains("enviado") && text.contains("Correos"),
        "{text}"
    );
    assert!(
        !text.contains(INTERNAL_FIELD_VALUE),
        "undeclared output was pruned: {text}"
    );
    // Empty result: a fixed text, no data.
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-0404?").await;
    assert_eq!(reply(&body), "No encontré información para esa consulta.");
    assert_eq!(trace(&body)[1].2, "empty");
    // Failure: a fixed text, no data, and an agent dead end is recorded.
    let (status, body) = shop.say(None, "¿Dónde está mi pedido A-5000?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        reply(&body),
        "No pude obtener esa información en este momento. Inténtalo de nuevo más tarde."
    );
    assert_eq!(trace(&body)[1].2, "http_status");
    let (_, gaps) = shop.app.get_capability_gaps(&shop.key, "").await;
    assert_eq!(gaps["events"][0]["kind"], "agent_dead_end", "{gaps}");
    assert_eq!(gaps["events"][0]["capability"], "order_status");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_07_only_active_read_only_capabilities_are_called(backend: Backend) {
    let shop = Shop::open(backend).await;
    let id = &shop.ids["order_status"];
    let (status, _) = shop.app.disable_capability(&shop.key, id, "1").await;
    assert_eq!(status, 200);
    let (_, body) = shop
        .say(None, "¿Cuál es el estado del envío de mi pedido A-1001?")
        .await;
    assert!(
        shop.calls().iter().all(|(p, _)| p != "/orders/status"),
        "a disabled capability is never called: {body}"
    );
    // A mutation capability cannot even be published.
    let mut mutation = order_status("https://api.shop.example");
    mutation["name"] = json!("delete_order");
    mutation["side_effect"] = json!("write");
    let (status, _) = shop.app.create_capability(&shop.key, mutation).await;
    assert_eq!(status, 400);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_07_a_capability_disabled_on_another_replica_is_not_called_on_the_next_turn(
    backend: Backend,
) {
    let shop = Shop::open(backend).await;
    let asked = "¿Cuál es el estado del envío de mi pedido A-1001?";
    let (status, body) = shop.say(None, asked).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(shop.calls().len(), 1, "called while active: {body}");
    // This server now holds the account's active set; another replica
    // disables the capability in the shared database.
    let other = shop.app.replica().await;
    let id = &shop.ids["order_status"];
    let (status, body) = other.disable_capability(&shop.key, id, "1").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = shop.say(None, asked).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        shop.calls().len(),
        1,
        "the next turn sees the other replica's change: {body}"
    );
    // And its re-enabling, too.
    let (status, body) = answer_enable(&other, &shop.key, id, "2").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = shop.say(None, asked).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(shop.calls().len(), 2, "called again once enabled: {body}");
}

async fn answer_enable(app: &TestApp, key: &str, id: &str, if_match: &str) -> (u16, Value) {
    let response = app
        .client
        .post(app.url(&format!("/v1/capabilities/{id}/enable")))
        .bearer_auth(key)
        .header("if-match", if_match)
        .send()
        .await
        .unwrap();
    status_and_json(response).await
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_08_preparation_runs_only_after_an_operation_intent(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop
        .say(None, "La dirección de envío del pedido A-1001")
        .await;
    assert!(
        shop.calls()
            .iter()
            .all(|(p, _)| p != "/orders/prepare-address-change"),
        "{body}"
    );
    let (_, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )
        .await;
    assert_eq!(
        shop.calls().last().unwrap().0,
        "/orders/prepare-address-change",
        "{body}"
    );
    assert_eq!(body["interaction"]["type"], "confirm_operation", "{body}");
    assert_eq!(body["interaction"]["owner"], "host");
    assert_eq!(body["interaction"]["operation"], "change_address");
    assert!(
        body["interaction"]["interaction_id"]
            .as_str()
            .unwrap()
            .starts_with("int_")
    );
    assert_eq!(
        body["interaction"]["preview"]["title"],
        "Cambiar la dirección del pedido A-1001"
    );
}

/// Imports one more preparation into the shop: its capability id.
async fn add_preparation(shop: &Shop, definition: Value) -> String {
    let response = shop
        .app
        .import_capabilities(&shop.key, &new_key(), vec![definition])
        .await;
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 201, "{body}");
    body["capabilities"][0]["id"].as_str().unwrap().to_owned()
}

/// The preparation paths the shop's endpoint was called on, in order.
fn prepared(shop: &Shop) -> Vec<String> {
    shop.calls()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|p| p.starts_with("/orders/prepare-"))
        .collect()
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_08_a_refund_is_not_a_return_and_devolucion_is_either(backend: Backend) {
    let shop = Shop::open(backend).await;
    let base = shop.endpoint.base.clone();
    let ret = add_preparation(
        &shop,
        preparation(
            &base,
            "prepare_return",
            "Devolver artículos del pedido",
            "Cuando el usuario quiere devolver artículos de un pedido",
            "/orders/prepare-return",
        ),
    )
    .await;
    // Rule 8: the intent for *that* operation. A refund prepares no return…
    let (status, body) = shop.say(None, "Please refund my order A-1001").await;
    assert_eq!(status, 200, "{body}");
    assert!(prepared(&shop).is_empty(), "{body}");
    assert!(body.get("interaction").is_none(), "{body}");
    assert_eq!(trace(&body).last().unwrap().2, "operation_not_offered");
    // …while a return, in either language, does.
    let (_, body) = shop.say(None, "I want to return order A-1001").await;
    assert_eq!(prepared(&shop), ["/orders/prepare-return"], "{body}");
    let (_, body) = shop
        .say(None, "Quiero hacer una devolución del pedido A-1001")
        .await;
    assert_eq!(prepared(&shop).len(), 2, "{body}");
    assert_eq!(body["interaction"]["operation"], "return_items", "{body}");

    // The other way round: a return prepares no refund.
    add_preparation(
        &shop,
        preparation(
            &base,
            "prepare_refund",
            "Refunds the amount paid for an order",
            "When the user asks for their money back",
            "/orders/prepare-refund",
        ),
    )
    .await;
    let (_, body) = shop.say(None, "Please refund my order A-1001").await;
    assert_eq!(body["interaction"]["operation"], "refund_order", "{body}");
    let (_, body) = shop.say(None, "I want to return order A-1001").await;
    assert_eq!(body["interaction"]["operation"], "return_items", "{body}");
    let (status, _) = shop.app.disable_capability(&shop.key, &ret, "1").await;
    assert_eq!(status, 200);
    let before = prepared(&shop).len();
    let (_, body) = shop.say(None, "I want to return order A-1001").await;
    assert_eq!(
        prepared(&shop).len(),
        before,
        "no refund for a return: {body}"
    );
    assert_eq!(trace(&body).last().unwrap().2, "operation_not_offered");
    // Spanish "devolución" covers the refund the capability speaks of.
    let (_, body) = shop
        .say(None, "Quiero hacer una devolución del pedido A-1001")
        .await;
    assert_eq!(body["interaction"]["operation"], "refund_order", "{body}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_alone_does_not_fix_the_conversations_language(backend: Backend) {
    let shop = Shop::open(backend).await;
    for text in ["", "  "] {
        let (status, body) = shop
            .send_with_image(text, "image/png", png_with_marker())
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(trace(&body).last().unwrap().2, "image_needs_instructions");
        let c = conversation(&body);
        // The first message with text decides: English, to the confirmation.
        let (_, body) = shop
            .say(
                Some(&c),
                "Please change the delivery address of order A-1001",
            )
            .await;
        assert_eq!(body["interaction"]["type"], "confirm_operation", "{body}");
        assert!(
            reply(&body).ends_with("Please review and confirm the operation."),
            "{body}"
        );
        // Kept: the host's report on it is answered in English too.
        let interaction = body["interaction"]["interaction_id"].as_str().unwrap();
        let (status, reported) = shop
            .report(
                &c,
                &new_key(),
                json!({"interaction_id": interaction, "operation": "change_address",
                       "status": "succeeded"}),
            )
            .await;
        assert_eq!(status, 200, "{reported}");
        assert_eq!(
            reported["message"]["body"], "The operation was completed successfully.",
            "{reported}"
        );
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_09_not_found_preparation_has_the_exact_text(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (status, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-0404",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(reply(&body), NOT_FOUND_TEXT);
    assert!(
        body.get("interaction").is_none(),
        "nothing for the host to route: {body}"
    );
    assert_eq!(trace(&body).last().unwrap().2, "not_found");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_10_opaque_references_reach_only_the_host_response(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )
        .await;
    assert_eq!(
        body["interaction"]["operation_ref"], OPERATION_REF,
        "the host gets its reference"
    );
    assert!(!reply(&body).contains(OPERATION_REF));
    let c = conversation(&body);
    let (_, later) = shop.say(Some(&c), "gracias").await;
    assert!(
        !later.to_string().contains(OPERATION_REF),
        "not resent later: {later}"
    );
    // A selection: the option references go back with their options.
    let (_, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-2002",
        )
        .await;
    assert_eq!(body["interaction"]["type"], "selection", "{body}");
    assert_eq!(body["interaction"]["selection_ref"], SELECTION_REF);
    assert_eq!(
        body["interaction"]["options"][0],
        json!({"option_ref": OPTION_REF, "label": "Casa"})
    );
    for secret in [OPERATION_REF, SELECTION_REF, OPTION_REF] {
        assert!(
            !shop.app.db.contains(secret).await,
            "{secret} is not persisted"
        );
    }
}

/// A custom guest's selection whose options are not objects (issue 25): the
/// turn answers the failed text and records where the guest's output broke
/// the closed interaction object; nothing of it reaches the host.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_10_a_guest_interaction_outside_the_closed_object_is_refused_where_it_breaks(
    backend: Backend,
) {
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests/odd-interaction");
    let guest = warden_guest_build::build_guest(
        &source,
        "odd_interaction_guest",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    let shop = Shop::open_with(TestApp::spawn_with_guest(backend, guest).await).await;
    let (status, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-2002",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("interaction").is_none(), "{body}");
    let events = trace(&body);
    assert!(
        events
            .iter()
            .any(|(stage, _, reason)| stage == "execution" && reason == "interaction_invalid"),
        "{body}"
    );
    assert_eq!(events.last().unwrap().2, "capability_failed", "{body}");
    let (_, gaps) = shop.app.get_capability_gaps(&shop.key, "").await;
    assert_eq!(
        gaps["events"][0]["reason_code"], "interaction_invalid",
        "{gaps}"
    );
    assert_eq!(gaps["events"][0]["kind"], "agent_dead_end", "{gaps}");
    for secret in [SELECTION_REF, OPTION_REF] {
        assert!(
            !body.to_string().contains(secret),
            "{secret} reached the host"
        );
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_11_and_12_images_are_never_stored_and_pending_operations_complete_or_cancel(
    backend: Backend,
) {
    let shop = Shop::open(backend).await;
    let image = png_with_marker();
    let (status, body) = shop
        .send_with_image(
            "Quiero cambiar la dirección de este pedido",
            "image/png",
            image.clone(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        reply(&body).contains("el número de pedido"),
        "the image alone defines no field: {body}"
    );
    let c = conversation(&body);
    // Answered in the same conversation, without re-uploading.
    let (_, body) = shop.say(Some(&c), "A-1001").await;
    assert_eq!(body["interaction"]["type"], "confirm_operation", "{body}");
    assert!(
        !shop.app.db.contains_bytes(&image).await,
        "no image bytes stored"
    );
    assert!(!shop.app.db.contains_bytes(IMAGE_MARKER).await);

    // `cancelar` discards a pending operation without calling the host.
    let (_, body) = shop
        .send_with_image(
            "Quiero cambiar la dirección de este pedido",
            "image/png",
            image,
        )
        .await;
    let c = conversation(&body);
    let calls = shop.calls().len();
    let (_, body) = shop.say(Some(&c), "cancelar").await;
    assert_eq!(shop.calls().len(), calls, "no host call: {body}");
    assert_eq!(trace(&body).last().unwrap().2, "cancelled");
    let (_, body) = shop.say(Some(&c), "A-1001").await;
    assert!(
        body.get("interaction").is_none(),
        "the discarded operation does not come back: {body}"
    );
    assert_eq!(shop.calls().len(), calls);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_13_an_exclusion_clause_gets_the_safe_fallback_without_executor_io(backend: Backend) {
    let shop = Shop::open(backend).await;
    for text in [
        "¿Dónde está mi pedido A-1001? No uses ninguna herramienta.",
        "Where is my order A-1001? Do not call any capability.",
    ] {
        let (status, body) = shop.say(None, text).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            trace(&body),
            vec![(
                "response_generation".to_owned(),
                None,
                "capability_excluded".to_owned()
            )]
        );
        assert!(!reply(&body).contains("enviado"));
    }
    assert_eq!(shop.calls().len(), 0, "no executor I/O");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_topics_and_out_of_scope_apply_and_gaps_are_recorded(backend: Backend) {
    let shop = Shop::open(backend).await;
    let policy = json!({"version": 1, "allowed_topics": [{"name": "pedidos", "description": "Pedidos, devoluciones y garantías"}],
                            "out_of_scope_response": "Solo hablo de pedidos."});
    let (status, _) = shop.app.put_policy(&shop.key, &policy).await;
    assert_eq!(status, 201);
    let (_, body) = shop.say(None, "¿Quién ganó el partido de fútbol?").await;
    assert_eq!(reply(&body), "Solo hablo de pedidos.");
    assert_eq!(trace(&body).last().unwrap().2, "out_of_scope");
    // In scope, but no capability fits: a coverage gap, without text in `metadata` mode.
    let (_, body) = shop.say(None, "¿Cómo funciona la garantía?").await;
    assert_eq!(trace(&body).last().unwrap().2, "no_capability", "{body}");
    let (_, listed) = shop.app.get_capability_gaps(&shop.key, "").await;
    assert_eq!(listed["events"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["events"][0]["kind"], "coverage_gap");
    assert_eq!(listed["events"][0]["reason_code"], "no_matching_capability");
    assert_eq!(
        listed["events"][0]["conversation_id"],
        body["conversation_id"]
    );
    assert!(
        listed["events"][0].get("message_text").is_none(),
        "{listed}"
    );
    // In `text` mode the message text is recorded and shown.
    let (status, _) = shop
        .app
        .put_settings(&shop.key, &json!({"diagnostic_message_mode": "text"}))
        .await;
    assert!((200..300).contains(&status));
    shop.say(None, "¿Cómo funciona la garantía de devoluciones?")
        .await;
    let (_, listed) = shop.app.get_capability_gaps(&shop.key, "").await;
    assert_eq!(
        listed["events"][0]["message_text"], "¿Cómo funciona la garantía de devoluciones?",
        "{listed}"
    );
    // Without a policy, platform defaults: no topic restriction.
    shop.app.delete_policy(&shop.key).await;
    let (_, body) = shop.say(None, "¿Quién ganó el partido de fútbol?").await;
    assert_eq!(trace(&body).last().unwrap().2, "no_capability", "{body}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_and_benchmark_observation_have_the_documented_shape(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (_, body) = shop
        .send(
            json!({"message": {"type": "text", "body": "¿Dónde está mi pedido A-1001?"},
                                         "metadata": {"benchmark_correlation_id": "bench-1"}}),
        )
        .await;
    let t = &body["capability_trace"];
    assert_eq!(t["version"], "v1");
    assert!(t["run_id"].as_str().unwrap().starts_with("run_"));
    assert_eq!(t["message_id"], body["message"]["id"]);
    assert_eq!(
        t["events"][0],
        json!({"ordinal": 1, "stage": "selection", "status": "selected",
            "capability": "order_status", "revision": 1, "reason_code": "matched"})
    );
    assert_eq!(t["events"][1]["status"], "result_received");
    assert_eq!(
        t["events"][2],
        json!({"ordinal": 3, "stage": "response_generation", "status": "response_generated", "reason_code": "grounded"})
    );
    for field in [
        "preparation_ms",
        "selection_inference_ms",
        "selection_retry_delay_ms",
        "execution_ms",
        "grounded_inference_ms",
        "e2e_processing_ms",
        "selection_inference_attempts",
        "executor_attempts",
    ] {
        assert!(t["timing"][field].is_u64(), "{field}: {t}");
    }
    assert_eq!(t["timing"]["executor_attempts"], 1);
    assert_eq!(
        body["benchmark_observation"],
        json!({"capability": "order_status", "argument_category": "known",
            "fixture_result": "non_empty", "status": 200, "model": "warden-builtin", "correlation_id": "bench-1"})
    );
    assert_eq!(body["message"]["role"], "assistant");
    assert_eq!(body["message"]["type"], "text");
}

/// How often one turn tokenises its message (issue 25: it is read once,
/// `language::Said`). Debug builds count the tokenisations of texts holding
/// the probe word; the turn here selects, calls and answers from a result.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_tokenises_its_message_once() {
    use warden::agent::language::words::probe;
    let shop = Shop::open(Backend::Sqlite).await;
    let mut counts = Vec::new();
    let m = probe::MARKER;
    for message in [
        // A look-up answered from the result.
        format!("{m} dónde está mi pedido A-1001 {m}?"),
        // A preparation: an interaction.
        format!("{m} quiero cambiar la dirección de envío del pedido A-1001 {m}"),
        // Two questions: the planner's focus has three parts.
        format!("{m} dónde está mi pedido A-1001 y qué pedidos tiene Luis Gómez {m}?"),
    ] {
        let before = probe::tokenised();
        let (status, body) = shop.say(None, &message).await;
        assert_eq!(status, 200, "{body}");
        counts.push(probe::tokenised() - before);
    }
    eprintln!("tokenisations of the message per turn: {counts:?}");
    assert!(counts.iter().all(|n| *n == 1), "{counts:?}");
}
