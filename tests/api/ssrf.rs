//! The SSRF guard at call time, with a resolver whose answers the test
//! controls (the executor's real client, resolver hook and connector).

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use warden::executor::address_guard::{AddressClass, AddressRefused, NameLookup};
use warden::executor::{Call, CallFailure, CallKind, CapabilityAtRevision, Executor};

/// Answers lookups from a script, one answer per lookup, and counts them.
struct ScriptedLookup {
    answers: Mutex<Vec<Vec<IpAddr>>>,
    lookups: Mutex<Vec<String>>,
}

impl ScriptedLookup {
    fn new(answers: Vec<Vec<&str>>) -> Arc<Self> {
        let answers = answers
            .into_iter()
            .rev()
            .map(|a| a.into_iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        Arc::new(ScriptedLookup {
            answers: Mutex::new(answers),
            lookups: Mutex::new(Vec::new()),
        })
    }

    fn count(&self) -> usize {
        self.lookups.lock().unwrap().len()
    }
}

impl NameLookup for ScriptedLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        self.lookups.lock().unwrap().push(host.to_owned());
        let answer = self.answers.lock().unwrap().pop().unwrap_or_default();
        Box::pin(async move { Ok(answer) })
    }
}

fn executor(app: &TestApp, lookup: Arc<ScriptedLookup>) -> Executor {
    let ctx = app.context.clone();
    Executor::with_lookup(
        ctx.sandbox.clone(),
        ctx.store.clone(),
        ctx.keyring.clone(),
        ctx.signer.clone(),
        lookup,
    )
}

fn capability(url: &str) -> CapabilityAtRevision {
    let mut definition = valid_definition("ssrf_probe");
    definition["url"] = json!(url);
    definition["retry_count"] = json!(2);
    CapabilityAtRevision {
        id: "cap_ssrfprobe".into(),
        revision: 1,
        definition: std::sync::Arc::new(serde_json::from_value(definition).unwrap()),
    }
}

async fn call(app: &TestApp, executor: &Executor, url: &str) -> (Result<Value, CallFailure>, u32) {
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let capability = capability(url);
    let arguments = json!({"order": "A-1"});
    let report = executor
        .call(Call {
            kind: CallKind::Test,
            account: &account,
            user_id: None,
            capability: &capability,
            arguments: &arguments,
            credential: None,
        })
        .await;
    let outcome = report.outcome.map(|r| match r {
        warden::executor::CallResult::Data(v) => v,
        other => panic!("unexpected {other:?}"),
    });
    (outcome, report.attempts)
}

fn refused(outcome: &Result<Value, CallFailure>) -> bool {
    matches!(outcome, Err(CallFailure::AddressRefused(_)))
}

/// The class a call was refused for, if it was refused for one.
fn refused_as(outcome: &Result<Value, CallFailure>) -> Option<AddressClass> {
    match outcome {
        Err(CallFailure::AddressRefused(AddressRefused::Class(class))) => Some(*class),
        _ => None,
    }
}

