//! Prometheus metrics (issue 26): the real binary with `--metrics-listen`
//! (as `WARDEN_METRICS_LISTEN`), driven through a turn, contract tests, a
//! platform webhook delivery and prompt-integration executions, scraped
//! every second by a real Prometheus server on loopback; PromQL through its
//! HTTP API shows each family's increase since a scrape taken before the
//! workload. `promtool check metrics` passes on a scrape; the alert rules
//! of examples/observability pass `promtool check rules`. Misconfigured
//! listeners fail at start with a clear error.

use crate::helpers::endpoint::*;
use crate::helpers::fake_inference::{FakeInference, FakeReply};
use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::fake_verifier::{self, FakeVerifier, mint};
use crate::helpers::fixtures::{CREDENTIAL, new_key, valid_definition};
use crate::helpers::prometheus::{Prometheus, now_seconds, promtool};
use crate::helpers::shop::order_status;
use crate::helpers::*;
use crate::prompt_integrations::{GOOD_OUTPUT, HOST, ORIGIN, manifest, topic};
use serde_json::{Value, json};
use std::time::Duration;

const NUMBER: &str = "5550001";
const APP_SECRET: &str = "metrics-app-secret";

/// `warden ARGS` on the test database with the master key: its JSON.
pub(crate) async fn keyed_cli(db: &TestDb, args: &[&str]) -> Value {
    let out = warden_command(db)
        .env("WARDEN_MASTER_KEY", MASTER_KEY)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "warden {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The account `forms` and a prompt integration of the test manifest,
/// through the real CLI: the integration's id and challenge action.
pub(crate) async fn forms_integration(db: &TestDb) -> (String, String) {
    let scratch = tempfile::tempdir().unwrap();
    let manifest_file = scratch.path().join("manifest.json");
    std::fs::write(&manifest_file, manifest().to_string()).unwrap();
    keyed_cli(db, &["admin", "account", "create", "forms"]).await;
    let bundle = keyed_cli(
        db,
        &[
            "admin",
            "prompt-integration",
            "create",
            "--account",
            "forms",
            "--manifest",
            manifest_file.to_str().unwrap(),
        ],
    )
    .await;
    let field = |name: &str| bundle[name].as_str().unwrap().to_owned();
    (field("id"), field("challenge_action"))
}

/// Where the server's metrics listener listens, from its start-up log.
pub(crate) fn metrics_address(server: &ServerProcess) -> String {
    server
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| {
            event["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("metrics at"))
        })
        .and_then(|event| event["address"].as_str().map(str::to_owned))
        .expect("the server logs where its metrics listener is")
}

/// One scrape of the metrics listener at `metrics`, as text.
async fn scrape(metrics: &str) -> String {
    reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The sum of every sample of `family` in one scrape of the metrics
/// listener at `metrics` (0 when the family has no sample yet), and the
/// scrape's lines of that family.
pub(crate) async fn scraped(metrics: &str, family: &str) -> (f64, Vec<String>) {
    let scrape = scrape(metrics).await;
    let lines: Vec<String> = scrape
        .lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .map(str::to_owned)
        .collect();
    let sum = lines
        .iter()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (sum, lines)
}

/// `sum(SERIES)`'s increase since `t0` (a series born after `t0` counts
/// from zero, which plain `increase()` cannot see).
fn increase(series: &str, t0: f64) -> String {
    format!("sum({series}) - (sum({series} @ {t0:.3}) or vector(0))")
}

fn delivery(message_id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"object": "whatsapp_business_account", "entry": [{
        "id": "waba-1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": NUMBER},
            "messages": [{"from": "34600000001", "id": message_id, "timestamp": "1763900000",
                "type": "text", "text": {"body": text}}]}}]}]}))
    .unwrap()
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_sees_every_family_move_through_a_workload(backend: Backend) {
    let db = TestDb::new(backend).await;
    let key = cli_account_with_key(&db, "metrics").await;
    keyed_cli(
        &db,
        &[
            "admin",
            "webhook",
            "register",
            "--account",
            "metrics",
            "--phone-number-id",
            NUMBER,
        ],
    )
    .await;
    let (integration, action) = forms_integration(&db).await;

    let endpoint = FakeEndpoint::start(|request: Received| async move {
        match request.uri.path() {
            "/broken" => json_response(axum::http::StatusCode::INTERNAL_SERVER_ERROR, &json!({})),
            _ => json_response(
                axum::http::StatusCode::OK,
                &json!({"status": "enviado", "carrier": "SEUR"}),
            ),
        }
    })
    .await;
    let model = FakeInference::start(vec![FakeReply::text("Hola")]).await;
    let send_api = FakeSendApi::start().await;
    let verifier = FakeVerifier::start().await;
    let (model_url, send_url, verifier_url) =
        (model.base_url(), send_api.base_url(), verifier.url());
    let server = ServerProcess::start(
        &db,
        &[
            ("WARDEN_METRICS_LISTEN", "127.0.0.1:0"),
            ("WARDEN_DEV_ALLOW_LOOPBACK", "1"),
            ("WARDEN_INFERENCE_URL", &model_url),
            ("WARDEN_INFERENCE_MODEL", "fake-model"),
            ("WARDEN_WEBHOOK_VERIFY_TOKEN", "metrics-verify"),
            ("WARDEN_WEBHOOK_APP_SECRET", APP_SECRET),
            ("WARDEN_PLATFORM_API_URL", &send_url),
            ("WARDEN_PLATFORM_ACCESS_TOKEN", "EAAG-metrics"),
            ("WARDEN_CHALLENGE_VERIFY_URL", &verifier_url),
            ("WARDEN_CHALLENGE_SECRET", fake_verifier::SECRET),
        ],
    )
    .await;
    let api = server.api(&key);
    let secret = json!({"auth_type": "bearer", "secret": "endpoint-token-123"});
    assert_eq!(api.put_credential(CREDENTIAL, &secret).await.0, 201);
    let mut broken = valid_definition("broken_lookup");
    broken["url"] = json!(format!("{}/broken", endpoint.base));
    let (status, imported) = api
        .import_capabilities(&new_key(), vec![order_status(&endpoint.base), broken])
        .await;
    assert_eq!(status, 201, "{imported}");
    let ids: Vec<String> = imported["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();

    let metrics = metrics_address(&server);
    let prometheus = Prometheus::start(&metrics).await;
    prometheus.wait_for_scrape().await;
    let t0 = now_seconds();

    // A turn on the HTTP channel: the model proposes order_status, the
    // endpoint answers, the model writes the reply.
    model.set_script(vec![
        FakeReply::tool_call("order_status", json!({"order": "A-1001"})),
        FakeReply::text("Tu pedido A-1001 está enviado con SEUR."),
    ]);
    let message = json!({"user_id": "u-1", "message": {"type": "text", "body": "¿Dónde está mi pedido A-1001?"}});
    let (status, turn) = api.send_message(&message).await;
    assert_eq!(status, 200, "{turn}");
    // Contract tests: one passing, one failing at the endpoint, one with
    // arguments the guest refuses.
    let (status, body) = api
        .test_capability(&ids[0], json!({"order": "A-1001"}))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("passed")),
        "{body}"
    );
    let (_, body) = api
        .test_capability(&ids[1], json!({"order": "A-1001"}))
        .await;
    assert_eq!(body["status"], "failed", "{body}");
    let _ = api.test_capability(&ids[0], json!({"order": 5})).await;
    // A tool call through MCP: the same executor, kind "mcp".
    let (status, body) = status_and_json(
        client_for_mcp(
            &server.address,
            &key,
            "order_status",
            json!({"order": "A-1001"}),
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    // A name already taken: refused before the store (400).
    let (status, body) = api.create_capability(order_status(&endpoint.base)).await;
    assert_eq!(status, 400, "{body}");

    // A platform delivery whose reply is held at the send API long enough
    // for a scrape to see the queue hold it.
    model.set_script(vec![FakeReply::text("Hola, ¿en qué puedo ayudarte?")]);
    send_api.hold();
    let body = delivery("wamid.metrics-1", "Hola");
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/v1/webhooks/platform", server.address))
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            warden::platform::webhook::sign(APP_SECRET, &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // An idle connection held open across a scrape.
    let idle = tokio::net::TcpStream::connect(server.address.trim_start_matches("http://"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    prometheus.wait_for_scrape().await;
    drop(idle);
    send_api.release();
    assert_eq!(send_api.wait_for(1, 30).await.len(), 1);

    // Prompt integrations: one execution answered, one refused.
    model.set_script(vec![FakeReply::text(GOOD_OUTPUT)]);
    let execute = format!(
        "{}/v1/prompt-integrations/{integration}/execute",
        server.address
    );
    let token = mint(HOST, &action, true);
    let response = client
        .post(&execute)
        .header("origin", ORIGIN)
        .json(&topic("boots", &token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let refused = mint(HOST, &action, false);
    let response = client
        .post(&execute)
        .header("origin", ORIGIN)
        .json(&topic("boots", &refused))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    // Two scrapes after the workload: the last values are in.
    prometheus.wait_for_scrape().await;
    prometheus.wait_for_scrape().await;

    let build = prometheus.query("warden_build_info").await;
    assert_eq!(build.len(), 1, "{build:?}");
    let (labels, value) = &build[0];
    assert_eq!(*value, 1.0);
    assert_eq!(labels["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(labels["contract"], "7.0.0");
    assert_eq!(
        labels["guest_sha256"].as_str().unwrap().len(),
        64,
        "{labels}"
    );

    // (series, increase, exact): exact where the workload decides the
    // count; "at least" where inner steps may add calls of their own.
    let expectations: Vec<(&str, f64, bool)> = vec![
        // HTTP, by operationId and status, never by path.
        (
            r#"warden_http_requests_total{operation="sendHttpMessage",status="200"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_http_requests_total{operation="testCapability",status="200"}"#,
            3.0,
            true,
        ),
        (
            r#"warden_http_requests_total{operation="createCapability",status="400"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_http_requests_total{operation="receivePlatformWebhook",status="200"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_http_requests_total{operation="executePromptIntegration",status="200"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_http_requests_total{operation="executePromptIntegration",status="403"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_http_request_duration_seconds_count{operation="sendHttpMessage"}"#,
            1.0,
            true,
        ),
        // Turns, by channel and outcome.
        (
            r#"warden_turns_total{channel="http",outcome="answered"}"#,
            1.0,
            true,
        ),
        (r#"warden_turns_total{channel="platform"}"#, 1.0, true),
        (
            r#"warden_turn_duration_seconds_count{channel="http"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_turn_duration_seconds_count{channel="platform"}"#,
            1.0,
            true,
        ),
        // Capability calls, by kind and outcome (the failure reasons).
        (
            r#"warden_capability_calls_total{kind="turn",outcome="succeeded"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_capability_calls_total{kind="test",outcome="succeeded"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_capability_calls_total{kind="test",outcome="http_status"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_capability_calls_total{kind="test",outcome="arguments_invalid"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_capability_call_duration_seconds_count{kind="test"}"#,
            3.0,
            true,
        ),
        (
            r#"warden_capability_calls_total{kind="mcp",outcome="succeeded"}"#,
            1.0,
            true,
        ),
        // Guest calls, by export and outcome.
        (
            r#"warden_guest_calls_total{export="validate-arguments",outcome="ok"}"#,
            3.0,
            false,
        ),
        (
            r#"warden_guest_calls_total{export="validate-arguments",outcome="refused"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_guest_calls_total{export="prune-output",outcome="ok"}"#,
            2.0,
            false,
        ),
        (
            r#"warden_guest_call_duration_seconds_count{export="prune-output"}"#,
            2.0,
            false,
        ),
        // Model calls, by purpose.
        (
            r#"warden_model_calls_total{purpose="planner",outcome="ok"}"#,
            2.0,
            false,
        ),
        (
            r#"warden_model_calls_total{purpose="prompt_integration",outcome="ok"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_model_call_duration_seconds_count{purpose="planner"}"#,
            2.0,
            false,
        ),
        // The platform: the delivery queued, the reply sent.
        (
            r#"warden_platform_deliveries_total{outcome="accepted"}"#,
            1.0,
            true,
        ),
        (r#"warden_platform_sends_total{outcome="sent"}"#, 1.0, true),
        // Prompt executions, by outcome.
        (
            r#"warden_prompt_executions_total{outcome="succeeded"}"#,
            1.0,
            true,
        ),
        (
            r#"warden_prompt_executions_total{outcome="CHALLENGE_INVALID"}"#,
            1.0,
            true,
        ),
    ];
    let mut wrong = Vec::new();
    for (series, expected, exact) in &expectations {
        let got = prometheus.value(&increase(series, t0)).await;
        let fits = if *exact {
            (got - expected).abs() < 1e-9
        } else {
            got >= *expected
        };
        if !fits {
            let how = if *exact { "" } else { "at least " };
            wrong.push(format!(
                "{series}: increased by {got}, expected {how}{expected}"
            ));
        }
    }
    // Gauges: the queue held the message while the reply was held, the
    // idle connection was open, the pool has connections.
    let window = format!("[{:.0}s]", now_seconds() - t0 + 1.0);
    for (expr, at_least) in [
        (
            format!("max_over_time(warden_platform_queue_depth{window})"),
            1.0,
        ),
        (
            format!("max_over_time(warden_platform_queue_oldest_age_seconds{window})"),
            0.5,
        ),
        (
            format!("max_over_time(warden_http_connections_open{window})"),
            1.0,
        ),
        ("sum(warden_db_pool_connections)".to_owned(), 1.0),
    ] {
        let got = prometheus.value(&expr).await;
        if got < at_least {
            wrong.push(format!("{expr}: {got}, expected at least {at_least}"));
        }
    }
    assert_eq!(
        prometheus.value("warden_trace_spans_dropped_total").await,
        0.0
    );

    // No label names an account, a capability or a path.
    let scrape = scrape(&metrics).await;
    for leak in [
        ids[0].as_str(),
        "order_status",
        "/v1/",
        integration.as_str(),
        "A-1001",
        key.as_str(),
    ] {
        assert!(
            !scrape
                .lines()
                .filter(|l| !l.starts_with('#'))
                .any(|l| l.contains(leak)),
            "{leak:?} in a series: {scrape}"
        );
    }
    let (ok, report) = promtool(&["check", "metrics"], Some(&scrape)).await;
    assert!(ok, "promtool check metrics: {report}\n{scrape}");
    // Once the reply is sent, the queue gauge is back to 0.
    let depth = prometheus.value("warden_platform_queue_depth").await;
    if depth != 0.0 {
        wrong.push(format!(
            "warden_platform_queue_depth is {depth} after the reply was sent"
        ));
    }
    let seen: Vec<&str> = scrape
        .lines()
        .filter(|l| l.contains("prompt") || l.contains("sends") || l.contains("queue_depth"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{}\nscrape now:\n{}",
        wrong.join("\n"),
        seen.join("\n")
    );
}

/// A `tools/call` of revision 2026-07-28 with the account's key.
async fn client_for_mcp(
    address: &str,
    key: &str,
    tool: &str,
    arguments: Value,
) -> reqwest::Response {
    let meta = crate::mcp::meta();
    reqwest::Client::new()
        .post(format!("{address}/v1/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", crate::mcp::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta}}))
        .send()
        .await
        .unwrap()
}

/// A statement that fails is counted once, by the store's error class: the
/// database dropped under a running server fails the health check's ping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_statements_are_counted_by_class() {
    let mut db = TestDb::new(Backend::Postgres).await;
    let server = ServerProcess::start(&db, &[("WARDEN_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let metrics = metrics_address(&server);
    let health = format!("{}/health", server.address);
    assert_eq!(reqwest::get(&health).await.unwrap().status(), 200);
    let (before, _) = scraped(&metrics, "warden_db_statement_errors_total").await;
    assert_eq!(before, 0.0, "no statement has failed yet");

    db.drop_postgres_now().await;
    for _ in 0..3 {
        assert_eq!(reqwest::get(&health).await.unwrap().status(), 503);
    }
    let (after, lines) = scraped(&metrics, "warden_db_statement_errors_total").await;
    assert!(after >= 3.0, "{lines:?}");
    for line in &lines {
        let class = line
            .split("class=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no class label: {line}"));
        assert!(
            ["unavailable", "timeout"].contains(&class),
            "a dropped database is a class a retry may cure: {line}"
        );
    }
}

#[tokio::test]
async fn the_alert_rules_pass_promtool() {
    let rules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/observability/alerts.yml"
    );
    let (ok, report) = promtool(&["check", "rules", rules], None).await;
    assert!(ok, "promtool check rules: {report}");
}

#[tokio::test]
async fn the_dashboard_queries_only_series_warden_exposes() {
    let dashboard: Value = serde_json::from_str(include_str!(
        "../../examples/observability/grafana-dashboard.json"
    ))
    .unwrap();
    let mut exprs = Vec::new();
    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(members) => {
                for (name, member) in members {
                    match member.as_str() {
                        Some(expr) if name == "expr" => out.push(expr.to_owned()),
                        _ => collect(member, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
            _ => {}
        }
    }
    collect(&dashboard, &mut exprs);
    assert!(exprs.len() >= 6, "{exprs:?}");
    let known = [
        "warden_turns_total",
        "warden_capability_call_duration_seconds_bucket",
        "warden_capability_calls_total",
        "warden_guest_calls_total",
        "warden_platform_queue_depth",
        "warden_platform_queue_oldest_age_seconds",
        "warden_prompt_executions_total",
        "warden_http_request_duration_seconds_bucket",
        "warden_http_requests_total",
        "warden_model_calls_total",
        "warden_db_pool_connections",
    ];
    for expr in &exprs {
        let named: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("warden_"))
            .collect();
        assert!(!named.is_empty(), "{expr}");
        for name in named {
            assert!(
                known.contains(&name),
                "{name} in {expr} is not a Warden series"
            );
        }
    }
}

#[tokio::test]
async fn an_unparseable_metrics_address_is_a_clear_error_at_start() {
    let db = TestDb::new(Backend::Sqlite).await;
    let stderr = serve_refuses(&db, &[("WARDEN_METRICS_LISTEN", "localhost:metrics")]).await;
    assert!(
        stderr.contains("metrics-listen") && stderr.contains("localhost:metrics"),
        "{stderr}"
    );
}

/// Writes through sqlx count toward the background checkpoint as the
/// turns' do (`Store::write_turn`'s guard): their connections no longer
/// checkpoint on commit, so uncounted, a server taking only such writes
/// would let its WAL grow to the safety net.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_checkpoints_a_wal_written_only_through_sqlx() {
    let db = TestDb::new(Backend::Sqlite).await;
    let key = cli_account_with_key(&db, "wal").await;
    let server = ServerProcess::start(&db, &[("WARDEN_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let metrics = metrics_address(&server);
    let api = server.api(&key);
    // 150 settings writes, each a sqlx write turn; no turn at all.
    for write in 0..150 {
        let mode = if write % 2 == 0 { "text" } else { "metadata" };
        let (status, answer) = api
            .put_settings(&json!({"diagnostic_message_mode": mode}))
            .await;
        assert!(status == 200 || status == 201, "{status} {answer}");
    }
    let (ran, _) = checkpoints_once_at_least(&metrics, 1.0).await;
    assert!(ran >= 1.0, "a checkpoint ran for 150 sqlx writes: {ran}");
}

/// `warden_db_wal_checkpoints_total` (the sum, and its lines) once it has
/// reached `count`, or as it is after 10 s: checkpoints run in the
/// background, after the commits that brought them.
async fn checkpoints_once_at_least(metrics: &str, count: f64) -> (f64, Vec<String>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (sum, lines) = scraped(metrics, "warden_db_wal_checkpoints_total").await;
        if sum >= count || tokio::time::Instant::now() > deadline {
            return (sum, lines);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SQLite's WAL is checkpointed off the request path
/// (`store::wal_checkpoint`): the turns' commits do not checkpoint; every
/// 100 of them one passive checkpoint runs in the background, counted in
/// `warden_db_wal_checkpoints_total` by outcome, and none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_checkpoints_its_wal_off_the_request_path() {
    const CLIENTS: usize = 8;
    const TURNS_EACH: usize = 30;
    let db = TestDb::new(Backend::Sqlite).await;
    let key = cli_account_with_key(&db, "wal").await;
    let server = ServerProcess::start(&db, &[("WARDEN_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let metrics = metrics_address(&server);
    let (before, _) = scraped(&metrics, "warden_db_wal_checkpoints_total").await;
    assert_eq!(before, 0.0, "nothing written yet");

    // 240 turns, each a commit of the direct write path.
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let api = server.api(&key);
        clients.spawn(async move {
            for turn in 0..TURNS_EACH {
                let body = json!({"user_id": format!("u{client}-{turn}"),
                    "message": {"type": "text", "body": "hola"}});
                let (status, answer) = api.send_message(&body).await;
                assert_eq!(status, 200, "{answer}");
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.unwrap();
    }

    // Two checkpoints are due; each runs in the background.
    let (_, lines) = checkpoints_once_at_least(&metrics, 2.0).await;
    let by_outcome = |outcome: &str| -> f64 {
        lines
            .iter()
            .filter(|l| l.contains(&format!("outcome=\"{outcome}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let done = by_outcome("complete") + by_outcome("partial");
    assert!(done >= 2.0, "two checkpoints ran: {lines:?}");
    assert!(
        done < 10.0,
        "one per 100 commits, not one per commit: {lines:?}"
    );
    assert_eq!(by_outcome("error"), 0.0, "{lines:?}");
}
