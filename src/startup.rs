//! Builds the application (database, keys, router, listener) and runs it
//! until a shutdown signal. Tests build the same [`Application`] on port 0.

use anyhow::Context;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

use crate::agent::Engine;
use crate::agent::planner::{Planner, builtin::BuiltinPlanner, openai};
use crate::api::lifetime::RequestDeadlines;
use crate::api::{self, AppContext};
use crate::cli::{DatabaseArgs, MasterKeyArgs, PlannerArgs, PlatformArgs, ServeArgs};
use crate::crypto::master_key::{self, DatabasePlace, KeySettings, Keyring};
use crate::executor::Executor;
use crate::http_server::{self, ConnectionLimits};
use crate::platform::worker::{RetryPolicy, Worker};
use crate::platform::{PlatformChannel, send_api::SendApi, webhook::WebhookSecrets};
use crate::sandbox::PolicySandbox;
use crate::signing::Signer;
use crate::store::{DatabaseKind, Store};

pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    connection_limits: ConnectionLimits,
    store: Store,
    context: crate::api::AppState,
    /// The platform channel's worker and how many tasks run it.
    worker: Option<(Worker, usize)>,
    retention: crate::retention::Retention,
    /// The metrics listener (`--metrics-listen`), when configured.
    metrics: Option<(
        TcpListener,
        &'static metrics_exporter_prometheus::PrometheusHandle,
    )>,
}