/// One DNS answer per class of the shared table (IPv4-mapped, NAT64 and 6to4
/// answers take the class of the IPv4 address they carry).
const ANSWERS: &[(&str, AddressClass)] = &[
    ("0.0.0.0", AddressClass::Unspecified),
    ("::", AddressClass::Unspecified),
    ("0.9.9.9", AddressClass::ThisNetwork),
    ("127.0.0.1", AddressClass::Loopback),
    ("::1", AddressClass::Loopback),
    ("10.0.0.7", AddressClass::Private),
    ("172.20.1.1", AddressClass::Private),
    ("192.168.0.10", AddressClass::Private),
    ("100.64.3.3", AddressClass::Cgnat),
    ("169.254.10.10", AddressClass::LinkLocal),
    ("fe80::1", AddressClass::LinkLocal),
    ("169.254.169.254", AddressClass::CloudMetadata),
    ("fd00:ec2::254", AddressClass::CloudMetadata),
    ("192.0.0.8", AddressClass::ProtocolAssignment),
    ("2001:1::2", AddressClass::ProtocolAssignment),
    ("192.0.2.10", AddressClass::Documentation),
    ("198.51.100.10", AddressClass::Documentation),
    ("203.0.113.10", AddressClass::Documentation),
    ("2001:db8::10", AddressClass::Documentation),
    ("3fff::10", AddressClass::Documentation),
    ("198.18.5.5", AddressClass::Benchmarking),
    ("2001:2::5", AddressClass::Benchmarking),
    ("192.88.99.1", AddressClass::SixToFourRelay),
    ("224.0.0.9", AddressClass::Multicast),
    ("ff02::1", AddressClass::Multicast),
    ("240.1.1.1", AddressClass::Reserved),
    ("4000::1", AddressClass::Reserved),
    ("255.255.255.255", AddressClass::Broadcast),
    ("::a00:1", AddressClass::Ipv4Compatible),
    ("::ffff:0:a00:1", AddressClass::Ipv4Translated),
    ("64:ff9b:1::a00:1", AddressClass::Nat64Local),
    ("100::1", AddressClass::Discard),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", AddressClass::Teredo),
    ("2001:20::1", AddressClass::Orchid),
    ("5f00::1", AddressClass::SegmentRouting),
    ("fd00::5", AddressClass::UniqueLocal),
    ("fec0::1", AddressClass::SiteLocal),
    ("::ffff:10.0.0.1", AddressClass::Private),
    ("64:ff9b::a9fe:a9fe", AddressClass::CloudMetadata),
    ("2002:c000:0201::1", AddressClass::Documentation),
    ("2002:7f00:1::1", AddressClass::Loopback),
];

#[tokio::test]
async fn every_refused_class_is_refused_as_a_dns_answer_and_named() {
    for class in AddressClass::ALL {
        assert!(ANSWERS.iter().any(|(_, c)| *c == class), "{class}");
    }
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    for (ip, class) in ANSWERS {
        let lookup = ScriptedLookup::new(vec![vec![ip]]);
        let (outcome, attempts) = call(
            &app,
            &executor(&app, lookup.clone()),
            "https://api.partner.test/orders",
        )
        .await;
        assert_eq!(refused_as(&outcome), Some(*class), "{ip}: {outcome:?}");
        let message = outcome.unwrap_err().to_string();
        assert_eq!(
            message,
            format!("the endpoint address is refused ({class})")
        );
        assert_eq!((lookup.count(), attempts), (1, 1), "{ip}");
    }
}

#[tokio::test]
async fn a_mixed_answer_is_refused_whole() {
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    // Even with a public address first.
    let lookup = ScriptedLookup::new(vec![vec!["8.8.8.8", "10.0.0.1"]]);
    let (outcome, attempts) = call(
        &app,
        &executor(&app, lookup.clone()),
        "https://api.partner.test/orders",
    )
    .await;
    assert_eq!(refused_as(&outcome), Some(AddressClass::Private));
    assert_eq!(
        (lookup.count(), attempts),
        (1, 1),
        "resolved once, not retried"
    );
}

#[tokio::test]
async fn literal_addresses_are_refused_without_a_lookup() {
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    for (url, class) in [
        ("https://10.1.1.1/x", AddressClass::Private),
        ("https://[fd00::1]/x", AddressClass::UniqueLocal),
        (
            "https://169.254.169.254/latest",
            AddressClass::CloudMetadata,
        ),
        ("https://127.0.0.1/x", AddressClass::Loopback),
        ("http://127.0.0.1:9/x", AddressClass::Loopback),
        ("https://100.64.0.1/x", AddressClass::Cgnat),
        ("https://192.0.2.1/x", AddressClass::Documentation),
        ("https://[2001::1]/x", AddressClass::Teredo),
        ("https://[64:ff9b:1::1]/x", AddressClass::Nat64Local),
        ("https://[::10.0.0.1]/x", AddressClass::Ipv4Compatible),
        ("https://[2002:a00:1::1]/x", AddressClass::Private),
        // Spellings the URL parser normalises (the guest refuses them at import).
        ("https://0x7f.1/x", AddressClass::Loopback),
        ("https://3221225985/x", AddressClass::Documentation),
    ] {
        let lookup = ScriptedLookup::new(vec![]);
        let (outcome, attempts) = call(&app, &executor(&app, lookup.clone()), url).await;
        assert_eq!(refused_as(&outcome), Some(class), "{url}: {outcome:?}");
        assert_eq!((lookup.count(), attempts), (0, 1), "{url}");
    }
}

