//! Prompt integrations (contract 2.13, 3.5, 4.4, 7, 8): the operator's
//! commands and the public execute route, in the contract's processing
//! order, against a fake siteverify verifier and a fake OpenAI-compatible
//! model on loopback, on both databases.

use crate::helpers::fake_inference::{FakeInference, FakeReply};
use crate::helpers::fake_verifier::{self, FakeVerifier, mint};
use crate::helpers::*;
use serde_json::{Value, json};
use warden::cli::{AdminCommand, BundleArgs, PlannerArgs, PromptArgs, PromptIntegrationCommand};

pub(crate) const ORIGIN: &str = "https://forms.shop.example";
pub(crate) const HOST: &str = "forms.shop.example";
const PROMPT: &str = "Write a catchy product title for the topic given. SECRET-PROMPT-MARKER";
/// The header tests use to act as many clients (WARDEN_CLIENT_IP_HEADER).
pub(crate) const IP_HEADER: &str = "x-test-client-ip";

pub(crate) fn manifest() -> Value {
    json!({
        "version": 1,
        "name": "Title helper",
        "origin": ORIGIN,
        "data_classification": "non_sensitive",
        "prompt": PROMPT,
        "input_schema": {"type": "object", "additionalProperties": false, "required": ["topic"],
            "properties": {"topic": {"type": "string", "minLength": 1, "maxLength": 40}}},
        "output_schema": {"type": "object", "additionalProperties": false, "required": ["title"],
            "properties": {"title": {"type": "string", "maxLength": 80}}}
    })
}

pub(crate) fn bundle_args() -> BundleArgs {
    BundleArgs {
        challenge_sitekey: "0x-test-sitekey".into(),
        public_base_url: "https://warden.example.com".into(),
    }
}

pub(crate) struct Forms {
    pub(crate) app: TestApp,
    verifier: FakeVerifier,
    pub(crate) model: FakeInference,
    /// The bundle `create` printed.
    bundle: Value,
    pub(crate) id: String,
    action: String,
}

fn prompt_args(verifier: &FakeVerifier) -> PromptArgs {
    PromptArgs {
        challenge_verify_url: Some(verifier.url()),
        challenge_secret: Some(fake_verifier::SECRET.into()),
        challenge_timeout_ms: 2_000,
        client_ip_header: Some(IP_HEADER.into()),
        ..Default::default()
    }
}

fn planner(model: &FakeInference) -> PlannerArgs {
    PlannerArgs {
        inference_url: Some(model.base_url()),
        inference_model: Some("fake-model".into()),
        inference_api_key: Some("sk-test-inference".into()),
        inference_timeout_ms: 2_000,
    }
}

pub(crate) const GOOD_OUTPUT: &str = r#"{"title": "Boots that MODEL-OUTPUT-MARKER"}"#;

impl Forms {
    async fn open(backend: Backend) -> Forms {
        Forms::open_with_model(backend, vec![FakeReply::text(GOOD_OUTPUT)]).await
    }

    /// An integration whose model answers from `replies` (the last repeats).
    pub(crate) async fn open_with_model(backend: Backend, replies: Vec<FakeReply>) -> Forms {
        let verifier = FakeVerifier::start().await;
        let model = FakeInference::start(replies).await;
        let app = TestApp::spawn_with_prompt(
            TestDb::new(backend).await,
            planner(&model),
            prompt_args(&verifier),
        )
        .await;
        let bundle = create(&app, &manifest())
            .await
            .expect("the manifest is accepted");
        Forms {
            id: bundle["id"].as_str().unwrap().to_owned(),
            action: bundle["challenge_action"].as_str().unwrap().to_owned(),
            app,
            verifier,
            model,
            bundle,
        }
    }

    pub(crate) fn token(&self) -> String {
        mint(HOST, &self.action, true)
    }

    /// POSTs `body` to the execute route from `origin` as client `ip`.
    async fn execute_as(
        &self,
        app: &TestApp,
        origin: Option<&str>,
        ip: &str,
        body: &Value,
    ) -> reqwest::Response {
        let mut request = app
            .client
            .post(app.url(&format!("/v1/prompt-integrations/{}/execute", self.id)))
            .header(IP_HEADER, ip)
            .json(body);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().await.unwrap()
    }

