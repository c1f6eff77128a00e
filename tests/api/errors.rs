use crate::helpers::*;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_in_the_route_family_shape(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for path in ["/", "/v1/nope", "/v2/agent-policy", "/health/x"] {
        let (status, body) =
            status_and_json(app.client.get(app.url(path)).send().await.unwrap()).await;
        assert_eq!(status, 404, "{path}");
        assert_flat_error(&body, "NOT_FOUND");
    }
    for path in [
        "/v1/channels/nope",
        "/v1/prompt-integrations/pi_public_x/nope",
    ] {
        let (status, body) =
            status_and_json(app.client.post(app.url(path)).send().await.unwrap()).await;
        assert_eq!(status, 404, "{path}");
        assert_nested_error(&body, "NOT_FOUND");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_are_405_with_allow(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for (method, path) in [
        ("POST", "/v1/agent-policy"),
        ("PATCH", "/v1/agent-policy"),
        ("DELETE", "/v1/diagnostics/settings"),
        ("POST", "/health"),
    ] {
        let response = app
            .client
            .request(method.parse().unwrap(), app.url(path))
            .send()
            .await
            .unwrap();
        assert!(response.headers().contains_key("allow"), "{method} {path}");
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 405, "{method} {path}");
        assert_flat_error(&body, "METHOD_NOT_ALLOWED");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_json_are_invalid_json(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    for path in ["/v1/agent-policy", "/v1/diagnostics/settings"] {
        let cases = [
            ("application/json", "{not json"),
            ("application/json", ""),
            ("text/plain", r#"{"version":1,"instructions":"x"}"#),
            ("application/x-www-form-urlencoded", "version=1"),
        ];
        for (content_type, body) in cases {
            let response = app
                .client
                .put(app.url(path))
                .bearer_auth(&key)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            assert!(response.headers().contains_key("warden-error-detail"));
            let (status, json) = status_and_json(response).await;
            assert_eq!(status, 400, "{path} {content_type} {body}");
            assert_eq!(
                json,
                serde_json::json!({"error": "INVALID_JSON", "code": "INVALID_JSON"})
            );
        }
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_bodies_are_413(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let big = format!(
        r#"{{"diagnostic_message_mode":"text","pad":"{}"}}"#,
        "x".repeat(64 * 1024)
    );
    let (status, body) = status_and_json(
        app.client
            .put(app.url("/v1/diagnostics/settings"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(big)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 413);
    assert_flat_error(&body, "PAYLOAD_TOO_LARGE");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_comes_before_body_errors(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, body) = status_and_json(
        app.client
            .put(app.url("/v1/agent-policy"))
            .header("content-type", "application/json")
            .body("{oops")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    assert_flat_error(&body, "UNAUTHORIZED");
}
