//! The platform channel with real `warden serve` processes: SIGKILL at
//! random points between receipt, turn, send and acknowledgement, and two
//! replicas draining one PostgreSQL queue. The send API is a fake on
//! loopback that, like a deduplicating platform, drops a resend carrying an
//! `Idempotency-Key` it already delivered; it also counts every request.

use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::*;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use warden::platform::webhook::sign;

const VERIFY_TOKEN: &str = "durability-verify-token";
pub const APP_SECRET: &str = "durability-app-secret";
const NUMBER: &str = "4455667788";
pub const TOKEN: &str = "EAAG-durability";

pub fn platform_env(api: &FakeSendApi) -> Vec<(&'static str, String)> {
    vec![
        ("WARDEN_WEBHOOK_VERIFY_TOKEN", VERIFY_TOKEN.into()),
        ("WARDEN_WEBHOOK_APP_SECRET", APP_SECRET.into()),
        ("WARDEN_PLATFORM_API_URL", api.base_url()),
        ("WARDEN_DEV_ALLOW_LOOPBACK", "1".into()),
        ("WARDEN_PLATFORM_LEASE_MS", "1000".into()),
        ("WARDEN_PLATFORM_RETRY_BASE_MS", "50".into()),
        ("WARDEN_PLATFORM_MAX_ATTEMPTS", "1000".into()),
        ("WARDEN_LOG", "warden=info,warn".into()),
    ]
}

async fn start(db: &TestDb, env: &[(&'static str, String)]) -> ServerProcess {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ServerProcess::start(db, &pairs).await
}

/// The account and its number, through the real CLI (the token sealed).
async fn set_up(db: &TestDb) {
    cli_account_with_key(db, "shop").await;
    register_number(db).await;
}

/// Registers the number for the existing account `shop`, through the real
/// CLI (the token sealed).
pub async fn register_number(db: &TestDb) {
    let file = db.dir().join("token.txt");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let out = warden_command(db)
        .env("WARDEN_MASTER_KEY", MASTER_KEY)
        .args([
            "admin",
            "webhook",
            "register",
            "--account",
            "shop",
            "--phone-number-id",
            NUMBER,
            "--access-token-file",
        ])
        .arg(&file)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["access_token"], "sealed");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN));
}

pub fn delivery(user: &str, id: &str, body: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"object": "whatsapp_business_account", "entry": [{"id": "w", "changes": [{
            "field": "messages",
            "value": {
                "metadata": {"phone_number_id": NUMBER},
                "messages": [{"from": user, "id": id, "type": "text", "text": {"body": body}}]
            }
        }]}]}),
    )
    .unwrap()
}

