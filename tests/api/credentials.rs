use crate::helpers::*;
use serde_json::json;
use warden::crypto::master_key::{Keyring, MasterKey};
use warden::domain::credential::{CredentialRef, CredentialSpec};
use warden::vault;

const SECRET_1: &str = "sk-live-FIRSTsecretVALUE-0123456789";
const SECRET_2: &str = "sk-live-SECONDsecretVALUE-9876543210";

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_stored_rotated_and_revoked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let account = app.store.find_account("acme").await.unwrap().unwrap();

    let (status, body) = app
        .put_credential(
            &key,
            "cred_orders",
            &json!({"auth_type": "bearer", "secret": SECRET_1}),
        )
        .await;
    assert_eq!(
        (status, body),
        (
            201,
            json!({"credential_ref": "cred_orders", "status": "configured"})
        )
    );
    let opened = vault::open_credential(&app.store, &keyring(), &account, "cred_orders")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(opened.secret.as_str(), SECRET_1);

    // Rotation: a second PUT replaces the secret.
    let body = json!({"auth_type": "api_key", "header_name": "x-api-token", "secret": SECRET_2});
    assert_eq!(app.put_credential(&key, "cred_orders", &body).await.0, 201);
    let opened = vault::open_credential(&app.store, &keyring(), &account, "cred_orders")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(opened.secret.as_str(), SECRET_2);
    assert_eq!(opened.header_name.as_deref(), Some("x-api-token"));

    let (status, body) = app.delete_credential(&key, "cred_orders").await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"credential_ref": "cred_orders", "status": "revoked"})
        )
    );
    assert!(
        vault::open_credential(&app.store, &keyring(), &account, "cred_orders")
            .await
            .unwrap()
            .is_none(),
        "revoked is unusable"
    );
    assert!(
        !vault::is_configured(&app.store, &account, "cred_orders")
            .await
            .unwrap()
    );

    let (status, body) = app.delete_credential(&key, "cred_missing").await;
    assert_eq!(status, 404);
    assert_flat_error(&body, "NOT_FOUND");

    assert!(
        !app.db.contains(SECRET_1).await,
        "first secret stored in clear"
    );
    assert!(
        !app.db.contains(SECRET_2).await,
        "second secret stored in clear"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_requests_are_validated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let good = json!({"auth_type": "bearer", "secret": "t0ken"});
    for reference in [
        "cred_ab",
        "cred_a.b",
        "orders",
        &format!("cred_{}", "x".repeat(121)),
    ] {
        let (status, body) = app.put_credential(&key, reference, &good).await;
        assert_eq!(status, 400, "{reference}");
        assert_flat_error(&body, "BAD_REQUEST");
    }
    for body in [
        json!({"auth_type": "none", "secret": "x"}),
        json!({"auth_type": "bearer"}),
        json!({"auth_type": "bearer", "secret": "x", "header_name": "x-api-key"}),
        json!({"auth_type": "api_key", "secret": "x"}),
        json!({"auth_type": "api_key", "secret": "x", "header_name": "authorization"}),
        json!({"auth_type": "bearer", "secret": "x", "scope": "all"}),
    ] {
        let (status, response) = app.put_credential(&key, "cred_orders", &body).await;
        assert_eq!(status, 400, "{body}");
        assert_flat_error(&response, "BAD_REQUEST");
    }
    let huge = json!({"auth_type": "bearer", "secret": "a".repeat(4097)});
    let (status, body) = app.put_credential(&key, "cred_orders", &huge).await;
    assert_eq!(status, 413);
    assert_flat_error(&body, "PAYLOAD_TOO_LARGE");
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    assert!(
        !vault::is_configured(&app.store, &account, "cred_orders")
            .await
            .unwrap(),
        "nothing stored"
    );

    let unauthenticated = app
        .client
        .put(app.url("/v1/capability-credentials/cred_orders"))
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_belong_to_one_account(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let alice = app.account_with_key("alice").await;
    let bob = app.account_with_key("bob").await;
    assert_eq!(
        app.put_credential(
            &alice,
            "cred_shared",
            &json!({"auth_type": "bearer", "secret": SECRET_1})
        )
        .await
        .0,
        201
    );
    assert_eq!(
        app.delete_credential(&bob, "cred_shared").await.0,
        404,
        "bob cannot revoke alice's credential"
    );
    let bob_id = app.store.find_account("bob").await.unwrap().unwrap();
    assert!(
        vault::open_credential(&app.store, &keyring(), &bob_id, "cred_shared")
            .await
            .unwrap()
            .is_none()
    );
    let alice_id = app.store.find_account("alice").await.unwrap().unwrap();
    assert!(
        vault::is_configured(&app.store, &alice_id, "cred_shared")
            .await
            .unwrap()
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_key_rotation_reseals_every_secret(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let old = MasterKey::generate();
    let new = MasterKey::generate();
    let before = Keyring::new(old.clone(), vec![]);
    for (i, secret) in [SECRET_1, SECRET_2].iter().enumerate() {
        let spec =
            CredentialSpec::from_json(&json!({"auth_type": "bearer", "secret": secret})).unwrap();
        let reference = CredentialRef::parse(&format!("cred_n{i}x")).unwrap();
        vault::store_credential(&store, &before, &account, &reference, &spec)
            .await
            .unwrap();
    }
    let new_only = Keyring::new(new.clone(), vec![]);
    assert!(
        vault::open_credential(&store, &new_only, &account, "cred_n0x")
            .await
            .is_err(),
        "new key alone cannot open old secrets"
    );

    let during = Keyring::new(new.clone(), vec![old]);
    let counts = vault::rotate_master_key(&store, &during).await.unwrap();
    assert_eq!((counts.resealed, counts.already_current), (2, 0));
    let again = vault::rotate_master_key(&store, &during).await.unwrap();
    assert_eq!(
        (again.resealed, again.already_current),
        (0, 2),
        "rotation is idempotent"
    );

    let opened = vault::open_credential(&store, &new_only, &account, "cred_n1x")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(opened.secret.as_str(), SECRET_2);
    assert!(
        vault::rotate_master_key(&store, &Keyring::new(MasterKey::generate(), vec![]))
            .await
            .is_err(),
        "an unknown sealing key aborts the rotation"
    );
    assert!(
        vault::open_credential(&store, &new_only, &account, "cred_n0x")
            .await
            .unwrap()
            .is_some(),
        "the aborted rotation changed nothing"
    );
    store.close().await;
    assert!(!db.contains(SECRET_1).await);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_logs(backend: Backend) {
    let db = TestDb::new(backend).await;
    let key = cli_account_with_key(&db, "acme").await;
    let server = ServerProcess::start(&db, &[("WARDEN_LOG", "debug")]).await;
    let api = server.api(&key);
    for secret in [SECRET_1, SECRET_2] {
        let secret = json!({"auth_type": "bearer", "secret": secret});
        let (status, body) = api.put_credential("cred_logs", &secret).await;
        assert_eq!(status, 201, "{body}");
    }
    let malformed = json!({"auth_type": "basic", "secret": "not base64!"});
    let (status, body) = api.put_credential("cred_logs", &malformed).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = api.delete_credential("cred_logs").await;
    assert_eq!(status, 200, "{body}");
    let logs = server.logs_so_far().await.join("\n");
    assert!(
        logs.contains("credential configured"),
        "the log shows what happened"
    );
    for secret in [SECRET_1, SECRET_2, "not base64!", key.as_str()] {
        assert!(!logs.contains(secret), "a secret reached the log");
    }
    assert!(!db.contains(SECRET_1).await && !db.contains(SECRET_2).await);
}

fn keyring() -> Keyring {
    Keyring::new(MasterKey::from_base64(MASTER_KEY).unwrap(), vec![])
}

/// A turn (and an MCP call) uses the credential rows its account's catalog
/// read with the active capabilities, kept until the account's capability
/// version moves: every credential write moves it (triggers), so a rotation
/// or a revocation made on one replica reaches the next call on every
/// replica, each of which had already called with the old secret.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_change_reaches_the_next_turn_on_every_replica(backend: Backend) {
    use crate::helpers::fixtures::CREDENTIAL;
    use crate::helpers::shop::Shop;
    use crate::helpers::sql;
    let shop = Shop::open(backend).await;
    let replica = shop.app.replica().await;
    let ask = json!({"user_id": "user-42", "message": {"type": "text", "body": "¿Dónde está mi pedido A-1001?"}});
    let sent = async |app: &TestApp| {
        let hits = shop.endpoint.hits();
        let (status, body) = app.send_message(&shop.key, &ask).await;
        assert_eq!(status, 200, "{body}");
        (shop.endpoint.hits() > hits).then(|| {
            let header = shop.endpoint.last().headers["authorization"].clone();
            header.to_str().unwrap().to_owned()
        })
    };
    let version = "SELECT capability_version FROM accounts WHERE name = 'shop'";
    for app in [&shop.app, &replica] {
        assert_eq!(
            sent(app).await.as_deref(),
            Some("Bearer endpoint-token-123")
        );
    }

    let before = sql::integers(&shop.app, version).await;
    let rotated = json!({"auth_type": "bearer", "secret": SECRET_2});
    let (status, _) = shop
        .app
        .put_credential(&shop.key, CREDENTIAL, &rotated)
        .await;
    assert_eq!(status, 201);
    let after = sql::integers(&shop.app, version).await;
    assert!(
        after[0] > before[0],
        "the rotation moved the version: {before:?} → {after:?}"
    );
    for app in [&replica, &shop.app] {
        assert_eq!(sent(app).await, Some(format!("Bearer {SECRET_2}")));
    }

    // Revoked on the other replica: no call is made with it anywhere.
    assert_eq!(
        replica.delete_credential(&shop.key, CREDENTIAL).await.0,
        200
    );
    for app in [&shop.app, &replica] {
        assert_eq!(
            sent(app).await,
            None,
            "nothing sent with a revoked credential"
        );
    }
    // Configured again: used again.
    let (status, _) = replica
        .put_credential(&shop.key, CREDENTIAL, &rotated)
        .await;
    assert_eq!(status, 201);
    for app in [&shop.app, &replica] {
        assert_eq!(sent(app).await, Some(format!("Bearer {SECRET_2}")));
    }
}