    pub(crate) async fn execute(
        &self,
        ip: &str,
        body: &Value,
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let response = self.execute_as(&self.app, Some(ORIGIN), ip, body).await;
        let headers = response.headers().clone();
        let (status, body) = status_and_json(response).await;
        (status, body, headers)
    }
}

async fn create(app: &TestApp, manifest: &Value) -> Result<Value, String> {
    create_from_text(app, &manifest.to_string()).await
}

/// `warden admin prompt-integration create` with this manifest file's text.
pub(crate) async fn create_from_text(app: &TestApp, manifest: &str) -> Result<Value, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    std::fs::write(&path, manifest).unwrap();
    let command = AdminCommand::PromptIntegration(PromptIntegrationCommand::Create {
        account: "forms".into(),
        manifest: path,
        bundle: bundle_args(),
        sandbox: warden::cli::SandboxArgs {
            guest_cache_dir: Some(guest_cache_dir()),
            ..Default::default()
        },
    });
    if app.store.find_account("forms").await.unwrap().is_none() {
        admin(
            &app.store,
            AdminCommand::Account(warden::cli::AccountCommand::Create {
                name: "forms".into(),
            }),
        )
        .await;
    }
    let keys = warden::cli::MasterKeyArgs {
        master_key: Some(MASTER_KEY.into()),
        ..Default::default()
    };
    warden::admin::execute(&app.store, &app.db.database_args(), &keys, command)
        .await
        .map_err(|e| format!("{e:#}"))
}

async fn set_status(app: &TestApp, id: &str, enable: bool) -> Value {
    let id = id.to_owned();
    let bundle = bundle_args();
    admin(
        &app.store,
        AdminCommand::PromptIntegration(if enable {
            PromptIntegrationCommand::Enable { id, bundle }
        } else {
            PromptIntegrationCommand::Disable { id, bundle }
        }),
    )
    .await
}

