//! The HTTP API: one module per resource, the router, and the middleware
//! every route shares (request ids and logging, error shaping, panics as 500).

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post, put};
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;

use crate::agent::Engine;
use crate::crypto::master_key::Keyring;
use crate::executor::Executor;
use crate::sandbox::PolicySandbox;
use crate::signing::Signer;
use crate::store::Store;

pub mod auth;
pub mod capabilities;
pub mod capability_test;
pub mod credentials;
pub mod diagnostics;
pub mod error;
pub mod health;
pub mod idempotent;
pub mod json_body;
pub mod jwks;
pub mod lifetime;
pub mod messages;
pub mod operation_results;
pub mod platform_webhook;
pub mod policy;
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
}

pub type AppState = Arc<AppContext>;

/// The API with its shared middleware. `deadlines` bound each request's body
/// and duration (`ClientLimits`).
pub fn router(state: AppState, deadlines: lifetime::RequestDeadlines) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route(
            "/.well-known/service/capability-context/v1/jwks.json",
            get(jwks::jwks),
        )
        .route(
            "/v1/agent-policy",
            get(policy::get_policy)
                .put(policy::put_policy)
                .delete(policy::delete_policy),
        )
        .route(
            "/v1/diagnostics/settings",
            get(diagnostics::get_settings).put(diagnostics::put_settings),
        )
        .route(
            "/v1/diagnostics/capability-gaps",
            get(diagnostics::list_capability_gaps),
        )
        .route(
            "/v1/capability-credentials/{credential_ref}",
            put(credentials::put_credential).delete(credentials::delete_credential),
        )
        .route(
            "/v1/capabilities",
            get(capabilities::list_capabilities).post(capabilities::create_capability),
        )
        .route(
            "/v1/capabilities/import",
            post(capabilities::import_capabilities),
        )
        .route(
            "/v1/capabilities/{capability_id}",
            get(capabilities::get_capability).patch(capabilities::revise_capability),
        )
        .route(
            "/v1/capabilities/{capability_id}/enable",
            post(capabilities::enable_capability),
        )
        .route(
            "/v1/capabilities/{capability_id}/disable",
            post(capabilities::disable_capability),
        )
        .route(
            "/v1/capabilities/{capability_id}/test",
            post(capability_test::test_capability),
        )
        .route(
            "/v1/channels/http/messages",
            // Multipart bodies carry an image of up to 4 MiB; each part has its own bound.
            post(messages::send_message).layer(DefaultBodyLimit::max(
                crate::channel::inbound::MAX_MULTIPART_BYTES,
            )),
        )
        .route(
            "/v1/conversations/{conversation_id}/operation-results",
            post(operation_results::report_operation_result),
        )
        .route(
            "/v1/webhooks/platform",
            get(platform_webhook::verify_platform_webhook)
                .post(platform_webhook::receive_platform_webhook),
        )
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(CatchPanicLayer::new())
        .layer(from_fn_with_state(deadlines, lifetime::body_deadline))
        // Everything inside runs to completion even if the client hangs up.
        .layer(from_fn(lifetime::run_to_completion))
        .layer(from_fn_with_state(deadlines, lifetime::request_deadline))
        .layer(from_fn(error::shape_errors))
        .layer(from_fn(request_log::request_log))
        .with_state(state)
}
