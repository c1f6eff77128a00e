//! U+0000 at every edge where request text enters (issue 24). PostgreSQL's
//! text cannot hold it, so no route may hand one to the store: each refuses
//! it with the status and code it declares, in its error shape, the same on
//! both databases, and stores nothing. One row per field; a JSON body is
//! sent twice, with the character escaped (`\u0000`, valid JSON) and raw
//! (a control character inside a string, invalid JSON).

use crate::helpers::fake_inference::FakeReply;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use crate::prompt_integrations::{Forms, GOOD_OUTPUT, IP_HEADER, ORIGIN};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden::api::error;

/// Where a row's body holds U+0000; replaced by the escaped or the raw form.
const NUL: &str = "<NUL>";

/// What a route answers: its status and code (the shape follows the path).
#[derive(Clone, Copy)]
struct Answer {
    status: u16,
    code: &'static str,
}

const fn answer(status: u16, code: &'static str) -> Answer {
    Answer { status, code }
}

const FLAT_INVALID: Answer = answer(400, "INVALID_JSON");
const NESTED_INVALID: Answer = answer(422, "VALIDATION_ERROR");
/// The capability test declares no 400: a refused body is a failed test.
const TEST_REFUSED: Answer = answer(200, "arguments_invalid");

struct Row {
    what: &'static str,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, String)>,
    /// JSON text holding [`NUL`] (or none for path and query rows).
    body: Option<String>,
    /// Text next to the NUL that must never be stored.
    marker: &'static str,
    /// With the NUL escaped (or in the path or query).
    escaped: Answer,
    /// With the NUL raw in the body.
    raw: Answer,
}

fn row(what: &'static str, method: &'static str, path: &str, marker: &'static str) -> Row {
    Row {
        what,
        method,
        path: path.to_owned(),
        headers: Vec::new(),
        body: None,
        marker,
        escaped: FLAT_INVALID,
        raw: FLAT_INVALID,
    }
}

impl Row {
    fn body(mut self, body: Value) -> Self {
        self.body = Some(body.to_string());
        self
    }
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
    fn answers(mut self, escaped: Answer, raw: Answer) -> Self {
        self.escaped = escaped;
        self.raw = raw;
        self
    }
}

/// `text` with the NUL placeholder written as JSON's escape or raw.
fn with_nul(text: &str, raw: bool) -> String {
    text.replace(NUL, if raw { "\u{0}" } else { "\\u0000" })
}

/// What is wrong with an answer, if anything.
fn mismatch(row: &Row, form: &str, status: u16, body: &Value, expected: Answer) -> Option<String> {
    let code = if status == 200 {
        body["status"]
            .as_str()
            .filter(|s| *s == "failed")
            .and(body["reason"].as_str())
    } else if error::ErrorShape::for_path(&row.path) == error::ErrorShape::Nested {
        body["error"]["code"]
            .as_str()
            .filter(|_| body["error"]["message"].is_string())
    } else {
        body["code"].as_str().filter(|_| body["error"].is_string())
    };
    (status != expected.status || code != Some(expected.code)).then(|| {
        format!(
            "{} ({form}): expected {} {}, got {status} {body}",
            row.what, expected.status, expected.code
        )
    })
}