#[tokio::test]
async fn the_connection_goes_to_the_checked_address_with_no_second_lookup() {
    // The development switch lets loopback stand in for a public address.
    let app = TestApp::spawn(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    let endpoint = FakeEndpoint::start(|_| async {
        let mut r = json_response(axum::http::StatusCode::OK, &json!({"status": "ok"}));
        // No pooled connection: the next call must resolve again.
        r.headers_mut()
            .insert("connection", "close".parse().unwrap());
        r
    })
    .await;
    let port = endpoint.base.rsplit(':').next().unwrap().to_owned();
    let url = format!("http://localhost:{port}/orders");
    // First lookup: the allowed address; any second lookup would be private.
    let lookup = ScriptedLookup::new(vec![vec!["127.0.0.1"], vec!["10.0.0.1"]]);
    let exec = executor(&app, lookup.clone());

    let (outcome, _) = call(&app, &exec, &url).await;
    assert_eq!(outcome.unwrap(), json!({"status": "ok"}));
    assert_eq!(
        lookup.count(),
        1,
        "one lookup for the call: checked and connected to the same answer"
    );
    assert_eq!(endpoint.hits(), 1);

    // A rebinding answer on the next lookup is refused, and nothing is sent.
    let (outcome, _) = call(&app, &exec, &url).await;
    assert!(refused(&outcome), "{outcome:?}");
    assert_eq!(lookup.count(), 2);
    assert_eq!(endpoint.hits(), 1);

    // Plain http to a name other than localhost stays refused even in development.
    let lookup = ScriptedLookup::new(vec![vec!["127.0.0.1"]]);
    let (outcome, _) = call(
        &app,
        &executor(&app, lookup.clone()),
        &format!("http://partner.test:{port}/orders"),
    )
    .await;
    assert!(refused(&outcome));
    assert_eq!(lookup.count(), 0);
}

/// The app's routes served again, with an executor resolving through `lookup`
/// (same database, keys and guest); returns the base URL.
async fn serve_resolving(app: &TestApp, lookup: Arc<ScriptedLookup>) -> String {
    let ctx = &app.context;
    let state = Arc::new(warden::api::AppContext {
        store: ctx.store.clone(),
        environment: ctx.environment.clone(),
        keyring: ctx.keyring.clone(),
        sandbox: ctx.sandbox.clone(),
        signer: ctx.signer.clone(),
        executor: executor(app, lookup.clone()),
        engine: ctx.engine.clone(),
        platform: None,
        prompt: None,
        admission: ctx.admission.clone(),
        // MCP's calls resolve through `lookup` too.
        mcp: warden::mcp::McpServer::new(
            ctx.store.clone(),
            executor(app, lookup),
            warden::mcp::McpConfig::default(),
        ),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            listener,
            warden::api::router(
                state,
                (&warden::cli::ClientLimits::DEFAULT).into(),
                warden::api::DocsUi::Off,
            ),
        )
        .await
    });
    base
}

/// A strict app (no loopback endpoints) whose account `acme` has the
/// capability `internal_probe` at an intranet name: the app, the key, the
/// capability's id.
async fn internal_probe(backend: Backend) -> (TestApp, String, String) {
    let app = TestApp::spawn_strict(backend).await;
    let key = account_ready(&app, "acme").await;
    let mut definition = valid_definition("internal_probe");
    definition["url"] = json!("https://intranet.partner.test/orders");
    let (status, body) = app.create_capability(&key, definition).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    (app, key, id)
}

