//! Capability lifecycle (contract 3.1), idempotency and atomic publishing.

use crate::helpers::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};

async fn send(
    app: &TestApp,
    method: &str,
    path: &str,
    key: &str,
    if_match: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(key);
    if let Some(rev) = if_match {
        request = request.header("if-match", rev);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    status_and_json(request.send().await.unwrap()).await
}

fn revision_body(name: &str) -> Value {
    json!({"domain": "orders", "capability": valid_definition(name)})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_follows_every_row_of_contract_3_1(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;

    let (status, created) = app
        .create_capability(&key, valid_definition("order_status"))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("cap_") && (8..=80).contains(&id.len()));
    assert_eq!(
        created,
        json!({"id": id, "lifecycle_status": "active", "revision": 1})
    );
    let path = format!("/v1/capabilities/{id}");

    // active --PATCH--> active, new revision
    let (status, body) = send(
        &app,
        "PATCH",
        &path,
        &key,
        Some("1"),
        Some(revision_body("order_status")),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"id": id, "lifecycle_status": "active", "revision": 2})
        )
    );
    // stale, malformed and missing If-Match
    let (status, body) = send(
        &app,
        "PATCH",
        &path,
        &key,
        Some("1"),
        Some(revision_body("order_status")),
    )
    .await;
    assert_eq!(status, 409);
    assert_flat_error(&body, "CONFLICT");
    for bad in ["abc", "0", "W/\"2\"", &"9".repeat(81)] {
        let (status, body) = send(
            &app,
            "PATCH",
            &path,
            &key,
            Some(bad),
            Some(revision_body("order_status")),
        )
        .await;
        assert_eq!(status, 400, "If-Match {bad}");
        assert_flat_error(&body, "BAD_REQUEST");
    }
    assert_eq!(
        send(
            &app,
            "PATCH",
            &path,
            &key,
            None,
            Some(revision_body("order_status"))
        )
        .await
        .0,
        400
    );
    // enable and disable declare no 400: a missing If-Match is a revision
    // that is not the current one (tested in `status_mappings.rs` too).
    assert_eq!(
        send(&app, "POST", &format!("{path}/disable"), &key, None, None)
            .await
            .0,
        409
    );

    // active --disable--> disabled
    let (status, body) = send(
        &app,
        "POST",
        &format!("{path}/disable"),
        &key,
        Some("2"),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"id": id, "lifecycle_status": "disabled", "revision": 3})
        )
    );
    // disabled --PATCH--> disabled (never re-enables); a quoted entity tag works too
    let (status, body) = send(
        &app,
        "PATCH",
        &path,
        &key,
        Some("\"3\""),
        Some(revision_body("order_status_v2")),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"id": id, "lifecycle_status": "disabled", "revision": 4})
        )
    );
    // disabling twice is a conflict, not a new revision
    assert_eq!(
        send(
            &app,
            "POST",
            &format!("{path}/disable"),
            &key,
            Some("4"),
            None
        )
        .await
        .0,
        409
    );
    // disabled --enable--> active
    let (status, body) = send(
        &app,
        "POST",
        &format!("{path}/enable"),
        &key,
        Some("4"),
        None,
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"id": id, "lifecycle_status": "active", "revision": 5})
        )
    );
    assert_eq!(
        send(
            &app,
            "POST",
            &format!("{path}/enable"),
            &key,
            Some("5"),
            None
        )
        .await
        .0,
        409,
        "already active"
    );

    // enable rechecks the credential: a revoked one keeps the capability disabled
    assert_eq!(
        send(
            &app,
            "POST",
            &format!("{path}/disable"),
            &key,
            Some("5"),
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        send(
            &app,
            "DELETE",
            &format!("/v1/capability-credentials/{CREDENTIAL}"),
            &key,
            None,
            None
        )
        .await
        .0,
        200
    );
    let (status, body) = send(
        &app,
        "POST",
        &format!("{path}/enable"),
        &key,
        Some("6"),
        None,
    )
    .await;
    assert_eq!(status, 409);
    assert!(body["error"].as_str().unwrap().contains(CREDENTIAL));

    // detail: the current definition and the whole history
    let (status, detail) = send(&app, "GET", &path, &key, None, None).await;
    assert_eq!(status, 200);
    assert_eq!(detail["lifecycle_status"], "disabled");
    assert_eq!(detail["revision"], 6);
    assert_eq!(detail["definition"], valid_definition("order_status_v2"));
    let changes: Vec<(i64, &str, &str)> = detail["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap(),
                r["change"].as_str().unwrap(),
                r["lifecycle_status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            (1, "created", "active"),
            (2, "revised", "active"),
            (3, "disabled", "disabled"),
            (4, "revised", "disabled"),
            (5, "enabled", "active"),
            (6, "disabled", "disabled")
        ]
    );

    let (status, list) = send(&app, "GET", "/v1/capabilities", &key, None, None).await;
    assert_eq!(status, 200);
    let items = list["capabilities"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        (
            items[0]["id"].as_str(),
            items[0]["name"].as_str(),
            items[0]["revision"].as_i64()
        ),
        (Some(id.as_str()), Some("order_status_v2"), Some(6))
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_foreign_and_malformed_ids(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let alice = account_ready(&app, "alice").await;
    let bob = account_ready(&app, "bob").await;
    let (_, created) = app
        .create_capability(&alice, valid_definition("order_status"))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    for (who, path) in [
        (&bob, format!("/v1/capabilities/{id}")),
        (&alice, "/v1/capabilities/cap_doesnotexist".to_owned()),
    ] {
        let (status, body) = send(&app, "GET", &path, who, None, None).await;
        assert_eq!(status, 404, "{path}");
        assert_flat_error(&body, "NOT_FOUND");
        assert_eq!(
            send(
                &app,
                "PATCH",
                &path,
                who,
                Some("1"),
                Some(revision_body("x_y"))
            )
            .await
            .0,
            404
        );
        assert_eq!(
            send(
                &app,
                "POST",
                &format!("{path}/disable"),
                who,
                Some("1"),
                None
            )
            .await
            .0,
            404
        );
        assert_eq!(
            send(
                &app,
                "POST",
                &format!("{path}/enable"),
                who,
                Some("1"),
                None
            )
            .await
            .0,
            404
        );
    }
    for bad in ["cap_UPPER123", "cap_1", "orders", "cap_with-dash1"] {
        let (status, body) = send(
            &app,
            "GET",
            &format!("/v1/capabilities/{bad}"),
            &alice,
            None,
            None,
        )
        .await;
        // A malformed id names no capability (the routes declare no 400).
        assert_eq!(status, 404, "{bad}");
        assert_flat_error(&body, "NOT_FOUND");
    }
    let (_, bobs) = send(&app, "GET", "/v1/capabilities", &bob, None, None).await;
    assert_eq!(
        bobs,
        json!({"capabilities": []}),
        "lists are scoped to the key"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_with_one_if_match_have_one_winner(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let (_, created) = app
        .create_capability(&key, valid_definition("order_status"))
        .await;
    let id = created["id"].as_str().unwrap();
    let attempts = (0..8)
        .map(|i| {
            let definition = valid_definition(&format!("order_status_{i}"));
            let patch = app.api(&key).revise_capability(id, "1", definition);
            tokio::spawn(async move { patch.response().await.status().as_u16() })
        })
        .collect::<Vec<_>>();
    let mut statuses = Vec::new();
    for a in attempts {
        statuses.push(a.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, vec![200, 409, 409, 409, 409, 409, 409, 409]);
    let (_, detail) = app.api(&key).get_capability(id).await;
    assert_eq!(detail["revision"], 2);
    assert_eq!(detail["revisions"].as_array().unwrap().len(), 2);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_unique_per_account(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let other = account_ready(&app, "other").await;
    assert_eq!(
        app.create_capability(&key, valid_definition("order_status"))
            .await
            .0,
        201
    );
    let (status, body) = app
        .create_capability(&key, valid_definition("order_status"))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        violation_pairs(&body),
        vec![("/capability/name".to_owned(), "name-not-unique".to_owned())]
    );
    assert_eq!(
        app.create_capability(&other, valid_definition("order_status"))
            .await
            .0,
        201,
        "another account may use the name"
    );
    let (status, body) = status_and_json(
        app.import_capabilities(
            &key,
            &new_key(),
            vec![valid_definition("a_b"), valid_definition("a_b")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        violation_pairs(&body),
        vec![(
            "/capabilities/1/name".to_owned(),
            "name-duplicate".to_owned()
        )]
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_import_replays_and_detects_reuse(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let idem = new_key();
    let manifest = vec![valid_definition("one"), valid_definition("two")];

    let first = app.import_capabilities(&key, &idem, manifest.clone()).await;
    assert!(first.headers().get("idempotency-replayed").is_none());
    let (status, first) = status_and_json(first).await;
    assert_eq!(status, 201);
    assert_eq!(first["capabilities"].as_array().unwrap().len(), 2);

    let again = app.import_capabilities(&key, &idem, manifest.clone()).await;
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let (status, replayed) = status_and_json(again).await;
    assert_eq!(
        (status, &replayed),
        (201, &first),
        "the replay is the first answer"
    );
    assert_eq!(
        app.store.count_capability_rows(&account).await.unwrap(),
        (2, 2),
        "nothing created twice"
    );

    let (status, body) = status_and_json(
        app.import_capabilities(&key, &idem, vec![valid_definition("three")])
            .await,
    )
    .await;
    assert_eq!(status, 409);
    assert_flat_error(&body, "IDEMPOTENCY_KEY_REUSED");

    // The same key on the other publishing route is a different request too.
    let response = app
        .client
        .post(app.url("/v1/capabilities"))
        .bearer_auth(&key)
        .header("idempotency-key", &idem)
        .json(&json!({"domain": "orders", "capability": valid_definition("four")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);

    // Keys are scoped to the account.
    let other = account_ready(&app, "other").await;
    assert_eq!(
        app.import_capabilities(&other, &idem, manifest.clone())
            .await
            .status(),
        201
    );

    for bad in [None, Some(String::new()), Some("k".repeat(201))] {
        let mut request = app
            .client
            .post(app.url("/v1/capabilities/import"))
            .bearer_auth(&key)
            .json(&json!({"domain": "orders", "capabilities": [valid_definition("five")]}));
        if let Some(value) = &bad {
            request = request.header("idempotency-key", value.as_str());
        }
        let (status, body) = status_and_json(request.send().await.unwrap()).await;
        assert_eq!(status, 400, "{bad:?}");
        assert_flat_error(&body, "BAD_REQUEST");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_requests_with_one_new_key_import_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let idem = new_key();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let definitions = vec![valid_definition("one"), valid_definition("two")];
            let import = app.api(&key).import_capabilities(&idem, definitions);
            tokio::spawn(async move {
                let r = import.response().await;
                let replayed = r.headers().contains_key("idempotency-replayed");
                let (status, body) = status_and_json(r).await;
                (status, replayed, body)
            })
        })
        .collect();
    let mut executed = 0;
    for t in tasks {
        let (status, replayed, body) = t.await.unwrap();
        match (status, replayed) {
            (201, false) => executed += 1,
            (201, true) => {}
            (409, false) => assert_flat_error(&body, "CONFLICT"),
            other => panic!("unexpected {other:?} {body}"),
        }
    }
    assert_eq!(executed, 1, "exactly one request executed the import");
    assert_eq!(
        app.store.count_capability_rows(&account).await.unwrap(),
        (2, 2)
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_import_leaves_nothing_behind(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = account_ready(&app, "acme").await;
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let mut last = valid_definition("three");
    last["input_schema"]["properties"]["order"]
        .as_object_mut()
        .unwrap()
        .remove("maxLength");
    let idem = new_key();
    let (status, body) = status_and_json(
        app.import_capabilities(
            &key,
            &idem,
            vec![valid_definition("one"), valid_definition("two"), last],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    let located: Vec<(i64, String)> = body["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["capability_index"].as_i64().unwrap(),
                v["capability"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        located.iter().all(|l| *l == (2, "three".to_owned())),
        "{body}"
    );
    assert_eq!(
        app.store.count_capability_rows(&account).await.unwrap(),
        (0, 0),
        "no capability, no revision"
    );
    assert_eq!(
        app.store.count_idempotency_records(&account).await.unwrap(),
        0,
        "no idempotency record"
    );
    // The key was released: the corrected import goes through with it.
    let fixed = vec![
        valid_definition("one"),
        valid_definition("two"),
        valid_definition("three"),
    ];
    assert_eq!(
        app.import_capabilities(&key, &idem, fixed).await.status(),
        201
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_imports_leaves_only_whole_imports(backend: Backend) {
    let db = TestDb::new(backend).await;
    // The server under test is the real binary; set up through its CLI and API.
    let key = cli_account_with_key(&db, "acme").await;
    let mut server = ServerProcess::start(&db, &[("WARDEN_DEV_ALLOW_LOOPBACK", "1")]).await;
    configure_credential(&server.api(&key)).await;

    const PER_IMPORT: usize = 3;
    let writer = {
        let api = server.api(&key);
        tokio::spawn(async move {
            let mut acknowledged = 0;
            for batch in 0.. {
                let defs: Vec<Value> = (0..PER_IMPORT)
                    .map(|i| valid_definition(&format!("b{batch}_c{i}")))
                    .collect();
                // The server is killed mid-import: a failed send ends the writer.
                let import = api.import_capabilities(&format!("batch-{batch}"), defs);
                let sent = import.request().send().await;
                match sent {
                    Ok(r) if r.status() == 201 => acknowledged += 1,
                    _ => break,
                }
            }
            acknowledged
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    let acknowledged = writer.await.unwrap();
    assert!(acknowledged > 0);

    let server = ServerProcess::start(&db, &[("WARDEN_DEV_ALLOW_LOOPBACK", "1")]).await;
    let (status, list) = server.api(&key).list_capabilities().await;
    assert_eq!(status, 200, "{list}");
    let mut per_batch = std::collections::BTreeMap::<String, usize>::new();
    for cap in list["capabilities"].as_array().unwrap() {
        let name = cap["name"].as_str().unwrap();
        *per_batch
            .entry(name.split('_').next().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(
        per_batch.values().all(|&n| n == PER_IMPORT),
        "a torn import: {per_batch:?}"
    );
    assert!(
        per_batch.len() >= acknowledged,
        "every acknowledged import survived ({acknowledged} acked, {per_batch:?})"
    );
    assert!(per_batch.len() <= acknowledged + 1);
}