async fn send(app: &TestApp, key: &str, row: &Row, body: Option<String>) -> (u16, Value) {
    let mut request = app
        .client
        .request(row.method.parse().unwrap(), app.url(&row.path))
        .bearer_auth(key);
    for (name, value) in &row.headers {
        request = request.header(*name, value);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    status_and_json(request.send().await.unwrap()).await
}

/// A request whose header `name` holds a raw NUL, written on the socket
/// (no HTTP client sends one): the status line's code.
async fn raw_header_status(app: &TestApp, key: &str, row: &Row, name: &str, value: &str) -> u16 {
    let body = row
        .body
        .as_deref()
        .map_or(String::new(), |b| with_nul(b, false));
    let request = format!(
        "{} {} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n{name}: {value}\r\n\r\n{body}",
        row.method,
        row.path,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(app.address.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    let line = String::from_utf8_lossy(&head);
    line[9..12].parse().unwrap_or_else(|_| panic!("{line:?}"))
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_anywhere_in_request_text_is_refused_as_declared_and_never_stored(backend: Backend) {
    let forms = Forms::open_with_model(backend, vec![FakeReply::text(GOOD_OUTPUT)]).await;
    let app = &forms.app;
    let key = account_ready(app, "acme").await;
    let (status, created) = app
        .create_capability(&key, valid_definition("order_status"))
        .await;
    assert_eq!(status, 201, "{created}");
    let cap = created["id"].as_str().unwrap().to_owned();

    let mut definition = valid_definition("nul_create");
    definition["description"] = json!(format!("NULMARK-CREATE {NUL}"));
    let mut imported = valid_definition(&format!("NULMARK_IMPORT{NUL}"));
    imported["description"] = json!("an ordinary description");
    let mut revised = valid_definition("order_status");
    revised["description"] = json!(format!("NULMARK-PATCH {NUL}"));
    let execute = format!("/v1/prompt-integrations/{}/execute", forms.id);
    // The body is judged before the conversation is looked up.
    let results = "/v1/conversations/conv_unknown/operation-results";

    let rows = vec![
        // Flat routes: INVALID_JSON (400).
        row("policy instructions", "PUT", "/v1/agent-policy", "NULMARK-POLICY")
            .body(json!({"version": 1, "instructions": format!("NULMARK-POLICY {NUL}")})),
        row("policy topic", "PUT", "/v1/agent-policy", "NULMARK-TOPIC").body(json!({
            "version": 1,
            "allowed_topics": [{"name": format!("NULMARK-TOPIC{NUL}"), "description": "d"}]
        })),
        row("policy key", "PUT", "/v1/agent-policy", "NULMARK-PKEY")
            .body(json!({"version": 1, "instructions": "x", format!("NULMARK-PKEY{NUL}"): 1})),
        row(
            "diagnostics settings",
            "PUT",
            "/v1/diagnostics/settings",
            "NULMARK-MODE",
        )
        .body(json!({"diagnostic_message_mode": format!("text{NUL}NULMARK-MODE")})),
        row(
            "credential secret",
            "PUT",
            "/v1/capability-credentials/cred_nul_secret",
            "NULMARK-SECRET",
        )
        .body(json!({"auth_type": "bearer", "secret": format!("NULMARK-SECRET{NUL}")})),
        row(
            "capability create",
            "POST",
            "/v1/capabilities",
            "NULMARK-CREATE",
        )
        .header("idempotency-key", "NULMARK-IDEM-CREATE")
        .body(json!({"domain": "orders", "capability": definition})),
        row(
            "capability import",
            "POST",
            "/v1/capabilities/import",
            "NULMARK_IMPORT",
        )
        .header("idempotency-key", "NULMARK-IDEM-IMPORT")
        .body(json!({"domain": "orders", "capabilities": [imported]})),
        row(
            "capability domain",
            "POST",
            "/v1/capabilities",
            "NULMARK-DOMAIN",
        )
        .header("idempotency-key", "NULMARK-IDEM-DOMAIN")
        .body(json!({"domain": format!("NULMARK-DOMAIN{NUL}"),
                     "capability": valid_definition("nul_domain")})),
        row(
            "capability PATCH",
            "PATCH",
            &format!("/v1/capabilities/{cap}"),
            "NULMARK-PATCH",
        )
        .header("if-match", "1")
        .body(json!({"domain": "orders", "capability": revised})),
        row(
            "contract-test arguments",
            "POST",
            &format!("/v1/capabilities/{cap}/test"),
            "NULMARK-ARGS",
        )
        .body(json!({"arguments": {"order": format!("NULMARK-ARGS{NUL}")}}))
        .answers(TEST_REFUSED, TEST_REFUSED),
        row(
            "operation result",
            "POST",
            results,
            "NULMARK-RESULT",
        )
        .header("idempotency-key", "NULMARK-IDEM-RESULT")
        .body(json!({"interaction_id": format!("int_NULMARK-RESULT{NUL}"),
                     "operation": "change_address", "status": "succeeded"})),
        // Path and query values: each route's own refusal.
        row(
            "credentialRef (PUT)",
            "PUT",
            "/v1/capability-credentials/cred_NULMARK%00x",
            "cred_NULMARK",
        )
        .body(json!({"auth_type": "bearer", "secret": "s3cret-value"}))
        .answers(answer(400, "BAD_REQUEST"), answer(400, "BAD_REQUEST")),
        row(
            "credentialRef (DELETE)",
            "DELETE",
            "/v1/capability-credentials/cred_NULMARKdel%00",
            "cred_NULMARKdel",
        )
        .answers(answer(404, "NOT_FOUND"), answer(404, "NOT_FOUND")),
        row(
            "capabilityId",
            "GET",
            "/v1/capabilities/cap_nulmarkget%00def",
            "cap_nulmarkget",
        )
        .answers(answer(404, "NOT_FOUND"), answer(404, "NOT_FOUND")),
        row(
            "capabilityId (test)",
            "POST",
            "/v1/capabilities/cap_nulmarktest%00def/test",
            "cap_nulmarktest",
        )
        .body(json!({"arguments": {}}))
        .answers(answer(404, "NOT_FOUND"), answer(404, "NOT_FOUND")),
        row(
            "conversationId",
            "POST",
            "/v1/conversations/conv_NULMARK%00/operation-results",
            "conv_NULMARK",
        )
        .header("idempotency-key", "NULMARK-IDEM-CONV")
        .body(json!({"interaction_id": "int_x", "operation": "change_address", "status": "succeeded"}))
        .answers(answer(400, "BAD_REQUEST"), answer(400, "BAD_REQUEST")),
        row(
            "gaps before_id",
            "GET",
            "/v1/diagnostics/capability-gaps?before=2024-01-01T00:00:00Z&before_id=evt_NULMARK%00",
            "evt_NULMARK",
        )
        .answers(answer(400, "BAD_REQUEST"), answer(400, "BAD_REQUEST")),
        row(
            "gaps before",
            "GET",
            "/v1/diagnostics/capability-gaps?before=2024-01-01T00:00:00Z%00&before_id=NULMARK-BEFORE",
            "NULMARK-BEFORE",
        )
        .answers(answer(400, "BAD_REQUEST"), answer(400, "BAD_REQUEST")),
        // The HTTP channel (nested): VALIDATION_ERROR (422).
        row(
            "message body",
            "POST",
            "/v1/channels/http/messages",
            "NULMARK-BODY",
        )
        .body(json!({"message": {"type": "text", "body": format!("NULMARK-BODY {NUL}")}}))
        .answers(NESTED_INVALID, NESTED_INVALID),
        row(
            "message user_id",
            "POST",
            "/v1/channels/http/messages",
            "NULMARK-USER",
        )
        .body(json!({"user_id": format!("NULMARK-USER{NUL}"),
                     "message": {"type": "text", "body": "hola"}}))
        .answers(NESTED_INVALID, NESTED_INVALID),
        row(
            "message conversation_id",
            "POST",
            "/v1/channels/http/messages",
            "NULMARK-CONV",
        )
        .body(json!({"conversation_id": format!("NULMARK-CONV{NUL}"),
                     "message": {"type": "text", "body": "hola"}}))
        .answers(NESTED_INVALID, NESTED_INVALID),
        row(
            "message metadata value",
            "POST",
            "/v1/channels/http/messages",
            "NULMARK-META",
        )
        .body(json!({"message": {"type": "text", "body": "hola"},
                     "metadata": {"cart": {"items": [format!("NULMARK-META{NUL}")]}}}))
        .answers(NESTED_INVALID, NESTED_INVALID),
        row(
            "message metadata key",
            "POST",
            "/v1/channels/http/messages",
            "NULMARK-MKEY",
        )
        .body(json!({"message": {"type": "text", "body": "hola"},
                     "metadata": {"cart": {format!("NULMARK-MKEY{NUL}"): 1}}}))
        .answers(NESTED_INVALID, NESTED_INVALID),
        // Prompt integrations (nested): a malformed body is 400, a value
        // the body's schema refuses 422.
        row("execute input", "POST", &execute, "NULMARK-INPUT")
            .header("origin", ORIGIN)
            .header(IP_HEADER, "198.51.100.1")
            .body(json!({"input": {"topic": format!("NULMARK-INPUT{NUL}")},
                         "challenge_token": forms.token()}))
            .answers(NESTED_INVALID, answer(400, "BAD_REQUEST")),
        row("execute input key", "POST", &execute, "NULMARK-IKEY")
            .header("origin", ORIGIN)
            .header(IP_HEADER, "198.51.100.2")
            .body(json!({"input": {format!("NULMARK-IKEY{NUL}"): "boots"},
                         "challenge_token": forms.token()}))
            .answers(NESTED_INVALID, answer(400, "BAD_REQUEST")),
        row("execute token", "POST", &execute, "NULMARK-TOKEN")
            .header("origin", ORIGIN)
            .header(IP_HEADER, "198.51.100.3")
            .body(json!({"input": {"topic": "boots"},
                         "challenge_token": format!("{}NULMARK-TOKEN{NUL}", forms.token())}))
            .answers(NESTED_INVALID, answer(400, "BAD_REQUEST")),
        row(
            "publicId",
            "POST",
            "/v1/prompt-integrations/pi_public_NULMARKaaaaaaaaaa%00/execute",
            "pi_public_NULMARK",
        )
        .header("origin", ORIGIN)
        .body(json!({"input": {"topic": "boots"}, "challenge_token": "t"}))
        .answers(answer(404, "NOT_FOUND"), answer(404, "NOT_FOUND")),
    ];

    let mut wrong = Vec::new();
    for row in &rows {
        let forms_of_body: &[bool] = if row.body.as_deref().is_some_and(|b| b.contains(NUL)) {
            &[false, true]
        } else {
            &[false]
        };
        for &raw in forms_of_body {
            let body = row.body.as_deref().map(|b| with_nul(b, raw));
            let (status, answered) = send(app, &key, row, body).await;
            let (form, expected) = if raw {
                ("raw", row.raw)
            } else {
                ("escaped", row.escaped)
            };
            wrong.extend(mismatch(row, form, status, &answered, expected));
        }
    }

    // The multipart payload, with an image and without one.
    let png = crate::helpers::shop::png_with_marker();
    for raw in [false, true] {
        for image in [false, true] {
            let payload = with_nul(
                &json!({"message": {"type": "text", "body": format!("NULMARK-MULTI{NUL}")}})
                    .to_string(),
                raw,
            );
            let mut form = reqwest::multipart::Form::new().part(
                "payload",
                reqwest::multipart::Part::text(payload)
                    .mime_str("application/json")
                    .unwrap(),
            );
            if image {
                form = form.part(
                    "image",
                    reqwest::multipart::Part::bytes(png.clone())
                        .file_name("x.png")
                        .mime_str("image/png")
                        .unwrap(),
                );
            }
            let (status, body) = app.send_multipart(&key, form).await;
            let multipart = row(
                "multipart payload",
                "POST",
                "/v1/channels/http/messages",
                "",
            );
            let form = format!("raw {raw}, image {image}");
            wrong.extend(mismatch(&multipart, &form, status, &body, NESTED_INVALID));
        }
    }

    // Headers: no client sends a raw NUL in a header; written on the socket,
    // the HTTP parser refuses the request before any route runs.
    let header_rows = [
        (
            row("Client-Event-Id", "POST", "/v1/channels/http/messages", "")
                .body(json!({"message": {"type": "text", "body": "hola"}})),
            "client-event-id",
            "NULMARK-EVENT\u{0}x",
        ),
        (
            row("Idempotency-Key", "POST", "/v1/capabilities", "")
                .body(json!({"domain": "orders", "capability": valid_definition("nul_idem")})),
            "idempotency-key",
            "NULMARK-IDEM-HDR\u{0}x",
        ),
        (
            row("If-Match", "PATCH", &format!("/v1/capabilities/{cap}"), "")
                .body(json!({"domain": "orders", "capability": valid_definition("order_status")})),
            "if-match",
            "1\u{0}NULMARK-IFMATCH",
        ),
    ];
    for (row, name, value) in &header_rows {
        let status = raw_header_status(app, &key, row, name, value).await;
        if status != 400 {
            wrong.push(format!("{} with a raw NUL: {status}", row.what));
        }
    }

    // The operator's manifest: escaped and raw, refused naming the character.
    let mut manifest = crate::prompt_integrations::manifest();
    manifest["prompt"] = json!(format!("NULMARK-MANIFEST {NUL} write a title"));
    for raw in [false, true] {
        let text = with_nul(&manifest.to_string(), raw);
        match crate::prompt_integrations::create_from_text(app, &text).await {
            Ok(_) => wrong.push(format!("manifest (raw {raw}): accepted")),
            Err(err) if !raw && !err.contains("U+0000") => {
                wrong.push(format!("manifest (escaped): {err}"))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Nothing stored.
    let markers = rows.iter().map(|r| r.marker).chain([
        "NULMARK-MULTI",
        "NULMARK-EVENT",
        "NULMARK-IDEM",
        "NULMARK-IFMATCH",
        "NULMARK-MANIFEST",
    ]);
    for marker in markers {
        assert!(!app.db.contains(marker).await, "{marker} was stored");
    }
    assert_eq!(app.get_policy(&key).await.0, 404, "no policy stored");
    let (_, listed) = answer_of(app, &key, "/v1/capabilities").await;
    assert_eq!(
        listed["capabilities"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let (_, current) = answer_of(app, &key, &format!("/v1/capabilities/{cap}")).await;
    assert_eq!(current["revision"], 1, "{current}");
    assert_eq!(
        app.delete_credential(&key, "cred_nul_secret").await.0,
        404,
        "no credential stored"
    );
    let day = warden::prompt::utc_day(warden::clock::now_millis());
    assert!(
        app.store
            .prompt_usage(&forms.id, &day)
            .await
            .unwrap()
            .is_empty(),
        "no execution counted"
    );
    let integrations = admin(
        &app.store,
        warden::cli::AdminCommand::PromptIntegration(warden::cli::PromptIntegrationCommand::List {
            account: "forms".into(),
            bundle: crate::prompt_integrations::bundle_args(),
        }),
    )
    .await;
    assert_eq!(
        integrations["prompt_integrations"].as_array().map(Vec::len),
        Some(1),
        "no integration stored"
    );
}

async fn answer_of(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    status_and_json(
        app.client
            .get(app.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap(),
    )
    .await
}
