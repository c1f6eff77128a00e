use crate::helpers::*;
use serde_json::json;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_lifecycle_follows_contract_3_3(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;

    let (status, body) = app.get_policy(&key).await;
    assert_eq!(status, 404);
    assert_flat_error(&body, "NOT_FOUND");

    let first = json!({"version": 1, "instructions": "Responde en español.",
                           "allowed_topics": [{"name": "pedidos", "description": "Estado de pedidos"}],
                           "out_of_scope_response": "Solo puedo ayudar con pedidos."});
    let (status, body) = app.put_policy(&key, &first).await;
    assert_eq!(status, 201);
    assert_eq!(body["policy"], first);
    assert_eq!(body["revision"], 1);
    assert!(body["updated_at"].as_str().unwrap().ends_with('Z'));

    let (status, body) = app.get_policy(&key).await;
    assert_eq!(status, 200);
    assert_eq!(body["policy"], first);

    // Full replacement: omitted fields are gone, not merged.
    let second = json!({"version": 1, "instructions": "Answer in English."});
    let (status, body) = app.put_policy(&key, &second).await;
    assert_eq!(status, 200);
    assert_eq!(body["revision"], 2);
    assert_eq!(app.get_policy(&key).await.1["policy"], second);

    let delete = app.delete_policy(&key).await;
    assert_eq!(delete.status(), 204);
    assert!(delete.text().await.unwrap().is_empty());
    let (status, body) = status_and_json(app.delete_policy(&key).await).await;
    assert_eq!(status, 404);
    assert_flat_error(&body, "NOT_FOUND");
    assert_eq!(app.get_policy(&key).await.0, 404);
    assert_eq!(
        app.put_policy(&key, &second).await.0,
        201,
        "after DELETE the next PUT creates again"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_policies_give_the_three_codes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let cases = [
        (json!({"version": 1}), "POLICY_EMPTY"),
        (
            json!({"version": 1, "out_of_scope_response": "no"}),
            "POLICY_EMPTY",
        ),
        (json!({"instructions": "x"}), "POLICY_INVALID"),
        (json!({"version": 2, "instructions": "x"}), "POLICY_INVALID"),
        (
            json!({"version": "1", "instructions": "x"}),
            "POLICY_INVALID",
        ),
        (
            json!({"version": 1, "instructions": "x", "tone": "formal"}),
            "POLICY_INVALID",
        ),
        (
            json!({"version": 1, "instructions": "x", "out_of_scope_response": "no"}),
            "POLICY_INVALID",
        ),
        (
            json!({"version": 1, "allowed_topics": [{"name": "a"}]}),
            "POLICY_INVALID",
        ),
        (
            json!({"version": 1, "allowed_topics": "a"}),
            "POLICY_INVALID",
        ),
        (
            json!({"version": 1, "instructions": "x".repeat(8001)}),
            "POLICY_INVALID",
        ),
        (json!([1, 2]), "POLICY_INVALID"),
    ];
    for (body, code) in cases {
        let (status, response) = app.put_policy(&key, &body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(response, json!({"error": code, "code": code}), "{body}");
    }
    assert_eq!(
        app.get_policy(&key).await.0,
        404,
        "nothing was stored by invalid PUTs"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_body_limit_is_16_kib(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let base = r#"{"version":1,"instructions":"x"}"#;
    // JSON allows trailing whitespace: pad a valid policy to exact sizes.
    let exact = format!("{base}{}", " ".repeat(16 * 1024 - base.len()));
    let over = format!("{exact} ");
    let send = |body: String| {
        app.client
            .put(app.url("/v1/agent-policy"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(send(exact).await.unwrap().status(), 201);
    let (status, body) = status_and_json(send(over).await.unwrap()).await;
    assert_eq!(status, 413);
    assert_flat_error(&body, "PAYLOAD_TOO_LARGE");
}
