use crate::helpers::*;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_exactly_status_and_service(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let response = app.client.get(app.url("/health")).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        serde_json::json!({"status": "ok", "service": "warden"})
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_distinct_request_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut ids = std::collections::HashSet::new();
    for path in ["/health", "/health", "/nope", "/v1/agent-policy"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(id.len() >= 16, "{id}");
        assert!(ids.insert(id), "request ids repeat");
    }
}

/// PostgreSQL can be taken away under a running server: health turns 503.
#[tokio::test]
async fn health_is_503_with_an_error_body_when_the_database_is_gone() {
    let mut app = TestApp::spawn(Backend::Postgres).await;
    app.db.drop_postgres_now().await;
    let (status, body) =
        status_and_json(app.client.get(app.url("/health")).send().await.unwrap()).await;
    assert_eq!(status, 503);
    assert_flat_error(&body, "SERVICE_UNAVAILABLE");
}