pub(crate) fn topic(topic: &str, token: &str) -> Value {
    json!({"input": {"topic": topic}, "challenge_token": token})
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundle_is_public_and_never_holds_the_prompt_output_schema_or_secret(backend: Backend) {
    let forms = Forms::open(backend).await;
    let mut keys: Vec<&str> = forms
        .bundle
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "challenge_action",
            "challenge_sitekey",
            "endpoint",
            "id",
            "input_schema",
            "origin",
            "revision",
            "status"
        ]
    );
    let id = &forms.id;
    assert!(
        id.starts_with("pi_public_") && (27..=90).contains(&id.len()),
        "{id}"
    );
    assert_eq!(forms.bundle["status"], "active");
    assert_eq!(forms.bundle["revision"], 1);
    assert_eq!(forms.bundle["origin"], ORIGIN);
    assert_eq!(
        forms.bundle["endpoint"],
        format!("https://warden.example.com/v1/prompt-integrations/{id}/execute")
    );
    assert_eq!(forms.bundle["input_schema"], manifest()["input_schema"]);
    let action = &forms.action;
    assert!(
        action.len() <= 32
            && action
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    );
    let text = forms.bundle.to_string();
    for secret in [
        "SECRET-PROMPT-MARKER",
        "output_schema",
        "title",
        fake_verifier::SECRET,
    ] {
        assert!(!text.contains(secret), "the bundle shows {secret}: {text}");
    }
    // show, disable, enable, update: the same id and action; the status and
    // the revision follow.
    let shown = admin(
        &forms.app.store,
        AdminCommand::PromptIntegration(PromptIntegrationCommand::Show {
            id: id.clone(),
            bundle: bundle_args(),
        }),
    )
    .await;
    assert_eq!(shown, forms.bundle);
    assert_eq!(
        set_status(&forms.app, id, false).await["status"],
        "disabled"
    );
    assert_eq!(set_status(&forms.app, id, true).await["status"], "active");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    let mut changed = manifest();
    changed["name"] = json!("Title helper v2");
    std::fs::write(&path, changed.to_string()).unwrap();
    let updated = admin(
        &forms.app.store,
        AdminCommand::PromptIntegration(PromptIntegrationCommand::Update {
            id: id.clone(),
            manifest: path,
            bundle: bundle_args(),
            sandbox: warden::cli::SandboxArgs {
                guest_cache_dir: Some(guest_cache_dir()),
                ..Default::default()
            },
        }),
    )
    .await;
    assert_eq!(updated["id"], *id);
    assert_eq!(updated["revision"], 2);
    assert_eq!(updated["challenge_action"], *action);
    let listed = admin(
        &forms.app.store,
        AdminCommand::PromptIntegration(PromptIntegrationCommand::List {
            account: "forms".into(),
            bundle: bundle_args(),
        }),
    )
    .await;
    assert_eq!(listed["prompt_integrations"], json!([updated]));
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_outside_the_contract_are_refused_naming_the_field(backend: Backend) {
    let forms = Forms::open(backend).await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("version", json!(2), "version"),
        ("origin", json!("https://forms.shop.example/"), "origin"),
        ("origin", json!("https://forms.shop.example/page"), "origin"),
        ("origin", json!("ftp://forms.shop.example"), "origin"),
        (
            "data_classification",
            json!("sensitive"),
            "data_classification",
        ),
        ("prompt", json!(""), "prompt"),
        (
            "input_schema",
            json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {"oneOf": [{"type": "string", "maxLength": 3}]}}}),
            "input_schema",
        ),
        (
            "output_schema",
            json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {"$ref": "#/x"}}}),
            "output_schema",
        ),
        (
            "input_schema",
            json!({"type": "array", "maxItems": 3}),
            "input_schema",
        ),
    ];
    for (field, value, named) in cases {
        let mut bad = manifest();
        bad[field] = value.clone();
        let err = create(&forms.app, &bad)
            .await
            .expect_err(&format!("{field} = {value}"));
        assert!(err.contains(named), "{field} = {value}: {err}");
    }
    let mut extra = manifest();
    extra["secret"] = json!("x");
    assert!(
        create(&forms.app, &extra).await.is_err(),
        "unknown fields are refused"
    );
    let listed = admin(
        &forms.app.store,
        AdminCommand::PromptIntegration(PromptIntegrationCommand::List {
            account: "forms".into(),
            bundle: bundle_args(),
        }),
    )
    .await;
    assert_eq!(
        listed["prompt_integrations"].as_array().unwrap().len(),
        1,
        "nothing stored"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_answers_the_models_data_and_stores_no_text(backend: Backend) {
    let forms = Forms::open(backend).await;
    let token = forms.token();
    let (status, body, headers) = forms
        .execute("203.0.113.7", &topic("INPUT-TEXT-MARKER boots", &token))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"data": {"title": "Boots that MODEL-OUTPUT-MARKER"}})
    );
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    // The verifier was asked with the secret, the client's IP and the token.
    let asked = forms.verifier.received();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["secret"], fake_verifier::SECRET);
    assert_eq!(asked[0]["remoteip"], "203.0.113.7");
    assert_eq!(asked[0]["response"], token);
    assert!(!asked[0]["idempotency_key"].is_empty());
    // The model was asked in JSON mode with the operator's prompt and the input.
    let sent = &forms.model.requests()[0];
    assert_eq!(sent["response_format"]["type"], "json_object");
    assert!(
        sent["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("SECRET-PROMPT-MARKER")
    );
    assert!(
        sent["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("INPUT-TEXT-MARKER")
    );
    // Usage is attributed; no input or output text, nor the token, is stored.
    let day = warden::prompt::utc_day(warden::clock::now_millis());
    let usage = forms.app.store.prompt_usage(&forms.id, &day).await.unwrap();
    assert_eq!(usage, vec![("succeeded".to_owned(), 1)]);
    for text in ["INPUT-TEXT-MARKER", "MODEL-OUTPUT-MARKER", token.as_str()] {
        assert!(!forms.app.db.contains(text).await, "{text} was stored");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_enum_without_max_length_is_bounded_by_its_values(backend: Backend) {
    let forms = Forms::open(backend).await;
    // Contract 2.13 lists "string enum" in the subset: its values bound it.
    let mut sized = manifest();
    sized["input_schema"] = json!({"type": "object", "additionalProperties": false,
        "required": ["size"], "properties": {"size": {"type": "string", "enum": ["S", "M", "L"]}}});
    let bundle = create(&forms.app, &sized)
        .await
        .expect("a string enum needs no maxLength here");
    let (id, action) = (
        bundle["id"].as_str().unwrap(),
        bundle["challenge_action"].as_str().unwrap(),
    );
    let execute = |size: &str, ip: &str| {
        let body = json!({"input": {"size": size}, "challenge_token": mint(HOST, action, true)});
        forms
            .app
            .client
            .post(
                forms
                    .app
                    .url(&format!("/v1/prompt-integrations/{id}/execute")),
            )
            .header("origin", ORIGIN)
            .header(IP_HEADER, ip)
            .json(&body)
            .send()
    };
    let (status, body) = status_and_json(execute("XL", "203.0.113.30").await.unwrap()).await;
    assert_eq!(status, 422, "{body}");
    assert_nested_error(&body, "VALIDATION_ERROR");
    let (status, body) = status_and_json(execute("M", "203.0.113.31").await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    // A capability's input_schema keeps contract 2.6: maxLength, enum or not.
    let key = crate::helpers::fixtures::account_ready(&forms.app, "acme").await;
    let mut definition = crate::helpers::fixtures::valid_definition("sized");
    definition["input_schema"] = json!({"type": "object", "additionalProperties": false,
        "required": ["size"], "properties": {"size": {"type": "string", "enum": ["S", "M", "L"]}}});
    let (status, body) = forms.app.create_capability(&key, definition).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        crate::helpers::fixtures::violation_pairs(&body).contains(&(
            "/capability/input_schema/properties/size".into(),
            "string-max-length-required".into()
        )),
        "{body}"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_allows_exactly_the_configured_origin(backend: Backend) {
    let forms = Forms::open(backend).await;
    let preflight = |id: String, origin: &'static str| {
        let app = &forms.app;
        app.client
            .request(
                reqwest::Method::OPTIONS,
                app.url(&format!("/v1/prompt-integrations/{id}/execute")),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
    };
    let ok = preflight(forms.id.clone(), ORIGIN).await.unwrap();
    assert_eq!(ok.status(), 204);
    assert_eq!(ok.headers()["access-control-allow-origin"], ORIGIN);
    assert_eq!(ok.headers()["access-control-allow-methods"], "POST");
    assert_eq!(ok.headers()["access-control-allow-headers"], "content-type");
    assert_eq!(ok.headers()["vary"], "Origin");
    for other in [
        "https://evil.example",
        "https://forms.shop.example.evil.example",
    ] {
        let denied = preflight(forms.id.clone(), other).await.unwrap();
        assert_eq!(denied.status(), 403);
        assert!(
            denied
                .headers()
                .get("access-control-allow-origin")
                .is_none()
        );
        let (_, body) = status_and_json(denied).await;
        assert_nested_error(&body, "ORIGIN_DENIED");
    }
    for id in [
        "pi_public_AAAAAAAAAAAAAAAAAAAAAAAA",
        "pi_public_short",
        "not-an-id",
    ] {
        let missing = preflight(id.into(), ORIGIN).await.unwrap();
        assert_eq!(missing.status(), 404, "{id}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refusal_comes_in_processing_order_and_only_verification_spends_a_token(
    backend: Backend,
) {
    let forms = Forms::open(backend).await;
    let app = &forms.app;
    // Resolve: unknown and malformed ids.
    for id in ["pi_public_AAAAAAAAAAAAAAAAAAAAAAAA", "pi_public_bad/../x"] {
        let response = app
            .client
            .post(app.url(&format!("/v1/prompt-integrations/{id}/execute")))
            .header("origin", ORIGIN)
            .json(&topic("boots", &forms.token()))
            .send()
            .await
            .unwrap();
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 404, "{id}: {body}");
        assert_nested_error(&body, "NOT_FOUND");
    }
    // Origin before everything else about the request: a wrong or missing
    // origin with a good token does not spend it, and never gets it echoed;
    // an API key changes nothing.
    let kept = forms.token();
    for origin in [Some("https://evil.example"), None] {
        let response = forms
            .execute_as(app, origin, "198.51.100.1", &topic("boots", &kept))
            .await;
        assert!(
            response
                .headers()
                .get("access-control-allow-origin")
                .is_none()
        );
        let (status, body) = status_and_json(response).await;
        assert_eq!(status, 403, "{body}");
        assert_nested_error(&body, "ORIGIN_DENIED");
    }
    let key = app.account_with_key("other").await;
    let response = app
        .client
        .post(app.url(&format!("/v1/prompt-integrations/{}/execute", forms.id)))
        .bearer_auth(&key)
        .header("origin", "https://evil.example")
        .json(&topic("boots", &kept))
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 403, "an API key bypasses nothing: {body}");
    assert_nested_error(&body, "ORIGIN_DENIED");
    assert_eq!(forms.verifier.asked_about(&kept), 0);
    // The body: too large (declared, not read), malformed, unknown
    // properties, input against the schema: none of them spends the token.
    let huge = "x".repeat(2 * 1024 * 1024);
    let response = app
        .client
        .post(app.url(&format!("/v1/prompt-integrations/{}/execute", forms.id)))
        .header("origin", ORIGIN)
        .header(IP_HEADER, "198.51.100.2")
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["access-control-allow-origin"], ORIGIN);
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 413, "{body}");
    assert_nested_error(&body, "REQUEST_TOO_LARGE");
    let bad_bodies = [
        (
            json!({"input": {"topic": "boots"}, "challenge_token": kept, "user_id": "u"}),
            422,
        ),
        (json!({"challenge_token": kept}), 422),
        (
            json!({"input": {"topic": ""}, "challenge_token": kept}),
            422,
        ),
        (
            json!({"input": {"topic": "x".repeat(41)}, "challenge_token": kept}),
            422,
        ),
        (
            json!({"input": {"topic": "boots", "extra": 1}, "challenge_token": kept}),
            422,
        ),
    ];
    for (i, (bad, expected)) in bad_bodies.iter().enumerate() {
        let (status, body, _) = forms.execute(&format!("198.51.100.{}", 10 + i), bad).await;
        assert_eq!(status, *expected, "{bad}: {body}");
        assert_nested_error(&body, "VALIDATION_ERROR");
    }
    let response = app
        .client
        .post(app.url(&format!("/v1/prompt-integrations/{}/execute", forms.id)))
        .header("origin", ORIGIN)
        .header(IP_HEADER, "198.51.100.20")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, body) = status_and_json(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        forms.verifier.asked_about(&kept),
        0,
        "no body refusal reached the verifier"
    );
    // The kept token still works: nothing above spent it.
    let (status, body, _) = forms.execute("198.51.100.30", &topic("boots", &kept)).await;
    assert_eq!(status, 200, "{body}");
    // The token stage: missing, empty, overlong (the verifier is not even
    // asked), refused by the verifier, for another action or host, reused.
    let overlong = "t".repeat(2049);
    let token_cases = [
        (json!({"input": {"topic": "boots"}}), "missing"),
        (topic("boots", ""), "empty"),
        (topic("boots", &overlong), "overlong"),
        (topic("boots", &mint(HOST, &forms.action, false)), "refused"),
        (
            topic("boots", &mint(HOST, "another_action", true)),
            "action",
        ),
        (
            topic("boots", &mint("evil.example", &forms.action, true)),
            "host",
        ),
        (topic("boots", &kept), "reused"),
    ];
    for (i, (body, case)) in token_cases.iter().enumerate() {
        let (status, answer, _) = forms.execute(&format!("198.51.100.{}", 40 + i), body).await;
        assert_eq!(status, 403, "{case}: {answer}");
        assert_nested_error(&answer, "CHALLENGE_INVALID");
    }
    assert_eq!(forms.verifier.asked_about(&overlong), 0);
    assert_eq!(
        forms.verifier.asked_about(&kept),
        1,
        "a reused token is refused before the verifier"
    );
    // A token whose verification failed is spent as well.
    let refused = mint(HOST, "another_action", true);
    forms
        .execute("198.51.100.60", &topic("boots", &refused))
        .await;
    let (status, _, _) = forms
        .execute("198.51.100.61", &topic("boots", &refused))
        .await;
    assert_eq!(status, 403);
    assert_eq!(forms.verifier.asked_about(&refused), 1);
    // The verifier down: 503, and the token is spent (it reached verification).
    forms.verifier.set_down(true);
    let during = forms.token();
    let (status, body, _) = forms
        .execute("198.51.100.70", &topic("boots", &during))
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(body["error"]["code"].is_string(), "nested: {body}");
    forms.verifier.set_down(false);
    let (status, body, _) = forms
        .execute("198.51.100.71", &topic("boots", &during))
        .await;
    assert_eq!(status, 403, "{body}");
    assert_nested_error(&body, "CHALLENGE_INVALID");
    // The model: garbage and off-schema output are 502; down is 503; each
    // spends its token and gives its reservation back.
    let model_cases = [
        (
            FakeReply::text("not json at all"),
            502,
            "MODEL_OUTPUT_INVALID",
        ),
        (
            FakeReply::text(r#"{"title": 5}"#),
            502,
            "MODEL_OUTPUT_INVALID",
        ),
        (
            FakeReply::text(r#"{"title": "ok", "leak": "x"}"#),
            502,
            "MODEL_OUTPUT_INVALID",
        ),
        (FakeReply::Status(500), 503, "INFERENCE_UNAVAILABLE"),
    ];
    for (i, (reply, status_expected, code)) in model_cases.into_iter().enumerate() {
        forms.model.set_script(vec![reply]);
        let token = forms.token();
        let (status, body, headers) = forms
            .execute(&format!("198.51.100.{}", 80 + i), &topic("boots", &token))
            .await;
        assert_eq!(status, status_expected, "{code}: {body}");
        assert_nested_error(&body, code);
        assert_eq!(headers["access-control-allow-origin"], ORIGIN);
        let (again, _, _) = forms
            .execute(&format!("198.51.100.{}", 90 + i), &topic("boots", &token))
            .await;
        assert_eq!(again, 403, "{code}: the token was spent");
    }
    // Disabled: 404 INTEGRATION_DISABLED, readable by its page.
    set_status(app, &forms.id, false).await;
    let (status, body, headers) = forms
        .execute("198.51.100.99", &topic("boots", &forms.token()))
        .await;
    assert_eq!(status, 404, "{body}");
    assert_nested_error(&body, "INTEGRATION_DISABLED");
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    // Usage: the success and the failures that reached the quota, by outcome.
    let day = warden::prompt::utc_day(warden::clock::now_millis());
    let usage = app.store.prompt_usage(&forms.id, &day).await.unwrap();
    assert_eq!(
        usage,
        vec![
            ("inference_unavailable".to_owned(), 1),
            ("model_output_invalid".to_owned(), 3),
            ("succeeded".to_owned(), 1),
        ]
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fourth_request_in_a_minute_from_one_client_is_rate_limited(backend: Backend) {
    let forms = Forms::open(backend).await;
    for n in 0..3 {
        let (status, body, _) = forms
            .execute("192.0.2.1", &topic("boots", &forms.token()))
            .await;
        assert_eq!(status, 200, "request {n}: {body}");
    }
    let kept = forms.token();
    let (status, body, headers) = forms.execute("192.0.2.1", &topic("boots", &kept)).await;
    assert_eq!(status, 429, "{body}");
    assert_nested_error(&body, "RATE_LIMITED");
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    assert_eq!(
        headers["access-control-expose-headers"], "Retry-After",
        "the page may read it"
    );
    assert_eq!(
        forms.verifier.asked_about(&kept),
        0,
        "a limited request spends no token"
    );
    // Another client is not limited by it; the limited one's token still works.
    let (status, body, _) = forms.execute("192.0.2.2", &topic("boots", &kept)).await;
    assert_eq!(status, 200, "{body}");
}

/// Issue 24 item 7: behind a proxy, the client's own leading values of the
/// trusted header are not new clients, and an IPv6 /64 is one client.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_burst_counts_the_address_the_proxy_appended_and_an_ipv6_64_as_one_client(
    backend: Backend,
) {
    let forms = Forms::open(backend).await;
    // Each value as the trusted header holds it, and the status it gets.
    let expect = |sent: &'static str, status: u16, why: &'static str| (sent, status, why);
    for (sent, wanted, why) in [
        // X-Forwarded-For style: the client writes what it likes first, the
        // trusted proxy appends the address it saw (WARDEN_CLIENT_IP_HOPS=1).
        expect("198.18.0.1, 203.0.113.9", 200, "first"),
        expect("198.18.0.2, 203.0.113.9", 200, "second"),
        expect("198.18.0.3, 203.0.113.9", 200, "third"),
        expect(
            "198.18.0.99, 203.0.113.9",
            429,
            "made-up leading values are not new clients",
        ),
        // One IPv6 /64 is one client, whatever its low 64 bits.
        expect("2001:db8:5:6::1", 200, "first of the /64"),
        expect("2001:db8:5:6::2", 200, "second of the /64"),
        expect("2001:db8:5:6::3", 200, "third of the /64"),
        expect(
            "2001:db8:5:6:ffff::1",
            429,
            "another address of the same /64",
        ),
        expect("2001:db8:5:7::1", 200, "the next /64 is another client"),
    ] {
        let (status, body, _) = forms.execute(sent, &topic("boots", &forms.token())).await;
        assert_eq!(status, wanted, "{why} ({sent}): {body}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_fifth_success_of_a_day_is_refused_and_failures_never_count(backend: Backend) {
    let forms = Forms::open(backend).await;
    let mut successes = 0;
    for n in 0..40 {
        // Every third request fails at the model: it must not count.
        let failing = n % 3 == 2;
        forms.model.set_script(vec![FakeReply::text(if failing {
            "not json"
        } else {
            GOOD_OUTPUT
        })]);
        let (status, body, _) = forms
            .execute(
                &format!("10.0.{}.{}", n / 200, n % 200),
                &topic("boots", &forms.token()),
            )
            .await;
        if failing {
            assert_eq!(status, 502, "{body}");
        } else {
            assert_eq!(status, 200, "request {n}: {body}");
            successes += 1;
        }
        if successes == 24 {
            break;
        }
    }
    assert_eq!(successes, 24);
    forms.model.set_script(vec![FakeReply::text(GOOD_OUTPUT)]);
    let (status, body, headers) = forms
        .execute("10.1.0.1", &topic("boots", &forms.token()))
        .await;
    assert_eq!(status, 429, "{body}");
    assert_nested_error(&body, "DAILY_QUOTA_EXCEEDED");
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let until_midnight = warden::prompt::seconds_until_midnight(warden::clock::now_millis());
    assert!(
        wait.abs_diff(until_midnight) <= 2,
        "until UTC midnight: {wait} vs {until_midnight}"
    );
}

/// Two replicas on one PostgreSQL database, 20 requests at once: neither
/// limit is ever exceeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_on_two_replicas_never_exceed_either_limit() {
    let forms = Forms::open(Backend::Postgres).await;
    let other = TestApp::spawn_with_prompt(
        forms.app.db.shared(),
        planner(&forms.model),
        prompt_args(&forms.verifier),
    )
    .await;
    // One client, 20 requests at once, spread over both replicas: 3 pass
    // the burst limit.
    let (f, o) = (&forms, &other);
    let burst = futures::future::join_all((0..20).map(move |n| {
        let (forms, app) = (f, if n % 2 == 0 { &f.app } else { o });
        let body = topic("boots", &forms.token());
        async move {
            forms
                .execute_as(app, Some(ORIGIN), "192.0.2.50", &body)
                .await
                .status()
        }
    }))
    .await;
    let admitted = burst.iter().filter(|s| s.as_u16() != 429).count();
    assert_eq!(admitted, 3, "{burst:?}");
    // 20 clients at once after 10 successes: 14 succeed, 6 meet the quota.
    for n in 0..10 {
        let (status, body, _) = forms
            .execute(
                &format!("192.0.2.{}", 100 + n),
                &topic("boots", &forms.token()),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let statuses = futures::future::join_all((0..20).map(move |n| {
        let (forms, app) = (f, if n % 2 == 0 { &f.app } else { o });
        let body = topic("boots", &forms.token());
        let ip = format!("198.18.0.{n}");
        async move {
            forms
                .execute_as(app, Some(ORIGIN), &ip, &body)
                .await
                .status()
                .as_u16()
        }
    }))
    .await;
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let quota = statuses.iter().filter(|s| **s == 429).count();
    // Two of the earlier burst's three admitted requests may have succeeded.
    let before = 10 + burst.iter().filter(|s| s.as_u16() == 200).count();
    assert_eq!(ok + before, 24, "{statuses:?}");
    assert_eq!(ok + quota, 20, "{statuses:?}");
}
