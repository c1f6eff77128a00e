//! The messaging-platform channel (contract 2.12, 4.3) from outside: the
//! handshake, signatures over raw bytes, routing, dedup and ignored items,
//! and replies through a fake send API on loopback (real HTTP both ways).

use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::sql::{execute, integers, strings};
use crate::helpers::*;
use serde_json::{Value, json};
use warden::cli::{AdminCommand, DatabaseArgs, MasterKeyArgs, PlatformArgs, WebhookCommand};
use warden::platform::webhook::sign;

const VERIFY_TOKEN: &str = "verify-token-of-the-test";
pub(crate) const APP_SECRET: &str = "app-secret-of-the-test";
pub(crate) const NUMBER: &str = "1029384756";
const FALLBACK_TOKEN: &str = "EAAG-fallback-token";
pub(crate) const PATH: &str = "/v1/webhooks/platform";

pub(crate) fn platform_args(api_url: &str) -> PlatformArgs {
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

pub(crate) async fn register(
    app: &TestApp,
    account: &str,
    number: &str,
    token: Option<&str>,
) -> Value {
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

pub(crate) fn text(from: &str, id: &str, body: &str) -> Value {
    json!({"from": from, "id": id, "timestamp": "1763900000", "type": "text", "text": {"body": body}})
}

pub(crate) fn delivery(number: &str, messages: Vec<Value>, statuses: Vec<Value>) -> Value {
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

pub(crate) async fn post_signed(app: &TestApp, payload: &Value) -> (u16, Value) {
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

pub(crate) async fn queue_counts(app: &TestApp) -> Value {
    webhook_admin(app, WebhookCommand::Queue { account: None })
        .await
        .unwrap()
}

pub(crate) async fn wait_for_queue(app: &TestApp, state: &str, n: i64) -> Value {
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

/// Like `post_signed`, with the answer's headers.
async fn post_signed_with_headers(
    app: &TestApp,
    payload: &Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let bytes = serde_json::to_vec(payload).unwrap();
    let response = app
        .client
        .post(app.url(PATH))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign(APP_SECRET, &bytes))
        .body(bytes)
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    let (status, body) = status_and_json(response).await;
    (status, headers, body)
}

/// A delivery with one change per number.
fn delivery_to_numbers(changes: Vec<(&str, Vec<Value>)>) -> Value {
    let changes: Vec<Value> = changes
        .into_iter()
        .map(|(number, messages)| {
            json!({"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"phone_number_id": number},
                "messages": messages
            }})
        })
        .collect();
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba-1", "changes": changes}]})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_number_is_answered_within_a_few_claims_behind_a_flood(backend: Backend) {
    // The default two workers, and one: fairness must not come from
    // having a spare worker.
    for (workers, flood) in [(2, 300), (1, 150)] {
        quiet_number_behind_a_flood(backend, workers, flood).await;
    }
}

async fn quiet_number_behind_a_flood(backend: Backend, workers: usize, flood: usize) {
    use std::time::{Duration, Instant};
    const QUIET: &str = "5550002";
    // A slow platform: draining the flood takes seconds.
    let api = FakeSendApi::start().await;
    api.set_delay(Duration::from_millis(25));
    let args = PlatformArgs {
        platform_workers: workers,
        ..platform_args(&api.base_url())
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, args).await;
    app.account_with_key("shop").await;
    app.account_with_key("quiet").await;
    register(&app, "shop", NUMBER, None).await;
    register(&app, "quiet", QUIET, None).await;

    // Number A: `flood` messages from 60 users, in deliveries of 50.
    let started = Instant::now();
    for chunk in 0..flood / 50 {
        let messages = (chunk * 50..(chunk + 1) * 50)
            .map(|n| {
                text(
                    &format!("346000{:05}", n % 60),
                    &format!("wamid.flood.{n:03}"),
                    "hola",
                )
            })
            .collect();
        let (status, body) = post_signed(&app, &delivery(NUMBER, messages, vec![])).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "accepted");
    }
    // Number B (another account): one message.
    let replied_before = api.delivered().len();
    let queued_at = Instant::now();
    let quiet = delivery(
        QUIET,
        vec![text("34611122233", "wamid.quiet", "hola")],
        vec![],
    );
    assert_eq!(post_signed(&app, &quiet).await.0, 200);

    let delivered = api.wait_for(flood + 1, 180).await;
    let drained = started.elapsed();
    let at = delivered
        .iter()
        .position(|d| d.idempotency_key == "wamid.quiet")
        .expect("the quiet number is answered");
    let latency = delivered[at].at.duration_since(queued_at);
    let flood_ahead = at - replied_before;
    eprintln!(
        "{backend:?}, {workers} worker(s): the quiet number's reply {latency:?} after its message was queued, \
         behind {} of the flood's {} unanswered messages; the flood of {flood} drained in {drained:?}",
        flood_ahead,
        flood - replied_before,
    );
    // The test means something only if most of the flood was still waiting.
    assert!(
        flood - replied_before >= flood / 3,
        "the flood was mostly answered before the quiet message arrived ({replied_before})"
    );
    assert!(
        flood_ahead <= 10,
        "the quiet number waited behind {flood_ahead} of the flood's messages"
    );
    // Each of the flood's users still answered in arrival order.
    for u in 0..60 {
        let user = format!("346000{u:05}");
        let keys: Vec<_> = delivered
            .iter()
            .filter(|d| d.body["to"] == user.as_str())
            .map(|d| d.idempotency_key.clone())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{user}'s replies in arrival order");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_number_answers_503_after_queueing_what_fits(backend: Backend) {
    const QUIET: &str = "5550002";
    // A platform that holds every send: nothing finishes until released.
    let api = FakeSendApi::start().await;
    api.hold();
    let args = PlatformArgs {
        platform_queue_per_number: 5,
        ..platform_args(&api.base_url())
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, args).await;
    app.account_with_key("shop").await;
    app.account_with_key("quiet").await;
    register(&app, "shop", NUMBER, None).await;
    register(&app, "quiet", QUIET, None).await;
    let stored = || {
        strings(
            &app,
            "SELECT platform_message_id FROM platform_inbound ORDER BY seq",
        )
    };

    let ids: Vec<String> = (0..8).map(|n| format!("wamid.CAP{n}")).collect();
    let flood = delivery(
        NUMBER,
        ids.iter()
            .enumerate()
            .map(|(n, id)| text(&format!("3460000000{n}"), id, "hola"))
            .collect(),
        vec![],
    );
    let (status, headers, body) = post_signed_with_headers(&app, &flood).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "SERVICE_UNAVAILABLE");
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=300).contains(&retry_after), "{retry_after}");
    // What fits was queued: the first five.
    let first_five: Vec<_> = ids[..5].iter().map(|id| Some(id.clone())).collect();
    assert_eq!(stored().await, first_five);

    // A delivery for the full number and another: the other's message is
    // queued, and the answer is still 503 so the platform retries.
    let mixed = delivery_to_numbers(vec![
        (NUMBER, vec![text("34600000009", "wamid.CAP8", "hola")]),
        (QUIET, vec![text("34611122233", "wamid.Q1", "hola")]),
    ]);
    assert_eq!(post_signed(&app, &mixed).await.0, 503);
    // Retried while still full: 503 again, nothing more queued.
    assert_eq!(post_signed(&app, &flood).await.0, 503);
    let mut expected = first_five.clone();
    expected.push(Some("wamid.Q1".into()));
    assert_eq!(stored().await, expected);

    // Drained, the retries are accepted; what was queued is duplicated.
    api.release();
    wait_for_queue(&app, "replied", 6).await;
    let (status, body) = post_signed(&app, &flood).await;
    assert_eq!(status, 200, "{body}");
    let statuses: Vec<_> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        statuses,
        [
            "duplicated",
            "duplicated",
            "duplicated",
            "duplicated",
            "duplicated",
            "accepted",
            "accepted",
            "accepted"
        ]
    );
    let (status, body) = post_signed(&app, &mixed).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"][0]["status"], "accepted");
    assert_eq!(body["messages"][1]["status"], "duplicated");

    // One reply per message, none lost, none twice.
    api.wait_for(10, 30).await;
    wait_for_queue(&app, "replied", 10).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut keys: Vec<_> = api
        .delivered()
        .iter()
        .map(|d| d.idempotency_key.clone())
        .collect();
    keys.sort();
    let mut wanted: Vec<_> = ids.clone();
    wanted.extend(["wamid.CAP8".to_owned(), "wamid.Q1".to_owned()]);
    wanted.sort();
    assert_eq!(keys, wanted);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstorable_fields_are_ignored_and_nothing_of_them_is_stored(backend: Backend) {
    let api = FakeSendApi::start().await;
    let app = spawn(backend, &api.base_url()).await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;
    let user = "34600111222";
    let bad = [
        text(user, "wamid.NUL-TEXT", "hola\u{0}mundo"),
        text(user, "wamid.NUL\u{0}ID", "hola"),
        text("3460011\u{0}1222", "wamid.NUL-FROM", "hola"),
        text(user, "wamid.CRLF\r\nX-Injected: 1", "hola"),
        text(user, "wamid.LF\nID", "hola"),
        text(user, "wamid.DEL\u{7f}ID", "hola"),
    ];
    let mut messages = vec![text(user, "wamid.OK1", "hola")];
    messages.extend(bad.iter().cloned());
    messages.push(text(user, "wamid.OK2", "adiós\nmundo"));
    let payload = delivery(NUMBER, messages, vec![]);
    let mut wanted = vec![json!({"id": "wamid.OK1", "status": "accepted"})];
    for m in &bad {
        wanted.push(json!({"id": m["id"], "status": "ignored", "reason": "invalid_message"}));
    }
    wanted.push(json!({"id": "wamid.OK2", "status": "accepted"}));
    let (status, body) = post_signed(&app, &payload).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"status": "accepted", "messages": wanted}));
    // Nothing of the refused messages is stored.
    let stored = "SELECT platform_message_id FROM platform_inbound ORDER BY seq";
    let ok = vec![Some("wamid.OK1".to_owned()), Some("wamid.OK2".to_owned())];
    assert_eq!(strings(&app, stored).await, ok);
    // Redelivered: the same answer, with the good ones duplicated.
    let (status, again) = post_signed(&app, &payload).await;
    assert_eq!(status, 200);
    assert_eq!(again["status"], "duplicated");
    assert_eq!(again["messages"][1]["reason"], "invalid_message");

    // A phone_number_id that cannot be a registered one is not registered,
    // looked up or not: ignored beside a registered number, 404 alone.
    for (n, number) in ["10293\u{0}84756", "1029384756\r\n", "x"]
        .into_iter()
        .enumerate()
    {
        let mixed = delivery_to_numbers(vec![
            (NUMBER, vec![text(user, &format!("wamid.OK.{n}"), "hola")]),
            (number, vec![text(user, "wamid.NOWHERE", "hola")]),
        ]);
        let (status, body) = post_signed(&app, &mixed).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["messages"][0]["status"], "accepted");
        assert_eq!(body["messages"][1]["reason"], "number_not_registered");
        let alone = delivery(number, vec![text(user, "wamid.NOWHERE", "hola")], vec![]);
        let (status, body) = post_signed(&app, &alone).await;
        assert_eq!(status, 404, "{body}");
    }
    assert_eq!(strings(&app, stored).await.len(), 5);

    // Only the stored messages are answered.
    api.wait_for(5, 30).await;
    wait_for_queue(&app, "replied", 5).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(api.delivered().len(), 5);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_that_cannot_be_built_is_dead_at_the_first_attempt(backend: Backend) {
    // The server's fallback token cannot be a header value.
    let api = FakeSendApi::start().await;
    let args = PlatformArgs {
        platform_access_token: Some("EAAG-broken\ntoken".into()),
        platform_max_attempts: 4,
        ..platform_args(&api.base_url())
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, args).await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;
    let payload = delivery(
        NUMBER,
        vec![text("34600111222", "wamid.B1", "hola")],
        vec![],
    );
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    wait_for_queue(&app, "dead", 1).await;
    assert_eq!(
        integers(&app, "SELECT attempts FROM platform_inbound").await,
        vec![1],
        "dead-lettered at the first attempt, never retried"
    );
    assert_eq!(api.requests(), 0);
    let errors = strings(&app, "SELECT last_error FROM platform_inbound").await;
    let error = errors[0].as_deref().unwrap();
    assert!(!error.contains("EAAG"), "{error}");
}

