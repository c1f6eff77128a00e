//! The executor through the contract-test route, against real loopback
//! endpoints: what the endpoint receives, and every failure's reason.

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::sql;
use crate::helpers::*;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

const ENDPOINT_SECRET: &str = "endpoint-token-123";

/// Publishes the fixture capability pointed at `url`, with `edit` applied.
async fn capability_at(
    app: &TestApp,
    key: &str,
    url: &str,
    edit: impl FnOnce(&mut Value),
) -> String {
    let mut definition = valid_definition(&format!("c{}", uuid::Uuid::new_v4().simple()));
    definition["url"] = json!(url);
    edit(&mut definition);
    let (status, body) = app.create_capability(key, definition).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

fn order() -> Value {
    json!({"order": "A-1001"})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_test_calls_the_endpoint_as_declared_and_prunes_the_answer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({
        "status": "shipped", "internal_margin": 0.31,
        "lines": [{"sku": "X1", "qty": 2, "cost": 9.5, "supplier": {"name": "ACME"}}]
    }))
    .await;
    let id = capability_at(
        &app,
        &key,
        &format!("{}/orders/status", endpoint.base),
        |_| {},
    )
    .await;

    let (status, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "passed");
    assert_eq!(body["revision"], 1);
    assert_eq!(body["attempts"], 1);
    assert!(body["test_id"].as_str().unwrap().starts_with("ctest_"));
    assert_eq!(
        body["output"],
        json!({"status": "shipped", "lines": [{"sku": "X1", "qty": 2}]}),
        "undeclared fields pruned at every depth"
    );

    let got = endpoint.last();
    assert_eq!(got.method, "POST");
    assert_eq!(got.uri.path(), "/orders/status");
    assert_eq!(
        serde_json::from_slice::<Value>(&got.body).unwrap(),
        order(),
        "the body is exactly the arguments"
    );
    assert_eq!(
        got.headers["authorization"],
        format!("Bearer {ENDPOINT_SECRET}")
    );
    assert_eq!(got.headers["accept"], "application/json");
    assert_eq!(got.headers["content-type"], "application/json");
    for signed in [
        "signature",
        "signature-input",
        "content-digest",
        "capability-context",
    ] {
        assert!(got.headers.contains_key(signed), "missing {signed}");
    }

    // The test changed neither revision nor state, and was recorded.
    let (_, detail) = status_and_json(
        app.client
            .get(app.url(&format!("/v1/capabilities/{id}")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (
            detail["revision"].as_i64(),
            detail["lifecycle_status"].as_str()
        ),
        (Some(1), Some("active"))
    );
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let records = app
        .store
        .list_test_records(&account, &id, 10)
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status.as_str(), "passed");
    // The record is readable: the detail shows the latest tests, and each
    // revision's definition in the history.
    let tests = detail["tests"].as_array().expect("tests in the detail");
    assert_eq!(tests.len(), 1, "{detail}");
    assert_eq!(tests[0]["status"], "passed");
    assert_eq!(tests[0]["test_id"], records[0].id.as_str());
    assert_eq!(tests[0]["revision"], 1);
    assert!(tests[0].get("output").is_none(), "no result body is kept");
    assert_eq!(
        detail["revisions"][0]["definition"], detail["definition"],
        "revision 1 holds the definition as published"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_and_basic_credentials_are_injected_per_type(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({"status": "ok"})).await;
    for (credential, expected_header, expected_value) in [
        (
            json!({"auth_type": "api_key", "header_name": "x-api-token", "secret": "tok-42"}),
            "x-api-token",
            "tok-42",
        ),
        (
            json!({"auth_type": "basic", "secret": "dXNlcjpwYXNz"}),
            "authorization",
            "Basic dXNlcjpwYXNz",
        ),
    ] {
        let (status, _) = app.put_credential(&key, "cred_other", &credential).await;
        assert_eq!(status, 201);
        let auth_type = credential["auth_type"].as_str().unwrap().to_owned();
        let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |d| {
            d["auth"] = json!({"type": auth_type, "credential_ref": "cred_other"});
        })
        .await;
        assert_eq!(
            app.test_capability(&key, &id, order()).await.1["status"],
            "passed"
        );
        assert_eq!(endpoint.last().headers[expected_header], expected_value);
        if expected_header != "authorization" {
            assert!(!endpoint.last().headers.contains_key("authorization"));
        }
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_are_a_failed_test_and_nothing_is_called(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({"status": "ok"})).await;
    let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |_| {}).await;
    // The test route declares no 400: refused arguments are a test that
    // failed before any call (docs/contract-decisions.md).
    for (arguments, pointer) in [
        (json!({}), "/arguments"),
        (json!({"order": "lower-case"}), "/arguments/order"),
        (json!({"order": "A-1", "extra": 1}), "/arguments/extra"),
        (json!({"order": "A".repeat(21)}), "/arguments/order"),
    ] {
        let (status, body) = app.test_capability(&key, &id, arguments.clone()).await;
        assert_eq!(status, 200, "{arguments}");
        assert_eq!(body["status"], "failed", "{body}");
        assert_eq!(body["reason"], "arguments_invalid", "{body}");
        assert_eq!(body["attempts"], 0, "{body}");
        assert!(
            violation_pairs(&body)
                .iter()
                .any(|(p, _)| p.starts_with(pointer)),
            "{arguments}: {body}"
        );
    }
    let (status, body) = status_and_json(
        app.client
            .post(app.url(&format!("/v1/capabilities/{id}/test")))
            .bearer_auth(&key)
            .json(&json!({"args": {}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["reason"], "arguments_invalid", "{body}");
    assert_eq!(endpoint.hits(), 0, "the endpoint was never called");
    assert_eq!(
        app.test_capability(&key, "cap_unknown1", order()).await.0,
        404
    );
}

/// A contract test reads its capability and the credential it names in
/// the key's statement, through a column kept beside the definition
/// (`capabilities.credential_ref`): the definition in force names the
/// credential however the column stands, and the account's own credential is
/// the one used.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_uses_the_credential_its_current_definition_names(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({"status": "shipped"})).await;
    let bearer = |secret: &str| json!({"auth_type": "bearer", "secret": secret});
    assert_eq!(
        app.put_credential(&key, "cred_second", &bearer("secret-b"))
            .await
            .0,
        201
    );
    // Another account's credential of the same reference is never used.
    let other = account_ready(&app, "globex").await;
    assert_eq!(
        app.put_credential(&other, "cred_globex", &bearer("globex-c"))
            .await
            .0,
        201
    );
    let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |_| {}).await;
    let column = format!("SELECT credential_ref FROM capabilities WHERE id = '{id}'");
    // The test's status and what the endpoint was sent as its credential.
    let sent = async || {
        let (status, body) = app.test_capability(&key, &id, order()).await;
        let header = endpoint.last().headers["authorization"].clone();
        (
            status,
            body["status"].clone(),
            header.to_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        sql::strings(&app, &column).await,
        [Some(CREDENTIAL.to_owned())]
    );
    assert_eq!(
        sent().await,
        (200, json!("passed"), format!("Bearer {ENDPOINT_SECRET}"))
    );

    // A revision that names another credential moves the column with it.
    let mut revised = valid_definition("revised");
    revised["url"] = json!(format!("{}/x", endpoint.base));
    revised["auth"]["credential_ref"] = json!("cred_second");
    let (status, body) = app
        .api(&key)
        .revise_capability(&id, "1", revised.clone())
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sql::strings(&app, &column).await,
        [Some("cred_second".to_owned())]
    );
    assert_eq!(
        sent().await,
        (200, json!("passed"), "Bearer secret-b".to_owned())
    );

    // A row an older build wrote has no column; one whose column disagrees
    // with its definition is not believed: the definition's credential is
    // read on its own.
    for stale in ["NULL", "'cred_orders'"] {
        let update = format!("UPDATE capabilities SET credential_ref = {stale} WHERE id = '{id}'");
        assert_eq!(sql::execute(&app, &update).await, 1);
        assert_eq!(
            sent().await,
            (200, json!("passed"), "Bearer secret-b".to_owned()),
            "{stale}"
        );
    }

    // The same reference configured by this account and another: this
    // account's is used; once only the other's is stored, none is (409).
    let acme_globex = bearer("acme-globex");
    assert_eq!(
        app.put_credential(&key, "cred_globex", &acme_globex)
            .await
            .0,
        201
    );
    let mut on_globex = revised.clone();
    on_globex["auth"]["credential_ref"] = json!("cred_globex");
    let (status, body) = app.api(&key).revise_capability(&id, "2", on_globex).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        sent().await,
        (200, json!("passed"), "Bearer acme-globex".to_owned())
    );
    let forget = format!(
        "DELETE FROM capability_credentials WHERE credential_ref = 'cred_globex' \
         AND account_id = (SELECT account_id FROM capabilities WHERE id = '{id}')"
    );
    assert_eq!(sql::execute(&app, &forget).await, 1);
    let (status, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(status, 409, "{body}");

    // Revoked: not configured either.
    let (status, body) = app.api(&key).revise_capability(&id, "3", revised).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.delete_credential(&key, "cred_second").await.0, 200);
    let (status, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(status, 409, "{body}");
    let hits = endpoint.hits();

    // A capability of another account, a malformed id: 404; a bad key
    // first of all: 401.
    assert_eq!(app.test_capability(&other, &id, order()).await.0, 404);
    assert_eq!(app.test_capability(&key, "not-an-id", order()).await.0, 404);
    assert_eq!(
        app.test_capability("wk_nope", "not-an-id", order()).await.0,
        401
    );
    assert_eq!(app.test_capability("wk_nope", &id, order()).await.0, 401);
    assert_eq!(endpoint.hits(), hits, "nothing was called for any of these");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_recorded_with_their_reason(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let huge = "x".repeat(2 * 1024 * 1024);
    let cases: Vec<(&str, FakeEndpoint, &str, Option<i64>)> = vec![
        (
            "404",
            FakeEndpoint::start(|_| async { json_response(StatusCode::NOT_FOUND, &json!({})) })
                .await,
            "http_status",
            Some(404),
        ),
        (
            "redirect",
            FakeEndpoint::start(|_| async {
                axum::http::Response::builder()
                    .status(302)
                    .header("location", "/elsewhere")
                    .body(axum::body::Body::empty())
                    .unwrap()
            })
            .await,
            "redirect_refused",
            Some(302),
        ),
        (
            "html",
            FakeEndpoint::start(|_| async {
                axum::http::Response::builder()
                    .header("content-type", "text/html")
                    .body(axum::body::Body::from("<p>hi</p>"))
                    .unwrap()
            })
            .await,
            "not_json",
            None,
        ),
        (
            "broken json",
            FakeEndpoint::start(|_| async {
                axum::http::Response::builder()
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from("{\"status\":"))
                    .unwrap()
            })
            .await,
            "not_json",
            None,
        ),
        (
            "oversize",
            FakeEndpoint::start(move |_| {
                let huge = huge.clone();
                async move { json_response(StatusCode::OK, &json!({"status": huge})) }
            })
            .await,
            "response_too_large",
            None,
        ),
        (
            "schema violation",
            FakeEndpoint::json(json!({"status": 7})).await,
            "output_invalid",
            None,
        ),
        (
            "string too long",
            FakeEndpoint::json(json!({"status": "s".repeat(41)})).await,
            "output_invalid",
            None,
        ),
    ];
    for (name, endpoint, reason, http_status) in cases {
        let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |d| {
            d["retry_count"] = json!(0)
        })
        .await;
        let (status, body) = app.test_capability(&key, &id, order()).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(
            (body["status"].as_str(), body["reason"].as_str()),
            (Some("failed"), Some(reason)),
            "{name}: {body}"
        );
        assert_eq!(body["http_status"].as_i64(), http_status, "{name}");
        assert!(
            body.get("output").is_none(),
            "{name}: a failed call passes nothing on"
        );
        assert_eq!(
            endpoint.hits(),
            1,
            "{name}: called once, redirect not followed"
        );
        let account = app.store.find_account("acme").await.unwrap().unwrap();
        assert_eq!(
            app.store
                .list_test_records(&account, &id, 10)
                .await
                .unwrap()[0]
                .reason
                .as_deref(),
            Some(reason)
        );
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_only_transient_failures_and_counts_them(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    for (name, status, retry_count, expected_hits, reason) in [
        ("503 retried", 503u16, 2, 3usize, "http_status"),
        ("502 retried", 502, 1, 2, "http_status"),
        ("500 not retried", 500, 3, 1, "http_status"),
        ("400 not retried", 400, 3, 1, "http_status"),
    ] {
        let endpoint = FakeEndpoint::start(move |_| async move {
            json_response(StatusCode::from_u16(status).unwrap(), &json!({}))
        })
        .await;
        let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |d| {
            d["retry_count"] = json!(retry_count)
        })
        .await;
        let (_, body) = app.test_capability(&key, &id, order()).await;
        assert_eq!(body["reason"], reason, "{name}");
        assert_eq!(
            endpoint.hits(),
            expected_hits,
            "{name}: requests the endpoint received"
        );
        assert_eq!(body["attempts"], expected_hits as i64, "{name}");
    }
    // A transient failure followed by success passes.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let flaky = FakeEndpoint::start(move |_| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            if n == 0 {
                json_response(StatusCode::SERVICE_UNAVAILABLE, &json!({}))
            } else {
                json_response(StatusCode::OK, &json!({"status": "ok"}))
            }
        }
    })
    .await;
    let id = capability_at(&app, &key, &format!("{}/x", flaky.base), |d| {
        d["retry_count"] = json!(1)
    })
    .await;
    let (_, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(
        (body["status"].as_str(), body["attempts"].as_i64()),
        (Some("passed"), Some(2))
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_retried_and_the_server_stays_responsive(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let slow = FakeEndpoint::start(|_| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        json_response(StatusCode::OK, &json!({"status": "late"}))
    })
    .await;
    let id = capability_at(&app, &key, &format!("{}/x", slow.base), |d| {
        d["timeout_ms"] = json!(300);
        d["retry_count"] = json!(2);
    })
    .await;
    let test = {
        let (client, url, key) = (
            app.client.clone(),
            app.url(&format!("/v1/capabilities/{id}/test")),
            key.clone(),
        );
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"arguments": {"order": "A-1"}}))
                .send()
                .await
                .unwrap();
            (r.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..5 {
        let started = std::time::Instant::now();
        assert_eq!(
            app.client
                .get(app.url("/health"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "health stayed fast during a slow call"
        );
    }
    let (body, elapsed) = test.await.unwrap();
    assert_eq!(
        (body["status"].as_str(), body["reason"].as_str()),
        (Some("failed"), Some("timeout")),
        "{body}"
    );
    assert_eq!(body["attempts"], 3);
    assert_eq!(slow.hits(), 3, "every attempt reached the endpoint");
    assert!(
        elapsed < Duration::from_secs(4),
        "three attempts of 300 ms plus backoff, not 5 s each: {elapsed:?}"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_credential_makes_the_test_a_conflict(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({"status": "ok"})).await;
    let id = capability_at(&app, &key, &format!("{}/x", endpoint.base), |_| {}).await;
    let (status, _) = app.delete_credential(&key, CREDENTIAL).await;
    assert_eq!(status, 200);
    let (status, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(status, 409);
    assert_flat_error(&body, "CONFLICT");
    assert_eq!(endpoint.hits(), 0);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_interaction_results_are_shaped_without_references(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::json(json!({
            "type": "confirm_operation", "operation": "cancel_order", "operation_ref": "opref_SECRET_123",
            "expires_at": "2030-01-01T00:00:00Z",
            "preview": {"title": "Cancel order A-1001", "fields": [{"label": "Order", "value": "A-1001"}]}
        })).await;
    let id = capability_at(&app, &key, &format!("{}/prepare", endpoint.base), |d| {
        d["result_handling"] = json!("host_interaction");
        d["output_schema"] = host_interaction_output_schema();
    })
    .await;
    let (status, body) = app.test_capability(&key, &id, order()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "passed", "{body}");
    assert_eq!(body["output"]["interaction"]["type"], "confirm_operation");
    assert!(
        !body.to_string().contains("opref_SECRET_123"),
        "the opaque reference is not in the test output"
    );
    assert!(!app.db.contains("opref_SECRET_123").await, "nor stored");
}

/// An output schema that declares the closed confirmation and selection shapes.
pub fn host_interaction_output_schema() -> Value {
    let s = |n: u64| json!({"type": "string", "maxLength": n});
    json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "type": {"type": "string", "maxLength": 32, "enum": ["confirm_operation", "selection", "not_found"]},
            "operation": s(64), "operation_ref": s(256), "expires_at": s(40),
            "selection_ref": s(256), "title": s(200),
            "options": {"type": "array", "maxItems": 20, "items": {"type": "object", "additionalProperties": false,
                "properties": {"option_ref": s(256), "label": s(200), "description": s(500)}}},
            "preview": {"type": "object", "additionalProperties": false, "properties": {
                "title": s(200),
                "fields": {"type": "array", "maxItems": 20, "items": {"type": "object", "additionalProperties": false,
                    "properties": {"label": s(100), "value": s(500)}}}
            }}
        }
    })
}