impl Application {
    pub async fn build(
        database: &DatabaseArgs,
        master_key: &MasterKeyArgs,
        serve: &ServeArgs,
    ) -> anyhow::Result<Self> {
        let kind = DatabaseKind::of_url(&database.database_url)?;
        // The key is checked before touching the database, so a misconfigured
        // PostgreSQL replica fails fast with a clear message.
        let keyring = keyring(master_key, &kind)?;
        // The guest is loaded before the database so a bad guest fails fast.
        let sandbox = PolicySandbox::load(&serve.sandbox)?;
        let store = Store::connect(&database.database_url)
            .await
            .with_context(|| format!("cannot open the {} database", backend_label(&kind)))?;
        let signer = Signer::start(store.clone(), keyring.clone())
            .await
            .context("cannot load the signing key")?;
        let executor = Executor::new(
            sandbox.clone(),
            store.clone(),
            keyring.clone(),
            signer.clone(),
        );
        let planner = planner(&serve.planner)?;
        let prompt = prompt_channel(&serve.prompt, keyring.current())?;
        let engine = Engine::new(store.clone(), executor.clone(), planner, keyring.clone());
        let (platform, worker) =
            match platform_channel(&serve.platform, serve.sandbox.dev_allow_loopback)? {
                Some((channel, send_api)) => {
                    let worker = Worker {
                        store: store.clone(),
                        engine: engine.clone(),
                        keyring: keyring.clone(),
                        send_api,
                        fallback_token: serve
                            .platform
                            .platform_access_token
                            .clone()
                            .map(|t| Arc::new(zeroize::Zeroizing::new(t))),
                        policy: RetryPolicy {
                            max_attempts: serve.platform.platform_max_attempts.max(1),
                            base_delay: Duration::from_millis(
                                serve.platform.platform_retry_base_ms,
                            ),
                            lease: Duration::from_millis(
                                serve.platform.platform_lease_ms.max(1000),
                            ),
                        },
                        wake: channel.wake.clone(),
                    };
                    (
                        Some(channel),
                        Some((worker, serve.platform.platform_workers.max(1))),
                    )
                }
                None => (None, None),
            };
        let mcp = crate::mcp::McpServer::new(store.clone(), executor.clone(), (&serve.mcp).into());
        let state = Arc::new(AppContext {
            store: store.clone(),
            environment: database.environment.clone(),
            keyring,
            sandbox,
            signer,
            executor,
            engine,
            platform,
            prompt,
            admission: crate::api::admission::Admission::from_limits(&serve.limits),
            mcp,
        });
        let listener = http_server::listen(serve.listen)
            .with_context(|| format!("cannot listen on {}", serve.listen))?;
        let metrics = match serve.metrics_listen {
            Some(address) => {
                let listener = TcpListener::bind(address).await.with_context(|| {
                    format!("cannot listen for metrics on {address} (WARDEN_METRICS_LISTEN)")
                })?;
                let handle = crate::metrics::install(crate::metrics::BuildInfo {
                    version: env!("CARGO_PKG_VERSION"),
                    contract: crate::api::openapi::CONTRACT_VERSION,
                    guest_sha256: state.sandbox.guest_sha256().to_owned(),
                })?;
                Some((listener, handle))
            }
            None => None,
        };
        Ok(Application {
            listener,
            router: api::router(
                state.clone(),
                RequestDeadlines::from(&serve.limits),
                api::DocsUi::from_flag(serve.docs_ui),
            ),
            connection_limits: ConnectionLimits::from(&serve.limits),
            store,
            context: state,
            worker,
            retention: crate::retention::Retention::new(
                (&serve.retention).into(),
                crate::clock::Clock::System,
            ),
            metrics,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Where the metrics listener listens, when configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What the handlers see (tests build executors from it).
    pub fn context(&self) -> crate::api::AppState {
        self.context.clone()
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish
    /// (for at most the shutdown grace).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let housekeeping = tokio::spawn(housekeeping(self.store.clone(), self.retention));
        let metrics = self.metrics.map(|(listener, handle)| {
            tokio::spawn(http_server::metrics_listener::serve(
                listener,
                handle,
                self.store.clone(),
            ))
        });
        crate::shedding_threads::start();
        let (stop_workers, stop) = tokio::sync::watch::channel(false);
        let workers = match self.worker {
            Some((worker, count)) => worker.spawn(count, stop),
            None => Vec::new(),
        };
        let served =
            http_server::serve(self.listener, self.router, self.connection_limits, shutdown).await;
        housekeeping.abort();
        if let Some(metrics) = metrics {
            metrics.abort();
        }
        // Workers finish the message in hand; a claim cut short lapses and
        // another attempt (here or on a replica) takes it over.
        let _ = stop_workers.send(true);
        for mut worker in workers {
            if tokio::time::timeout(Duration::from_secs(10), &mut worker)
                .await
                .is_err()
            {
                worker.abort();
            }
        }
        served?;
        // Work detached from hung-up clients may still hold connections;
        // it is bounded by its own deadlines, and so is this wait.
        if tokio::time::timeout(Duration::from_secs(10), self.store.close())
            .await
            .is_err()
        {
            tracing::warn!("database connections still busy at exit");
        }
        Ok(())
    }
}

/// Periodic clean-up that any replica may do: every statement is
/// idempotent, and retention purges take disjoint batches (see
/// `store::retention`).
async fn housekeeping(store: Store, retention: crate::retention::Retention) {
    let mut every_hour = tokio::time::interval(std::time::Duration::from_secs(3600));
    loop {
        every_hour.tick().await;
        match retention.purge(&store).await {
            Ok(report) if !report.removed_anything() => {}
            Ok(report) => tracing::info!(
                conversations = report.conversations.conversations,
                messages = report.conversations.messages,
                batches = report.conversation_batches,
                gap_texts = report.gap_texts,
                mcp_calls = report.mcp_calls,
                contract_tests = report.contract_tests,
                prompt_usage = report.prompt_usage,
                platform_messages = report.finished_platform_messages,
                housekeeping = report.housekeeping,
                "expired data purged"
            ),
            Err(err) => {
                tracing::warn!(error = %err, "retention purge interrupted; the next hour resumes it")
            }
        }
    }
}

/// The prompt integrations' verifier when its URL and secret are set; one
/// without the other is a configuration mistake, refused at start.
fn prompt_channel(
    args: &crate::cli::PromptArgs,
    master: &crate::crypto::master_key::MasterKey,
) -> anyhow::Result<Option<crate::prompt::PromptChannel>> {
    let client_ip_header = match &args.client_ip_header {
        Some(name) => Some(crate::client_address::TrustedHeader {
            name: axum::http::HeaderName::from_bytes(name.trim().as_bytes()).with_context(
                || format!("WARDEN_CLIENT_IP_HEADER {name:?} is not a header name"),
            )?,
            hops: usize::from(args.client_ip_hops.max(1)),
        }),
        None => None,
    };
    let (url, secret) = match (&args.challenge_verify_url, &args.challenge_secret) {
        (Some(url), Some(secret)) => (url, secret),
        (None, None) => {
            tracing::info!(
                "prompt integrations: no challenge verifier configured; executions answer 503"
            );
            return Ok(None);
        }
        _ => anyhow::bail!(
            "set both WARDEN_CHALLENGE_VERIFY_URL and WARDEN_CHALLENGE_SECRET, or neither"
        ),
    };
    let parsed = url::Url::parse(url).context("WARDEN_CHALLENGE_VERIFY_URL is not a URL")?;
    if !matches!(parsed.scheme(), "http" | "https") {
        anyhow::bail!("WARDEN_CHALLENGE_VERIFY_URL must be http(s)");
    }
    Ok(Some(crate::prompt::PromptChannel {
        verifier: crate::prompt::challenge::Verifier::new(
            url.clone(),
            secret.clone(),
            Duration::from_millis(args.challenge_timeout_ms.max(100)),
        ),
        client_ip_header,
        client_key: crate::prompt::client_key(master),
    }))
}

/// The platform channel when both webhook secrets are set; one without the
/// other is a configuration mistake, refused at start.
fn platform_channel(
    args: &PlatformArgs,
    allow_loopback: bool,
) -> anyhow::Result<Option<(PlatformChannel, SendApi)>> {
    let (token, secret) = match (&args.webhook_verify_token, &args.webhook_app_secret) {
        (None, None) => return Ok(None),
        (Some(token), Some(secret)) if !token.is_empty() && !secret.is_empty() => (token, secret),
        _ => anyhow::bail!(
            "the platform channel needs both WARDEN_WEBHOOK_VERIFY_TOKEN and WARDEN_WEBHOOK_APP_SECRET (non-empty)"
        ),
    };
    let send_api = SendApi::new(
        &args.platform_api_url,
        Duration::from_millis(args.platform_send_timeout_ms),
        allow_loopback,
    )?;
    tracing::info!(send_api = %args.platform_api_url, "platform channel: webhook on, replies through the send API");
    Ok(Some((
        PlatformChannel {
            secrets: WebhookSecrets::new(token, secret),
            wake: Arc::new(tokio::sync::Notify::new()),
            queue_per_number: i64::from(args.platform_queue_per_number.max(1)),
        },
        send_api,
    )))
}

/// The configured planner: a model behind an OpenAI-compatible API, or the
/// built-in deterministic planner when no inference URL is set.
fn planner(args: &PlannerArgs) -> anyhow::Result<Planner> {
    let Some(url) = &args.inference_url else {
        tracing::info!("planner: built-in (deterministic, no network)");
        return Ok(Planner::Builtin(BuiltinPlanner));
    };
    let model = args
        .inference_model
        .clone()
        .context("WARDEN_INFERENCE_MODEL is required with WARDEN_INFERENCE_URL")?;
    url::Url::parse(url).with_context(|| format!("WARDEN_INFERENCE_URL {url:?} is not a URL"))?;
    tracing::info!(url = %url, model = %model, "planner: OpenAI-compatible backend");
    Ok(Planner::OpenAi(openai::OpenAiPlanner::new(
        openai::OpenAiConfig {
            url: url.clone(),
            model,
            api_key: args.inference_api_key.clone(),
            timeout: std::time::Duration::from_millis(args.inference_timeout_ms),
        },
    )))
}

/// The master keyring for these settings and this database, resolved the
/// same way by `warden serve` and `warden admin`.
pub fn keyring(master_key: &MasterKeyArgs, kind: &DatabaseKind) -> anyhow::Result<Keyring> {
    let settings = KeySettings {
        inline: master_key.master_key.as_deref(),
        file: master_key.master_key_file.as_deref(),
        previous_file: master_key.master_key_previous_file.as_deref(),
    };
    let place = match kind {
        DatabaseKind::Postgres => DatabasePlace::Shared,
        DatabaseKind::SqliteMemory => DatabasePlace::Memory,
        DatabaseKind::SqliteFile(path) => DatabasePlace::File(path),
    };
    master_key::resolve_keyring(settings, place)
}

fn backend_label(kind: &DatabaseKind) -> &'static str {
    match kind {
        DatabaseKind::Postgres => "PostgreSQL",
        _ => "SQLite",
    }
}

/// `warden serve`.
pub async fn serve(
    database: DatabaseArgs,
    master_key: MasterKeyArgs,
    args: ServeArgs,
) -> anyhow::Result<()> {
    let app = Application::build(&database, &master_key, &args).await?;
    // Handlers are installed before announcing readiness, so a signal sent
    // right after start-up is never the default "terminate at once".
    let shutdown = shutdown_signal()?;
    if let Some(metrics) = app.metrics_addr() {
        tracing::info!(address = %metrics, "metrics at http://{metrics}/metrics");
    }
    tracing::info!(
        address = %app.local_addr(),
        backend = app.store().backend_name(),
        environment = %database.environment,
        "warden is listening"
    );
    app.run(shutdown).await?;
    tracing::info!("warden stopped");
    Ok(())
}

fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received: finishing in-flight requests"),
            _ = term.recv() => tracing::info!("SIGTERM received: finishing in-flight requests"),
        }
    })
}
