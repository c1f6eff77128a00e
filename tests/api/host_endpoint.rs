//! The example host endpoint (examples/host-endpoint) against a real
//! Warden: every call it receives verifies, and it refuses what was tampered
//! with, expired, or signed by a key it cannot find.

use crate::executor::host_interaction_output_schema;
use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};
use std::sync::Arc;
use warden::cli::{AdminCommand, SigningKeyCommand};
use warden_example_host_endpoint::verify::{KeySet, ReceivedRequest, VerifyError, verify};
use warden_example_host_endpoint::{Config, Endpoint, router};

const TOKEN: &str = "endpoint-token-123";

fn jwks_url(app: &TestApp) -> String {
    app.url("/.well-known/service/capability-context/v1/jwks.json")
}

async fn start_example(app: &TestApp) -> (Arc<Endpoint>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let endpoint = Endpoint::new(Config {
        token: TOKEN.into(),
        jwks_url: jwks_url(app),
        origin: origin.clone(),
    });
    let app_router = router(endpoint.clone());
    tokio::spawn(async move { axum::serve(listener, app_router).await.unwrap() });
    (endpoint, origin)
}

async fn publish(app: &TestApp, key: &str, name: &str, url: String, interaction: bool) -> String {
    let mut definition = valid_definition(name);
    definition["url"] = json!(url);
    if interaction {
        definition["result_handling"] = json!("host_interaction");
        definition["output_schema"] = host_interaction_output_schema();
    }
    let (status, body) = app.create_capability(key, definition).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn test_call(app: &TestApp, key: &str, id: &str, order: &str) -> Value {
    app.test_capability(key, id, json!({"order": order}))
        .await
        .1
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_endpoint_verifies_every_call_and_follows_rotation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (endpoint, origin) = start_example(&app).await;
    let status_id = publish(
        &app,
        &key,
        "order_status",
        format!("{origin}/orders/status"),
        false,
    )
    .await;
    let prepare_id = publish(
        &app,
        &key,
        "prepare_cancel",
        format!("{origin}/orders/cancel/prepare"),
        true,
    )
    .await;

    let read = test_call(&app, &key, &status_id, "A-1001").await;
    assert_eq!(read["status"], "passed", "{read}");
    assert_eq!(
        read["output"],
        json!({"status": "shipped", "lines": [{"sku": "TSHIRT-M", "qty": 2}]})
    );
    let prepared = test_call(&app, &key, &prepare_id, "A-2002").await;
    assert_eq!(
        prepared["output"]["interaction"]["type"], "confirm_operation",
        "{prepared}"
    );
    let none = test_call(&app, &key, &prepare_id, "A-9999").await;
    assert_eq!(none["output"]["interaction"]["type"], "not_found", "{none}");
    assert_eq!(
        endpoint.keys().fetches(),
        1,
        "the key set is fetched once and cached"
    );

    // After a rotation the endpoint meets an unknown kid, refetches, verifies.
    app.admin(AdminCommand::SigningKey(SigningKeyCommand::Rotate {
        activate_in_secs: 0,
        grace_secs: 3600,
    }))
    .await;
    tokio::time::sleep(warden::signing::KEY_RECHECK).await;
    assert_eq!(
        test_call(&app, &key, &status_id, "A-1001").await["status"],
        "passed"
    );
    assert_eq!(endpoint.keys().fetches(), 2);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_endpoint_prepares_an_address_change(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (_endpoint, origin) = start_example(&app).await;
    let id = publish(
        &app,
        &key,
        "prepare_address_change",
        format!("{origin}/orders/prepare-address-change"),
        true,
    )
    .await;

    let prepared = test_call(&app, &key, &id, "A-1001").await;
    assert_eq!(prepared["status"], "passed", "{prepared}");
    let interaction = &prepared["output"]["interaction"];
    assert_eq!(interaction["type"], "confirm_operation", "{prepared}");
    assert_eq!(interaction["operation"], "change_address");
    assert!(
        interaction["preview"]["title"]
            .as_str()
            .unwrap()
            .contains("A-1001"),
        "{prepared}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expires = interaction["expires_at"].as_str().unwrap();
    assert!(
        expires > warden_example_host_endpoint::rfc3339(now).as_str(),
        "expires in the future: {expires}"
    );
    assert!(
        !prepared.to_string().contains("addrchg_"),
        "the opaque reference stays out of test records: {prepared}"
    );

    let none = test_call(&app, &key, &id, "A-9999").await;
    assert_eq!(none["output"]["interaction"]["type"], "not_found", "{none}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_endpoint_refuses_tampering_expiry_and_unknown_keys(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    // Capture one real signed call.
    let capture = FakeEndpoint::json(json!({"status": "ok"})).await;
    let id = publish(
        &app,
        &key,
        "order_status",
        format!("{}/orders/status", capture.base),
        false,
    )
    .await;
    assert_eq!(
        test_call(&app, &key, &id, "A-1001").await["status"],
        "passed"
    );
    let got = capture.last();
    let origin = capture.base.clone();
    let header = |name: &str| {
        got.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let keys = KeySet::new(jwks_url(&app));
    let target = format!("{origin}/orders/status");
    let check = |method: &'static str, target: String, body: Vec<u8>, now: i64, keys: &KeySet| {
        let received = ReceivedRequest {
            method,
            target_uri: &target,
            header: &header,
            body: &body,
        };
        // Each check runs to completion before the next.
        futures_block(verify(&received, keys, now, &origin)).map(|_| ())
    };
    assert_eq!(
        check("POST", target.clone(), got.body.to_vec(), now, &keys),
        Ok(())
    );
    assert_eq!(
        check(
            "POST",
            target.clone(),
            b"{\"order\":\"B-2\"}".to_vec(),
            now,
            &keys
        ),
        Err(VerifyError::DigestMismatch)
    );
    assert_eq!(
        check(
            "POST",
            format!("{origin}/orders/cancel"),
            got.body.to_vec(),
            now,
            &keys
        ),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(
        check("PUT", target.clone(), got.body.to_vec(), now, &keys),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(
        check("POST", target.clone(), got.body.to_vec(), now + 61, &keys),
        Err(VerifyError::Expired)
    );

    // A key set that does not hold the signing key: refused, after one refetch.
    let other = FakeEndpoint::json(
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "someone-else",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "use": "sig", "alg": "EdDSA"}]}),
    )
    .await;
    let strangers = KeySet::new(format!("{}/jwks.json", other.base));
    let outcome = check("POST", target.clone(), got.body.to_vec(), now, &strangers);
    assert!(
        matches!(outcome, Err(VerifyError::UnknownKey(_))),
        "{outcome:?}"
    );
    assert_eq!(strangers.fetches(), 1);

    // The endpoint itself answers 401 to a replay with a changed body.
    let (example, example_origin) = start_example(&app).await;
    let mut replay = reqwest::Client::new().post(format!("{example_origin}/orders/status"));
    for (name, value) in got.headers.iter() {
        if name != "host" && name != "content-length" {
            replay = replay.header(name, value);
        }
    }
    let refused = replay.body("{\"order\":\"A-1002\"}").send().await.unwrap();
    assert_eq!(refused.status(), 401);
    drop(example);
}

/// Runs a future to completion on the current multi-thread runtime.
fn futures_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}