/// A worker whose lease another worker took over while its turn ran (the
/// lease had lapsed, as behind a slow host endpoint) keeps nothing of that
/// turn: the turn and its reply's record are one transaction under the
/// lease, so the user's conversation never holds a turn that the message's
/// new owner answers again, and nothing is sent.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_lease_was_taken_over_keeps_nothing(backend: Backend) {
    use crate::helpers::fixtures::account_with_held_order_status;
    let api = FakeSendApi::start().await;
    let platform = PlatformArgs {
        platform_workers: 1,
        ..platform_args(&api.base_url())
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, platform).await;
    let (_key, mut held) = account_with_held_order_status(&app, "shop").await;
    register(&app, "shop", NUMBER, None).await;

    let asked = "¿Dónde está mi pedido A-1001? zqleaselost";
    let payload = delivery(NUMBER, vec![text("34600000009", "wamid.L1", asked)], vec![]);
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    held.arrived.recv().await.unwrap();
    // The turn is at the host endpoint; the lease passes to another worker.
    let taken = execute(
        &app,
        "UPDATE platform_inbound SET lease_owner = 'wrk_another' WHERE platform_message_id = 'wamid.L1'",
    )
    .await;
    assert_eq!(taken, 1);
    held.release.add_permits(1);

    // The one worker answers the next message only once that turn is over.
    let payload = delivery(
        NUMBER,
        vec![text("34600000010", "wamid.L2", "hola")],
        vec![],
    );
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    let delivered = api.wait_for(1, 30).await;
    assert_eq!(delivered[0].idempotency_key, "wamid.L2");

    let conversations = strings(&app, "SELECT id FROM conversations").await;
    assert_eq!(conversations.len(), 1, "only the second user's");
    let asked_in_conversations = strings(
        &app,
        "SELECT body FROM conversation_messages WHERE body LIKE '%zqleaselost%'",
    )
    .await;
    assert!(
        asked_in_conversations.is_empty(),
        "{asked_in_conversations:?}"
    );
    let mapped = strings(&app, "SELECT user_pseudonym FROM platform_conversations").await;
    assert_eq!(mapped.len(), 1);
    let left = strings(
        &app,
        "SELECT state || ' ' || lease_owner || ' ' || COALESCE(reply, '-') FROM platform_inbound \
         WHERE platform_message_id = 'wamid.L1'",
    )
    .await;
    assert_eq!(left, vec![Some("queued wrk_another -".to_owned())]);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(api.delivered().len(), 1, "nothing sent for the lost turn");
}
