//! The runtime rules a model could break (contract 1: rules 1, 2, 5, 6, 7,
//! 10, 13), with a fake OpenAI-compatible backend proposing the violation
//! and the engine refusing it; and the backend's outage as 503.

use crate::helpers::fake_inference::{FakeInference, FakeReply};
use crate::helpers::shop::*;
use crate::helpers::*;
use serde_json::{Value, json};
use warden::cli::PlannerArgs;

async fn shop_with_model(backend: Backend, script: Vec<FakeReply>) -> (Shop, FakeInference) {
    let model = FakeInference::start(script).await;
    let planner = PlannerArgs {
        inference_url: Some(model.base_url()),
        inference_model: Some("fake-model".into()),
        inference_api_key: Some("sk-test-inference".into()),
        inference_timeout_ms: 2_000,
    };
    let shop = Shop::open_with(TestApp::spawn_with_planner(backend, planner).await).await;
    (shop, model)
}

fn order(order: &str) -> FakeReply {
    FakeReply::tool_call("order_status", json!({"order": order}))
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_01_a_second_tool_call_is_not_executed(backend: Backend) {
    let (shop, model) = shop_with_model(
        backend,
        vec![
            FakeReply::ToolCalls(vec![
                (
                    "order_status".into(),
                    json!({"order": "A-1001"}).to_string(),
                ),
                (
                    "customer_orders".into(),
                    json!({"customer": "Ana Pérez"}).to_string(),
                ),
            ]),
            FakeReply::text("Tu pedido está enviado con Correos."),
        ],
    )
    .await;
    let (status, body) = shop
        .say(
            None,
            "¿Dónde está mi pedido A-1001 y qué pedidos tiene Ana Pérez?",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        shop.calls(),
        vec![("/orders/status".to_owned(), json!({"order": "A-1001"}))]
    );
    assert_eq!(reply(&body), "Tu pedido está enviado con Correos.");
    assert_eq!(
        body["capability_trace"]["timing"]["selection_inference_attempts"],
        1
    );
    assert_eq!(model.requests().len(), 2, "plan, then the grounded reply");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_02_an_invented_argument_is_dropped_and_asked_for(backend: Backend) {
    let (shop, _model) = shop_with_model(backend, vec![order("A-9999")]).await;
    let (status, body) = shop.say(None, "¿Dónde está mi pedido?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(shop.calls().len(), 0, "the invented A-9999 is never sent");
    assert!(reply(&body).contains("el número de pedido"), "{body}");
    // Malformed tool arguments are never guessed at either.
    let (shop, _model) = shop_with_model(
        backend,
        vec![FakeReply::ToolCall {
            name: "order_status".into(),
            arguments: "{\"order\": ".into(),
        }],
    )
    .await;
    let (status, body) = shop.say(None, "¿Dónde está mi pedido?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(shop.calls().len(), 0);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_05_identifiers_never_reach_the_model_or_the_user(backend: Backend) {
    let (shop, model) = shop_with_model(
        backend,
        vec![
            order("A-1001"),
            FakeReply::text("Enviado (capacidad cap_zz9x revisión 1)."),
        ],
    )
    .await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    assert!(!reply(&body).contains("cap_"), "{body}");
    assert_eq!(trace(&body).last().unwrap().2, "grounded_template");
    let sent = serde_json::to_string(&model.requests()).unwrap();
    for id in shop.ids.values() {
        assert!(
            !sent.contains(id.as_str()),
            "capability id sent to the model"
        );
    }
    assert!(
        !sent.contains(&shop.endpoint.base),
        "endpoint URL sent to the model"
    );
    assert!(
        !sent.contains("endpoint-token-123") && !sent.contains("cred_orders"),
        "credential sent to the model"
    );
    assert!(
        sent.contains("\"order_status\""),
        "tools are named by capability name"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_06_invented_data_is_replaced_and_empty_results_are_not_narrated(
    backend: Backend,
) {
    let (shop, model) = shop_with_model(
        backend,
        vec![
            order("A-1001"),
            FakeReply::text("Llegará el 12 de mayo a las 18:00."),
        ],
    )
    .await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    assert!(!reply(&body).contains("12 de mayo"), "{body}");
    assert!(
        reply(&body).contains("enviado"),
        "the grounded template instead: {body}"
    );
    // An empty result: a fixed text, and no second inference call.
    model.set_script(vec![
        order("A-0404"),
        FakeReply::text("Tu pedido llega mañana."),
    ]);
    let before = model.requests().len();
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-0404?").await;
    assert_eq!(reply(&body), "No encontré información para esa consulta.");
    assert_eq!(model.requests().len(), before + 1);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_07_unoffered_or_disabled_capabilities_are_refused(backend: Backend) {
    let (shop, model) = shop_with_model(
        backend,
        vec![FakeReply::tool_call(
            "delete_order",
            json!({"order": "A-1001"}),
        )],
    )
    .await;
    let (status, body) = shop.say(None, "Borra mi pedido A-1001").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(shop.calls().len(), 0);
    assert_eq!(trace(&body).last().unwrap().2, "capability_refused");
    let id = &shop.ids["order_status"];
    shop.app.disable_capability(&shop.key, id, "1").await;
    model.set_script(vec![order("A-1001")]);
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    assert_eq!(shop.calls().len(), 0, "{body}");
    let tools = model.requests().last().unwrap()["tools"].clone();
    assert!(
        !tools.to_string().contains("\"order_status\""),
        "a disabled capability is not offered: {tools}"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_10_opaque_refs_never_reach_the_model(backend: Backend) {
    let (shop, model) = shop_with_model(
        backend,
        vec![FakeReply::tool_call(
            "prepare_address_change",
            json!({"order": "A-1001"}),
        )],
    )
    .await;
    let (_, body) = shop
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )
        .await;
    assert_eq!(
        body["interaction"]["operation_ref"], OPERATION_REF,
        "{body}"
    );
    model.set_script(vec![FakeReply::text("¿Algo más?")]);
    let (_, _) = shop.say(Some(&conversation(&body)), "gracias").await;
    let sent = serde_json::to_string(&model.requests()).unwrap();
    assert!(
        !sent.contains(OPERATION_REF),
        "the reference reached the model"
    );
    assert!(!shop.app.db.contains(OPERATION_REF).await);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_13_an_exclusion_clause_skips_the_model_and_the_executor(backend: Backend) {
    let (shop, model) = shop_with_model(backend, vec![order("A-1001")]).await;
    let (_, body) = shop
        .say(
            None,
            "¿Dónde está mi pedido A-1001? No uses ninguna herramienta.",
        )
        .await;
    assert_eq!(
        trace(&body),
        vec![(
            "response_generation".to_owned(),
            None,
            "capability_excluded".to_owned()
        )]
    );
    assert_eq!(shop.calls().len(), 0);
    assert_eq!(model.requests().len(), 0);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inference_outage_is_503_and_stores_nothing(backend: Backend) {
    let (shop, _model) = shop_with_model(backend, vec![FakeReply::Status(500)]).await;
    let (status, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    assert_eq!(status, 503, "{body}");
    assert_nested_error(&body, "INFERENCE_UNAVAILABLE");
    assert!(
        !shop.app.db.contains("¿Dónde está mi pedido A-1001?").await,
        "no half-written turn"
    );
    let _: Value = body;
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_reads_an_image_in_memory_and_a_clarification_completes_it(backend: Backend) {
    // The model reads nothing usable from the image: the engine asks.
    let (shop, model) = shop_with_model(
        backend,
        vec![FakeReply::tool_call("prepare_address_change", json!({}))],
    )
    .await;
    let image = png_with_marker();
    let (status, body) = shop
        .send_with_image(
            "Quiero cambiar la dirección de este pedido",
            "image/png",
            image.clone(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(reply(&body).contains("el número de pedido"), "{body}");
    let sent = model.requests()[0].to_string();
    assert!(
        sent.contains("data:image/png;base64,"),
        "vision input reaches the model"
    );
    // The answer completes the pending operation: no re-upload, no second plan.
    let (_, body) = shop.say(Some(&conversation(&body)), "A-1001").await;
    assert_eq!(body["interaction"]["type"], "confirm_operation", "{body}");
    assert_eq!(model.requests().len(), 1);
    assert!(
        !shop.app.db.contains_bytes(&image).await
            && !shop.app.db.contains_bytes(IMAGE_MARKER).await
    );

    // A value the model read from the image (not in the text) is used, still validated by the guest.
    model.set_script(vec![FakeReply::tool_call(
        "prepare_address_change",
        json!({"order": "A-1001"}),
    )]);
    let (_, body) = shop
        .send_with_image(
            "Quiero cambiar la dirección de este pedido",
            "image/png",
            image.clone(),
        )
        .await;
    assert_eq!(body["interaction"]["type"], "confirm_operation", "{body}");
    // Without an image the same unwritten value is dropped and asked for.
    let (_, body) = shop
        .say(None, "Quiero cambiar la dirección de este pedido")
        .await;
    assert!(
        body.get("interaction").is_none() && reply(&body).contains("el número de pedido"),
        "{body}"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_rule_03_an_ambiguous_history_value_is_confirmed_not_assumed(backend: Backend) {
    let (shop, model) = shop_with_model(
        backend,
        vec![order("A-1001"), FakeReply::text("Enviado con Correos.")],
    )
    .await;
    let (_, body) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    let c = conversation(&body);
    model.set_script(vec![
        order("A-2002"),
        FakeReply::text("Preparando, con SEUR."),
    ]);
    shop.say(Some(&c), "¿Y el pedido A-2002?").await;
    // The model picks the older order from an ambiguous history.
    model.set_script(vec![order("A-1001")]);
    let calls = shop.calls().len();
    let (_, body) = shop.say(Some(&c), "¿Cuál es el estado del envío?").await;
    assert_eq!(
        shop.calls().len(),
        calls,
        "not called on an assumption: {body}"
    );
    assert_eq!(trace(&body).last().unwrap().2, "confirmation");
}
