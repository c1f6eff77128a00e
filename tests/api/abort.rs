//! Clients that hang up at any moment leave nothing behind.
//!
//! Every writing route gets a few dozen requests over raw TCP, each cut at a
//! random moment: inside the headers, inside the body, a few milliseconds
//! after the body, or after the first byte of the answer. Then:
//! - another account's write succeeds within one second (an abandoned
//!   transaction would hold SQLite's write lock for everyone);
//! - no idempotency claim stays in flight, and every import is whole: both of
//!   its capabilities exist or neither, and retrying its key answers 201;
//! - revisions are contiguous and match each capability's current revision;
//! - a claimed `Client-Event-Id` belongs to a turn that was written, and a
//!   written turn's claim is kept;
//! - no conversation exists without its messages;
//! - (prompt integrations, their own test) every execution that reached the
//!   model is recorded, and the day's reservations equal the executions that
//!   succeeded: a failed one gave its reservation back;
//! - (the platform webhook, its own test) once the platform re-sends every
//!   delivery, each message is queued exactly once, none stays leased or
//!   unfinished, and the worker replies once per message, in each user's
//!   arrival order.
//!
//! The seed is printed; `WARDEN_ABORT_SEED` replays a run and
//! `WARDEN_ABORT_ROUNDS` (default 24 per route) makes it longer.

use crate::helpers::fake_inference::FakeReply;
use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::fixtures::{CREDENTIAL, valid_definition};
use crate::helpers::shop::*;
use crate::helpers::*;
use crate::platform_webhook::{
    APP_SECRET, NUMBER, PATH, delivery, platform_args, post_signed, register, text, wait_for_queue,
};
use crate::prompt_integrations::{Forms, GOOD_OUTPUT, IP_HEADER, ORIGIN, topic};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use warden::platform::webhook::sign;
use warden::store::Store;

/// One request as bytes on the wire.
struct Probe {
    head: Vec<u8>,
    body: Vec<u8>,
}

impl Probe {
    fn new(method: &str, path: &str, key: &str, headers: &[(&str, String)], body: &Value) -> Self {
        let mut all = vec![("authorization", format!("Bearer {key}"))];
        all.extend_from_slice(headers);
        Probe::public(method, path, &all, body)
    }

    /// A request with no bearer key (the public routes).
    fn public(method: &str, path: &str, headers: &[(&str, String)], body: &Value) -> Self {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: warden\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        Probe {
            head: head.into_bytes(),
            body,
        }
    }
}

/// Where the client hangs up.
#[derive(Clone, Copy, Debug)]
enum Cut {
    InHeaders,
    InBody,
    AfterBody(u64),
    AfterFirstResponseByte,
}

impl Cut {
    fn random(rng: &mut StdRng) -> Self {
        match rng.gen_range(0..10) {
            0 => Cut::InHeaders,
            1 => Cut::InBody,
            2 => Cut::AfterFirstResponseByte,
            _ => Cut::AfterBody(rng.gen_range(0..6)),
        }
    }
}

async fn send_and_hang_up(address: SocketAddr, probe: Probe, cut: Cut, split: f64) {
    let Ok(mut stream) = TcpStream::connect(address).await else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let at = |len: usize| ((len as f64 * split) as usize).min(len.saturating_sub(1));
    let _ = match cut {
        Cut::InHeaders => stream.write_all(&probe.head[..at(probe.head.len())]).await,
        Cut::InBody => {
            let _ = stream.write_all(&probe.head).await;
            stream.write_all(&probe.body[..at(probe.body.len())]).await
        }
        Cut::AfterBody(millis) => {
            let _ = stream.write_all(&probe.head).await;
            let _ = stream.write_all(&probe.body).await;
            tokio::time::sleep(Duration::from_millis(millis)).await;
            Ok(())
        }
        Cut::AfterFirstResponseByte => {
            let _ = stream.write_all(&probe.head).await;
            let _ = stream.write_all(&probe.body).await;
            let mut byte = [0u8; 1];
            let _ = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await;
            Ok(())
        }
    };
    // Dropping the socket closes it: the hang-up.
}

/// Runs one query that returns a single integer, on either backend.
async fn scalar(store: &Store, sql: &str) -> i64 {
    match store {
        Store::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
        Store::Postgres(pool) => sqlx::query_scalar(sql)
            .fetch_one(pool.pool())
            .await
            .unwrap(),
    }
}

async fn strings(store: &Store, sql: &str) -> Vec<String> {
    match store {
        Store::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        Store::Postgres(pool) => sqlx::query_scalar(sql)
            .fetch_all(pool.pool())
            .await
            .unwrap(),
    }
}

