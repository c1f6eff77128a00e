//! Every route answers only the statuses the contract declares for it
//! (issue 15): where an input error has no declared 400, the mapping chosen
//! in docs/contract-decisions.md ("Declared statuses only").

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};

async fn send(
    app: &TestApp,
    method: &str,
    path: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, Value) {
    let mut request = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(key);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    status_and_json(request.send().await.unwrap()).await
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_path_ids_are_404_as_for_an_absent_resource(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    for bad in ["cap_A", "cap_", "cap_UPPER123", "orders", "cap_with-dash1"] {
        for (method, path, body) in [
            ("GET", format!("/v1/capabilities/{bad}"), None),
            ("POST", format!("/v1/capabilities/{bad}/enable"), None),
            ("POST", format!("/v1/capabilities/{bad}/disable"), None),
            (
                "POST",
                format!("/v1/capabilities/{bad}/test"),
                Some(r#"{"arguments":{}}"#),
            ),
        ] {
            let (status, body) = send(&app, method, &path, &key, &[("if-match", "1")], body).await;
            assert_eq!(status, 404, "{method} {path}");
            assert_flat_error(&body, "NOT_FOUND");
        }
    }
    for bad in ["cred_", "cred_a", "orders", "cred_bad*chars"] {
        let (status, body) = app.delete_credential(&key, bad).await;
        assert_eq!(status, 404, "DELETE {bad}");
        assert_flat_error(&body, "NOT_FOUND");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_malformed_if_match_on_enable_and_disable_is_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (_, created) = app
        .create_capability(&key, valid_definition("order_status"))
        .await;
    let id = created["id"].as_str().unwrap();
    let too_big = "9".repeat(30);
    let too_long = "9".repeat(81);
    for action in ["disable", "enable"] {
        let path = format!("/v1/capabilities/{id}/{action}");
        let (status, body) = send(&app, "POST", &path, &key, &[], None).await;
        assert_eq!(status, 409, "{action} without If-Match");
        assert_flat_error(&body, "CONFLICT");
        for bad in [
            "0",
            "abc",
            "W/\"1\"",
            "-1",
            too_big.as_str(),
            too_long.as_str(),
        ] {
            let (status, body) = send(&app, "POST", &path, &key, &[("if-match", bad)], None).await;
            assert_eq!(status, 409, "{action} If-Match {bad}");
            assert_flat_error(&body, "CONFLICT");
        }
    }
    // Nothing changed.
    let (_, detail) = send(
        &app,
        "GET",
        &format!("/v1/capabilities/{id}"),
        &key,
        &[],
        None,
    )
    .await;
    assert_eq!(
        (
            detail["lifecycle_status"].clone(),
            detail["revision"].clone()
        ),
        (json!("active"), json!(1))
    );
    // An absent capability is still 404 first.
    let (status, _) = send(
        &app,
        "POST",
        "/v1/capabilities/cap_doesnotexist/disable",
        &key,
        &[],
        None,
    )
    .await;
    assert_eq!(status, 404);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_with_a_missing_or_malformed_body_is_a_failed_test_and_calls_nothing(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({"status": "ok"})).await;
    let mut definition = valid_definition("order_status");
    definition["url"] = json!(format!("{}/x", endpoint.base));
    let (status, created) = app.create_capability(&key, definition).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let path = format!("/v1/capabilities/{id}/test");
    // (content type, body): send() sets application/json with a body.
    let cases = [
        (None, None),
        (Some("application/json"), None),
        (None, Some("not json")),
        (None, Some("[1, 2]")),
        (None, Some(r#"{"arguments": 3}"#)),
        (None, Some(r#"{"arguments": {}, "other": 1}"#)),
    ];
    for (content_type, body) in cases {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| ("content-type", t))
            .into_iter()
            .collect();
        let (status, result) = send(&app, "POST", &path, &key, &headers, body).await;
        assert_eq!(status, 200, "{body:?}: {result}");
        assert_eq!(result["status"], "failed", "{result}");
        assert_eq!(result["reason"], "arguments_invalid", "{result}");
        assert_eq!(result["attempts"], 0, "{result}");
        assert!(!violation_pairs(&result).is_empty(), "{result}");
    }
    // A text body without a content type is refused the same way.
    let response = app
        .client
        .post(app.url(&path))
        .bearer_auth(&key)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    let (status, result) = status_and_json(response).await;
    assert_eq!(
        (status, result["reason"].clone()),
        (200, json!("arguments_invalid"))
    );
    assert_eq!(endpoint.hits(), 0, "the host was never called");
    // Each refused test is recorded like any other.
    let (_, detail) = send(
        &app,
        "GET",
        &format!("/v1/capabilities/{id}"),
        &key,
        &[],
        None,
    )
    .await;
    assert_eq!(detail["tests"].as_array().unwrap().len(), 7, "{detail}");
    assert!(
        detail["tests"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["reason"] == "arguments_invalid" && t.get("violations").is_none())
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_results_answer_errors_in_the_flat_shape(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let body = r#"{"interaction_id":"int_x","operation":"change_address","status":"succeeded"}"#;
    let path = "/v1/conversations/conv_doesnotexist/operation-results";
    let (status, error) = send(
        &app,
        "POST",
        path,
        &key,
        &[("idempotency-key", "k-1")],
        Some(body),
    )
    .await;
    assert_eq!(status, 404);
    assert_flat_error(&error, "NOT_FOUND");
    let (status, error) = send(&app, "POST", path, &key, &[], Some(body)).await;
    assert_eq!(status, 400);
    assert_flat_error(&error, "BAD_REQUEST");
}