/// An MCP tools/call to a name resolving to a refused address: a tool
/// error with the contract's reason and the refused class, never the
/// address, and a record that keeps neither.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_names_the_refused_class_and_never_the_resolved_address(backend: Backend) {
    let (app, key, _) = internal_probe(backend).await;
    let lookup = ScriptedLookup::new(vec![vec!["8.8.4.4", "10.20.30.40"]]);
    let base = serve_resolving(&app, lookup.clone()).await;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "internal_probe", "arguments": {"order": "A-1"},
            "_meta": crate::mcp::meta()}});
    let response = app
        .client
        .post(format!("{base}/v1/mcp"))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", crate::mcp::MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "internal_probe")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["result"]["isError"], true, "{text}");
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("address_refused"), "{said}");
    assert!(said.contains("(private)"), "the class is named: {said}");
    for address in ["8.8.4.4", "10.20.30.40"] {
        assert!(!text.contains(address), "{address} shown: {text}");
    }
    assert_eq!(lookup.count(), 1);
    let listed = app
        .admin(warden::cli::AdminCommand::Mcp(
            warden::cli::McpCommand::Calls {
                account: "acme".into(),
                limit: 10,
            },
        ))
        .await;
    let calls = listed["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{listed}");
    assert_eq!(calls[0]["reason"], "address_refused");
    assert!(!listed.to_string().contains("10.20.30.40"), "{listed}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_test_names_the_refused_class_and_never_the_resolved_address(backend: Backend) {
    let (app, key, id) = internal_probe(backend).await;
    // One answer per /test: loopback, then a mixed answer whose second
    // address is private (which of the two matched must not show).
    let lookup = ScriptedLookup::new(vec![vec!["127.0.0.1"], vec!["8.8.4.4", "10.20.30.40"]]);
    let base = serve_resolving(&app, lookup.clone()).await;
    for (class, addresses) in [
        ("loopback", vec!["127.0.0.1"]),
        ("private", vec!["8.8.4.4", "10.20.30.40"]),
    ] {
        let response = app
            .client
            .post(format!("{base}/v1/capabilities/{id}/test"))
            .bearer_auth(&key)
            .json(&json!({"arguments": {"order": "A-1"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["status"], "failed", "{text}");
        assert_eq!(body["reason"], "address_refused", "{text}");
        assert_eq!(
            body["message"],
            format!("the endpoint address is refused ({class})"),
            "{text}"
        );
        for address in addresses {
            assert!(!text.contains(address), "{address} shown: {text}");
        }
    }
    assert_eq!(lookup.count(), 2);
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let records = app
        .store
        .list_test_records(&account, &id, 10)
        .await
        .unwrap();
    assert_eq!(records.len(), 2);
    for record in records {
        assert_eq!(record.reason.as_deref(), Some("address_refused"));
        let stored = format!("{record:?}");
        assert!(
            !stored.contains("127.0.0.1") && !stored.contains("10.20.30.40"),
            "{stored}"
        );
    }
}

#[tokio::test]
async fn the_guest_refuses_each_class_as_a_literal_at_import() {
    // The wasm guest runs the same table as the executor: one literal per
    // class, bracketed IPv6 included (loopback is `url-localhost`).
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    let key = account_ready(&app, "acme").await;
    for (ip, class) in ANSWERS {
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        let mut definition = valid_definition("literal_probe");
        definition["url"] = json!(format!("https://{host}/orders"));
        let (status, body) = app.create_capability(&key, definition).await;
        assert_eq!(status, 400, "{ip}: {body}");
        let violation = &body["violations"][0];
        assert_eq!(violation["pointer"], "/capability/url", "{ip}: {body}");
        if *class == AddressClass::Loopback {
            assert_eq!(violation["rule"], "url-localhost", "{ip}: {body}");
        } else {
            assert_eq!(violation["rule"], "url-private-address", "{ip}: {body}");
            assert_eq!(
                violation["message"],
                format!("the URL's host is a refused address ({class})"),
                "{ip}"
            );
        }
    }
}
