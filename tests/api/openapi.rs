//! The machine-readable contract (section 9, issue 15): `GET /openapi.json`
//! is an OpenAPI 3.1 document of `info.version` 7.0.0 listing every route
//! of contract section 4 that exists, equal to the checked-in
//! `docs/openapi.json`; every documented operation is routed and no route
//! bypasses the document; the docs UI is off unless enabled.

use crate::helpers::*;
use serde_json::Value;
use std::path::PathBuf;

fn checked_in() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    let text = std::fs::read_to_string(&path).expect("docs/openapi.json exists");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

async fn served(app: &TestApp) -> Value {
    let response = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "served as JSON"
    );
    response.json().await.unwrap()
}

/// (method, path, operationId, authenticated) of every contract route that exists.
const CONTRACT_OPERATIONS: &[(&str, &str, &str, bool)] = &[
    ("get", "/health", "getHealth", false),
    (
        "options",
        "/v1/prompt-integrations/{publicId}/execute",
        "preflightPromptIntegration",
        false,
    ),
    (
        "post",
        "/v1/prompt-integrations/{publicId}/execute",
        "executePromptIntegration",
        false,
    ),
    (
        "get",
        "/v1/webhooks/platform",
        "verifyPlatformWebhook",
        false,
    ),
    (
        "post",
        "/v1/webhooks/platform",
        "receivePlatformWebhook",
        false,
    ),
    (
        "get",
        "/.well-known/service/capability-context/v1/jwks.json",
        "getCapabilityContextKeys",
        false,
    ),
    (
        "post",
        "/v1/channels/http/messages",
        "sendHttpMessage",
        true,
    ),
    (
        "post",
        "/v1/conversations/{conversationId}/operation-results",
        "reportHostOperationResult",
        true,
    ),
    ("get", "/v1/agent-policy", "getAgentPolicy", true),
    ("put", "/v1/agent-policy", "putAgentPolicy", true),
    ("delete", "/v1/agent-policy", "deleteAgentPolicy", true),
    (
        "get",
        "/v1/diagnostics/settings",
        "getDiagnosticSettings",
        true,
    ),
    (
        "put",
        "/v1/diagnostics/settings",
        "putDiagnosticSettings",
        true,
    ),
    (
        "get",
        "/v1/diagnostics/capability-gaps",
        "listCapabilityGaps",
        true,
    ),
    (
        "put",
        "/v1/capability-credentials/{credentialRef}",
        "putCapabilityCredential",
        true,
    ),
    (
        "delete",
        "/v1/capability-credentials/{credentialRef}",
        "revokeCapabilityCredential",
        true,
    ),
    ("get", "/v1/capabilities", "listCapabilities", true),
    ("post", "/v1/capabilities", "createCapability", true),
    (
        "post",
        "/v1/capabilities/import",
        "importCapabilities",
        true,
    ),
    (
        "get",
        "/v1/capabilities/{capabilityId}",
        "getCapability",
        true,
    ),
    (
        "patch",
        "/v1/capabilities/{capabilityId}",
        "reviseCapability",
        true,
    ),
    (
        "post",
        "/v1/capabilities/{capabilityId}/enable",
        "enableCapability",
        true,
    ),
    (
        "post",
        "/v1/capabilities/{capabilityId}/disable",
        "disableCapability",
        true,
    ),
    // Issue 27: MCP, beside the contract's routes.
    ("post", "/v1/mcp", "sendMcpMessage", true),
    (
        "post",
        "/v1/capabilities/{capabilityId}/test",
        "testCapability",
        true,
    ),
];

const METHODS: [&str; 6] = ["get", "put", "post", "delete", "patch", "options"];

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_checked_in_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let document = served(&app).await;
    assert!(
        document == checked_in(),
        "docs/openapi.json differs from the served document: regenerate it with \
         `cargo run --bin warden -- openapi > docs/openapi.json` and review the diff"
    );
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["info"]["version"], "7.0.0");
    assert_eq!(
        document["info"]["version"],
        warden::api::openapi::CONTRACT_VERSION
    );
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    for (method, path, operation_id, authenticated) in CONTRACT_OPERATIONS {
        let operation = &document["paths"][path][method];
        assert_eq!(
            operation["operationId"], *operation_id,
            "{method} {path} is documented as {operation_id}"
        );
        let security = &operation["security"];
        if *authenticated {
            assert_eq!(security[0]["bearer"], serde_json::json!([]), "{path}");
        } else {
            assert!(security.is_null(), "{path} is public");
        }
        // Both error shapes are documented where they apply.
        let shape =
            if path.starts_with("/v1/channels/") || path.starts_with("/v1/prompt-integrations/") {
                "NestedError"
            } else if *path == "/v1/mcp" {
                "JsonRpcError"
            } else {
                "FlatError"
            };
        for (status, response) in operation["responses"].as_object().unwrap() {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    format!("#/components/schemas/{shape}"),
                    "{method} {path} {status}"
                );
            }
        }
    }
    // The headers the contract names.
    let header = |path: &str, method: &str, name: &str| {
        document["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["in"] == "header" && p["name"] == name)
    };
    assert!(header("/v1/capabilities", "post", "Idempotency-Key"));
    assert!(header("/v1/capabilities/import", "post", "Idempotency-Key"));
    assert!(header(
        "/v1/conversations/{conversationId}/operation-results",
        "post",
        "Idempotency-Key"
    ));
    assert!(header(
        "/v1/capabilities/{capabilityId}",
        "patch",
        "If-Match"
    ));
    assert!(header(
        "/v1/capabilities/{capabilityId}/enable",
        "post",
        "If-Match"
    ));
    assert!(header(
        "/v1/channels/http/messages",
        "post",
        "Client-Event-Id"
    ));
    assert!(header(
        "/v1/webhooks/platform",
        "post",
        "X-Hub-Signature-256"
    ));
    assert!(
        !document["paths"]["/v1/capabilities/import"]["post"]["responses"]["201"]["headers"]
            ["Idempotency-Replayed"]
            .is_null()
    );
    // A 429 says when to come back (contract 7).
    let execute = &document["paths"]["/v1/prompt-integrations/{publicId}/execute"];
    assert!(!execute["post"]["responses"]["429"]["headers"]["Retry-After"].is_null());
    assert!(
        !execute["options"]["responses"]["204"]["headers"]["Access-Control-Allow-Origin"].is_null()
    );
    // Closed where the contract says "no other properties".
    let schemas = &document["components"]["schemas"];
    for closed in ["AgentPolicy", "Health", "TestRequest"] {
        assert_eq!(
            schemas[closed]["additionalProperties"], false,
            "{closed} is closed"
        );
    }
}

