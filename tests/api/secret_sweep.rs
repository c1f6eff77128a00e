//! The secret-leak sweep: one workload that touches every kind of secret,
//! run on the real binary with the most verbose logs it can write
//! (`WARDEN_LOG=trace`, the code generator aside: see [`LOG_FILTER`]), then a byte scan of everything the service left
//! behind — the database files (SQLite file, WAL and shared memory; every
//! row of every PostgreSQL table as text), the captured log file (server and
//! admin commands) and every response body — for each secret in clear and in
//! its natural encodings. Any hit fails and says where.
//!
//! The issue asks for the sweep "after the whole suite"; the suite's tests
//! run in parallel on their own databases, so the sweep brings its own
//! workload instead, covering every secret the suite's tests create:
//! - API keys issued by `warden admin key issue` (one revoked);
//! - endpoint credentials of each auth type (bearer, api_key, basic), one
//!   rotated (both values), one revoked;
//! - both master keys of a `warden admin master-key rotate`;
//! - both signing private keys of a `warden admin signing-key rotate`;
//! - the bytes of an uploaded image;
//! - the opaque references of host interactions (confirmation and selection),
//!   which may appear only in the `interaction` object of the response that
//!   revealed them;
//! - the inference backend's API key, the platform webhook's verify token
//!   and app secret, a number's sealed access token and the fallback one.

use crate::helpers::endpoint::*;
use crate::helpers::fake_inference::{FakeInference, FakeReply};
use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::fixtures::{new_key, valid_definition};
use crate::helpers::shop::{IMAGE_MARKER, order_status, prepare_address_change};
use crate::helpers::*;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use std::sync::Arc;
use warden::crypto::master_key::{Keyring, MasterKey};
use warden_example_host_endpoint::{Config, Endpoint, router};

/// The master key after the rotation (base64 of 32 bytes).
const NEXT_MASTER_KEY: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
const ACCOUNT: &str = "sweep";
/// Everything at trace, except the code generator's own tracing: it sees
/// only guest code, and at trace it writes megabytes whenever a guest is
/// compiled (a cold guest cache).
const LOG_FILTER: &str =
    "trace,cranelift_codegen=info,cranelift_frontend=info,wasmtime_cranelift=info,regalloc2=info";

