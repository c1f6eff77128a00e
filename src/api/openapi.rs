//! The machine-readable contract (section 9): the OpenAPI 3.1 document,
//! generated from the handlers' own `#[utoipa::path]` annotations and types
//! as the router is built (`api::routes`), so a route cannot exist without
//! its entry. Served at `GET /openapi.json`, printed by `warden openapi`,
//! checked in as `docs/openapi.json` (`tests/api/openapi.rs` fails when they
//! differ).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::OnceLock;
use utoipa::Modify;
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// `info.version`: the contract this service implements.
pub const CONTRACT_VERSION: &str = "7.0.0";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Warden: conversational agent public API",
        version = "7.0.0",
        description = "The conversational agent public API (contract 7.0.0) as Warden serves it. \
            Authenticated routes take `Authorization: Bearer <API_KEY>`. Errors come in two shapes: \
            flat `{error, code}` (management routes, health, the key set) and nested \
            `{error: {code, message}}` (the HTTP channel). Choices where the contract is silent: \
            docs/contract-decisions.md.",
        license(name = "Apache-2.0"),
    ),
    components(schemas(super::error::FlatError, super::error::NestedError)),
    modifiers(&BearerKey),
    tags(
        (name = "system", description = "Health, the key set and this document (public)"),
        (name = "channel", description = "The HTTP channel and operation results"),
        (name = "policy", description = "The agent policy"),
        (name = "diagnostics", description = "Diagnostic settings and capability-gap events"),
        (name = "credentials", description = "Endpoint credentials"),
        (name = "capabilities", description = "Capabilities: publish, revise, enable, disable, test"),
        (name = "mcp", description = "The account's read capabilities as MCP tools (Streamable HTTP, stateless; JSON-RPC error bodies)"),
    )
)]
struct ApiDoc;

/// The base document: info, shared schemas, the security scheme, links.
pub fn base() -> OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// The bearer API key of `/v1/*` (section 5); each authenticated operation
/// names it, public ones name nothing.
struct BearerKey;

impl Modify for BearerKey {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The API key issued for this environment"))
                    .build(),
            ),
        );
    }
}

/// A link between operations (what a client, or a stateful test, does next
/// with an answer): from an operation's response to another operation,
/// with its parameters as runtime expressions.
struct Link {
    from: &'static str,
    status: &'static str,
    name: &'static str,
    to: &'static str,
    parameters: &'static [(&'static str, &'static str)],
}

const LINKS: &[Link] = &[
    Link {
        from: "createCapability",
        status: "201",
        name: "GetCapability",
        to: "getCapability",
        parameters: &[("path.capabilityId", "$response.body#/id")],
    },
    Link {
        from: "createCapability",
        status: "201",
        name: "ReviseCapability",
        to: "reviseCapability",
        parameters: &[
            ("path.capabilityId", "$response.body#/id"),
            ("header.If-Match", "$response.body#/revision"),
        ],
    },
    Link {
        from: "createCapability",
        status: "201",
        name: "TestCapability",
        to: "testCapability",
        parameters: &[("path.capabilityId", "$response.body#/id")],
    },
    Link {
        from: "createCapability",
        status: "201",
        name: "DisableCapability",
        to: "disableCapability",
        parameters: &[
            ("path.capabilityId", "$response.body#/id"),
            ("header.If-Match", "$response.body#/revision"),
        ],
    },
    Link {
        from: "disableCapability",
        status: "200",
        name: "EnableCapability",
        to: "enableCapability",
        parameters: &[
            ("path.capabilityId", "$response.body#/id"),
            ("header.If-Match", "$response.body#/revision"),
        ],
    },
    Link {
        from: "importCapabilities",
        status: "201",
        name: "GetImportedCapability",
        to: "getCapability",
        parameters: &[("path.capabilityId", "$response.body#/capabilities/0/id")],
    },
    Link {
        from: "putCapabilityCredential",
        status: "201",
        name: "RevokeCapabilityCredential",
        to: "revokeCapabilityCredential",
        parameters: &[("path.credentialRef", "$response.body#/credential_ref")],
    },
    Link {
        from: "sendHttpMessage",
        status: "200",
        name: "ReportHostOperationResult",
        to: "reportHostOperationResult",
        parameters: &[("path.conversationId", "$response.body#/conversation_id")],
    },
];

/// Adds `LINKS` to the responses they start from. On the JSON, because
/// utoipa 5.5 writes a link's `operationId` as `operation_id`.
fn add_links(document: &mut Value) {
    for Link {
        from,
        status,
        name,
        to,
        parameters,
    } in LINKS
    {
        let Some(response) = document["paths"]
            .as_object_mut()
            .into_iter()
            .flat_map(|paths| paths.values_mut())
            .filter_map(Value::as_object_mut)
            .flat_map(|item| item.values_mut())
            .find(|operation| operation["operationId"] == *from)
            .and_then(|operation| operation["responses"].get_mut(*status))
        else {
            continue;
        };
        let parameters: serde_json::Map<String, Value> = parameters
            .iter()
            .map(|(parameter, expression)| ((*parameter).to_owned(), json!(expression)))
            .collect();
        response["links"][*name] = json!({"operationId": to, "parameters": parameters});
    }
}

/// Operations never refused for lack of room (`api::admission`): they do no
/// work worth bounding.
const ALWAYS_ADMITTED: [&str; 3] = [
    "getHealth",
    "getCapabilityContextKeys",
    "getOpenApiDocument",
];

