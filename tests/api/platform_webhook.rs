//! The messaging-platform channel (contract 2.12, 4.3) from outside: the
//! handshake, signatures over raw bytes, routing, dedup and ignored items,
//! and replies through a fake send API on loopback (real HTTP both ways).

use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::*;
use serde_json::{Value, json};
use warden::cli::{AdminCommand, DatabaseArgs, MasterKeyArgs, PlatformArgs, WebhookCommand};
use warden::platform::webhook::sign;

const VERIFY_TOKEN: &str = "verify-token-of-the-test";
const APP_SECRET: &str = "app-secret-of-the-test";
const NUMBER: &str = "1029384756";
const FALLBACK_TOKEN: &str = "EAAG-fallback-token";
const PATH: &str = "/v1/webhooks/platform";

fn platform_args(api_url: &str) -> PlatformArgs {
    PlatformArgs {
        webhook_verify_token: Some(VERIFY_TOKEN.into()),
        webhook_app_secret: Some(APP_SECRET.into()),
        platform_api_url: api_url.into(),
        platform_access_token: Some(FALLBACK_TOKEN.into()),
        platform_retry_base_ms: 50,
        ..Default::default()
    }
}

async fn spawn(backend: Backend, api_url: &str) -> TestApp {
    TestApp::spawn_with_platform(TestDb::new(backend).await, platform_args(api_url)).await
}

/// `warden admin webhook …` with the server's master key (the token file is sealed).
async fn webhook_admin(app: &TestApp, command: WebhookCommand) -> anyhow::Result<Value> {
    let database = DatabaseArgs {
        database_url: app.db.url.clone(),
        environment: ENVIRONMENT.into(),
    };
    let keys = MasterKeyArgs {
        master_key: Some(MASTER_KEY.into()),
        ..Default::default()
    };
    warden::admin::execute(&app.store, &database, &keys, AdminCommand::Webhook(command)).await
}

async fn register(app: &TestApp, account: &str, number: &str, token: Option<&str>) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let access_token_file = token.map(|t| {
        let path = dir.path().join("token");
        std::fs::write(&path, format!("{t}\n")).unwrap();
        path
    });
    webhook_admin(
        app,
        WebhookCommand::Register {
            account: account.into(),
            phone_number_id: number.into(),
            access_token_file,
        },
    )
    .await
    .unwrap()
}

fn text(from: &str, id: &str, body: &str) -> Value {
    json!({"from": from, "id": id, "timestamp": "1763900000", "type": "text", "text": {"body": body}})
}

fn delivery(number: &str, messages: Vec<Value>, statuses: Vec<Value>) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba-1", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": number},
            "messages": messages,
            "statuses": statuses
        }
    }]}]})
}

async fn post_raw(app: &TestApp, body: &[u8], signature: Option<&str>) -> (u16, Value) {
    let mut request = app
        .client
        .post(app.url(PATH))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    status_and_json(request.send().await.unwrap()).await
}

async fn post_signed(app: &TestApp, payload: &Value) -> (u16, Value) {
    let bytes = serde_json::to_vec(payload).unwrap();
    post_raw(app, &bytes, Some(&sign(APP_SECRET, &bytes))).await
}

