//! The MCP server at `/v1/mcp` (issue 27), over real HTTP on both databases:
//! the tools are the account's active read capabilities on every revision
//! served, a call is the executor's call (pruned result, refusals as tool
//! results, the signature), accounts never see each other's tools, a
//! disabled capability is gone at once on every replica, the transport's
//! refusals (Origin, key, method, malformed JSON-RPC) and the per-account
//! cap on calls in progress.

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::shop::*;
use crate::helpers::*;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use warden::cli::{AdminCommand, KeyCommand, McpArgs, McpCommand};

pub const MODERN: &str = "2026-07-28";

/// `_meta` of a 2026-07-28 request.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "warden-tests", "version": "1"},
    })
}

/// Posts `body` with these headers (and the key, when given).
async fn post(
    app: &TestApp,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, HeaderMap, Value) {
    let mut request = app
        .client
        .post(app.url("/v1/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let headers = response.headers().clone();
    let (status, body) = status_and_json(response).await;
    (status, headers, body)
}

/// A 2026-07-28 request, its headers mirroring the body.
pub async fn modern(app: &TestApp, key: &str, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = meta();
    let name = params["name"].as_str().map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let (status, _, body) = post(app, Some(key), &headers, body.to_string()).await;
    (status, body)
}

/// A request after a legacy `initialize` (no session: only the header).
async fn legacy(
    app: &TestApp,
    key: &str,
    version: &str,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": "l1", "method": method, "params": params});
    let (status, _, body) = post(
        app,
        Some(key),
        &[("mcp-protocol-version", version)],
        body.to_string(),
    )
    .await;
    (status, body)
}

pub async fn call(app: &TestApp, key: &str, name: &str, arguments: Value) -> (u16, Value) {
    modern(
        app,
        key,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Calls `order_status` for A-1001 and asserts its tool result is (or is
/// not) an error.
async fn order_status_answers(app: &TestApp, key: &str, is_error: bool) {
    let (_, answer) = call(app, key, "order_status", json!({"order": "A-1001"})).await;
    assert_eq!(answer["result"]["isError"], is_error, "{answer}");
}

async fn calls_of(app: &TestApp, account: &str) -> Vec<Value> {
    let listed = app
        .admin(AdminCommand::Mcp(McpCommand::Calls {
            account: account.into(),
            limit: 50,
        }))
        .await;
    listed["calls"].as_array().unwrap().clone()
}

fn order_status_hits(shop: &Shop) -> usize {
    shop.calls()
        .iter()
        .filter(|(path, _)| path == "/orders/status")
        .count()
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_the_active_read_capabilities_on_every_revision_and_never_preparations(
    backend: Backend,
) {
    let shop = Shop::open(backend).await;
    let (app, key) = (&shop.app, shop.key.as_str());

    // 2026-07-28: no handshake, cacheable list, server identity in _meta.
    let (status, list) = modern(app, key, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    // In the store's order (creation, then name): stable for caches.
    assert_eq!(names(&list), ["customer_orders", "order_status"]);
    let result = &list["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 10_000);
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "warden"
    );
    let tool = &result["tools"][1];
    let definition = order_status(&shop.endpoint.base);
    assert_eq!(tool["title"], "Order status");
    let description = tool["description"].as_str().unwrap();
    assert!(description.starts_with(definition["description"].as_str().unwrap()));
    assert!(description.contains(definition["when_to_use"].as_str().unwrap()));
    assert_eq!(tool["inputSchema"], definition["input_schema"]);
    assert_eq!(tool["outputSchema"], definition["output_schema"]);
    assert_eq!(
        tool["annotations"],
        json!({"readOnlyHint": true, "openWorldHint": true})
    );

    let (status, discovered) = modern(app, key, "server/discover", json!({})).await;
    assert_eq!(status, 200, "{discovered}");
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!([MODERN, "2025-11-25", "2025-06-18"])
    );
    assert_eq!(discovered["result"]["capabilities"], json!({"tools": {}}));
    assert_eq!(discovered["result"]["cacheScope"], "public");

    // 2025-06-18 and 2025-11-25: initialize without a session, then the header.
    for version in ["2025-06-18", "2025-11-25"] {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "warden-tests", "version": "1"}}});
        let (status, headers, body) = post(app, Some(key), &[], init.to_string()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["protocolVersion"], version);
        assert_eq!(
            body["result"]["capabilities"]["tools"],
            json!({"listChanged": false})
        );
        assert!(
            headers.get("mcp-session-id").is_none(),
            "stateless: no session"
        );
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, body) = post(
            app,
            Some(key),
            &[("mcp-protocol-version", version)],
            note.to_string(),
        )
        .await;
        assert_eq!((status, body), (202, Value::Null));
        let (status, list) = legacy(app, key, version, "tools/list", json!({})).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(names(&list), ["customer_orders", "order_status"]);
        assert!(list["result"].get("ttlMs").is_none());
        assert!(list["result"].get("resultType").is_none());
        assert_eq!(
            legacy(app, key, version, "ping", json!({})).await,
            (200, json!({"jsonrpc": "2.0", "id": "l1", "result": {}}))
        );
    }
    // A version we do not serve is answered with the newest legacy one.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}}});
    let (_, _, body) = post(app, Some(key), &[], init.to_string()).await;
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");

    // The preparation is not a tool on any revision, and cannot be called.
    let (status, refused) = call(
        app,
        key,
        "prepare_address_change",
        json!({"order": "A-1001"}),
    )
    .await;
    assert_eq!(
        (status, refused["error"]["code"].as_i64()),
        (400, Some(-32602))
    );
    assert!(shop.calls().is_empty(), "nothing was called");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answers_the_pruned_result_and_refusals_are_tool_results(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (app, key) = (&shop.app, shop.key.as_str());
    let pruned = json!({"status": "enviado", "carrier": "Correos", "customer_name": "Ana Pérez"});

    let (status, answer) = call(app, key, "order_status", json!({"order": "A-1001"})).await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"], pruned, "pruned in the guest");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, pruned);
    assert_eq!(result["resultType"], "complete");

    // Arguments refused in the guest: a tool result the model can correct from.
    let (status, answer) = call(app, key, "order_status", json!({"order": "nope"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("arguments_invalid"), "{text}");
    assert!(text.contains("/order"), "the violation is located: {text}");
    assert_eq!(order_status_hits(&shop), 1, "refused before any call");

    // An endpoint failure: the contract's reason, nothing of the endpoint's body.
    let (_, answer) = call(app, key, "order_status", json!({"order": "A-5000"})).await;
    assert_eq!(answer["result"]["isError"], true);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("http_status"), "{text}");
    assert!(!text.contains("boom"), "{text}");
    assert!(answer["result"].get("structuredContent").is_none());

    // The same call on 2025-11-25.
    let (status, answer) = legacy(
        app,
        key,
        "2025-11-25",
        "tools/call",
        json!({"name": "order_status", "arguments": {"order": "A-1001"}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["structuredContent"], pruned);

    // Each call that reached the executor left a record, newest first.
    let records = calls_of(app, "shop").await;
    let outcomes: Vec<(&str, Option<&str>, i64)> = records
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap(),
                r["reason"].as_str(),
                r["attempts"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("succeeded", None, 1),
            ("failed", Some("http_status"), 1),
            ("failed", Some("arguments_invalid"), 0),
            ("succeeded", None, 1),
        ]
    );
    for record in &records {
        assert_eq!(record["capability_id"], shop.ids["order_status"].as_str());
        assert_eq!(record["revision"], 1);
        assert!(record["key_id"].as_str().unwrap().starts_with("key_"));
        assert!(record["duration_ms"].as_i64().unwrap() >= 0);
        assert!(record["at"].as_str().unwrap().ends_with('Z'));
    }
    let stored = serde_json::to_string(&records).unwrap();
    for secret in ["A-1001", "enviado", "nope", "Correos"] {
        assert!(!stored.contains(secret), "no argument or result is kept");
    }
}

/// Records written within one millisecond still list newest first: in the
/// order they were written, not by their random ids.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_one_millisecond_list_in_the_order_they_were_written(backend: Backend) {
    let shop = Shop::open(backend).await;
    let store = &shop.app.store;
    let account = store.find_account("shop").await.unwrap().unwrap();
    let at = warden::clock::now_millis();
    // Ids that sort against the order of writing, all at the same time.
    let written = ["mcpc_z", "mcpc_a", "mcpc_m", "mcpc_b"];
    for id in written {
        let record = warden::store::mcp_calls::McpCallRecord {
            id: id.into(),
            key_id: None,
            capability_id: shop.ids["order_status"].clone(),
            revision: 1,
            status: warden::store::mcp_calls::McpCallStatus::Succeeded,
            reason: None,
            attempts: 1,
            duration_ms: 0,
            created_at: at,
        };
        store
            .insert_mcp_call(&account, "no-key", &record)
            .await
            .unwrap();
    }
    let listed: Vec<String> = calls_of(&shop.app, "shop")
        .await
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    let newest_first: Vec<&str> = written.iter().rev().copied().collect();
    assert_eq!(listed, newest_first);
}

/// A call the endpoint does not answer in time: every attempt is made, and
/// the client gets a tool error with the contract's reason, nothing else.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_times_out_is_a_tool_error_with_the_contracts_reason(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let slow = FakeEndpoint::start(|_| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        json_response(axum::http::StatusCode::OK, &json!({"status": "late"}))
    })
    .await;
    let mut definition = valid_definition("slow_lookup");
    definition["url"] = json!(format!("{}/x", slow.base));
    definition["timeout_ms"] = json!(300);
    definition["retry_count"] = json!(1);
    let (status, body) = app.create_capability(&key, definition).await;
    assert_eq!(status, 201, "{body}");

    let started = Instant::now();
    let (status, answer) = call(&app, &key, "slow_lookup", json!({"order": "A-1001"})).await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("timeout"), "{text}");
    assert!(
        !text.contains("late") && !text.contains("127.0.0.1"),
        "{text}"
    );
    assert!(result.get("structuredContent").is_none(), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "two attempts of 300 ms plus backoff: {:?}",
        started.elapsed()
    );
    assert_eq!(slow.hits(), 2, "the retry was made");
    let records = calls_of(&app, "acme").await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        (
            &records[0]["status"],
            &records[0]["reason"],
            &records[0]["attempts"]
        ),
        (&json!("failed"), &json!("timeout"), &json!(2))
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_accounts_key_never_sees_or_calls_these_tools(backend: Backend) {
    let shop = Shop::open(backend).await;
    let other = account_ready(&shop.app, "other").await;

    let (status, list) = modern(&shop.app, &other, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    assert!(names(&list).is_empty(), "{list}");
    for name in ["order_status", "customer_orders"] {
        let (status, refused) = call(&shop.app, &other, name, json!({"order": "A-1001"})).await;
        assert_eq!(
            (status, refused["error"]["code"].as_i64()),
            (400, Some(-32602))
        );
    }
    assert!(shop.calls().is_empty());
    assert!(calls_of(&shop.app, "other").await.is_empty());
    assert!(calls_of(&shop.app, "shop").await.is_empty());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_capability_is_gone_at_once_on_every_replica(backend: Backend) {
    let shop = Shop::open(backend).await;
    let replica = shop.app.replica().await;
    let key = shop.key.as_str();
    // Both replicas have listed and called it (their catalogs are warm).
    for app in [&shop.app, &replica] {
        let (_, list) = modern(app, key, "tools/list", json!({})).await;
        assert!(names(&list).contains(&"order_status".to_owned()));
        order_status_answers(app, key, false).await;
    }
    let (status, _) = shop
        .app
        .disable_capability(key, &shop.ids["order_status"], "1")
        .await;
    assert_eq!(status, 200);
    for app in [&replica, &shop.app] {
        let (_, list) = modern(app, key, "tools/list", json!({})).await;
        assert_eq!(names(&list), ["customer_orders"], "gone at once");
        let (status, refused) = call(app, key, "order_status", json!({"order": "A-1001"})).await;
        assert_eq!(
            (status, refused["error"]["code"].as_i64()),
            (400, Some(-32602))
        );
        let (status, refused) = legacy(
            app,
            key,
            "2025-06-18",
            "tools/call",
            json!({"name": "order_status", "arguments": {"order": "A-1001"}}),
        )
        .await;
        assert_eq!(
            (status, refused["error"]["code"].as_i64()),
            (200, Some(-32602))
        );
    }
    assert_eq!(order_status_hits(&shop), 2, "no call after the disable");
}

/// A tool call opens the credential row its replica's catalog read with the
/// tool set, at the capability version read with the key: a rotation on one
/// replica reaches the next call on the other, whose set was warm.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_credential_reaches_the_next_tool_call_on_every_replica(backend: Backend) {
    let shop = Shop::open(backend).await;
    let replica = shop.app.replica().await;
    let key = shop.key.as_str();
    let sent = async |app: &TestApp| {
        order_status_answers(app, key, false).await;
        let header = shop.endpoint.last().headers["authorization"].clone();
        header.to_str().unwrap().to_owned()
    };
    for app in [&shop.app, &replica] {
        assert_eq!(sent(app).await, "Bearer endpoint-token-123");
    }
    let rotated = json!({"auth_type": "bearer", "secret": "rotated-token-456"});
    let (status, _) = shop.app.put_credential(key, CREDENTIAL, &rotated).await;
    assert_eq!(status, 201);
    for app in [&replica, &shop.app] {
        assert_eq!(sent(app).await, "Bearer rotated-token-456");
    }
    // Revoked: the call fails as not configured, and nothing is sent.
    assert_eq!(shop.app.delete_credential(key, CREDENTIAL).await.0, 200);
    let hits = shop.endpoint.hits();
    for app in [&replica, &shop.app] {
        order_status_answers(app, key, true).await;
    }
    assert_eq!(shop.endpoint.hits(), hits);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_endpoint_receives_a_signature_the_independent_implementation_verifies(
    backend: Backend,
) {
    let shop = Shop::open(backend).await;
    let (_, answer) = call(
        &shop.app,
        &shop.key,
        "order_status",
        json!({"order": "A-1001"}),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, set) = crate::signing::jwks(&shop.app).await;
    let received = shop.endpoint.last();
    crate::signing::verify_with_httpsig(&received, &set).expect("verifies with httpsig");
    let claims: Value =
        serde_json::from_str(received.headers["capability-context"].to_str().unwrap()).unwrap();
    assert_eq!(
        (claims["cap"].as_str(), claims["rev"].as_i64()),
        (Some(shop.ids["order_status"].as_str()), Some(1))
    );
    assert!(claims.get("usr").is_none(), "no end user is named over MCP");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_not_listed_is_403_and_only_a_live_key_opens_the_door(backend: Backend) {
    let mcp = McpArgs {
        mcp_allowed_origins: vec!["https://app.example".into()],
        ..Default::default()
    };
    let app = TestApp::spawn_with_mcp(TestDb::new(backend).await, mcp, Default::default()).await;
    let issued = {
        app.account_with_key("acme").await;
        app.issue_key("acme").await
    };
    let key = issued["api_key"].as_str().unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let v = ("mcp-protocol-version", "2025-06-18");

    for origin in ["https://evil.example", "http://app.example", "null"] {
        let (status, _, body) = post(&app, Some(key), &[v, ("origin", origin)], list.clone()).await;
        assert_eq!(status, 403, "{origin}");
        assert_eq!(body["jsonrpc"], "2.0");
        assert!(body.get("id").is_none(), "{body}");
        assert_eq!(body["error"]["code"], -32600);
    }
    // Checked before the key: a page on another origin learns nothing.
    let (status, _, _) = post(
        &app,
        None,
        &[v, ("origin", "https://evil.example")],
        list.clone(),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _, _) = post(
        &app,
        Some(key),
        &[v, ("origin", "https://app.example")],
        list.clone(),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = post(&app, Some(key), &[v], list.clone()).await;
    assert_eq!(status, 200, "no Origin: not a browser, not refused");

    let (status, headers, body) = post(&app, None, &[v], list.clone()).await;
    assert_eq!(
        (status, headers["www-authenticate"].to_str().unwrap()),
        (401, "Bearer")
    );
    assert_eq!(body["error"]["code"], -32600);
    app.admin(AdminCommand::Key(KeyCommand::Revoke {
        key_id: issued["key_id"].as_str().unwrap().into(),
    }))
    .await;
    let (status, headers, _) = post(&app, Some(key), &[v], list.clone()).await;
    assert_eq!(
        (status, headers.contains_key("www-authenticate")),
        (401, true)
    );

    // No stream to open and no session to end.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = app
            .client
            .request(method.clone(), app.url("/v1/mcp"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_answered_with_json_rpc_codes_never_a_5xx(backend: Backend) {
    let shop = Shop::open(backend).await;
    let (app, key) = (&shop.app, shop.key.as_str());
    let modern_headers = [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/list"),
    ];
    let modern_list =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": meta()}});
    let with_meta = |version: &str, capabilities: Option<Value>| {
        let mut meta = json!({"io.modelcontextprotocol/protocolVersion": version});
        if let Some(c) = capabilities {
            meta["io.modelcontextprotocol/clientCapabilities"] = c;
        }
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": meta}})
            .to_string()
    };
    let legacy_header = [("mcp-protocol-version", "2025-11-25")];
    // (what, headers, body, status, JSON-RPC code)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16, i64);
    let cases: Vec<Case> = vec![
        ("not JSON", legacy_header.to_vec(), "{\"jsonrpc\":".into(), 400, -32700),
        ("empty", legacy_header.to_vec(), String::new(), 400, -32700),
        ("NUL", legacy_header.to_vec(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\u0000"}}"#.into(), 400, -32700),
        ("a batch", legacy_header.to_vec(),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]).to_string(), 400, -32600),
        ("not an object", legacy_header.to_vec(), "42".into(), 400, -32600),
        ("no jsonrpc", legacy_header.to_vec(), json!({"id": 1, "method": "tools/list"}).to_string(), 400, -32600),
        ("null id", legacy_header.to_vec(),
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/list"}).to_string(), 400, -32600),
        ("params not an object", legacy_header.to_vec(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}).to_string(), 400, -32600),
        ("a response", legacy_header.to_vec(), json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(), 400, -32600),
        ("no version header", vec![], json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(), 400, -32022),
        ("unserved legacy version", vec![("mcp-protocol-version", "2024-11-05")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(), 400, -32022),
        ("unserved modern version", vec![("mcp-protocol-version", "2099-01-01"), ("mcp-method", "tools/list")],
            with_meta("2099-01-01", Some(json!({}))), 400, -32022),
        ("header differs from _meta", vec![("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/list")],
            modern_list.to_string(), 400, -32020),
        ("no Mcp-Method", vec![("mcp-protocol-version", MODERN)], modern_list.to_string(), 400, -32020),
        ("wrong Mcp-Method", vec![("mcp-protocol-version", MODERN), ("mcp-method", "tools/call")],
            modern_list.to_string(), 400, -32020),
        ("no clientCapabilities", modern_headers.to_vec(), with_meta(MODERN, None), 400, -32602),
        ("unknown method, 2026-07-28", vec![("mcp-protocol-version", MODERN), ("mcp-method", "resources/list")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": meta()}}).to_string(), 404, -32601),
        ("unknown method, 2025-11-25", legacy_header.to_vec(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}).to_string(), 200, -32601),
        ("ping is gone in 2026-07-28", vec![("mcp-protocol-version", MODERN), ("mcp-method", "ping")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": meta()}}).to_string(), 404, -32601),
        ("a cursor never issued", modern_headers.to_vec(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x", "_meta": meta()}}).to_string(), 400, -32602),
        ("arguments not an object", vec![("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "order_status")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "order_status", "arguments": [1], "_meta": meta()}}).to_string(), 400, -32602),
        ("Mcp-Name differs", vec![("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "customer_orders")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "order_status", "arguments": {}, "_meta": meta()}}).to_string(), 400, -32020),
    ];
    for (what, headers, body, status, code) in cases {
        let (got, _, answer) = post(app, Some(key), &headers, body).await;
        assert_eq!(
            (got, answer["error"]["code"].as_i64()),
            (status, Some(code)),
            "{what}: {answer}"
        );
        assert_eq!(answer["jsonrpc"], "2.0", "{what}");
    }
    // The unsupported-version error names what is served.
    let (_, _, answer) = post(
        app,
        Some(key),
        &[],
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await;
    assert_eq!(
        answer["error"]["data"]["supported"],
        json!([MODERN, "2025-11-25", "2025-06-18"])
    );
    assert_eq!(answer["id"], 1, "the id it could read");

    // Not JSON at all, and too large: refused before the room reads anything.
    let response = app
        .client
        .post(app.url("/v1/mcp"))
        .bearer_auth(key)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(300 * 1024)
    );
    let (status, _, body) = post(app, Some(key), &legacy_header, huge).await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (413, Some(-32600))
    );
    // A notification is accepted with no body.
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    assert_eq!(
        post(app, Some(key), &legacy_header, note.to_string())
            .await
            .0,
        202
    );
    assert!(shop.calls().is_empty());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_account_cap_holds_while_another_accounts_calls_keep_their_latency(
    backend: Backend,
) {
    const CAP: usize = 2;
    const SLOW: Duration = Duration::from_millis(1500);
    let mcp = McpArgs {
        mcp_max_concurrent_per_account: CAP,
        ..Default::default()
    };
    let app = TestApp::spawn_with_mcp(TestDb::new(backend).await, mcp, Default::default()).await;
    // The busy account's endpoint is slow and counts its callers at once.
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (n, m) = (now.clone(), most.clone());
    let slow = FakeEndpoint::start(move |_| {
        let (n, m) = (n.clone(), m.clone());
        async move {
            let current = n.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(current, Ordering::SeqCst);
            tokio::time::sleep(SLOW).await;
            n.fetch_sub(1, Ordering::SeqCst);
            json_response(reqwest::StatusCode::OK, &json!({"status": "slow"}))
        }
    })
    .await;
    let fast = FakeEndpoint::json(json!({"status": "fast"})).await;
    let mut keys = Vec::new();
    for (account, endpoint) in [("busy", &slow), ("calm", &fast)] {
        let key = account_ready(&app, account).await;
        let mut definition = valid_definition("order_status");
        definition["url"] = json!(format!("{}/orders/status", endpoint.base));
        let (status, body) = app.create_capability(&key, definition).await;
        assert_eq!(status, 201, "{body}");
        keys.push(key);
    }
    let (busy, calm) = (Arc::new(keys[0].clone()), keys[1].clone());
    let app = Arc::new(app);
    let timed = |app: Arc<TestApp>, key: String| async move {
        let started = Instant::now();
        let (status, answer) = call(&app, &key, "order_status", json!({"order": "A-1"})).await;
        assert_eq!(
            (status, &answer["result"]["isError"]),
            (200, &json!(false)),
            "{answer}"
        );
        started.elapsed()
    };
    let mut alone = Vec::new();
    for _ in 0..5 {
        alone.push(timed(app.clone(), calm.clone()).await);
    }

    // The busy account floods: three waves of 12 calls at once.
    let flood = {
        let (app, busy) = (app.clone(), busy.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                let wave: Vec<_> = (0..12)
                    .map(|_| {
                        let (app, busy) = (app.clone(), busy.clone());
                        tokio::spawn(async move {
                            let mut request = app
                                .client
                                .post(app.url("/v1/mcp"))
                                .bearer_auth(busy.as_str())
                                .header("content-type", "application/json")
                                .header("mcp-protocol-version", "2025-11-25");
                            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": "order_status", "arguments": {"order": "A-1"}}});
                            request = request.body(body.to_string());
                            let response = request.send().await.unwrap();
                            let retry = response.headers().get("retry-after").cloned();
                            let (status, body) = status_and_json(response).await;
                            (status, retry, body)
                        })
                    })
                    .collect();
                for call in wave {
                    statuses.push(call.await.unwrap());
                }
            }
            statuses
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut during = Vec::new();
    while !flood.is_finished() && during.len() < 40 {
        during.push(timed(app.clone(), calm.clone()).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let statuses = flood.await.unwrap();
    let max = |d: &[Duration]| d.iter().max().copied().unwrap_or_default();
    let median = |d: &[Duration]| {
        let mut d = d.to_vec();
        d.sort();
        d[d.len() / 2]
    };
    eprintln!(
        "MCP cap on {backend:?}: the calm account alone median {:?} max {:?}; during the flood \
         median {:?} max {:?} over {} calls; busy calls: {} served, {} refused",
        median(&alone),
        max(&alone),
        median(&during),
        max(&during),
        during.len(),
        statuses.iter().filter(|(s, _, _)| *s == 200).count(),
        statuses.iter().filter(|(s, _, _)| *s == 429).count(),
    );
    assert!(
        most.load(Ordering::SeqCst) <= CAP,
        "at most {CAP} calls of one account at once"
    );
    let served = statuses.iter().filter(|(s, _, _)| *s == 200).count();
    assert!(served >= CAP, "the cap's calls were served");
    for (status, retry, body) in &statuses {
        match status {
            200 => assert_eq!(body["result"]["isError"], false, "{body}"),
            429 => {
                assert_eq!(retry.as_ref().unwrap(), "1");
                assert_eq!(body["error"]["code"], -31000, "{body}");
            }
            other => panic!("busy call answered {other}: {body}"),
        }
    }
    assert!(statuses.len() - served >= 10, "the excess was refused");
    assert!(
        during.len() >= 3,
        "the calm account called during the flood"
    );
    // Generous: the slow endpoint takes 1.5 s, so waiting behind the busy
    // account's calls would show.
    assert!(
        max(&during) < Duration::from_millis(1000),
        "the calm account's calls keep their latency: {during:?}"
    );
    // And its typical call stays near its own, measured alone in this run.
    assert!(
        median(&during) <= median(&alone) * 2 + Duration::from_millis(50),
        "the calm account's median {:?} during the flood against {:?} alone",
        median(&during),
        median(&alone)
    );
}
