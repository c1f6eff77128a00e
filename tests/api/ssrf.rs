//! The SSRF guard at call time, with a resolver whose answers the test
//! controls (the executor's real client, resolver hook and connector).

use crate::endpoint::*;
use crate::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use warden::executor::address_guard::NameLookup;
use warden::executor::{Call, CallFailure, CapabilityAtRevision, Executor};

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
        definition: serde_json::from_value(definition).unwrap(),
    }
}

async fn call(app: &TestApp, executor: &Executor, url: &str) -> (Result<Value, CallFailure>, u32) {
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let capability = capability(url);
    let arguments = json!({"order": "A-1"});
    let report = executor
        .call(Call {
            account: &account,
            user_id: None,
            capability: &capability,
            arguments: &arguments,
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

#[tokio::test]
async fn names_resolving_to_refused_addresses_are_refused_at_call_time() {
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    for ip in [
        "127.0.0.1",
        "::1",
        "10.0.0.7",
        "172.20.1.1",
        "192.168.0.10",
        "169.254.10.10",
        "fe80::1",
        "fd00::5",
        "100.64.3.3",
        "224.0.0.9",
        "ff02::1",
        "0.0.0.0",
        "::",
        "169.254.169.254",
        "fd00:ec2::254",
        "::ffff:10.0.0.1",
    ] {
        let lookup = ScriptedLookup::new(vec![vec![ip]]);
        let (outcome, attempts) = call(
            &app,
            &executor(&app, lookup.clone()),
            "https://api.partner.test/orders",
        )
        .await;
        assert!(refused(&outcome), "{ip}: {outcome:?}");
        assert_eq!(lookup.count(), 1, "{ip}: resolved once and not retried");
        assert_eq!(attempts, 1, "{ip}");
    }
    // A mixed answer is refused whole, even with a public address first.
    let lookup = ScriptedLookup::new(vec![vec!["8.8.8.8", "10.0.0.1"]]);
    assert!(refused(
        &call(
            &app,
            &executor(&app, lookup),
            "https://api.partner.test/orders"
        )
        .await
        .0
    ));
}

#[tokio::test]
async fn literal_addresses_are_refused_without_a_lookup() {
    let app = TestApp::spawn_strict(Backend::Sqlite).await;
    account_ready(&app, "acme").await;
    for url in [
        "https://10.1.1.1/x",
        "https://[fd00::1]/x",
        "https://169.254.169.254/latest",
        "https://127.0.0.1/x",
        "http://127.0.0.1:9/x",
        "https://100.64.0.1/x",
    ] {
        let lookup = ScriptedLookup::new(vec![]);
        let (outcome, attempts) = call(&app, &executor(&app, lookup.clone()), url).await;
        assert!(refused(&outcome), "{url}: {outcome:?}");
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