/// A path of the document with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{capabilityId}", "cap_doesnotexist")
        .replace("{credentialRef}", "cred_doesnotexist")
        .replace("{conversationId}", "conv_doesnotexist")
        .replace("{publicId}", "pi_public_doesnotexist0000000")
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_is_routed(backend: Backend) {
    // The platform channel configured, so its routes answer (off, they 404
    // like an unrouted path).
    let platform = warden::cli::PlatformArgs {
        webhook_verify_token: Some("verify-token".into()),
        webhook_app_secret: Some("app-secret".into()),
        ..Default::default()
    };
    let app = TestApp::spawn_with_platform(TestDb::new(backend).await, platform).await;
    let document = served(&app).await;
    let mut seen = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in METHODS {
            if item[method].is_null() {
                continue;
            }
            seen += 1;
            let response = app
                .client
                .request(
                    method.to_uppercase().parse().unwrap(),
                    app.url(&concrete(path)),
                )
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            if path.starts_with("/v1/prompt-integrations/") {
                // Public; an unknown integration, told apart from the
                // fallback's "no such route" by its message.
                let (status, body) = status_and_json(response).await;
                assert_eq!(status, 404, "{method} {path}: {body}");
                assert_eq!(body["error"]["message"], "no such prompt integration");
                continue;
            }
            let expected: u16 = match (path.as_str(), method) {
                // No hub.* parameters: the handshake fails.
                ("/v1/webhooks/platform", "get") => 403,
                // No X-Hub-Signature-256.
                ("/v1/webhooks/platform", "post") => 400,
                _ if item[method]["security"].is_null() => 200,
                _ => 401,
            };
            assert_eq!(status, expected, "{method} {path} is routed");
        }
    }
    assert_eq!(seen, CONTRACT_OPERATIONS.len() + 1, "and /openapi.json");
}

/// The router is built only through `routes!` (`api::routes`), which adds
/// each handler's entry to the document: a plain `.route(` in `src/api/`
/// would serve a route the document does not list.
#[test]
fn no_route_bypasses_the_document() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/api");
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && (code.contains(".route(") || code.contains(".nest(")) {
                hits.push(format!("{}:{}: {code}", path.display(), n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "routes outside `routes!` (add them with a #[utoipa::path]):\n{}",
        hits.join("\n")
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_ui_is_off_unless_enabled(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let response = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(response.status(), 404, "off by default");

    let server = ServerProcess::start(&app.db, &[("WARDEN_DOCS_UI", "true")]).await;
    let page = server.get("/docs/").await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "no asset is fetched from elsewhere: {html}"
    );
    let config = server.get("/docs/swagger-initializer.js").await;
    assert_eq!(config.status(), 200);
    assert!(config.text().await.unwrap().contains("/openapi.json"));
}

/// Issue 24 item 13: what any operation may answer beside its row of the
/// contract is declared: 503 with `Retry-After` on every admitted operation
/// (the server or the account is busy, or the deadline passed), 413 where a
/// body is bounded, 401 with `WWW-Authenticate` wherever the key is taken.
#[test]
fn every_operation_declares_the_statuses_the_server_may_answer_beyond_its_row() {
    let document = checked_in();
    let always_admitted = [
        "getHealth",
        "getCapabilityContextKeys",
        "getOpenApiDocument",
    ];
    let mut checked = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap();
            let responses = &operation["responses"];
            if !always_admitted.contains(&id) {
                assert!(
                    responses["503"]["headers"]["Retry-After"].is_object(),
                    "{method} {path} ({id}) declares 503 with Retry-After"
                );
            }
            if operation["security"][0]["bearer"].is_array() {
                assert!(
                    responses["401"]["headers"]["WWW-Authenticate"].is_object(),
                    "{method} {path} ({id}) declares 401 with WWW-Authenticate"
                );
            }
            if ["createCapability", "importCapabilities", "reviseCapability"].contains(&id) {
                assert!(responses["413"].is_object(), "{id} declares 413");
            }
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked} operations");
}
