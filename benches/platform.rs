//! `make bench`: the messaging-platform channel on both databases.
//! Accepted webhook deliveries per second (signed deliveries posted by 8
//! concurrent clients while the workers drain), and queue-to-reply latency
//! (from the webhook's 200 to the reply reaching a send API on loopback),
//! p50/p99, under that burst and for messages sent one at a time.
//!
//! Run: `cargo bench --bench platform` (harness-free: prints a table).
//! PostgreSQL: `WARDEN_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); a fresh database is
//! created and dropped. The planner is the built-in one: the figures are the
//! channel's own cost, not a model's.

use serde_json::json;
use sqlx::Connection;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden::cli::{
    AccountCommand, AdminCommand, DatabaseArgs, MasterKeyArgs, PlatformArgs, SandboxArgs,
    ServeArgs, WebhookCommand,
};
use warden::platform::webhook::sign;
use warden::startup::Application;

const BURST: usize = 2_000;
const USERS: usize = 50;
const CLIENTS: usize = 8;
const PACED: usize = 200;
const SECRET: &str = "bench-app-secret";
const NUMBER: &str = "123456789";
const MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A send API that notes when each reply (by its idempotency key) arrived.
async fn fake_send_api() -> (String, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let shared = arrivals.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let shared = shared.clone();
        async move {
            if let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) {
                shared
                    .lock()
                    .unwrap()
                    .entry(key.to_owned())
                    .or_insert_with(Instant::now);
            }
            axum::Json(json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.out"}]}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v21.0", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, arrivals)
}

fn delivery(user: &str, id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"object": "whatsapp_business_account", "entry": [{"id": "w", "changes": [{
        "field": "messages",
        "value": {"metadata": {"phone_number_id": NUMBER},
                  "messages": [{"from": user, "id": id, "type": "text", "text": {"body": "hola, ¿qué tal?"}}]}
    }]}]}))
    .unwrap()
}

async fn post(client: &reqwest::Client, url: &str, bytes: Vec<u8>) -> Instant {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sign(SECRET, &bytes))
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    Instant::now()
}

async fn wait_for(arrivals: &Arrivals, ids: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while ids
        .iter()
        .any(|id| !arrivals.lock().unwrap().contains_key(id))
    {
        assert!(
            Instant::now() < deadline,
            "replies missing after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn latencies(arrivals: &Arrivals, accepted: &HashMap<String, Instant>) -> (f64, f64) {
    let arrivals = arrivals.lock().unwrap();
    let mut samples: Vec<Duration> = accepted
        .iter()
        .map(|(id, at)| arrivals[id].saturating_duration_since(*at))
        .collect();
    (
        ms(percentile(&mut samples, 0.50)),
        ms(percentile(&mut samples, 0.99)),
    )
}

async fn run(label: &str, database_url: &str, dir: &std::path::Path) {
    let (api, arrivals) = fake_send_api().await;
    let database = DatabaseArgs {
        database_url: database_url.into(),
        environment: "bench".into(),
    };
    let keys = MasterKeyArgs {
        master_key: Some(MASTER_KEY.into()),
        ..Default::default()
    };
    let serve = ServeArgs {
        docs_ui: false,
        listen: "127.0.0.1:0".parse().unwrap(),
        sandbox: SandboxArgs {
            dev_allow_loopback: true,
            guest_cache_dir: Some(dir.join("cache")),
            policy_guest: None,
        },
        planner: Default::default(),
        limits: Default::default(),
        platform: PlatformArgs {
            webhook_verify_token: Some("bench-verify".into()),
            webhook_app_secret: Some(SECRET.into()),
            platform_api_url: api,
            platform_access_token: Some("EAAG-bench".into()),
            // The whole burst fits: this measures throughput, not the cap.
            platform_queue_per_number: BURST as u32,
            ..Default::default()
        },
        prompt: Default::default(),
        mcp: Default::default(),
    };
    let app = Application::build(&database, &keys, &serve).await.unwrap();
    let store = app.store().clone();
    let url = format!("http://{}/v1/webhooks/platform", app.local_addr());
    tokio::spawn(app.run(std::future::pending()));
    for command in [
        AdminCommand::Account(AccountCommand::Create {
            name: "bench".into(),
        }),
        AdminCommand::Webhook(WebhookCommand::Register {
            account: "bench".into(),
            phone_number_id: NUMBER.into(),
            access_token_file: None,
        }),
    ] {
        warden::admin::execute(&store, &database, &keys, command)
            .await
            .unwrap();
    }

    // The burst: CLIENTS concurrent posters, USERS users.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut accepted = HashMap::new();
            for n in (c..BURST).step_by(CLIENTS) {
                let user = format!("34600{:06}", n % USERS);
                let id = format!("wamid.burst.{n}");
                accepted.insert(id.clone(), post(&client, &url, delivery(&user, &id)).await);
            }
            accepted
        }));
    }
    let mut accepted = HashMap::new();
    for t in tasks {
        accepted.extend(t.await.unwrap());
    }
    let per_second = BURST as f64 / started.elapsed().as_secs_f64();
    let ids: Vec<String> = accepted.keys().cloned().collect();
    wait_for(&arrivals, &ids).await;
    let drained = started.elapsed();
    let (burst_p50, burst_p99) = latencies(&arrivals, &accepted);

    // One at a time: each message waits for its reply before the next.
    let client = reqwest::Client::new();
    let mut paced = HashMap::new();
    for n in 0..PACED {
        let id = format!("wamid.paced.{n}");
        let at = post(
            &client,
            &url,
            delivery(&format!("34611{:06}", n % USERS), &id),
        )
        .await;
        paced.insert(id.clone(), at);
        wait_for(&arrivals, &[id]).await;
    }
    let (paced_p50, paced_p99) = latencies(&arrivals, &paced);

    println!(
        "{label:<10} {per_second:>10.0} /s {:>10.1} s {burst_p50:>10.1} {burst_p99:>10.1} {paced_p50:>10.1} {paced_p99:>10.1}",
        drained.as_secs_f64()
    );
    store.close().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!(
        "platform channel: {BURST} deliveries from {USERS} users by {CLIENTS} clients, then {PACED} one at a time (ms)"
    );
    println!(
        "{:<10} {:>13} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "database", "accepted", "drained in", "burst p50", "burst p99", "paced p50", "paced p99"
    );
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("bench.db").display());
    run("sqlite", &sqlite, dir.path()).await;

    let admin = std::env::var("WARDEN_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await else {
        println!("postgres   skipped: no server at {admin} (scripts/ensure-postgres.sh)");
        return;
    };
    let name = format!("warden_bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let url = match admin.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => unreachable!("a PostgreSQL URL has a database segment"),
    };
    run("postgres", &url, dir.path()).await;
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .unwrap();
}