fn unique(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// One secret and the forms it could leak in.
struct Secret {
    kind: &'static str,
    forms: Vec<(&'static str, Vec<u8>)>,
}

impl Secret {
    /// A text secret: as written, and base64 of it.
    fn text(kind: &'static str, value: &str) -> Self {
        Secret {
            kind,
            forms: vec![
                ("text", value.as_bytes().to_vec()),
                ("base64", STANDARD.encode(value).into_bytes()),
            ],
        }
    }

    /// Binary secret: raw, hex, base64 and base64url.
    fn bytes(kind: &'static str, value: &[u8]) -> Self {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        Secret {
            kind,
            forms: vec![
                ("raw", value.to_vec()),
                ("hex", hex.into_bytes()),
                ("base64", STANDARD.encode(value).into_bytes()),
                ("base64url", URL_SAFE_NO_PAD.encode(value).into_bytes()),
            ],
        }
    }
}

/// A response as recorded: what may legitimately appear in it is cut out
/// (the interaction of the turn that revealed it) before the scan.
struct Recorded {
    label: String,
    scanned: String,
}

struct Sweep {
    db: TestDb,
    client: reqwest::Client,
    key: String,
    address: String,
    responses: Vec<Recorded>,
    /// Opaque references revealed by interactions.
    references: Vec<String>,
    /// Standard error of every admin command.
    admin_logs: Vec<String>,
}

/// Every string under a member named `*_ref` (operation, selection, option).
fn collect_references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                match member.as_str() {
                    Some(text) if name.ends_with("_ref") => out.push(text.to_owned()),
                    _ => collect_references(member, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_references(i, out)),
        _ => {}
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Sweep {
    async fn admin(&mut self, args: &[&str], env: &[(&str, &str)]) -> Value {
        let mut command = warden_command(&self.db);
        command.args(args).env("WARDEN_LOG", LOG_FILTER);
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().await.unwrap();
        self.admin_logs
            .push(String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(
            out.status.success(),
            "warden {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The issued key is printed once, by design: that output alone may hold it.
        let mut scanned = value.clone();
        if let Some(o) = scanned.as_object_mut() {
            o.remove("api_key");
        }
        self.responses.push(Recorded {
            label: format!("warden {}", args.join(" ")),
            scanned: scanned.to_string(),
        });
        value
    }

    async fn start(&mut self, env: &[(&str, &str)]) -> ServerProcess {
        let mut all = vec![
            ("WARDEN_DEV_ALLOW_LOOPBACK", "1"),
            ("WARDEN_LOG", LOG_FILTER),
        ];
        all.extend_from_slice(env);
        let server = ServerProcess::start(&self.db, &all).await;
        self.address = server.address.clone();
        server
    }

    /// Sends, records the body (minus a revealed interaction) and returns it.
    async fn call(&mut self, label: &str, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text.clone()))
        };
        let mut scanned = body.clone();
        // A turn's `interaction` is where the host gets its references: the
        // only place they may be (a contract test shows only the public part).
        let mut revealed = Vec::new();
        if let Some(i) = scanned.get_mut("interaction") {
            revealed.push(i.take());
        }
        for revealed in &revealed {
            collect_references(revealed, &mut self.references);
        }
        self.responses.push(Recorded {
            label: format!("{label} ({status})"),
            scanned: scanned.to_string(),
        });
        (status, body)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// The running server's typed requests for the account of `key`.
    fn api(&self, key: &str) -> ApiClient {
        ApiClient::new(self.client.clone(), &self.address, key)
    }

    async fn put_credential(&mut self, reference: &str, body: Value) {
        let request = self.api(&self.key).put_credential(reference, &body);
        let (status, body) = self
            .call(&format!("PUT {reference}"), request.request())
            .await;
        assert_eq!(status, 201, "{body}");
    }

    async fn test_capability(&mut self, id: &str, arguments: Value) -> Value {
        let request = self.api(&self.key).test_capability(id, arguments);
        let (status, body) = self.call(&format!("test {id}"), request.request()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "passed", "{body}");
        body
    }

    async fn say(&mut self, conversation: Option<&str>, text: &str) -> Value {
        let mut message = json!({"user_id": "u-sweep", "message": {"type": "text", "body": text}});
        if let Some(c) = conversation {
            message["conversation_id"] = json!(c);
        }
        let request = self.api(&self.key).send_message(&message).request();
        let (status, body) = self.call(&format!("message {text:?}"), request).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn say_with_image(&mut self, text: &str, image: Vec<u8>) -> Value {
        let payload = json!({"user_id": "u-sweep", "message": {"type": "text", "body": text}});
        let form = crate::helpers::shop::message_with_image(&payload, image, "image/png");
        let request = self.api(&self.key).send_multipart(form).request();
        let (status, body) = self.call("message with an image", request).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn report(&mut self, conversation: &str, interaction: &str, key: &str) -> (u16, Value) {
        let result = json!({"interaction_id": interaction, "operation": "change_address",
            "status": "succeeded"});
        let api = self.api(&self.key);
        let request = api.report_operation_result(conversation, key, &result);
        self.call("operation result", request.request()).await
    }

    /// Everything stored: the SQLite files' bytes, or every PostgreSQL row as JSON text.
    async fn stored(&self, backend: Backend) -> Vec<u8> {
        if backend == Backend::Sqlite {
            return self.db.sqlite_bytes();
        }
        let store = warden::store::Store::connect(&self.db.url).await.unwrap();
        let warden::store::Store::Postgres(postgres) = &store else {
            unreachable!()
        };
        let pool = postgres.pool();
        let tables: Vec<(String,)> = sqlx::query_as(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        let mut dump = String::new();
        for (table,) in tables {
            let rows: Vec<(String,)> =
                sqlx::query_as(&format!("SELECT row_to_json(t)::text FROM \"{table}\" t"))
                    .fetch_all(pool)
                    .await
                    .unwrap();
            for (row,) in rows {
                dump.push_str(&format!("{table}: {row}\n"));
            }
        }
        store.close().await;
        dump.into_bytes()
    }
}

/// An endpoint for the api_key and basic credentials: a selection for a
/// return (fresh references each time) and a plain lookup.
async fn fake_endpoint() -> FakeEndpoint {
    FakeEndpoint::start(|request: Received| async move {
        let body = match request.uri.path() {
            "/returns/prepare" => json!({"type": "selection", "operation": "change_address",
                "selection_ref": unique("selref_"), "expires_at": "2099-01-01T00:00:00Z", "title": "¿Qué dirección?",
                "options": [{"option_ref": unique("optref_"), "label": "Casa"}, {"option_ref": unique("optref_"), "label": "Oficina"}]}),
            _ => json!({"status": "enviado", "carrier": "SEUR"}),
        };
        json_response(axum::http::StatusCode::OK, &body)
    })
    .await
}

/// The example host endpoint (it verifies the token and every signature).
async fn example_endpoint(token: &str, warden: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let endpoint = Endpoint::new(Config {
        token: token.into(),
        jwks_url: format!("{warden}/.well-known/service/capability-context/v1/jwks.json"),
        origin: origin.clone(),
    });
    let app: axum::Router = router(Arc::clone(&endpoint));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    origin
}

fn with_auth(mut definition: Value, name: &str, auth_type: &str, credential: &str) -> Value {
    definition["name"] = json!(name);
    definition["auth"] = json!({"type": auth_type, "credential_ref": credential});
    definition
}

async fn sigterm(mut server: ServerProcess) {
    let pid = server.child.id().unwrap().to_string();
    assert!(
        tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap()
            .success()
    );
    assert!(server.child.wait().await.unwrap().success());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_leak_sweep_after_a_workload_touching_every_secret(backend: Backend) {
    let scratch = tempfile::tempdir().unwrap();
    let mut sweep = Sweep {
        db: TestDb::new(backend).await,
        client: reqwest::Client::new(),
        key: String::new(),
        address: String::new(),
        responses: Vec::new(),
        references: Vec::new(),
        admin_logs: Vec::new(),
    };
    let mut secrets = Vec::new();

    // API keys, issued by the admin CLI; one is revoked.
    sweep
        .admin(&["admin", "account", "create", ACCOUNT], &[])
        .await;
    sweep
        .admin(&["admin", "account", "create", "neighbour"], &[])
        .await;
    sweep.key = sweep.admin(&["admin", "key", "issue", ACCOUNT], &[]).await["api_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let neighbour = sweep
        .admin(&["admin", "key", "issue", "neighbour"], &[])
        .await["api_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let revoked = sweep.admin(&["admin", "key", "issue", ACCOUNT], &[]).await;
    sweep
        .admin(
            &[
                "admin",
                "key",
                "revoke",
                revoked["key_id"].as_str().unwrap(),
            ],
            &[],
        )
        .await;
    let revoked = revoked["api_key"].as_str().unwrap().to_owned();
    for key in [&sweep.key, &neighbour, &revoked] {
        secrets.push(Secret::text("API key", key));
    }

    let server = sweep.start(&[]).await;
    let mut logs = vec![server.logs.clone()];

    // Credentials of each auth type; one rotated, one revoked.
    let bearer = unique("bearer-token-");
    let api_key = unique("api-key-");
    let basic_plain = format!("sweep-user:{}", unique("pass-"));
    let basic = STANDARD.encode(&basic_plain);
    let (rotated_old, rotated_new) = (unique("rotated-old-"), unique("rotated-new-"));
    let revoked_secret = unique("revoked-");
    for (reference, credential) in [
        (
            "cred_bearer",
            json!({"auth_type": "bearer", "secret": bearer}),
        ),
        (
            "cred_apikey",
            json!({"auth_type": "api_key", "header_name": "x-api-token", "secret": api_key}),
        ),
        ("cred_basic", json!({"auth_type": "basic", "secret": basic})),
        (
            "cred_rotated",
            json!({"auth_type": "bearer", "secret": rotated_old}),
        ),
        (
            "cred_rotated",
            json!({"auth_type": "bearer", "secret": rotated_new}),
        ),
        (
            "cred_revoked",
            json!({"auth_type": "api_key", "header_name": "x-api-key", "secret": revoked_secret}),
        ),
    ] {
        sweep.put_credential(reference, credential).await;
    }
    let request = sweep.api(&sweep.key).delete_credential("cred_revoked");
    let (status, _) = sweep.call("DELETE cred_revoked", request.request()).await;
    assert_eq!(status, 200);
    for (kind, value) in [
        ("bearer credential", &bearer),
        ("api_key credential", &api_key),
        ("basic credential", &basic),
        ("basic credential, decoded", &basic_plain),
        ("rotated-out credential", &rotated_old),
        ("rotated-in credential", &rotated_new),
        ("revoked credential", &revoked_secret),
    ] {
        secrets.push(Secret::text(kind, value));
    }

    // Capabilities on the example endpoint (bearer) and on a recording one (api_key, basic).
    let example = example_endpoint(&bearer, &server.address).await;
    let fake = fake_endpoint().await;
    let mut prepare_return = with_auth(
        prepare_address_change(&fake.base),
        "prepare_return",
        "api_key",
        "cred_apikey",
    );
    prepare_return["url"] = json!(format!("{}/returns/prepare", fake.base));
    prepare_return["description"] = json!("Prepara la devolución de un pedido");
    prepare_return["when_to_use"] = json!("Cuando el usuario quiere devolver un pedido");
    let mut basic_lookup = with_auth(
        valid_definition("basic_lookup"),
        "basic_lookup",
        "basic",
        "cred_basic",
    );
    basic_lookup["url"] = json!(format!("{}/basic/lookup", fake.base));
    let mut rotated_lookup = with_auth(
        valid_definition("rotated_lookup"),
        "rotated_lookup",
        "bearer",
        "cred_rotated",
    );
    rotated_lookup["url"] = json!(format!("{}/rotated/lookup", fake.base));
    let manifest = vec![
        with_auth(
            order_status(&example),
            "order_status",
            "bearer",
            "cred_bearer",
        ),
        with_auth(
            prepare_address_change(&example),
            "prepare_address_change",
            "bearer",
            "cred_bearer",
        ),
        prepare_return,
        basic_lookup,
        rotated_lookup,
    ];
    // Sent twice with one idempotency key: the second is the replay.
    let import = sweep
        .api(&sweep.key)
        .import_capabilities(&new_key(), manifest);
    let import = import.request();
    let (status, imported) = sweep.call("import", import.try_clone().unwrap()).await;
    assert_eq!(status, 201, "{imported}");
    let (status, _) = sweep.call("import replay", import).await;
    assert_eq!(status, 201);
    let ids: Vec<String> = imported["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();

    // Every credential is sent to an endpoint.
    let order = json!({"order": "A-1001"});
    sweep.test_capability(&ids[0], order.clone()).await;
    sweep.test_capability(&ids[1], order.clone()).await;
    sweep
        .test_capability(&ids[2], json!({"order": "A-2002"}))
        .await;
    sweep.test_capability(&ids[3], order.clone()).await;
    sweep.test_capability(&ids[4], order.clone()).await;

    // Turns: a lookup, an address change with an image, its result, a follow-up.
    sweep.say(None, "¿Dónde está mi pedido A-1001?").await;
    let mut image = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde".to_vec();
    image.extend_from_slice(IMAGE_MARKER);
    let distinctive: Vec<u8> = (0..64u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    image.extend_from_slice(&distinctive);
    image.extend(std::iter::repeat_n(0x5Au8, 1024));
    secrets.push(Secret::text(
        "image marker",
        std::str::from_utf8(IMAGE_MARKER).unwrap(),
    ));
    secrets.push(Secret::bytes("image bytes", &distinctive));
    secrets.push(Secret::text(
        "whole image, base64",
        &STANDARD.encode(&image),
    ));
    let turn = sweep
        .say_with_image(
            "Quiero cambiar la dirección de envío del pedido A-1001",
            image,
        )
        .await;
    let conversation = turn["conversation_id"].as_str().unwrap().to_owned();
    let interaction = turn["interaction"]["interaction_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no interaction: {turn}"))
        .to_owned();
    let result_key = new_key();
    assert_eq!(
        sweep
            .report(&conversation, &interaction, &result_key)
            .await
            .0,
        200
    );
    assert_eq!(
        sweep
            .report(&conversation, &interaction, &result_key)
            .await
            .0,
        200,
        "replay"
    );
    sweep.say(Some(&conversation), "gracias").await;
    let turn = sweep.say(None, "Quiero devolver el pedido A-2002").await;
    assert_eq!(turn["interaction"]["type"], "selection", "{turn}");
    let policy = json!({"version": 1, "instructions": "Responde en español."});
    let request = sweep.api(&sweep.key).put_policy(&policy).request();
    assert_eq!(sweep.call("PUT policy", request).await.0, 201);
    for path in [
        "/v1/capabilities",
        &format!("/v1/capabilities/{}", ids[1]),
        "/v1/agent-policy",
        "/v1/diagnostics/capability-gaps",
        "/.well-known/service/capability-context/v1/jwks.json",
    ] {
        let request = sweep.api(&sweep.key).get(path).request();
        assert_eq!(
            sweep.call(&format!("GET {path}"), request).await.0,
            200,
            "{path}"
        );
    }
    let request = sweep.api(&neighbour).list_capabilities().request();
    assert_eq!(
        sweep
            .call("GET /v1/capabilities (neighbour)", request)
            .await
            .0,
        200
    );
    let request = sweep.api(&revoked).list_capabilities().request();
    assert_eq!(
        sweep
            .call("GET /v1/capabilities (revoked key)", request)
            .await
            .0,
        401
    );

    // A signing-key rotation; the example endpoint meets the new kid and refetches.
    sweep
        .admin(
            &["admin", "signing-key", "rotate", "--activate-in-secs", "0"],
            &[("WARDEN_MASTER_KEY", MASTER_KEY)],
        )
        .await;
    tokio::time::sleep(warden::signing::KEY_RECHECK + std::time::Duration::from_millis(200)).await;
    sweep.test_capability(&ids[0], order.clone()).await;
    let turn = sweep
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )
        .await;
    assert!(turn["interaction"]["operation_ref"].is_string(), "{turn}");
    sigterm(server).await;

    // A master-key rotation, then the resealed credentials in use under the new key.
    let old_key_file = scratch.path().join("previous.key");
    std::fs::write(&old_key_file, MASTER_KEY).unwrap();
    let previous = old_key_file.to_str().unwrap();
    let rotation = [
        ("WARDEN_MASTER_KEY", NEXT_MASTER_KEY),
        ("WARDEN_MASTER_KEY_PREVIOUS_FILE", previous),
    ];
    sweep
        .admin(&["admin", "master-key", "rotate"], &rotation)
        .await;
    let server = sweep.start(&rotation).await;
    logs.push(server.logs.clone());
    for id in &ids[2..] {
        sweep.test_capability(id, json!({"order": "A-2002"})).await;
    }
    sweep.test_capability(&ids[1], order.clone()).await;
    let turn = sweep
        .say(
            None,
            "Quiero cambiar la dirección de envío del pedido A-1001",
        )
        .await;
    assert!(turn["interaction"]["operation_ref"].is_string(), "{turn}");
    sigterm(server).await;

    // The configured secrets of the model and of the messaging platform:
    // an inference API key, the webhook's verify token and app secret, a
    // number's sealed access token and the fallback one, each in use.
    let model = FakeInference::start(vec![FakeReply::text("Hola, ¿en qué puedo ayudarte?")]).await;
    let send_api = FakeSendApi::start().await;
    let inference_key = unique("sk-inference-");
    let verify_token = unique("verify-");
    let app_secret = unique("app-secret-");
    let number_token = unique("EAAG-number-");
    let fallback_token = unique("EAAG-fallback-");
    let token_file = scratch.path().join("number.token");
    std::fs::write(&token_file, format!("{number_token}\n")).unwrap();
    let (model_url, send_url) = (model.base_url(), send_api.base_url());
    // One number with its own sealed token, one falling back to the server's.
    let token_path = token_file.to_str().unwrap();
    for (number, token) in [("5550001", Some(token_path)), ("5550002", None)] {
        let mut args = vec!["admin", "webhook", "register", "--account", ACCOUNT];
        args.extend(["--phone-number-id", number]);
        if let Some(path) = token {
            args.extend(["--access-token-file", path]);
        }
        sweep.admin(&args, &rotation).await;
    }
    let mut configured = rotation.to_vec();
    configured.extend([
        ("WARDEN_INFERENCE_URL", model_url.as_str()),
        ("WARDEN_INFERENCE_MODEL", "fake-model"),
        ("WARDEN_INFERENCE_API_KEY", inference_key.as_str()),
        ("WARDEN_WEBHOOK_VERIFY_TOKEN", verify_token.as_str()),
        ("WARDEN_WEBHOOK_APP_SECRET", app_secret.as_str()),
        ("WARDEN_PLATFORM_API_URL", send_url.as_str()),
        ("WARDEN_PLATFORM_ACCESS_TOKEN", fallback_token.as_str()),
    ]);
    let server = sweep.start(&configured).await;
    logs.push(server.logs.clone());
    sweep.say(None, "Hola").await;
    let handshake = format!(
        "/v1/webhooks/platform?hub.mode=subscribe&hub.verify_token={verify_token}&hub.challenge=sweep-challenge"
    );
    let request = sweep.client.get(sweep.url(&handshake));
    assert_eq!(sweep.call("webhook handshake", request).await.0, 200);
    let wrong = "/v1/webhooks/platform?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=c";
    let request = sweep.client.get(sweep.url(wrong));
    assert_eq!(
        sweep
            .call("webhook handshake, wrong token", request)
            .await
            .0,
        403
    );
    for (number, id) in [("5550001", "wamid.sweep-1"), ("5550002", "wamid.sweep-2")] {
        let delivery =
            serde_json::to_vec(&json!({"object": "whatsapp_business_account", "entry": [{
            "id": "waba-1", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550001111", "phone_number_id": number},
                "messages": [{"from": "34600000001", "id": id, "timestamp": "1763900000",
                    "type": "text", "text": {"body": "Hola"}}]}}]}]}))
            .unwrap();
        let good = warden::platform::webhook::sign(&app_secret, &delivery);
        let bad = format!("sha256={}", "0".repeat(64));
        for (label, signature, expected) in [("signed", good, 200), ("bad signature", bad, 401)] {
            let request = sweep
                .client
                .post(sweep.url("/v1/webhooks/platform"))
                .header("content-type", "application/json")
                .header("x-hub-signature-256", signature)
                .body(delivery.clone());
            let label = format!("webhook delivery, {label}");
            assert_eq!(sweep.call(&label, request).await.0, expected);
        }
    }
    let replies = send_api.wait_for(2, 30).await;
    sigterm(server).await;
    // Each secret did reach the party it is for.
    let mut authorizations: Vec<String> = replies.iter().map(|r| r.authorization.clone()).collect();
    authorizations.sort();
    let mut expected = vec![
        format!("Bearer {fallback_token}"),
        format!("Bearer {number_token}"),
    ];
    expected.sort();
    assert_eq!(authorizations, expected);
    assert!(
        model.recorded().iter().any(|r| r
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            == Some(format!("Bearer {inference_key}").as_str())),
        "the model got the inference key"
    );
    for (kind, value) in [
        ("inference API key", &inference_key),
        ("webhook verify token", &verify_token),
        ("webhook app secret", &app_secret),
        ("number access token", &number_token),
        ("fallback access token", &fallback_token),
    ] {
        secrets.push(Secret::text(kind, value));
    }

    for key in [MASTER_KEY, NEXT_MASTER_KEY] {
        secrets.push(Secret::text("master key (base64)", key));
        secrets.push(Secret::bytes(
            "master key",
            MasterKey::from_base64(key).unwrap().bytes(),
        ));
    }

    // The signing keys' private halves, opened here with both master keys.
    let store = warden::store::Store::connect(&sweep.db.url).await.unwrap();
    let keyring = Keyring::new(
        MasterKey::from_base64(NEXT_MASTER_KEY).unwrap(),
        vec![MasterKey::from_base64(MASTER_KEY).unwrap()],
    );
    let rows = store.published_signing_keys(0).await.unwrap();
    assert_eq!(rows.len(), 2, "the first key and the rotated-in one");
    for row in &rows {
        let private = warden::signing::keys::open_private(&keyring, row).unwrap();
        secrets.push(Secret::bytes("signing private key", private.as_bytes()));
        secrets.push(Secret::bytes(
            "signing keypair",
            &private.to_keypair_bytes(),
        ));
    }
    store.close().await;

    // The endpoints did get every credential, so their absence elsewhere means something.
    let seen: Vec<String> = fake
        .received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| {
            ["authorization", "x-api-token"]
                .map(|h| r.headers.get(h).map(|v| v.to_str().unwrap().to_owned()))
        })
        .flatten()
        .collect();
    for expected in [
        format!("Basic {basic}"),
        format!("Bearer {rotated_new}"),
        api_key.clone(),
    ] {
        assert!(
            seen.contains(&expected),
            "the endpoint never got {expected}"
        );
    }
    let revealed = |prefix: &str| {
        sweep
            .references
            .iter()
            .filter(|r| r.starts_with(prefix))
            .count()
    };
    assert_eq!(
        (
            revealed("addrchg_"),
            revealed("selref_"),
            revealed("optref_")
        ),
        (3, 1, 2),
        "{:?}",
        sweep.references
    );
    for reference in &sweep.references {
        secrets.push(Secret::text("opaque interaction reference", reference));
    }

    // Where to look: the database, the log file, the responses.
    let stored = sweep.stored(backend).await;
    let log_file = scratch.path().join("warden.log");
    let mut lines: Vec<String> = logs
        .iter()
        .flat_map(|l| l.lock().unwrap().clone())
        .collect();
    lines.extend(
        sweep
            .admin_logs
            .iter()
            .flat_map(|l| l.lines().map(str::to_owned)),
    );
    std::fs::write(&log_file, lines.join("\n")).unwrap();
    let log = std::fs::read(&log_file).unwrap();
    // The scan does see what is there in clear.
    let clear_rows_found = find(&stored, ACCOUNT.as_bytes()).is_some()
        && find(&stored, "Responde en español.".as_bytes()).is_some();
    assert!(clear_rows_found, "the scan reads the stored rows");
    assert!(
        find(&log, b"warden is listening").is_some() && find(&log, br#""level":"DEBUG""#).is_some(),
        "verbose logs were captured"
    );
    assert!(
        sweep.responses.iter().any(|r| r.scanned.contains(&ids[0])),
        "responses were recorded"
    );

    let mut hits = Vec::new();
    for secret in &secrets {
        for (form, needle) in &secret.forms {
            if let Some(at) = find(&stored, needle) {
                hits.push(format!(
                    "{} ({form}) in the database at byte {at}",
                    secret.kind
                ));
            }
            if let Some(at) = find(&log, needle) {
                let line = log[..at].iter().filter(|&&b| b == b'\n').count() + 1;
                hits.push(format!(
                    "{} ({form}) in {} line {line}: {}",
                    secret.kind,
                    log_file.display(),
                    lines[line - 1]
                ));
            }
            for response in &sweep.responses {
                if find(response.scanned.as_bytes(), needle).is_some() {
                    hits.push(format!(
                        "{} ({form}) in the response to {}: {}",
                        secret.kind, response.label, response.scanned
                    ));
                }
            }
        }
    }
    eprintln!(
        "secret sweep {backend:?}: {} secrets ({} forms) against {} stored bytes, {} log lines, {} responses",
        secrets.len(),
        secrets.iter().map(|s| s.forms.len()).sum::<usize>(),
        stored.len(),
        lines.len(),
        sweep.responses.len()
    );
    assert!(hits.is_empty(), "secrets leaked:\n{}", hits.join("\n"));
}