/// Posts one delivery as the platform does; `true` once it got a 200.
pub async fn post(client: &reqwest::Client, address: &str, bytes: &[u8]) -> bool {
    let sent = client
        .post(format!("{address}/v1/webhooks/platform"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign(APP_SECRET, bytes))
        .body(bytes.to_vec())
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    matches!(sent, Ok(r) if r.status().as_u16() == 200)
}

fn user_of(id: &str) -> &str {
    id.split('.').nth(1).unwrap()
}

/// Every key of `ids` delivered exactly once (resends dropped by the fake),
/// and each user's replies in the order the queue accepted their messages.
async fn check_replies(api: &FakeSendApi, store: &warden::store::Store, total: usize) {
    let delivered = api.wait_for(total, 180).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = if api.delivered().len() > delivered.len() {
        api.delivered()
    } else {
        delivered
    };
    assert_eq!(delivered.len(), total, "one reply per accepted message");
    let sql = "SELECT platform_message_id FROM platform_inbound ORDER BY seq";
    let accepted: Vec<String> = match store {
        warden::store::Store::Sqlite(pool) => {
            sqlx::query_scalar(sql).fetch_all(pool).await.unwrap()
        }
        warden::store::Store::Postgres(pool) => sqlx::query_scalar(sql)
            .fetch_all(pool.pool())
            .await
            .unwrap(),
    };
    assert_eq!(accepted.len(), total);
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in &accepted {
        expected
            .entry(user_of(id).to_owned())
            .or_default()
            .push(id.clone());
    }
    let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in &delivered {
        assert_eq!(d.phone_number_id, NUMBER);
        assert_eq!(d.authorization, format!("Bearer {TOKEN}"));
        assert_eq!(d.body["to"], user_of(&d.idempotency_key));
        got.entry(user_of(&d.idempotency_key).to_owned())
            .or_default()
            .push(d.idempotency_key.clone());
    }
    assert_eq!(
        got, expected,
        "each user answered once per message, in arrival order"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_anywhere_still_gives_one_reply_per_accepted_message(backend: Backend) {
    let rounds: usize = std::env::var("WARDEN_PLATFORM_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("WARDEN_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().r#gen());
    eprintln!("platform crash seed {seed} ({rounds} kill points)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let api = FakeSendApi::start().await;
    let db = TestDb::new(backend).await;
    set_up(&db).await;
    let env = platform_env(&api);
    let client = reqwest::Client::new();
    let users: Vec<String> = (0..5).map(|u| format!("3460000{u:04}")).collect();
    // Deliveries the platform still has to (re)deliver: no 200 seen yet.
    let mut unacknowledged: Vec<Vec<u8>> = Vec::new();
    let mut sent = 0usize;
    for _ in 0..rounds {
        let mut server = start(&db, &env).await;
        let kill_at = Instant::now() + Duration::from_millis(rng.gen_range(30..=400));
        let mut pending = std::mem::take(&mut unacknowledged);
        while Instant::now() < kill_at {
            let bytes = match pending.pop() {
                Some(bytes) => bytes,
                None => {
                    let user = &users[sent % users.len()];
                    sent += 1;
                    delivery(
                        user,
                        &format!("wamid.{user}.{sent}"),
                        &format!("hola {sent}"),
                    )
                }
            };
            if !post(&client, &server.address, &bytes).await {
                unacknowledged.push(bytes);
            }
            tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
        }
        unacknowledged.extend(pending);
        server.child.start_kill().unwrap(); // SIGKILL
        server.child.wait().await.unwrap();
    }
    // The platform redelivers what was never acknowledged; the last server drains.
    let server = start(&db, &env).await;
    for bytes in std::mem::take(&mut unacknowledged) {
        assert!(post(&client, &server.address, &bytes).await);
    }
    let store = db.store().await;
    check_replies(&api, &store, sent).await;
    eprintln!(
        "{sent} messages, {} send requests ({} resends dropped by the idempotency key)",
        api.requests(),
        api.requests() - sent
    );
    // A resend only follows a kill between a send and its acknowledgement.
    assert!(api.requests() - sent <= 2 * rounds);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_postgresql_drain_one_queue() {
    const USERS: usize = 20;
    const PER_USER: usize = 25;
    let api = FakeSendApi::start().await;
    let db = TestDb::new(Backend::Postgres).await;
    set_up(&db).await;
    let env = platform_env(&api);
    let replicas = [start(&db, &env).await, start(&db, &env).await];
    let addresses: Vec<String> = replicas.iter().map(|r| r.address.clone()).collect();
    let started = Instant::now();
    let mut senders = Vec::new();
    for u in 0..USERS {
        let addresses = addresses.clone();
        senders.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let user = format!("3461{u:07}");
            for n in 0..PER_USER {
                let bytes = delivery(&user, &format!("wamid.{user}.{n:03}"), &format!("hola {n}"));
                // Each delivery to either replica, as a load balancer would.
                assert!(post(&client, &addresses[(u + n) % 2], &bytes).await);
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let accepted_in = started.elapsed();
    let store = db.store().await;
    check_replies(&api, &store, USERS * PER_USER).await;
    eprintln!(
        "{} messages accepted in {accepted_in:?}, all replied after {:?}",
        USERS * PER_USER,
        started.elapsed()
    );
    assert_eq!(api.requests(), USERS * PER_USER, "no message sent twice");
    let mut logs_of = Vec::new();
    for replica in &replicas {
        logs_of.push(replica.logs_so_far().await);
    }
    let mut sent_by: HashMap<usize, usize> = HashMap::new();
    for (i, logs) in logs_of.iter().enumerate() {
        sent_by.insert(
            i,
            logs.iter()
                .filter(|l| l.contains("platform reply sent"))
                .count(),
        );
    }
    assert!(
        sent_by.values().all(|n| *n > 0),
        "both replicas worked: {sent_by:?}"
    );
    // No secret and no sender id in any log line of either replica.
    for logs in &logs_of {
        for line in logs {
            for secret in [TOKEN, APP_SECRET, VERIFY_TOKEN, "3461000"] {
                assert!(!line.contains(secret), "{secret} logged: {line}");
            }
        }
    }
    store.close().await;
}
