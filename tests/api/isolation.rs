use crate::helpers::*;
use serde_json::json;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_never_see_each_others_policy_or_settings(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let alice = app.account_with_key("alice").await;
    let bob = app.account_with_key("bob").await;

    let policy = json!({"version": 1, "instructions": "Alice only."});
    let put = app
        .client
        .put(app.url("/v1/agent-policy"))
        .bearer_auth(&alice)
        .json(&policy)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let settings = json!({"diagnostic_message_mode": "text"});
    let put = app
        .client
        .put(app.url("/v1/diagnostics/settings"))
        .bearer_auth(&alice)
        .json(&settings)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);

    assert_eq!(
        app.client
            .get(app.url("/v1/agent-policy"))
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let delete = app
        .client
        .delete(app.url("/v1/agent-policy"))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 404, "bob cannot delete alice's policy");
    let (_, read) = status_and_json(
        app.client
            .get(app.url("/v1/diagnostics/settings"))
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(read, json!({"diagnostic_message_mode": "metadata"}));

    // Bob's own writes are his: creating his policy is a 201, not a replacement of Alice's.
    let put = app
        .client
        .put(app.url("/v1/agent-policy"))
        .bearer_auth(&bob)
        .json(&json!({"version": 1, "instructions": "Bob."}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let (_, alice_view) = status_and_json(
        app.client
            .get(app.url("/v1/agent-policy"))
            .bearer_auth(&alice)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(alice_view["policy"], policy);
}
