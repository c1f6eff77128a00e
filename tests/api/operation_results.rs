//! `POST /v1/conversations/{id}/operation-results`: the host's terminal
//! report on an interaction. Replays, key reuse, expiry, unknown ids,
//! forbidden fields and statuses; the host is never called.

use crate::helpers::fixtures::new_key;
use crate::helpers::shop::*;
use crate::helpers::*;
use serde_json::{Value, json};

async fn with_interaction(shop: &Shop, order: &str) -> (String, String) {
    let (_, body) = shop
        .say(
            None,
            &format!("Quiero cambiar la dirección de envío del pedido {order}"),
        )
        .await;
    let interaction = body["interaction"]["interaction_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();
    (conversation(&body), interaction)
}

fn result(interaction: &str, status: &str) -> Value {
    json!({"interaction_id": interaction, "operation": "change_address", "status": status})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_closes_the_interaction_and_replays(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (c, i) = with_interaction(&shop, "A-1001").await;
    let calls = shop.calls().len();
    let key = new_key();
    let (status, first) = shop.report(&c, &key, result(&i, "succeeded")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["status"], "succeeded");
    assert_eq!(
        first["message"]["body"],
        "La operación se completó correctamente."
    );
    // The same key and request: the first answer again.
    let (status, again) = shop.report(&c, &key, result(&i, "succeeded")).await;
    assert_eq!((status, &again), (200, &first));
    // The same key with another status, operation or interaction: 409 IDEMPOTENCY_KEY_REUSED.
    for other in [
        result(&i, "failed"),
        json!({"interaction_id": i, "operation": "other", "status": "succeeded"}),
        result("int_other", "succeeded"),
    ] {
        let (status, body) = shop.report(&c, &key, other).await;
        assert_eq!(status, 409, "{body}");
        assert_flat_error(&body, "IDEMPOTENCY_KEY_REUSED");
    }
    // A new key on a closed interaction: 409 CONFLICT.
    let (status, body) = shop.report(&c, &new_key(), result(&i, "failed")).await;
    assert_eq!(status, 409, "{body}");
    assert_flat_error(&body, "CONFLICT");
    assert_eq!(shop.calls().len(), calls, "the host is never called here");
    // The deterministic text is in the conversation.
    assert!(
        shop.app
            .db
            .contains("La operación se completó correctamente.")
            .await
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_expired_and_invalid_reports(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (c, i) = with_interaction(&shop, "A-1001").await;
    let (status, body) = shop
        .report("conv_unknown", &new_key(), result(&i, "succeeded"))
        .await;
    assert_eq!(status, 404, "{body}");
    assert_flat_error(&body, "NOT_FOUND");
    let (status, _) = shop
        .report(&c, &new_key(), result("int_unknown", "succeeded"))
        .await;
    assert_eq!(status, 404);
    for bad in [
        result(&i, "done"),
        json!({"interaction_id": i, "operation": "change_address", "status": "succeeded", "operation_ref": OPERATION_REF}),
        json!({"interaction_id": i, "operation": "change_address", "status": "succeeded", "arguments": {"address": "x"}}),
        json!({"interaction_id": i, "operation": "change_address", "status": "succeeded", "message": "hecho"}),
        json!({"interaction_id": i, "operation": "change_address"}),
        json!({"interaction_id": i, "operation": "other_operation", "status": "succeeded"}),
    ] {
        let (status, body) = shop.report(&c, &new_key(), bad.clone()).await;
        assert_eq!(status, 400, "{bad} → {body}");
    }
    let response = shop
        .app
        .client
        .post(
            shop.app
                .url(&format!("/v1/conversations/{c}/operation-results")),
        )
        .bearer_auth(&shop.key)
        .json(&result(&i, "succeeded"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400, "Idempotency-Key is required");
    let long = "c".repeat(129);
    let (status, _) = shop
        .report(&long, &new_key(), result(&i, "succeeded"))
        .await;
    assert_eq!(status, 400);
    let response = shop
        .app
        .client
        .post(
            shop.app
                .url(&format!("/v1/conversations/{c}/operation-results")),
        )
        .header("idempotency-key", new_key())
        .json(&result(&i, "succeeded"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // Expired between the offer and the report.
    let (c2, expired) = with_interaction(&shop, "A-1001").await;
    shop.expire_interaction(&expired).await;
    let (status, body) = shop
        .report(&c2, &new_key(), result(&expired, "succeeded"))
        .await;
    assert_eq!(status, 410, "{body}");
    // After all those refusals the interaction can still be closed.
    let (status, _) = shop.report(&c, &new_key(), result(&i, "cancelled")).await;
    assert_eq!(status, 200);
}
