//! The capability-gap report: modes, pagination and isolation.

use crate::helpers::*;
use serde_json::json;
use warden::domain::diagnostics::{GapKind, GapReason};
use warden::store::gap_events::GapEvent;

async fn seed(app: &TestApp, account: &str, events: &[(&str, i64, &str)]) {
    let account = app.store.find_account(account).await.unwrap().unwrap();
    for (id, at, text) in events {
        let event = GapEvent {
            id: (*id).into(),
            kind: if id.ends_with('d') {
                GapKind::AgentDeadEnd
            } else {
                GapKind::CoverageGap
            },
            reason_code: GapReason::NoMatchingCapability,
            conversation_id: Some("conv_1".into()),
            capability: None,
            message_text: Some((*text).into()),
            occurred_at: *at,
        };
        app.store.record_gap_event(&account, &event).await.unwrap();
    }
}

async fn set_mode(app: &TestApp, key: &str, mode: &str) {
    let (status, _) = app
        .put_settings(key, &json!({"diagnostic_message_mode": mode}))
        .await;
    assert!((200..300).contains(&status));
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_across_equal_timestamps_is_stable_and_complete(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    // 23 events, most sharing a millisecond.
    let events: Vec<(String, i64)> = (0..23)
        .map(|i| (format!("gap_{i:02}"), 1_700_000_000_000 + (i / 10) as i64))
        .collect();
    let refs: Vec<(&str, i64, &str)> = events
        .iter()
        .map(|(id, at)| (id.as_str(), *at, "where is my order"))
        .collect();
    seed(&app, "acme", &refs).await;

    let mut seen = Vec::new();
    let mut query = "?limit=4".to_owned();
    loop {
        let (status, page) = app.get_capability_gaps(&key, &query).await;
        assert_eq!(status, 200, "{page}");
        let ids: Vec<String> = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        seen.extend(ids);
        let Some(before) = page["next_before"].as_str() else {
            break;
        };
        let before_id = page["next_before_id"].as_str().unwrap();
        query = format!(
            "?limit=4&before={}&before_id={before_id}",
            url_encode(before)
        );
    }
    let mut expected: Vec<(i64, String)> =
        events.iter().map(|(id, at)| (*at, id.clone())).collect();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(
        seen,
        expected.into_iter().map(|(_, id)| id).collect::<Vec<_>>(),
        "newest first, none skipped or repeated"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_decide_what_is_shown(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    // Recent events: the start-up purge clears texts older than the gap-text
    // retention, and may run while the test seeds.
    let now = warden::clock::now_millis();
    seed(
        &app,
        "acme",
        &[
            ("gap_a", now - 2_000, "quiero cancelar mi pedido"),
            ("gap_bd", now - 1_000, "otra cosa"),
        ],
    )
    .await;

    let (_, metadata) = app.get_capability_gaps(&key, "").await;
    assert_eq!(metadata["diagnostic_message_mode"], "metadata");
    let first = &metadata["events"][0];
    assert_eq!(
        (first["id"].as_str(), first["kind"].as_str()),
        (Some("gap_bd"), Some("agent_dead_end"))
    );
    assert!(
        !metadata.to_string().contains("pedido"),
        "no message text in metadata mode"
    );

    set_mode(&app, &key, "text").await;
    let (_, text) = app.get_capability_gaps(&key, "").await;
    assert_eq!(
        text["events"][1]["message_text"],
        "quiero cancelar mi pedido"
    );

    set_mode(&app, &key, "disabled").await;
    let (status, disabled) = app.get_capability_gaps(&key, "").await;
    assert_eq!(
        (status, disabled),
        (
            200,
            json!({"diagnostic_message_mode": "disabled", "events": []})
        )
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_pagination_is_400_and_accounts_are_isolated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.account_with_key("acme").await;
    let other = app.account_with_key("other").await;
    seed(&app, "acme", &[("gap_a", 1_000, "x")]).await;
    for query in [
        "?limit=0",
        "?limit=101",
        "?limit=ten",
        "?before=2024-01-01T00:00:00Z",
        "?before_id=gap_a",
        "?before=2024-01-01T00:00:00%2B01:00&before_id=x",
        "?before=soon&before_id=x",
        &format!("?before=2024-01-01T00:00:00Z&before_id={}", "x".repeat(129)),
        "?limit=5&limit=6",
        "?page=2",
    ] {
        let (status, body) = app.get_capability_gaps(&key, query).await;
        assert_eq!(status, 400, "{query}");
        assert_flat_error(&body, "BAD_REQUEST");
    }
    let (_, page) = app.get_capability_gaps(&key, "?limit=100").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 1);
    assert!(
        page.get("next_before").is_none(),
        "no cursor after the last page"
    );
    let (_, theirs) = app.get_capability_gaps(&other, "").await;
    assert_eq!(
        theirs["events"],
        json!([]),
        "never another account's events"
    );
}

fn url_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
