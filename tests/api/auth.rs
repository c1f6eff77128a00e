use crate::helpers::*;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_are_401_unauthorized(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let url = app.url("/v1/diagnostics/settings");
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("wrong scheme", Some(format!("Basic {key}"))),
        ("empty bearer", Some("Bearer ".into())),
        (
            "unknown key",
            Some("Bearer wdn_notarealkeynotarealkeynotarealkeynotareal".into()),
        ),
        ("overlong", Some(format!("Bearer {}", "a".repeat(500)))),
    ];
    for (case, header) in cases {
        let mut request = app.client.get(&url);
        if let Some(h) = header {
            request = request.header("authorization", h);
        }
        let response = request.send().await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "{case}"
        );
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 401, "{case}");
        assert_flat_error(&body, "UNAUTHORIZED");
    }
    let ok = app.client.get(&url).bearer_auth(&key).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let lower = app
        .client
        .get(&url)
        .header("authorization", format!("bearer {key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(lower.status(), 200, "the scheme is case-insensitive");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let second = app.issue_key("acme").await;
    let revoked = second["api_key"].as_str().unwrap();
    assert_eq!(app.get_settings(&key).await.0, 200);
    // Admitted once, the key is known to the server (`known_keys`): that
    // changes nothing once it is revoked.
    assert_eq!(app.get_settings(revoked).await.0, 200);
    revoke(&app, &second).await;
    assert_eq!(app.get_settings(revoked).await.0, 401);
    assert_eq!(app.get_settings(revoked).await.0, 401);
    assert_eq!(
        app.get_settings(&key).await.0,
        200,
        "other keys keep working"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_environment_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.account_with_key("acme").await;
    let staging = staging_key(&app, "acme").await;
    let (status, _) = app.get_policy(staging["api_key"].as_str().unwrap()).await;
    assert_eq!(status, 401);
}

/// A message's key is read with its account's policy in one statement
/// (`TurnCaller`), not by the `Caller` of the other routes: it refuses the
/// same keys, with the channel's nested 401.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_refuses_the_keys_every_route_refuses(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let second = app.issue_key("acme").await;
    revoke(&app, &second).await;
    let staging = staging_key(&app, "acme").await;
    let message = serde_json::json!({"message": {"type": "text", "body": "hola"}});
    for (case, refused) in [
        ("unknown", "wdn_notarealkeynotarealkeynotarealkeynotareal"),
        ("revoked", second["api_key"].as_str().unwrap()),
        ("another environment", staging["api_key"].as_str().unwrap()),
    ] {
        let (status, body) = app.send_message(refused, &message).await;
        assert_eq!(status, 401, "{case}: {body}");
        assert_nested_error(&body, "UNAUTHORIZED");
    }
    let (status, body) = app.send_message(&key, &message).await;
    assert_eq!(status, 200, "{body}");
}

/// Revokes an issued key (`issued`: what `admin key issue` printed).
async fn revoke(app: &TestApp, issued: &serde_json::Value) {
    let key_id = issued["key_id"].as_str().unwrap().to_owned();
    admin(
        &app.store,
        warden::cli::AdminCommand::Key(warden::cli::KeyCommand::Revoke { key_id }),
    )
    .await;
}

/// A key of `account` issued for the "staging" environment.
async fn staging_key(app: &TestApp, account: &str) -> serde_json::Value {
    admin_in(
        &app.store,
        "staging",
        warden::cli::AdminCommand::Key(warden::cli::KeyCommand::Issue {
            account: account.into(),
        }),
    )
    .await
}