fn seed() -> u64 {
    std::env::var("WARDEN_ABORT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

fn rounds() -> usize {
    std::env::var("WARDEN_ABORT_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

/// Every writing route, with request `i`'s body.
fn probes(shop: &Shop, interactions: &[(String, String)], i: usize, revision: i64) -> Vec<Probe> {
    let key = shop.key.as_str();
    let order_status = &shop.ids["order_status"];
    let (conversation, interaction) = &interactions[i % interactions.len()];
    let idem = |kind: &str| vec![("idempotency-key", format!("abort-{kind}-{i}"))];
    let if_match = vec![("if-match", revision.to_string())];
    vec![
        Probe::new(
            "PUT",
            "/v1/agent-policy",
            key,
            &[],
            &json!({"version": 1, "instructions": format!("Be brief {i}")}),
        ),
        Probe::new("DELETE", "/v1/agent-policy", key, &[], &Value::Null),
        Probe::new(
            "PUT",
            "/v1/diagnostics/settings",
            key,
            &[],
            &json!({"diagnostic_message_mode": if i % 2 == 0 { "text" } else { "metadata" }}),
        ),
        Probe::new(
            "PUT",
            &format!("/v1/capability-credentials/cred_abort_{}", i % 4),
            key,
            &[],
            &json!({"auth_type": "bearer", "secret": format!("s3cret-{i}")}),
        ),
        Probe::new(
            "DELETE",
            &format!("/v1/capability-credentials/cred_abort_{}", (i + 2) % 4),
            key,
            &[],
            &Value::Null,
        ),
        Probe::new(
            "POST",
            "/v1/capabilities",
            key,
            &idem("create"),
            &json!({"domain": "orders", "capability": valid_definition(&format!("created_{i}"))}),
        ),
        Probe::new(
            "POST",
            "/v1/capabilities/import",
            key,
            &idem("import"),
            &json!({"domain": "orders", "capabilities": [valid_definition(&format!("imported_{i}_a")), valid_definition(&format!("imported_{i}_b"))]}),
        ),
        Probe::new(
            "PATCH",
            &format!("/v1/capabilities/{order_status}"),
            key,
            &if_match,
            &json!({"domain": "orders", "capability": order_status_definition(shop, i)}),
        ),
        Probe::new(
            "POST",
            &format!("/v1/capabilities/{order_status}/disable"),
            key,
            &if_match,
            &Value::Null,
        ),
        Probe::new(
            "POST",
            &format!("/v1/capabilities/{order_status}/enable"),
            key,
            &if_match,
            &Value::Null,
        ),
        Probe::new(
            "POST",
            &format!("/v1/capabilities/{order_status}/test"),
            key,
            &[],
            &json!({"arguments": {"order": "A-1001"}}),
        ),
        Probe::new(
            "POST",
            "/v1/channels/http/messages",
            key,
            &[("client-event-id", format!("abort-event-{i}"))],
            &json!({"user_id": "user-42", "message": {"type": "text", "body": format!("¿Dónde está mi pedido A-1001? probe-{i}-end")}}),
        ),
        Probe::new(
            "POST",
            &format!("/v1/conversations/{conversation}/operation-results"),
            key,
            &idem("report"),
            &json!({"interaction_id": interaction, "operation": "change_address", "status": "succeeded"}),
        ),
    ]
}

/// The shop's `order_status` definition with a description that changes per request.
fn order_status_definition(shop: &Shop, i: usize) -> Value {
    let mut definition = order_status(&shop.endpoint.base);
    definition["description"] = json!(format!("Order status, revision probe {i}"));
    definition
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_up_clients_leave_nothing_locked_or_half_written(backend: Backend) {
    let seed = seed();
    eprintln!("abort harness seed: {seed} (WARDEN_ABORT_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let shop = Shop::open(backend).await;
    let other = crate::helpers::fixtures::account_ready(&shop.app, "bystander").await;
    let address: SocketAddr = shop
        .app
        .address
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    // Interactions for the operation-result reports.
    let mut interactions = Vec::new();
    for _ in 0..3 {
        let (_, body) = shop
            .say(
                None,
                "Quiero cambiar la dirección de envío del pedido A-1001",
            )
            .await;
        interactions.push((
            conversation(&body),
            body["interaction"]["interaction_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{body}"))
                .to_owned(),
        ));
    }

    let rounds = rounds();
    let mut sent = 0usize;
    for i in 0..rounds {
        let revision = scalar(
            &shop.app.store,
            &format!(
                "SELECT revision FROM capabilities WHERE id = '{}'",
                shop.ids["order_status"]
            ),
        )
        .await;
        // Every route's probe of this round at once.
        let round = probes(&shop, &interactions, i, revision);
        sent += round.len();
        let at_once = round.len();
        hang_up_all(address, round, at_once, &mut rng).await;
    }
    eprintln!("abort harness: {sent} requests aborted on {backend:?}");

    // Another account writes at once.
    let write = shop
        .app
        .client
        .put(shop.app.url("/v1/agent-policy"))
        .bearer_auth(&other)
        .json(&json!({"version": 1, "instructions": "Answer in English."}))
        .send();
    let response = tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .expect("another account's write answers within 1 s")
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());

    // Work detached from the hung-up clients finishes on its own.
    let store = &shop.app.store;
    let mut in_flight = i64::MAX;
    for _ in 0..100 {
        in_flight = scalar(
            store,
            "SELECT COUNT(*) FROM idempotency_records WHERE state = 'in_flight'",
        )
        .await;
        if in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(in_flight, 0, "no idempotency claim stays in flight");

    // Imports are whole, and their keys are either replayed or free.
    let names = strings(store, "SELECT name FROM capabilities").await;
    for i in 0..rounds {
        let a = names.contains(&format!("imported_{i}_a"));
        let b = names.contains(&format!("imported_{i}_b"));
        assert_eq!(a, b, "import {i} is whole");
        let response = shop
            .app
            .import_capabilities(
                &shop.key,
                &format!("abort-import-{i}"),
                vec![
                    valid_definition(&format!("imported_{i}_a")),
                    valid_definition(&format!("imported_{i}_b")),
                ],
            )
            .await;
        let replayed = response.headers().get("idempotency-replayed").is_some();
        assert_eq!(response.status(), 201, "import {i} retried");
        assert_eq!(
            replayed, a,
            "a finished import is replayed, an unfinished one runs now"
        );
    }
    // Revisions are contiguous and end at the capability's revision.
    let broken = scalar(store, "SELECT COUNT(*) FROM capabilities c WHERE c.revision <> \
            (SELECT COUNT(*) FROM capability_revisions r WHERE r.capability_id = c.id) \
            OR c.revision <> (SELECT MAX(r.revision) FROM capability_revisions r WHERE r.capability_id = c.id)").await;
    assert_eq!(broken, 0, "revisions are contiguous");

    // A kept Client-Event-Id belongs to a written turn, and the other way round.
    let events = strings(store, "SELECT event_id FROM channel_events").await;
    let bodies = strings(
        store,
        "SELECT body FROM conversation_messages WHERE role = 'user'",
    )
    .await;
    for i in 0..rounds {
        let claimed = events.contains(&format!("abort-event-{i}"));
        let written = bodies.iter().any(|b| b.contains(&format!("probe-{i}-end")));
        assert_eq!(
            claimed, written,
            "event {i}: claim kept exactly when the turn was written"
        );
    }
    let empty = scalar(
        store,
        "SELECT COUNT(*) FROM conversations c WHERE NOT EXISTS \
            (SELECT 1 FROM conversation_messages m WHERE m.conversation_id = c.id)",
    )
    .await;
    assert_eq!(empty, 0, "no conversation without messages");

    // And the tenant itself still writes normally.
    let secret = json!({"auth_type": "bearer", "secret": "endpoint-token-123"});
    let (status, _) = shop
        .app
        .put_credential(&shop.key, CREDENTIAL, &secret)
        .await;
    assert_eq!(status, 201);
}

/// Hangs up `probes`, `at_once` at a time, each at a random moment.
async fn hang_up_all(address: SocketAddr, probes: Vec<Probe>, at_once: usize, rng: &mut StdRng) {
    let mut probes = probes.into_iter().peekable();
    while probes.peek().is_some() {
        let batch: Vec<_> = probes
            .by_ref()
            .take(at_once.max(1))
            .map(|probe| {
                let cut = Cut::random(rng);
                let split = rng.gen_range(0.0..1.0);
                tokio::spawn(send_and_hang_up(address, probe, cut, split))
            })
            .collect();
        for task in batch {
            task.await.unwrap();
        }
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_up_prompt_executions_give_back_what_they_reserved(backend: Backend) {
    let seed = seed();
    eprintln!("abort harness seed: {seed} (WARDEN_ABORT_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    // The model takes 0–15 ms, so hang-ups land while it thinks; every other
    // answer breaks the output schema, so half the executions that reach it
    // fail and must give their reservation back.
    let replies = (0..1000u64)
        .map(|i| {
            let answer = if i % 2 == 0 {
                FakeReply::text(GOOD_OUTPUT)
            } else {
                FakeReply::text(r#"{"title": 7}"#)
            };
            FakeReply::Delayed(Duration::from_millis(i % 16), Box::new(answer))
        })
        .collect();
    let forms = Forms::open_with_model(backend, replies).await;
    let address: SocketAddr = forms
        .app
        .address
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let path = format!("/v1/prompt-integrations/{}/execute", forms.id);
    // At most half of them succeed: the day's quota is never what stops one.
    let rounds = rounds().min(2 * (warden::store::prompt_integrations::DAILY_QUOTA as usize - 2));
    let probes = (0..rounds)
        .map(|i| {
            Probe::public(
                "POST",
                &path,
                &[
                    ("origin", ORIGIN.to_owned()),
                    // A client of its own each: the burst limit stays out of the way.
                    (IP_HEADER, format!("10.7.{}.{}", i / 256, i % 256)),
                ],
                &topic(&format!("boots {i}"), &forms.token()),
            )
        })
        .collect();
    hang_up_all(address, probes, 4, &mut rng).await;

    // Detached executions finish on their own; then the books balance.
    let store = &forms.app.store;
    let id = &forms.id;
    let count = |sql: String| async move { scalar(store, &sql).await };
    let (mut reached, mut recorded, mut reserved, mut succeeded) = (0, -1, -1, -2);
    for _ in 0..100 {
        reached = forms.model.requests().len() as i64;
        recorded = count(format!(
            "SELECT COUNT(*) FROM prompt_integration_usage WHERE integration_id = '{id}' \
             AND outcome <> 'quota_exceeded'"
        ))
        .await;
        reserved = count(format!(
            "SELECT CAST(COALESCE(SUM(reserved), 0) AS BIGINT) FROM prompt_integration_quota \
             WHERE integration_id = '{id}'"
        ))
        .await;
        succeeded = count(format!(
            "SELECT COUNT(*) FROM prompt_integration_usage WHERE integration_id = '{id}' \
             AND outcome = 'succeeded'"
        ))
        .await;
        if recorded == reached && reserved == succeeded {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "abort harness: {rounds} prompt executions aborted on {backend:?}; \
         {reached} reached the model, {succeeded} succeeded"
    );
    assert_eq!(
        recorded, reached,
        "every execution that reached the model is recorded"
    );
    assert_eq!(
        reserved, succeeded,
        "the day's reservations are the executions that succeeded"
    );

    // And the integration still answers a whole request.
    forms.model.set_script(vec![FakeReply::text(GOOD_OUTPUT)]);
    let (status, body, _) = forms
        .execute("10.8.0.1", &topic("boots", &forms.token()))
        .await;
    assert_eq!(status, 200, "{body}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_up_webhook_deliveries_queue_each_message_once(backend: Backend) {
    let seed = seed();
    eprintln!("abort harness seed: {seed} (WARDEN_ABORT_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let api = FakeSendApi::start().await;
    let app =
        TestApp::spawn_with_platform(TestDb::new(backend).await, platform_args(&api.base_url()))
            .await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;
    let address: SocketAddr = app.address.trim_start_matches("http://").parse().unwrap();
    // Deliveries of one to three messages from five users.
    let rounds = rounds() * 4;
    let mut ids = Vec::new();
    let deliveries: Vec<Value> = (0..rounds)
        .map(|i| {
            let messages = (0..1 + i % 3)
                .map(|k| {
                    let id = format!("wamid.abort.{i:03}.{k}");
                    ids.push(id.clone());
                    text(
                        &format!("3460000000{}", (i + k) % 5),
                        &id,
                        &format!("hola {i} {k}"),
                    )
                })
                .collect();
            delivery(NUMBER, messages, vec![])
        })
        .collect();
    let probes = deliveries
        .iter()
        .map(|d| {
            // Signed over exactly the bytes `Probe::public` sends.
            let signature = sign(APP_SECRET, d.to_string().as_bytes());
            Probe::public("POST", PATH, &[("x-hub-signature-256", signature)], d)
        })
        .collect();
    hang_up_all(address, probes, 4, &mut rng).await;
    eprintln!(
        "abort harness: {rounds} webhook deliveries ({} messages) aborted on {backend:?}",
        ids.len()
    );

    // The platform re-sends every delivery it saw no 200 for (here: all).
    for d in &deliveries {
        let (status, body) = post_signed(&app, d).await;
        assert_eq!(status, 200, "{body}");
        for m in body["messages"].as_array().unwrap() {
            assert!(
                m["status"] == "accepted" || m["status"] == "duplicated",
                "{body}"
            );
        }
    }
    // Each message queued exactly once.
    let store = &app.store;
    let mut stored = strings(
        store,
        "SELECT platform_message_id FROM platform_inbound ORDER BY seq",
    )
    .await;
    let queued_order = stored.clone();
    stored.sort();
    let mut wanted = ids.clone();
    wanted.sort();
    assert_eq!(stored, wanted, "every message queued exactly once");

    // The worker replies once per message, in each user's arrival order,
    // and nothing stays leased or unfinished.
    api.wait_for(ids.len(), 120).await;
    wait_for_queue(&app, "replied", ids.len() as i64).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let delivered = api.delivered();
    assert_eq!(delivered.len(), ids.len(), "one reply per message");
    for u in 0..5 {
        let user = format!("3460000000{u}");
        let ours = |key: &String| {
            delivered
                .iter()
                .any(|d| &d.idempotency_key == key && d.body["to"] == user.as_str())
        };
        let replied: Vec<_> = delivered
            .iter()
            .filter(|d| d.body["to"] == user.as_str())
            .map(|d| d.idempotency_key.clone())
            .collect();
        let queued: Vec<_> = queued_order.iter().filter(|k| ours(k)).cloned().collect();
        assert_eq!(replied, queued, "{user}'s replies in arrival order");
    }
    let unfinished = scalar(
        store,
        "SELECT COUNT(*) FROM platform_inbound WHERE lease_owner IS NOT NULL \
         OR state <> 'replied' OR recipient IS NOT NULL OR body IS NOT NULL",
    )
    .await;
    assert_eq!(unfinished, 0, "nothing leased, unfinished or kept");
}

/// `/v1/mcp` (issue 27): tool calls hung up at random moments give back
/// their places among the account's calls in progress, and every call that
/// reached the endpoint left exactly one audit record.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_up_mcp_calls_leave_nothing_held(backend: Backend) {
    const CAP: usize = 4;
    let seed = seed();
    eprintln!("abort harness seed: {seed} (WARDEN_ABORT_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let mcp = warden::cli::McpArgs {
        mcp_max_concurrent_per_account: CAP,
        ..Default::default()
    };
    let app = TestApp::spawn_with_mcp(TestDb::new(backend).await, mcp, Default::default()).await;
    let shop = Shop::open_with(app).await;
    let other = crate::helpers::fixtures::account_ready(&shop.app, "bystander").await;
    let address: SocketAddr = shop
        .app
        .address
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": crate::mcp::MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}});
    let probes: Vec<Probe> = (0..rounds() * 4)
        .map(|i| {
            let order = if i % 3 == 0 { "A-2002" } else { "A-1001" };
            Probe::new(
                "POST",
                "/v1/mcp",
                &shop.key,
                &[
                    ("mcp-protocol-version", crate::mcp::MODERN.to_owned()),
                    ("mcp-method", "tools/call".to_owned()),
                    ("mcp-name", "order_status".to_owned()),
                ],
                &json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                    "name": "order_status", "arguments": {"order": order}, "_meta": meta}}),
            )
        })
        .collect();
    let sent = probes.len();
    hang_up_all(address, probes, 12, &mut rng).await;
    eprintln!("abort harness: {sent} MCP calls aborted on {backend:?}");

    // Another account writes at once.
    let write = shop
        .app
        .client
        .put(shop.app.url("/v1/agent-policy"))
        .bearer_auth(&other)
        .json(&json!({"version": 1, "instructions": "Answer in English."}))
        .send();
    let response = tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .expect("another account's write answers within 1 s")
        .unwrap();
    assert!(response.status().is_success());

    // Detached calls finish on their own, each with its record.
    let store = &shop.app.store;
    let hits = || {
        shop.calls()
            .iter()
            .filter(|(path, _)| path == "/orders/status")
            .count() as i64
    };
    let mut recorded = -1;
    for _ in 0..100 {
        recorded = scalar(
            store,
            "SELECT CAST(COALESCE(SUM(attempts), 0) AS BIGINT) FROM mcp_calls",
        )
        .await;
        if recorded == hits() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("abort harness: {} MCP calls reached the endpoint", hits());
    assert_eq!(recorded, hits(), "one attempt recorded per endpoint call");

    // Every place was given back: the cap's worth of calls at once succeed.
    let calls: Vec<_> = (0..CAP)
        .map(|_| {
            let app = &shop.app;
            crate::mcp::call(app, &shop.key, "order_status", json!({"order": "A-1001"}))
        })
        .collect();
    for (status, answer) in futures::future::join_all(calls).await {
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
}
