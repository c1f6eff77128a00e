//! Data lifecycle (issue 29): one end user's erasure and export through
//! the real `warden admin data` commands while the server runs, and
//! retention purging by a controllable clock, in batches, while turns go on.

use crate::helpers::fixtures::*;
use crate::helpers::shop::*;
use crate::helpers::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use warden::clock::{Clock, now_millis};
use warden::retention::{Retention, RetentionPolicy};
use warden::store::Store;

const DAY: i64 = 24 * 60 * 60 * 1000;

fn said(user: &str, conversation: Option<&str>, text: &str) -> Value {
    let mut body = json!({"user_id": user, "message": {"type": "text", "body": text}});
    if let Some(c) = conversation {
        body["conversation_id"] = json!(c);
    }
    body
}

async fn erase(db: &TestDb, account: &str, user: &str) -> Value {
    cli(
        db,
        &[
            "admin",
            "data",
            "erase",
            "--account",
            account,
            "--user",
            user,
        ],
    )
    .await
}

fn removed_total(report: &Value) -> u64 {
    report["removed"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

/// Runs SQL the store does not offer (tests only: counting and seeding).
async fn sql_count(store: &Store, sql: &str) -> i64 {
    match store {
        Store::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await,
        Store::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p.pool()).await,
    }
    .unwrap()
}

/// The erased user's marker is nowhere (PostgreSQL: every row of every
/// table; SQLite: the file and its WAL as bytes, after a checkpoint).
async fn stored(app: &TestApp, needle: &str) -> bool {
    app.store.checkpoint_wal().await.unwrap();
    app.db.contains(needle).await
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_user_leaves_no_trace_and_nothing_of_anyone_else_goes(backend: Backend) {
    let shop = Shop::open(backend).await;
    let other_key = account_ready(&shop.app, "other").await;
    shop.app
        .put_settings(&shop.key, &json!({"diagnostic_message_mode": "text"}))
        .await;
    let marker = "zqmark-erase-7c1d";
    // The user's conversation: a capability call, a gap event with text
    // and an interaction (with its preview) in the same conversation.
    let (status, first) = shop
        .send(said(
            "ana",
            None,
            &format!("¿Dónde está mi pedido A-1001? {marker}"),
        ))
        .await;
    assert_eq!(status, 200, "{first}");
    let conversation = conversation(&first);
    let steps = [
        format!("¿Cómo funciona la garantía? {marker}"),
        format!("Quiero cambiar la dirección del pedido A-1001 {marker}"),
    ];
    for text in &steps {
        let (status, body) = shop.send(said("ana", Some(&conversation), text)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, gaps) = shop.app.get_capability_gaps(&shop.key, "").await;
    assert!(
        gaps.to_string().contains(marker),
        "a gap text was kept: {gaps}"
    );
    // Others: another user of the account, the same user id elsewhere.
    let (status, _) = shop
        .send(said(
            "luis",
            None,
            "¿Dónde está mi pedido A-2002? zqkeep-luis",
        ))
        .await;
    assert_eq!(status, 200);
    let (status, _) = shop
        .app
        .send_message(&other_key, &said("ana", None, "Hola zqkeep-other-account"))
        .await;
    assert_eq!(status, 200);
    assert!(stored(&shop.app, marker).await);

    let report = erase(&shop.app.db, "shop", "ana").await;
    assert_eq!(report["removed"]["conversations"], 1, "{report}");
    assert_eq!(report["removed"]["messages"], 6, "{report}");
    assert!(
        report["removed"]["gap_events"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert_eq!(report["removed"]["interactions"], 1, "{report}");
    assert!(
        !report.to_string().contains(marker),
        "counts, never content"
    );

    assert!(!stored(&shop.app, marker).await, "the marker is gone");
    assert!(stored(&shop.app, "zqkeep-luis").await);
    assert!(stored(&shop.app, "zqkeep-other-account").await);
    // The erased conversation answers as an unknown one (422, nested).
    let (status, body) = shop
        .send(said("ana", Some(&conversation), "¿Sigue ahí?"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
    // Idempotent: nothing left to remove.
    let again = erase(&shop.app.db, "shop", "ana").await;
    assert_eq!(removed_total(&again), 0, "{again}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_platform_sender_reaches_their_conversation_and_queue_rows(backend: Backend) {
    use crate::helpers::fake_send_api::FakeSendApi;
    use crate::platform_webhook::{
        NUMBER, delivery, platform_args, post_signed, register, text, wait_for_queue,
    };
    let api = FakeSendApi::start().await;
    let db = TestDb::new(backend).await;
    let app = TestApp::spawn_with_platform(db, platform_args(&api.base_url())).await;
    app.account_with_key("shop").await;
    register(&app, "shop", NUMBER, None).await;
    let (sender, other) = ("34600000077", "34600000088");
    let messages = [
        (sender, "hola zqplat-one"),
        (sender, "gracias zqplat-two"),
        (other, "hola zqplat-keep"),
    ];
    for (i, (from, words)) in messages.iter().enumerate() {
        let payload = delivery(
            NUMBER,
            vec![text(from, &format!("wamid.e.{i}"), words)],
            vec![],
        );
        assert_eq!(post_signed(&app, &payload).await.0, 200);
        api.wait_for(i + 1, 30).await;
    }
    wait_for_queue(&app, "replied", 3).await;
    assert!(stored(&app, "zqplat-one").await);

    let report = cli(
        &app.db,
        &[
            "admin",
            "data",
            "erase",
            "--account",
            "shop",
            "--platform-sender",
            sender,
        ],
    )
    .await;
    assert_eq!(report["removed"]["conversations"], 1, "{report}");
    assert_eq!(report["removed"]["messages"], 4, "{report}");
    assert_eq!(report["removed"]["platform_messages"], 2, "{report}");
    assert!(
        !report.to_string().contains(sender),
        "the pseudonym, never the id"
    );
    assert!(!stored(&app, "zqplat-one").await);
    assert!(!stored(&app, "zqplat-two").await);
    assert!(stored(&app, "zqplat-keep").await);
    // Past the erasure mark's clock-skew window the sender starts afresh.
    let skew = warden::store::data_requests::CLOCK_SKEW_ALLOWANCE_MS as u64;
    tokio::time::sleep(Duration::from_millis(skew + 200)).await;
    let payload = delivery(
        NUMBER,
        vec![text(sender, "wamid.e.9", "hola otra vez")],
        vec![],
    );
    assert_eq!(post_signed(&app, &payload).await.0, 200);
    api.wait_for(4, 30).await;
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_in_flight_when_its_user_is_erased_writes_nothing_back(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (key, mut held) = account_with_held_order_status(&app, "shop").await;
    let app = Arc::new(app);
    let send = |body: Value| {
        let (app, key) = (app.clone(), key.clone());
        tokio::spawn(async move { app.send_message(&key, &body).await })
    };

    // A turn starting a conversation for a user (none erased before), held
    // at the endpoint while the user is erased.
    let starting = send(said(
        "bea",
        None,
        "¿Dónde está mi pedido A-1001? zqinflight-start",
    ));
    held.arrived.recv().await.unwrap();
    let report = erase(&app.db, "shop", "bea").await;
    assert_eq!(removed_total(&report), 0, "nothing written yet: {report}");
    held.release.add_permits(1);
    let (status, body) = starting.await.unwrap();
    assert_eq!(status, 409, "not written back: {body}");
    assert_nested_error(&body, "CONFLICT");

    // A turn continuing another user's conversation, held the same way.
    held.release.add_permits(1);
    let (status, first) = send(said("ana", None, "¿Dónde está mi pedido A-1001?"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{first}");
    held.arrived.recv().await.unwrap();
    let conversation = conversation(&first);
    let continuing = send(said(
        "ana",
        Some(&conversation),
        "¿Y ahora dónde está el pedido A-1001? zqinflight-continue",
    ));
    held.arrived.recv().await.unwrap();
    let report = erase(&app.db, "shop", "ana").await;
    assert_eq!(report["removed"]["conversations"], 1, "{report}");
    held.release.add_permits(1);
    let (status, body) = continuing.await.unwrap();
    assert_eq!(status, 422, "the conversation is gone: {body}");

    let export = cli(
        &app.db,
        &[
            "admin",
            "data",
            "export",
            "--account",
            "shop",
            "--user",
            "ana",
        ],
    )
    .await;
    assert_eq!(export["conversations"], json!([]), "{export}");
    let export = cli(
        &app.db,
        &[
            "admin",
            "data",
            "export",
            "--account",
            "shop",
            "--user",
            "bea",
        ],
    )
    .await;
    assert_eq!(export["conversations"], json!([]), "{export}");
    assert!(!stored(&app, "zqinflight-continue").await);
    assert!(!stored(&app, "zqinflight-start").await);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_holds_a_users_conversations_in_order_and_nothing_of_others(backend: Backend) {
    let shop = Shop::open(backend).await;
    let other_key = account_ready(&shop.app, "other").await;
    let conversations = [
        [
            "¿Dónde está mi pedido A-1001? uno",
            "¿Y el pedido A-2002? dos",
        ],
        [
            "Hola, buenos días tres",
            "¿Cómo funciona la garantía? cuatro",
        ],
        [
            "Quiero cambiar la dirección del pedido A-1001 cinco",
            "Gracias seis",
        ],
    ];
    let mut ids = Vec::new();
    for texts in &conversations {
        let mut id: Option<String> = None;
        for text in texts {
            let (status, body) = shop.send(said("ana", id.as_deref(), text)).await;
            assert_eq!(status, 200, "{body}");
            id = Some(conversation(&body));
        }
        ids.push(id.unwrap());
    }
    shop.send(said("luis", None, "¿Dónde está mi pedido A-1001? zqluis"))
        .await;
    shop.app
        .send_message(&other_key, &said("ana", None, "Hola zqother"))
        .await;

    let export = cli(
        &shop.app.db,
        &[
            "admin",
            "data",
            "export",
            "--account",
            "shop",
            "--user",
            "ana",
        ],
    )
    .await;
    let exported = export["conversations"].as_array().unwrap();
    assert_eq!(exported.len(), 3, "{export}");
    for ((conversation, texts), id) in exported.iter().zip(&conversations).zip(&ids) {
        assert_eq!(conversation["conversation_id"], json!(id));
        let messages = conversation["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
        assert_eq!(messages[0]["text"], texts[0]);
        assert_eq!(messages[2]["text"], texts[1]);
        assert!(
            messages
                .iter()
                .all(|m| m["at"].as_str().unwrap().ends_with('Z'))
        );
    }
    let interactions = exported[2]["interactions"].as_array().unwrap();
    assert_eq!(interactions.len(), 1, "{export}");
    assert_eq!(interactions[0]["status"], "pending");
    let text = export.to_string();
    assert!(
        !text.contains("zqluis") && !text.contains("zqother"),
        "{text}"
    );
    // A platform sender is named by their id; the command finds their pseudonym.
    let sender = cli(
        &shop.app.db,
        &[
            "admin",
            "data",
            "export",
            "--account",
            "shop",
            "--platform-sender",
            "15551234567",
        ],
    )
    .await;
    assert!(
        sender["user"].as_str().unwrap().starts_with("usr_"),
        "{sender}"
    );
    assert!(!sender.to_string().contains("15551234567"), "{sender}");
    assert_eq!(sender["conversations"], json!([]));
}

fn policy(batch: i64) -> RetentionPolicy {
    RetentionPolicy {
        conversation_days: Some(90),
        gap_text_days: Some(30),
        audit_days: Some(180),
        batch,
    }
}

/// `count` conversations of three messages each, last active at `at`.
/// The seeded account's id, in SQL.
const SHOP: &str = "(SELECT id FROM accounts WHERE name = 'shop')";

async fn seed_conversations(store: &Store, prefix: &str, count: usize, at: i64) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(100) {
        let conversations: Vec<String> = chunk
            .iter()
            .map(|i| format!("('{prefix}{i}', {SHOP}, 'seed-user', {at}, {at})"))
            .collect();
        sql::execute_on(
            store,
            &format!(
                "INSERT INTO conversations (id, account_id, user_id, created_at, updated_at) VALUES {}",
                conversations.join(", ")
            ),
        )
        .await;
        let messages: Vec<String> = chunk
            .iter()
            .flat_map(|i| {
                (0..3).map(move |m| {
                    format!("('msg_{prefix}{i}_{m}', '{prefix}{i}', 'user', 'seeded text', {at})")
                })
            })
            .collect();
        sql::execute_on(
            store,
            &format!(
                "INSERT INTO conversation_messages (id, conversation_id, role, body, created_at) VALUES {}",
                messages.join(", ")
            ),
        )
        .await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Sends turns on one conversation until `stop` is set and at least
/// `at_least` were sent; their latencies, and after each how many of the
/// expired conversations were left.
async fn turns_until(
    shop: Arc<Shop>,
    conversation: String,
    stop: Arc<AtomicBool>,
    at_least: usize,
) -> (Vec<Duration>, Vec<i64>) {
    let mut latencies = Vec::new();
    let mut left = Vec::new();
    while latencies.len() < at_least || !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let (status, body) = shop
            .send(said(
                "live",
                Some(&conversation),
                "¿Dónde está mi pedido A-1001?",
            ))
            .await;
        assert_eq!(status, 200, "{body}");
        latencies.push(started.elapsed());
        let expired = "SELECT COUNT(*) FROM conversations WHERE id LIKE 'conv_old_%'";
        left.push(sql_count(&shop.app.store, expired).await);
    }
    (latencies, left)
}

fn print_latencies(label: &str, mut latencies: Vec<Duration>) {
    latencies.sort();
    println!(
        "{label}: {} turns, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().unwrap()
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_purges_exactly_what_expired_in_batches_while_turns_go_on(backend: Backend) {
    let shop = Arc::new(Shop::open(backend).await);
    let store = shop.app.store.clone();
    // Expired by the clock set below: conversations through the API and
    // seeded ones; a gap text. Kept: everything active from `t1` on.
    let (_, old) = shop
        .send(said("old", None, "¿Cómo funciona la garantía?"))
        .await;
    let old = conversation(&old);
    seed_conversations(&store, "conv_old_", 1999, now_millis() - 1000).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t1 = now_millis();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (_, live) = shop
        .send(said("live", None, "¿Dónde está mi pedido A-1001?"))
        .await;
    let live = conversation(&live);
    seed_conversations(&store, "conv_new_", 100, t1 + 10).await;
    let kept_before = sql_count(&store, "SELECT COUNT(*) FROM conversations").await - 2000;

    // 90 days after `t1`: what was last active before `t1` has expired.
    let retention = Retention::new(policy(50), Clock::manual(t1 + 90 * DAY));
    let (baseline, _) = turns_until(
        shop.clone(),
        live.clone(),
        Arc::new(AtomicBool::new(true)),
        40,
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(turns_until(shop.clone(), live.clone(), stop.clone(), 1));
    let started = Instant::now();
    let report = retention.purge(&store).await.unwrap();
    let purge_time = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (during, left) = during.await.unwrap();
    println!(
        "[{backend:?}] purge of 2000 conversations (5999 messages) in batches of 50: {purge_time:?}, {} batches",
        report.conversation_batches
    );
    let turns_during = during.len();
    print_latencies(&format!("[{backend:?}] turns before the purge"), baseline);
    print_latencies(&format!("[{backend:?}] turns during the purge"), during);
    // No turn waits for the purge as a whole: turns went on between its
    // batches, each seeing it part-way. A purge in one transaction (or one
    // holding the write gate across its batches) lets a turn see only all
    // or nothing of it. How long the turns took is printed, not judged:
    // that is the disk's.
    let part_way: std::collections::BTreeSet<i64> =
        left.into_iter().filter(|n| (1..1999).contains(n)).collect();
    assert!(
        turns_during >= 3 && part_way.len() >= 3,
        "turns went on between the batches of the {purge_time:?} purge: {turns_during} turns, \
         which saw it part-way at {part_way:?} expired conversations left"
    );

    assert_eq!(report.conversations.conversations, 2000, "{report:?}");
    assert_eq!(report.conversations.messages, 1999 * 3 + 2, "{report:?}");
    assert_eq!(
        report.conversation_batches, 41,
        "40 full batches and a short one"
    );
    assert_eq!(
        sql_count(&store, "SELECT COUNT(*) FROM conversations").await,
        kept_before,
        "everything active since t1 is kept"
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM conversations WHERE id LIKE 'conv_old_%'"
        )
        .await,
        0
    );
    let (status, body) = shop.send(said("old", Some(&old), "¿Sigue ahí?")).await;
    assert_eq!(status, 422, "a purged conversation is unknown: {body}");
    // Nothing else expired: a second purge removes nothing.
    let again = retention.purge(&store).await.unwrap();
    assert!(!again.removed_anything(), "{again:?}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_purges_at_once_and_each_kind_keeps_its_stated_time(backend: Backend) {
    let shop = Shop::open(backend).await;
    // A second replica's pool on the same database (its purge is the one
    // under test, not its hourly timer).
    let replica = Store::connect(&shop.app.db.url).await.unwrap();
    let store = shop.app.store.clone();
    let t = now_millis();
    seed_conversations(&store, "conv_a_", 400, t - 100 * DAY).await;
    seed_conversations(&store, "conv_b_", 10, t - 80 * DAY).await;
    let account = store.find_account("shop").await.unwrap().unwrap();
    let capability = shop.ids["order_status"].clone();
    for (i, age_days) in [(0, 40), (1, 1), (2, 200), (3, 100)] {
        let event = warden::store::gap_events::GapEvent {
            id: format!("gap_{i}"),
            kind: warden::domain::diagnostics::GapKind::CoverageGap,
            reason_code: warden::domain::diagnostics::GapReason::NoMatchingCapability,
            conversation_id: Some("conv_b_0".into()),
            capability: None,
            message_text: Some(format!("gap text {i}")),
            occurred_at: t - age_days * DAY,
        };
        store.record_gap_event(&account, &event).await.unwrap();
        let call = warden::store::mcp_calls::McpCallRecord {
            id: format!("mcp_{i}"),
            key_id: None,
            capability_id: capability.clone(),
            revision: 1,
            status: warden::store::mcp_calls::McpCallStatus::Succeeded,
            reason: None,
            attempts: 1,
            duration_ms: 1,
            created_at: t - age_days * DAY,
        };
        store
            .insert_mcp_call(&account, "no-key", &call)
            .await
            .unwrap();
        let test = warden::store::capability_tests::TestRecord {
            id: format!("test_{i}"),
            capability_id: capability.clone(),
            revision: 1,
            status: warden::store::capability_tests::TestStatus::Passed,
            reason: None,
            http_status: Some(200),
            attempts: 1,
            duration_ms: 1,
            created_at: t - age_days * DAY,
        };
        store.insert_test_record(&account, &test).await.unwrap();
    }
    // Prompt-integration usage rows (audit, 180 days) and the platform
    // queue's messages (finished ones kept 7 days, unfinished ones never
    // purged), seeded on both sides of their limits.
    sql::execute_on(
        &store,
        &format!(
            "INSERT INTO prompt_integrations (id, account_id, name, origin, challenge_action, status, \
             revision, manifest, created_at, updated_at) VALUES ('pi_aged', {SHOP}, 'aged', \
             'https://shop.example', 'ask', 'active', 1, '{{}}', {t}, {t})"
        ),
    )
    .await;
    for (i, age_days) in [(0, 200), (1, 179), (2, 181)] {
        sql::execute_on(
            &store,
            &format!(
                "INSERT INTO prompt_integration_usage (integration_id, account_id, day, outcome, created_at) \
                 VALUES ('pi_aged', {SHOP}, '2026-01-0{i}', 'completed', {at})",
                at = t - age_days * DAY
            ),
        )
        .await;
    }
    for (i, state, age_days) in [
        (0, "replied", 8),
        (1, "dead", 8),
        (2, "queued", 8),
        (3, "replied", 6),
        (4, "dead", 6),
    ] {
        sql::execute_on(
            &store,
            &format!(
                "INSERT INTO platform_inbound (platform_message_id, account_id, phone_number_id, \
                 user_pseudonym, state, next_attempt_at, received_at, updated_at) \
                 VALUES ('wamid.aged{i}', {SHOP}, 'number-1', 'sender-{i}', '{state}', {at}, {at}, {at})",
                at = t - age_days * DAY
            ),
        )
        .await;
    }

    let retention = Retention::new(policy(50), Clock::manual(t));
    let (a, b) = tokio::join!(retention.purge(&store), retention.purge(&replica));
    let (a, b) = (a.unwrap(), b.unwrap());
    println!("[{backend:?}] replica A {a:?}\n[{backend:?}] replica B {b:?}");
    assert_eq!(
        a.conversations.conversations + b.conversations.conversations,
        400
    );
    assert_eq!(a.conversations.messages + b.conversations.messages, 1200);
    // Gap texts older than 30 days lose their text, events stay.
    assert_eq!(a.gap_texts + b.gap_texts, 3);
    assert_eq!(
        sql_count(&store, "SELECT COUNT(*) FROM gap_events").await,
        4
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM gap_events WHERE message_text IS NOT NULL"
        )
        .await,
        1
    );
    // Audit records older than 180 days go.
    assert_eq!(a.mcp_calls + b.mcp_calls, 1);
    assert_eq!(a.contract_tests + b.contract_tests, 1);
    assert_eq!(sql_count(&store, "SELECT COUNT(*) FROM mcp_calls").await, 3);
    assert_eq!(
        sql_count(&store, "SELECT COUNT(*) FROM capability_tests").await,
        3
    );
    assert_eq!(a.prompt_usage + b.prompt_usage, 2, "the two past 180 days");
    assert_eq!(
        sql_count(&store, "SELECT COUNT(*) FROM prompt_integration_usage").await,
        1
    );
    // Finished platform messages older than 7 days go; a queued one of the
    // same age and finished ones of 6 days stay.
    assert_eq!(
        a.finished_platform_messages + b.finished_platform_messages,
        2
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM platform_inbound WHERE platform_message_id IN ('wamid.aged2', 'wamid.aged3', 'wamid.aged4')"
        )
        .await,
        3
    );
    assert_eq!(
        sql_count(&store, "SELECT COUNT(*) FROM platform_inbound").await,
        3
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM conversations WHERE id LIKE 'conv_b_%'"
        )
        .await,
        10
    );

    // A purged conversation takes its gap texts with it, whatever their age.
    let later = Retention::new(policy(50), Clock::manual(t + 11 * DAY));
    let report = later.purge(&store).await.unwrap();
    assert_eq!(report.conversations.conversations, 10);
    assert_eq!(report.gap_texts, 0, "the last text is 12 days old");
    assert_eq!(
        report.conversations.gap_events, 1,
        "its conversation took it"
    );
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM gap_events WHERE message_text IS NOT NULL"
        )
        .await,
        0
    );
}

/// On PostgreSQL a purge batch passes over a conversation whose row another
/// transaction holds (a turn writing to it) instead of waiting for it, and
/// takes it once it is free. SQLite has one writer: there the purge's
/// batch waits its turn at the write gate like any write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_purge_passes_over_a_conversation_a_turn_holds_and_takes_it_later() {
    use sqlx::Connection;
    let shop = Shop::open(Backend::Postgres).await;
    let store = shop.app.store.clone();
    let t = now_millis();
    seed_conversations(&store, "conv_held_", 3, t - 100 * DAY).await;
    let cutoff = t - 90 * DAY;
    // A turn's write transaction on `conv_held_1`: its row locked, open.
    let mut turn = sqlx::PgConnection::connect(&shop.app.db.url).await.unwrap();
    let mut held = turn.begin().await.unwrap();
    let locked =
        sqlx::query("UPDATE conversations SET updated_at = updated_at WHERE id = 'conv_held_1'")
            .execute(&mut *held)
            .await
            .unwrap();
    assert_eq!(locked.rows_affected(), 1);

    let removed = tokio::time::timeout(
        Duration::from_secs(10),
        store.purge_conversations_batch(cutoff, 100),
    )
    .await
    .expect("the purge does not wait for the held conversation")
    .unwrap();
    assert_eq!(removed.conversations, 2, "{removed:?}");
    assert_eq!(removed.messages, 6, "{removed:?}");
    let left = "SELECT COUNT(*) FROM conversations WHERE id LIKE 'conv_held_%'";
    assert_eq!(sql_count(&store, left).await, 1);
    assert_eq!(
        sql_count(
            &store,
            "SELECT COUNT(*) FROM conversation_messages WHERE conversation_id = 'conv_held_1'"
        )
        .await,
        3,
        "the held conversation keeps its messages"
    );

    // The turn ends without touching its age: the next purge takes it.
    held.commit().await.unwrap();
    let removed = store.purge_conversations_batch(cutoff, 100).await.unwrap();
    assert_eq!(removed.conversations, 1, "{removed:?}");
    assert_eq!(removed.messages, 3, "{removed:?}");
    assert_eq!(sql_count(&store, left).await, 0);
}

#[tokio::test]
async fn retention_settings_refuse_zero_and_accept_off() {
    use warden::cli::RetentionDays;
    assert_eq!("off".parse::<RetentionDays>(), Ok(RetentionDays(None)));
    assert_eq!("30".parse::<RetentionDays>(), Ok(RetentionDays(Some(30))));
    assert!("0".parse::<RetentionDays>().unwrap_err().contains("off"));
    assert!("-1".parse::<RetentionDays>().is_err());
    // The binary refuses it at start, naming the variable.
    let db = TestDb::new(Backend::Sqlite).await;
    let stderr = serve_refuses(&db, &[("WARDEN_CONVERSATION_RETENTION_DAYS", "0")]).await;
    assert!(stderr.contains("conversation-retention-days"), "{stderr}");
}
