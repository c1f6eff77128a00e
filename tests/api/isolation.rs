use crate::helpers::*;
use serde_json::json;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_never_see_each_others_policy_or_settings(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let alice = app.account_with_key("alice").await;
    let bob = app.account_with_key("bob").await;

    let policy = json!({"version": 1, "instructions": "Alice only."});
    assert_eq!(app.put_policy(&alice, &policy).await.0, 201);
    let settings = json!({"diagnostic_message_mode": "text"});
    assert_eq!(app.put_settings(&alice, &settings).await.0, 201);

    assert_eq!(app.get_policy(&bob).await.0, 404);
    let delete = app.delete_policy(&bob).await;
    assert_eq!(delete.status(), 404, "bob cannot delete alice's policy");
    let (_, read) = app.get_settings(&bob).await;
    assert_eq!(read, json!({"diagnostic_message_mode": "metadata"}));

    // Bob's own writes are his: creating his policy is a 201, not a replacement of Alice's.
    let bobs = json!({"version": 1, "instructions": "Bob."});
    assert_eq!(app.put_policy(&bob, &bobs).await.0, 201);
    let (_, alice_view) = app.get_policy(&alice).await;
    assert_eq!(alice_view["policy"], policy);
}
