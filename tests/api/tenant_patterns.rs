//! A tenant's `pattern` runs only in the policy guest, under its deadline:
//! a turn over a pattern a backtracking engine needs minutes for costs that
//! turn one deadline, and the server stays responsive meanwhile. Before,
//! the server ran patterns natively on its runtime threads, and two such
//! turns left `/health` unanswered for as long as the matching took.

use std::time::{Duration, Instant};

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// Accepted by the import guard (three adjacent stars), yet cubic per start
/// position: on 600 `a`s `regress` natively (release build) needs 23 s.
const SLOW_PATTERN: &str = "a*a*a*b";

fn code_lookup(base: &str) -> Value {
    let mut d = valid_definition("code_lookup");
    d["description"] = json!("Consulta el estado de un código de envío");
    d["when_to_use"] = json!("Cuando preguntan por un código de envío");
    d["url"] = json!(format!("{base}/codes"));
    d["input_schema"] = json!({"type": "object", "additionalProperties": false, "required": ["code"],
        "properties": {"code": {"type": "string", "maxLength": 4000, "pattern": SLOW_PATTERN,
                                "description": "el código de envío"}}});
    d["retry_count"] = json!(0);
    d
}

async fn say(app: &TestApp, key: &str, text: &str) -> (u16, Value) {
    let body = json!({"user_id": "user-1", "message": {"type": "text", "body": text}});
    app.send_message(key, &body).await
}

fn last_reason(body: &Value) -> String {
    let events = body["capability_trace"]["events"].as_array().unwrap();
    events.last().unwrap()["reason_code"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catastrophic_pattern_costs_a_turn_one_deadline_and_the_server_stays_responsive(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "codes").await;
    let endpoint = FakeEndpoint::start(|_| async {
        json_response(StatusCode::OK, &json!({"status": "entregado"}))
    })
    .await;
    let (status, body) = status_and_json(
        app.import_capabilities(&key, &new_key(), vec![code_lookup(&endpoint.base)])
            .await,
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // Two turns at once (the test runtime, like a small server, has two
    // worker threads), each with a word of 600 `a`s.
    let word = "a".repeat(600);
    let message = format!("Consulta el código de envío {word}");
    let started = Instant::now();
    let turns: Vec<_> = (0..2)
        .map(|_| {
            let (app_url, client, key, message) = (
                app.url("/v1/channels/http/messages"),
                app.client.clone(),
                key.clone(),
                message.clone(),
            );
            tokio::spawn(async move {
                let body =
                    json!({"user_id": "user-1", "message": {"type": "text", "body": message}});
                let response = client
                    .post(app_url)
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                status_and_json(response).await
            })
        })
        .collect();

    // Meanwhile the server answers its health check promptly. Measured,
    // not awaited with a timer: the test client shares the server's
    // runtime, whose timers starve too when its threads are pinned.
    let mut slowest = Duration::ZERO;
    loop {
        let asked = Instant::now();
        let health = app.client.get(app.url("/health")).send().await.unwrap();
        slowest = slowest.max(asked.elapsed());
        assert_eq!(health.status(), 200);
        if turns.iter().all(|t| t.is_finished()) || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        slowest < Duration::from_secs(2),
        "/health took {slowest:?} while the turns ran"
    );

    for turn in turns {
        let (status, body) = turn.await.unwrap();
        assert_eq!(status, 200, "{body}");
        // The guest's deadline stopped the match: no candidate, so the
        // agent asks for the value rather than guessing.
        assert_eq!(last_reason(&body), "clarification", "{body}");
        assert!(
            body["message"]["body"]
                .as_str()
                .unwrap()
                .contains("el código de envío"),
            "{body}"
        );
    }
    let took = started.elapsed();
    // Before, natively: 303-326 s for the two (debug build).
    assert!(took < Duration::from_secs(30), "both turns took {took:?}");
    eprintln!("two turns over {SLOW_PATTERN} took {took:?}; /health at worst {slowest:?}");
    assert!(
        endpoint.received.lock().unwrap().is_empty(),
        "nothing called with a guessed value"
    );

    // The same pattern still fills a value the guest judges to match.
    let (status, body) = say(&app, &key, "Consulta el código de envío aab").await;
    assert_eq!(status, 200, "{body}");
    let received = endpoint.received.lock().unwrap().clone();
    assert_eq!(received.len(), 1, "{body}");
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(sent, json!({"code": "aab"}));
}

/// The root crate has no regular-expression engine at all: a tenant pattern
/// cannot be run natively by accident. (The guest's rules crate has one; it
/// runs inside the sandbox only.)
#[test]
fn the_server_crate_does_not_depend_on_a_regex_engine() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let manifest: toml_lines::Manifest = toml_lines::parse(&manifest);
    for engine in ["regress", "regex", "fancy-regex", "pcre2", "onig"] {
        assert!(
            !manifest.dependencies.iter().any(|d| d == engine),
            "the server crate depends on `{engine}`; tenant patterns must run in the guest"
        );
    }
    // Nor does its source call one.
    let mut stack = vec![std::path::PathBuf::from(format!("{root}/src"))];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(
                    !text.contains("regress"),
                    "{} mentions regress",
                    path.display()
                );
            }
        }
    }
}

/// Just enough of Cargo.toml: the names in the `[dependencies]` table.
mod toml_lines {
    pub struct Manifest {
        pub dependencies: Vec<String>,
    }

    pub fn parse(text: &str) -> Manifest {
        let mut dependencies = Vec::new();
        let mut in_deps = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps && let Some((name, _)) = line.split_once('=') {
                dependencies.push(name.trim().to_owned());
            }
        }
        Manifest { dependencies }
    }
}
