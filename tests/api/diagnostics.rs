use crate::helpers::*;
use serde_json::json;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_default_to_metadata_and_put_is_201_then_200(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let (status, body) = app.get_settings(&key).await;
    assert_eq!(
        (status, body),
        (200, json!({"diagnostic_message_mode": "metadata"}))
    );

    for (mode, expected) in [("text", 201), ("disabled", 200), ("metadata", 200)] {
        let body = json!({"diagnostic_message_mode": mode});
        let (status, response) = app.put_settings(&key, &body).await;
        assert_eq!((status, response), (expected, body.clone()));
        let (_, read) = app.get_settings(&key).await;
        assert_eq!(read, body);
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_accept_only_the_three_modes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    for body in [
        json!({"diagnostic_message_mode": "verbose"}),
        json!({"diagnostic_message_mode": "TEXT"}),
        json!({"diagnostic_message_mode": 1}),
        json!({}),
        json!({"diagnostic_message_mode": "text", "extra": 1}),
        json!("text"),
    ] {
        let (status, response) = app.put_settings(&key, &body).await;
        assert_eq!(status, 400, "{body}");
        assert_flat_error(&response, "BAD_REQUEST");
    }
    let (_, read) = app.get_settings(&key).await;
    assert_eq!(read, json!({"diagnostic_message_mode": "metadata"}));
}
