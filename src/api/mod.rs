//! The HTTP API: one module per resource, the router, and the middleware
//! every route shares (request ids and logging, error shaping, panics as 500).

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::agent::Engine;
use crate::crypto::master_key::Keyring;
use crate::executor::Executor;
use crate::sandbox::PolicySandbox;
use crate::signing::Signer;
use crate::store::Store;

pub mod admission;
pub mod auth;
pub mod capabilities;
pub mod capability_bodies;
pub mod capability_revisions;
pub mod capability_test;
pub mod credentials;
pub mod diagnostics;
pub mod error;
pub mod health;
pub mod idempotent;
pub mod json_body;
pub mod jwks;
pub mod known_keys;
pub mod lifetime;
pub mod mcp;
pub mod message_body;
pub mod messages;
pub mod openapi;
pub mod operation_results;
pub mod platform_webhook;
pub mod policy;
pub mod prompt_integrations;
pub mod request_log;

/// What every handler can reach.
pub struct AppContext {
    pub store: Store,
    /// The environment API keys must have been issued for.
    pub environment: String,
    /// Seals and opens stored secrets.
    pub keyring: Keyring,
    /// The policy guest: judges definitions, arguments and results.
    pub sandbox: PolicySandbox,
    /// Signs the capability context of every outbound call.
    pub signer: Signer,
    /// The only way to call a host endpoint.
    pub executor: Executor,
    /// Runs user turns of the HTTP channel.
    pub engine: Engine,
    /// The messaging-platform channel, when configured (else its routes 404).
    pub platform: Option<crate::platform::PlatformChannel>,
    /// Prompt integrations' challenge verifier, when configured (else every
    /// execute answers 503 once it reaches the token).
    pub prompt: Option<crate::prompt::PromptChannel>,
    /// The bounds on work in progress, overall and per account.
    pub admission: Arc<admission::Admission>,
    /// The MCP server behind `/v1/mcp`.
    pub mcp: crate::mcp::McpServer,
}

pub type AppState = Arc<AppContext>;

/// Whether `/docs` serves the interactive reference (`--docs-ui`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocsUi {
    Off,
    On,
}

impl DocsUi {
    pub fn from_flag(on: bool) -> Self {
        if on { DocsUi::On } else { DocsUi::Off }
    }
}

/// Every route of the API with its OpenAPI entry: `routes!` registers the
/// handler and its `#[utoipa::path]` together, so the document
/// (`openapi::document_json`) always lists exactly these routes. A new
/// route goes here, in its section of the contract (a module per resource;
/// the platform webhook (4.3) and prompt integrations (4.4) add theirs the
/// same way). `tests/api/openapi.rs` fails on a `.route(` that bypasses it.
pub fn routes() -> OpenApiRouter<AppState> {
    // Multipart bodies carry an image of up to 4 MiB; each part has its own bound.
    let (schemas, paths, send_message) = routes!(messages::send_message);
    let send_message = send_message.layer(DefaultBodyLimit::max(
        warden_channel::inbound::MAX_MULTIPART_BYTES,
    ));
    OpenApiRouter::with_openapi(openapi::base())
        // 4.1 System (public).
        .routes(routes!(health::health))
        .routes(routes!(jwks::jwks))
        .routes(routes!(openapi::openapi_json))
        // 4.2 HTTP channel.
        .routes((schemas, paths, send_message))
        .routes(routes!(operation_results::report_operation_result))
        // 4.3 Platform webhook (public; 404 when the channel is not configured).
        .routes(routes!(
            platform_webhook::verify_platform_webhook,
            platform_webhook::receive_platform_webhook
        ))
        // 4.4 Prompt integrations (public, no API key).
        .routes(routes!(
            prompt_integrations::preflight_prompt_integration,
            prompt_integrations::execute_prompt_integration
        ))
        // 4.5 Agent policy.
        .routes(routes!(
            policy::get_policy,
            policy::put_policy,
            policy::delete_policy
        ))
        // 4.6 Diagnostics.
        .routes(routes!(
            diagnostics::get_settings,
            diagnostics::put_settings
        ))
        .routes(routes!(diagnostics::list_capability_gaps))
        // 4.7 Capability credentials.
        .routes(routes!(
            credentials::put_credential,
            credentials::delete_credential
        ))
        // 4.8 Capabilities.
        .routes(routes!(
            capabilities::list_capabilities,
            capabilities::create_capability
        ))
        .routes(routes!(capabilities::import_capabilities))
        .routes(routes!(
            capabilities::get_capability,
            capability_revisions::revise_capability
        ))
        .routes(routes!(capability_revisions::enable_capability))
        .routes(routes!(capability_revisions::disable_capability))
        .routes(routes!(capability_test::test_capability))
        // MCP (issue 27): the account's read capabilities as tools.
        .routes(routes!(mcp::mcp))
}

/// The API with its shared middleware. `deadlines` bound each request's body
/// and duration (`ClientLimits`).
pub fn router(state: AppState, deadlines: lifetime::RequestDeadlines, docs_ui: DocsUi) -> Router {
    let (mut api, _) = routes().split_for_parts();
    if docs_ui == DocsUi::On {
        // Swagger UI's assets are embedded in the binary; it reads the
        // document from /openapi.json like any client.
        api = api.merge(
            utoipa_swagger_ui::SwaggerUi::new("/docs")
                .config(utoipa_swagger_ui::Config::from("/openapi.json")),
        );
    }
    api.fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(CatchPanicLayer::new())
        .layer(from_fn_with_state(deadlines, lifetime::body_deadline))
        // Everything inside runs to completion even if the client hangs up,
        // within the bound on work in progress.
        .layer(from_fn_with_state(
            state.admission.clone(),
            lifetime::run_to_completion,
        ))
        .layer(from_fn_with_state(deadlines, lifetime::request_deadline))
        .layer(from_fn(error::shape_errors))
        .layer(from_fn(request_log::request_log))
        .with_state(state)
}
