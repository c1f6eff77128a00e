//! The HTTP message channel's edges: multipart parts and limits, bounds,
//! authentication, unknown conversations, duplicate deliveries, and what
//! the database holds after a whole conversation.

use crate::helpers::shop::*;
use crate::helpers::*;
use serde_json::json;

fn payload(text: &str) -> serde_json::Value {
    json!({"message": {"type": "text", "body": text}})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_edge_cases(backend: Backend) {
    let shop = Shop::open(backend).await;
    let send = |form: reqwest::multipart::Form| shop.app.send_multipart(&shop.key, form);
    let json_part = |v: &serde_json::Value| {
        reqwest::multipart::Part::text(v.to_string())
            .mime_str("application/json")
            .unwrap()
    };
    let image_part = |bytes: Vec<u8>, mime: &str| {
        reqwest::multipart::Part::bytes(bytes)
            .file_name("x")
            .mime_str(mime)
            .unwrap()
    };

    // Missing payload.
    let (status, body) = send(
        reqwest::multipart::Form::new().part("image", image_part(png_with_marker(), "image/png")),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
    // Two images.
    let (status, body) = send(
        reqwest::multipart::Form::new()
            .part("payload", json_part(&payload("hola")))
            .part("image", image_part(png_with_marker(), "image/png"))
            .part("image", image_part(png_with_marker(), "image/png")),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    // 4 MiB + 1 byte.
    let mut big = png_with_marker();
    big.resize(4 * 1024 * 1024 + 1, 0);
    let (status, body) = send(
        reqwest::multipart::Form::new()
            .part("payload", json_part(&payload("hola")))
            .part("image", image_part(big, "image/png")),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert_nested_error(&body, "REQUEST_TOO_LARGE");
    // Exactly 4 MiB is accepted.
    let mut max = png_with_marker();
    max.resize(4 * 1024 * 1024, 0);
    let (status, body) = send(
        reqwest::multipart::Form::new()
            .part("payload", json_part(&payload("hola")))
            .part("image", image_part(max, "image/png")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A PNG declared as JPEG: recognised by its bytes, accepted.
    let (status, body) = send(
        reqwest::multipart::Form::new()
            .part("payload", json_part(&payload("hola")))
            .part("image", image_part(png_with_marker(), "image/jpeg")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A text file declared as PNG.
    let (status, body) = send(
        reqwest::multipart::Form::new()
            .part("payload", json_part(&payload("hola")))
            .part(
                "image",
                image_part(b"just some text, not an image".to_vec(), "image/png"),
            ),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
    // Base64 image fields in JSON.
    let (status, body) = shop
        .send(json!({"message": {"type": "text", "body": "hola"}, "image": "iVBORw0KGgo="}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(shop.calls().len(), 0);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_bounds_and_unknown_conversations(backend: Backend) {
    let shop = Shop::open(backend).await;
    let response = shop
        .app
        .client
        .post(shop.app.url("/v1/channels/http/messages"))
        .json(&payload("hola"))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 401);
    assert_nested_error(&body, "UNAUTHORIZED");
    let (status, body) = shop
        .send(json!({"message": {"type": "text", "body": "x".repeat(4001)}}))
        .await;
    assert_eq!(status, 422, "{body}");
    // The channel declares no 404: an unknown conversation_id does not validate.
    let (status, body) = shop.say(Some("conv_doesnotexist"), "hola").await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
    // Another account's conversation is unknown to this key.
    let (_, body) = shop.say(None, "hola").await;
    let theirs = conversation(&body);
    let other = shop.app.account_with_key("other").await;
    let (status, _) = shop
        .app
        .send_message(
            &other,
            &json!({"conversation_id": theirs, "message": {"type": "text", "body": "hola"}}),
        )
        .await;
    assert_eq!(status, 422);
    let response = shop
        .app
        .client
        .get(shop.app.url("/v1/channels/http/messages"))
        .bearer_auth(&shop.key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_client_event_is_a_duplicate(backend: Backend) {
    let shop = Shop::open(backend).await;
    let send = || {
        shop.app
            .client
            .post(shop.app.url("/v1/channels/http/messages"))
            .bearer_auth(&shop.key)
            .header("client-event-id", "evt-123")
            .json(&payload("¿Dónde está mi pedido A-1001?"))
            .send()
    };
    let (status, _) = status_and_json(send().await.unwrap()).await;
    assert_eq!(status, 200);
    let (status, body) = status_and_json(send().await.unwrap()).await;
    assert_eq!(status, 409, "{body}");
    assert_nested_error(&body, "CONFLICT");
    assert_eq!(shop.calls().len(), 1, "the duplicate did nothing");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_holds_no_image_ref_credential_or_raw_result(backend: Backend) {
    let shop = Shop::open(backend).await;
    let image = png_with_marker();
    let (_, body) = shop
        .send_with_image(
            "Quiero cambiar la dirección de este pedido",
            "image/png",
            image.clone(),
        )
        .await;
    let c = conversation(&body);
    let (_, body) = shop.say(Some(&c), "A-1001").await;
    assert_eq!(body["interaction"]["operation_ref"], OPERATION_REF);
    let (_, body) = shop.say(Some(&c), "¿Dónde está mi pedido A-1001?").await;
    assert!(reply(&body).contains("enviado"));
    let interaction = shop.calls().len();
    assert_eq!(interaction, 2);

    let db = &shop.app.db;
    assert!(
        db.contains("¿Dónde está mi pedido A-1001?").await,
        "the history is stored (sanity check of the probe)"
    );
    assert!(!db.contains_bytes(&image).await, "image bytes");
    assert!(!db.contains_bytes(IMAGE_MARKER).await, "image marker");
    assert!(!db.contains(OPERATION_REF).await, "opaque reference");
    assert!(
        !db.contains("endpoint-token-123").await,
        "credential in clear"
    );
    assert!(
        !db.contains(INTERNAL_FIELD_VALUE).await,
        "raw, unpruned result"
    );
    assert!(
        !db.contains("\"internal_margin\"").await,
        "raw result field"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_alone_is_accepted_and_the_user_asked_what_to_do_with_it(backend: Backend) {
    // Rule 12: an image alone does not define which fields to extract.
    let shop = Shop::open(backend).await;
    let (status, body) = shop
        .send_with_image("", "image/png", png_with_marker())
        .await;
    assert_eq!(status, 200, "{body}");
    let reply = body["message"]["body"].as_str().unwrap();
    assert!(reply.contains("imagen") && reply.contains('?'), "{body}");
    let events = body["capability_trace"]["events"].as_array().unwrap();
    assert_eq!(
        events.last().unwrap()["reason_code"],
        "image_needs_instructions"
    );
    assert!(
        shop.calls().is_empty(),
        "nothing is called for an image alone"
    );
    assert!(
        !shop.app.db.contains_bytes(IMAGE_MARKER).await,
        "the image is not stored"
    );
    // Without an image an empty text is still refused.
    let (status, body) = shop.send(payload("")).await;
    assert_eq!(status, 422, "{body}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_form_metadata_nests_within_its_bounds(backend: Backend) {
    let shop = Shop::open(backend).await;
    let metadata = json!({"cart": {"items": [{"sku": "X1", "qty": 2}]}, "tags": ["vip", 3]});
    let mut request = payload("hola");
    request["metadata"] = metadata.clone();
    let (status, body) = shop.send(request).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        shop.app.db.contains("X1").await && shop.app.db.contains("vip").await,
        "kept as sent"
    );
    let mut too_deep = payload("hola");
    too_deep["metadata"] = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
    let (status, body) = shop.send(too_deep).await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
}