async fn handshake(app: &TestApp, query: &str) -> (u16, Option<String>, String) {
    let response = app
        .client
        .get(format!("{}?{query}", app.url(PATH)))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, content_type, response.text().await.unwrap())
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_echoes_the_challenge_and_refuses_everything_else(backend: Backend) {
    let app = spawn(backend, "http://127.0.0.1:9/v21.0").await;
    let ok = format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1158201444");
    let (status, content_type, body) = handshake(&app, &ok).await;
    assert_eq!(status, 200);
    assert!(content_type.unwrap().starts_with("text/plain"));
    assert_eq!(body, "1158201444");

    // Exactly the challenge, percent-decoded, up to its bound of 2048.
    let long = "c".repeat(2048);
    let q = format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge={long}");
    assert_eq!(handshake(&app, &q).await.2, long);

    let refused = [
        format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}x&hub.challenge=1"),
        "hub.mode=subscribe&hub.verify_token=verify-token-of-the-tesT&hub.challenge=1".to_owned(),
        "hub.mode=subscribe&hub.verify_token=&hub.challenge=1".to_owned(),
        format!("hub.mode=unsubscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"),
        format!("hub.mode=SUBSCRIBE&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"),
    ];
    for query in &refused {
        let (status, _, body) = handshake(&app, query).await;
        assert_eq!(status, 403, "{query}");
        assert!(!body.contains('1') || body.contains("FORBIDDEN"), "{body}");
    }

    let invalid = [
        format!("hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"),
        "hub.mode=subscribe&hub.challenge=1".to_owned(),
        format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}"),
        String::new(),
        format!(
            "hub.mode=subscribe&hub.verify_token={}&hub.challenge=1",
            "t".repeat(257)
        ),
        format!(
            "hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge={}",
            "c".repeat(2049)
        ),
        format!(
            "hub.mode=subscribe&hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1"
        ),
    ];
    for query in &invalid {
        // The contract declares only 403 for the handshake.
        let (status, _, _) = handshake(&app, query).await;
        assert_eq!(status, 403, "{query}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_secrets_the_channel_answers_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let q = format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}&hub.challenge=1");
    assert_eq!(handshake(&app, &q).await.0, 404);
    let payload = delivery(NUMBER, vec![text("34600111222", "wamid.A", "hola")], vec![]);
    let (status, body) = post_signed(&app, &payload).await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "NOT_FOUND");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_checked_over_the_raw_bytes_before_parsing(backend: Backend) {
    let app = spawn(backend, "http://127.0.0.1:9/v21.0").await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;
    let payload = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.SIG", "hola")],
        vec![],
    );
    let bytes = serde_json::to_vec(&payload).unwrap();
    let signature = sign(APP_SECRET, &bytes);

    // The same JSON re-serialised (pretty) under the original signature fails.
    let pretty = serde_json::to_vec_pretty(&payload).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&pretty).unwrap(), payload);
    let (status, body) = post_raw(&app, &pretty, Some(&signature)).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["code"], "UNAUTHORIZED");
    // Signed with another secret.
    assert_eq!(
        post_raw(&app, &bytes, Some(&sign("other", &bytes))).await.0,
        401
    );

    // Malformed signatures are 400, whatever the body.
    let malformed = [
        None,
        Some(String::new()),
        Some(signature.to_uppercase()),
        Some(signature.replace("sha256=", "sha1=")),
        Some(signature[..signature.len() - 1].to_owned()),
        Some(format!("{signature}0")),
        Some(format!("{signature} x")),
        Some(signature.replace("sha256=", "")),
    ];
    for header in &malformed {
        let (status, body) = post_raw(&app, &bytes, header.as_deref()).await;
        assert_eq!(status, 400, "{header:?}: {body}");
        assert_eq!(body["code"], "BAD_REQUEST");
    }
    // Nothing of the refused requests was queued.
    let counts = queue_counts(&app).await;
    assert_eq!(
        counts["queued"].as_i64().unwrap() + counts["claimed"].as_i64().unwrap(),
        0
    );

    // Correctly signed but not JSON, or not an object: 400.
    for raw in [&b"not json"[..], b"[1,2]", b"{\"entry\": \"x\"}"] {
        let (status, body) = post_raw(&app, raw, Some(&sign(APP_SECRET, raw))).await;
        assert_eq!(status, 400, "{body}");
    }
    // Over the documented limit: 413, signed or not.
    let big = vec![b' '; warden::api::platform_webhook::MAX_WEBHOOK_BYTES + 1];
    assert_eq!(
        post_raw(&app, &big, Some(&sign(APP_SECRET, &big))).await.0,
        413
    );

    // The original bytes pass.
    let (status, body) = post_raw(&app, &bytes, Some(&signature)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"][0]["status"], "accepted");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregistered_numbers_answer_404_and_queue_nothing(backend: Backend) {
    let app = spawn(backend, "http://127.0.0.1:9/v21.0").await;
    app.account_with_key("shop").await;
    let payload = delivery(NUMBER, vec![text("34600111222", "wamid.U", "hola")], vec![]);
    let (status, body) = post_signed(&app, &payload).await;
    assert_eq!(status, 404);
    assert_eq!(body["code"], "NOT_FOUND");

    register(&app, "shop", NUMBER, None).await;
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    let listed = webhook_admin(
        &app,
        WebhookCommand::List {
            account: "shop".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(listed["numbers"][0]["phone_number_id"], NUMBER);
    assert_eq!(listed["numbers"][0]["access_token"], "server_fallback");

    let removed = webhook_admin(
        &app,
        WebhookCommand::Unregister {
            phone_number_id: NUMBER.into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(removed["status"], "unregistered");
    let again = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.U2", "hola")],
        vec![],
    );
    assert_eq!(post_signed(&app, &again).await.0, 404);
    // Bad ids and unknown accounts are refused by the command.
    for (account, number) in [("shop", "12ab"), ("shop", ""), ("nobody", "123")] {
        let refused = webhook_admin(
            &app,
            WebhookCommand::Register {
                account: account.into(),
                phone_number_id: number.into(),
                access_token_file: None,
            },
        )
        .await;
        assert!(refused.is_err(), "{account} {number}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_status_updates_and_other_types_are_reported(backend: Backend) {
    // A send API that refuses everything keeps replies out of the way.
    let api = FakeSendApi::start().await;
    let app = spawn(backend, &api.base_url()).await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, Some("EAAG-sealed")).await;

    let first = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.D1", "hola")],
        vec![],
    );
    let (status, body) = post_signed(&app, &first).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "accepted", "messages": [{"id": "wamid.D1", "status": "accepted"}]})
    );
    // Redelivered: duplicated, not queued again.
    let (status, body) = post_signed(&app, &first).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "duplicated", "messages": [{"id": "wamid.D1", "status": "duplicated"}]})
    );

    // Status updates and non-text messages are ignored, with a reason.
    let mixed = delivery(
        NUMBER,
        vec![
            json!({"from": "34600111222", "id": "wamid.IMG", "type": "image", "image": {"id": "m1"}}),
            json!({"from": "34600111222", "id": "wamid.EMPTY", "type": "text", "text": {"body": " "}}),
        ],
        vec![json!({"id": "wamid.OUT1", "status": "delivered", "recipient_id": "34600111222"})],
    );
    let (status, body) = post_signed(&app, &mixed).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "ignored", "messages": [
            {"id": "wamid.IMG", "status": "ignored", "reason": "not_text"},
            {"id": "wamid.EMPTY", "status": "ignored", "reason": "malformed"},
            {"id": "wamid.OUT1", "status": "ignored", "reason": "status_update"}
        ]})
    );
    // An event with no message at all.
    let (status, body) = post_signed(
        &app,
        &json!({"object": "whatsapp_business_account", "entry": []}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ignored");
    assert_eq!(body["messages"][0]["reason"], "no_message");

    // Exactly one reply for the accepted message, with the sealed token.
    let delivered = api.wait_for(1, 30).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(api.delivered().len(), 1);
    assert_eq!(delivered[0].authorization, "Bearer EAAG-sealed");
    assert_eq!(delivered[0].idempotency_key, "wamid.D1");
}

/// One text column of every row a query returns.
async fn strings(app: &TestApp, sql: &str) -> Vec<Option<String>> {
    use warden::store::Store;
    match &app.store {
        Store::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        Store::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
    }
}

async fn queue_counts(app: &TestApp) -> Value {
    webhook_admin(app, WebhookCommand::Queue { account: None })
        .await
        .unwrap()
}

async fn wait_for_queue(app: &TestApp, state: &str, n: i64) -> Value {
    for _ in 0..600 {
        let counts = queue_counts(app).await;
        if counts[state].as_i64() == Some(n) {
            return counts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "the queue never had {n} {state}: {}",
        queue_counts(app).await
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_accepted_message_gets_exactly_one_reply_in_order_per_user(backend: Backend) {
    let api = FakeSendApi::start().await;
    let app = spawn(backend, &api.base_url()).await;
    app.account_with_key("shop").await;
    const OTHER: &str = "5550001";
    register(&app, "shop", NUMBER, Some("EAAG-sealed-token")).await;
    register(&app, "shop", OTHER, None).await;

    let users = ["34600000001", "34600000002", "34600000003"];
    let mut expected = 0;
    for round in 0..4 {
        for (u, user) in users.iter().enumerate() {
            let number = if u == 2 { OTHER } else { NUMBER };
            let id = format!("wamid.{user}.{round}");
            let payload = delivery(
                number,
                vec![text(user, &id, &format!("hola, mensaje {round}"))],
                vec![],
            );
            let (status, body) = post_signed(&app, &payload).await;
            assert_eq!(status, 200);
            assert_eq!(body["messages"][0]["status"], "accepted");
            expected += 1;
            // Some deliveries come twice, as the platform retries them.
            if round % 2 == 1 {
                let (_, body) = post_signed(&app, &payload).await;
                assert_eq!(body["messages"][0]["status"], "duplicated");
            }
        }
    }
    let delivered = api.wait_for(expected, 60).await;
    wait_for_queue(&app, "replied", expected as i64).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        api.delivered().len(),
        expected,
        "one reply per accepted message"
    );

    for (u, user) in users.iter().enumerate() {
        let theirs: Vec<_> = delivered.iter().filter(|d| d.body["to"] == *user).collect();
        let keys: Vec<_> = theirs.iter().map(|d| d.idempotency_key.clone()).collect();
        let wanted: Vec<_> = (0..4).map(|r| format!("wamid.{user}.{r}")).collect();
        assert_eq!(keys, wanted, "replies to {user} in arrival order");
        for d in theirs {
            let (number, token) = if u == 2 {
                (OTHER, format!("Bearer {FALLBACK_TOKEN}"))
            } else {
                (NUMBER, "Bearer EAAG-sealed-token".to_owned())
            };
            assert_eq!(d.phone_number_id, number);
            assert_eq!(d.authorization, token);
            assert_eq!(d.body["messaging_product"], "whatsapp");
            assert_eq!(d.body["recipient_type"], "individual");
            assert_eq!(d.body["type"], "text");
            assert!(!d.body["text"]["body"].as_str().unwrap().is_empty());
            assert_eq!(d.body.as_object().unwrap().len(), 5, "{}", d.body);
        }
    }

    // One conversation per user and number, continued; the stored user is a
    // pseudonym, and the sender's id is gone from the queue once replied.
    let users_stored = strings(&app, "SELECT user_id FROM conversations").await;
    assert_eq!(users_stored.len(), 3);
    for stored in &users_stored {
        let stored = stored.as_deref().unwrap();
        assert!(users.iter().all(|u| !stored.contains(u)), "{stored}");
    }
    let kept = strings(
        &app,
        "SELECT recipient FROM platform_inbound WHERE recipient IS NOT NULL",
    )
    .await;
    assert!(kept.is_empty());
    let turns = strings(
        &app,
        "SELECT body FROM conversation_messages WHERE role = 'user'",
    )
    .await;
    assert_eq!(turns.len(), expected);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_send_failures_are_retried_then_dead_lettered(backend: Backend) {
    let api = FakeSendApi::start().await;
    let args = PlatformArgs {
        platform_max_attempts: 3,
        ..platform_args(&api.base_url())
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, args).await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;

    // Two failures, then the send goes through: one reply.
    api.fail_next(&[503, 429]);
    let payload = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.R1", "hola")],
        vec![],
    );
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    api.wait_for(1, 30).await;
    assert_eq!(api.requests(), 3);
    wait_for_queue(&app, "replied", 1).await;

    // Failures past the bound: dead-lettered, visible to the operator.
    api.fail_next(&[500, 500, 500, 500]);
    let payload = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.R2", "otra")],
        vec![],
    );
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    let counts = wait_for_queue(&app, "dead", 1).await;
    assert_eq!(counts["replied"], 1);
    assert_eq!(api.delivered().len(), 1);

    // A refusal that cannot succeed is dead at once; the next message of the
    // same user is answered after it.
    api.fail_next(&[400]);
    let refused = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.R3", "y otra")],
        vec![],
    );
    assert_eq!(post_signed(&app, &refused).await.0, 200);
    wait_for_queue(&app, "dead", 2).await;
    let next = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.R4", "la última")],
        vec![],
    );
    assert_eq!(post_signed(&app, &next).await.0, 200);
    let delivered = api.wait_for(2, 30).await;
    assert_eq!(delivered[1].idempotency_key, "wamid.R4");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_tokens_are_sealed_at_rest_and_follow_a_master_key_rotation(backend: Backend) {
    use warden::crypto::master_key::{Keyring, MasterKey};
    const SECRET_TOKEN: &str = "EAAG-secret-token-never-in-clear";
    const NEW_KEY: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
    let app = spawn(backend, "http://127.0.0.1:9/v21.0").await;
    app.account_with_key("shop").await;
    let printed = register(&app, "shop", NUMBER, Some(SECRET_TOKEN)).await;
    assert_eq!(printed["access_token"], "sealed");
    assert!(!printed.to_string().contains(SECRET_TOKEN));
    let listed = webhook_admin(
        &app,
        WebhookCommand::List {
            account: "shop".into(),
        },
    )
    .await
    .unwrap();
    assert!(!listed.to_string().contains(SECRET_TOKEN));
    assert!(!app.db.contains(SECRET_TOKEN).await);

    // Rotate to a new master key with the old one as previous.
    let previous = app.db.dir().join("previous.key");
    std::fs::write(&previous, MASTER_KEY).unwrap();
    let database = DatabaseArgs {
        database_url: app.db.url.clone(),
        environment: ENVIRONMENT.into(),
    };
    let keys = MasterKeyArgs {
        master_key: Some(NEW_KEY.into()),
        master_key_previous_file: Some(previous),
        ..Default::default()
    };
    let rotated = warden::admin::execute(
        &app.store,
        &database,
        &keys,
        AdminCommand::MasterKey(warden::cli::MasterKeyCommand::Rotate),
    )
    .await
    .unwrap();
    assert!(rotated["resealed"].as_u64().unwrap() >= 1, "{rotated}");

    // The token now opens under the new key alone.
    let new_only = Keyring::new(MasterKey::from_base64(NEW_KEY).unwrap(), vec![]);
    let row = app
        .store
        .find_platform_number(NUMBER)
        .await
        .unwrap()
        .unwrap();
    let opened = warden::platform::access_token::open(
        &new_only,
        row.account(),
        NUMBER,
        &row.sealed_token().unwrap(),
    )
    .unwrap();
    assert_eq!(opened.as_str(), SECRET_TOKEN);
    assert!(!app.db.contains(SECRET_TOKEN).await);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interaction_reaches_the_phone_as_its_preview_never_its_refs(backend: Backend) {
    use crate::helpers::shop::{OPERATION_REF, Shop};
    let api = FakeSendApi::start().await;
    let app = spawn(backend, &api.base_url()).await;
    let shop = Shop::open_with(app).await;
    register(&shop.app, "shop", NUMBER, None).await;
    let payload = delivery(
        NUMBER,
        vec![text(
            "34600111222",
            "wamid.INT",
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )],
        vec![],
    );
    assert_eq!(post_signed(&shop.app, &payload).await.0, 200);
    let delivered = api.wait_for(1, 30).await;
    let sent = delivered[0].body.to_string();
    assert!(!sent.contains(OPERATION_REF), "{sent}");
    assert!(!sent.contains("_ref"), "{sent}");
    assert!(
        sent.contains("A-1001"),
        "the preview text is delivered: {sent}"
    );
    // The interaction is kept for the host's operation-results route.
    let kept = strings(&shop.app, "SELECT operation FROM interactions").await;
    assert_eq!(kept, vec![Some("change_address".to_owned())]);
    assert!(!shop.app.db.contains(OPERATION_REF).await);
}