/// Operations whose body has a size limit the route itself does not name
/// among its statuses (the contract lists 413 only for some routes).
const BOUNDED_BODIES: [(&str, &str); 3] = [
    ("createCapability", "over 256 KiB"),
    ("importCapabilities", "over 2 MiB"),
    ("reviseCapability", "over 256 KiB"),
];

/// Declares, once for every operation, what any of them may answer beside
/// its own statuses: 401 with `WWW-Authenticate` on every route that takes
/// the bearer key, 503 with `Retry-After` when the server or the account
/// has as much work in progress as it may (or the request outlived its
/// deadline), and 413 where a body is bounded. On the JSON, like the links.
fn add_shared_statuses(document: &mut Value) {
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let shape = match super::error::ErrorShape::for_path(path) {
            super::error::ErrorShape::Flat => "FlatError",
            super::error::ErrorShape::Nested => "NestedError",
            super::error::ErrorShape::JsonRpc => "JsonRpcError",
        };
        let body = json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{shape}")}}});
        let Some(operations) = item.as_object_mut() else {
            continue;
        };
        for operation in operations.values_mut() {
            let Some(id) = operation["operationId"].as_str().map(str::to_owned) else {
                continue;
            };
            let authenticated = operation["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|scheme| scheme.get("bearer").is_some()));
            let responses = &mut operation["responses"];
            if authenticated {
                // Section 5: the bearer key, declared once for every route that takes it.
                responses["401"] = json!({
                    "description": "Missing or invalid bearer key",
                    "content": body,
                    "headers": {"WWW-Authenticate": {
                        "description": "`Bearer`",
                        "schema": {"type": "string"}
                    }}
                });
            }
            if !ALWAYS_ADMITTED.contains(&id.as_str()) {
                let overloaded = "`SERVICE_UNAVAILABLE`: the server, or this account, has as much work \
                    in progress as it may (retry after `Retry-After` seconds), or the request outlived \
                    the server's deadline";
                let entry = responses["503"].as_object_mut().map(|existing| {
                    let said = existing["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    existing.insert(
                        "description".into(),
                        json!(format!("{said}; or {overloaded}")),
                    );
                });
                if entry.is_none() {
                    responses["503"] = json!({"description": overloaded, "content": body});
                }
                responses["503"]["headers"]["Retry-After"] = json!({
                    "description": "Seconds to wait before retrying (when the server is busy)",
                    "schema": {"type": "integer", "minimum": 0}
                });
            }
            if let Some((_, limit)) = BOUNDED_BODIES.iter().find(|(op, _)| *op == id) {
                if responses.get("413").is_none() {
                    responses["413"] = json!({
                        "description": format!("`PAYLOAD_TOO_LARGE`: the body is {limit}"),
                        "content": body
                    });
                }
            }
        }
    }
}

/// The document of the router `api::routes` builds, as pretty JSON.
/// Built once: the routes are fixed at compile time.
pub fn document_json() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let (_, document) = super::routes().split_for_parts();
        let mut document = serde_json::to_value(&document).unwrap_or_default();
        add_links(&mut document);
        add_shared_statuses(&mut document);
        serde_json::to_string_pretty(&document).unwrap_or_default()
    })
}

/// One operation of the document, with the names the HTTP layer gives a
/// request routed to it, made once: the server span's name and attributes
/// are then borrowed, not built for every request.
#[derive(Debug)]
pub struct Operation {
    /// The `operationId`: the HTTP metrics' `operation` label.
    pub id: &'static str,
    /// Upper case, as on the wire.
    pub method: &'static str,
    /// The route as routed (`/v1/capabilities/{id}`), never a raw path.
    pub route: &'static str,
    /// `{method} {route}`, the server span's name.
    pub span_name: &'static str,
}

/// The operation of a routed request, by its method and the route that
/// matched it (`MatchedPath`, never the raw path). A HEAD request is its GET
/// operation. Built once from the document.
pub fn operation(method: &axum::http::Method, route: &str) -> Option<&'static Operation> {
    type Operations = std::collections::HashMap<&'static str, Vec<Operation>>;
    static OPERATIONS: OnceLock<Operations> = OnceLock::new();
    let operations = OPERATIONS.get_or_init(|| {
        let document: serde_json::Value = serde_json::from_str(document_json()).unwrap_or_default();
        let mut operations = Operations::new();
        // The document's paths and operations are fixed at compile time:
        // leaking their text once is bounded.
        let leak = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
        for (path, methods) in document["paths"].as_object().into_iter().flatten() {
            let route = leak(path.clone());
            for (method, operation) in methods.as_object().into_iter().flatten() {
                if let Some(id) = operation["operationId"].as_str() {
                    let method = method.to_ascii_uppercase();
                    operations.entry(route).or_default().push(Operation {
                        id: leak(id.to_owned()),
                        span_name: leak(format!("{method} {route}")),
                        method: leak(method),
                        route,
                    });
                }
            }
        }
        operations
    });
    let method = if method == axum::http::Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    operations
        .get(route)?
        .iter()
        .find(|operation| operation.method == method)
}

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApiDocument",
    tag = "system",
    summary = "This document",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = serde_json::Value))
)]
pub async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document_json(),
    )
        .into_response()
}
