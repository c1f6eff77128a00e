//! The server under test, in-process on port 0, and its typed requests.

use super::fixtures::new_key;
use super::{Backend, MASTER_KEY, TestDb, admin, guest_cache_dir, status_and_json};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use warden::cli::{
    AccountCommand, AdminCommand, KeyCommand, MasterKeyArgs, PlannerArgs, ServeArgs,
};
use warden::startup::Application;
use warden::store::Store;

/// The server, running in-process on a random port.
pub struct TestApp {
    pub address: String,
    pub context: warden::api::AppState,
    pub client: reqwest::Client,
    pub store: Store,
    shutdown: Option<oneshot::Sender<()>>,
    pub db: TestDb,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_on(TestDb::new(backend).await).await
    }

    /// A server as deployed: the loopback development switch is off.
    pub async fn spawn_strict(backend: Backend) -> Self {
        Self::spawn_with(TestDb::new(backend).await, false).await
    }

    /// A server with the loopback development switch on, so capabilities can
    /// call endpoints the test runs on 127.0.0.1.
    pub async fn spawn_on(db: TestDb) -> Self {
        Self::spawn_with(db, true).await
    }

    async fn spawn_with(db: TestDb, dev_allow_loopback: bool) -> Self {
        Self::spawn_configured(
            db,
            dev_allow_loopback,
            Default::default(),
            Default::default(),
        )
        .await
    }

    /// A second server on this one's database: another replica.
    pub async fn replica(&self) -> Self {
        Self::spawn_on(self.db.shared()).await
    }

    /// A loopback-enabled server with these client limits.
    pub async fn spawn_with_limits(backend: Backend, limits: warden::cli::ClientLimits) -> Self {
        Self::spawn_configured(TestDb::new(backend).await, true, Default::default(), limits).await
    }

    /// A loopback-enabled server whose planner is configured by `planner`
    /// (an OpenAI-compatible backend, typically the test's fake).
    pub async fn spawn_with_planner(backend: Backend, planner: PlannerArgs) -> Self {
        Self::spawn_configured(
            TestDb::new(backend).await,
            true,
            planner,
            Default::default(),
        )
        .await
    }

    /// A loopback-enabled server with the messaging-platform channel configured.
    pub async fn spawn_with_platform(db: TestDb, platform: warden::cli::PlatformArgs) -> Self {
        Self::spawn_full(db, true, Default::default(), Default::default(), platform).await
    }

    async fn spawn_configured(
        db: TestDb,
        dev_allow_loopback: bool,
        planner: PlannerArgs,
        limits: warden::cli::ClientLimits,
    ) -> Self {
        Self::spawn_full(db, dev_allow_loopback, planner, limits, Default::default()).await
    }

    async fn spawn_full(
        db: TestDb,
        dev_allow_loopback: bool,
        planner: PlannerArgs,
        limits: warden::cli::ClientLimits,
        platform: warden::cli::PlatformArgs,
    ) -> Self {
        Self::spawn_serving(
            db,
            dev_allow_loopback,
            planner,
            limits,
            platform,
            Default::default(),
        )
        .await
    }

    /// A loopback-enabled server with prompt integrations' verifier
    /// configured and this planner (the model prompt integrations call).
    pub async fn spawn_with_prompt(
        db: TestDb,
        planner: PlannerArgs,
        prompt: warden::cli::PromptArgs,
    ) -> Self {
        Self::spawn_serving(
            db,
            true,
            planner,
            Default::default(),
            Default::default(),
            prompt,
        )
        .await
    }

    /// A loopback-enabled server whose policy guest is the component at `guest`.
    pub async fn spawn_with_guest(backend: Backend, guest: std::path::PathBuf) -> Self {
        Self::spawn_serving_guest(
            TestDb::new(backend).await,
            Some(guest),
            true,
            Default::default(),
            Default::default(),
            Default::default(),
            Default::default(),
            Default::default(),
        )
        .await
    }

    /// A loopback-enabled server with these MCP settings and client limits.
    pub async fn spawn_with_mcp(
        db: TestDb,
        mcp: warden::cli::McpArgs,
        limits: warden::cli::ClientLimits,
    ) -> Self {
        Self::spawn_serving_guest(
            db,
            None,
            true,
            Default::default(),
            limits,
            Default::default(),
            Default::default(),
            mcp,
        )
        .await
    }

    async fn spawn_serving(
        db: TestDb,
        dev_allow_loopback: bool,
        planner: PlannerArgs,
        limits: warden::cli::ClientLimits,
        platform: warden::cli::PlatformArgs,
        prompt: warden::cli::PromptArgs,
    ) -> Self {
        Self::spawn_serving_guest(
            db,
            None,
            dev_allow_loopback,
            planner,
            limits,
            platform,
            prompt,
            Default::default(),
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn spawn_serving_guest(
        db: TestDb,
        policy_guest: Option<std::path::PathBuf>,
        dev_allow_loopback: bool,
        planner: PlannerArgs,
        limits: warden::cli::ClientLimits,
        platform: warden::cli::PlatformArgs,
        prompt: warden::cli::PromptArgs,
        mcp: warden::cli::McpArgs,
    ) -> Self {
        let serve = ServeArgs {
            docs_ui: false,
            listen: "127.0.0.1:0".parse().unwrap(),
            sandbox: warden::cli::SandboxArgs {
                policy_guest,
                guest_cache_dir: Some(guest_cache_dir()),
                dev_allow_loopback,
            },
            planner,
            limits,
            platform,
            prompt,
            mcp,
        };
        let keys = MasterKeyArgs {
            master_key: Some(MASTER_KEY.into()),
            ..Default::default()
        };
        let app = Application::build(&db.database_args(), &keys, &serve)
            .await
            .expect("application builds");
        let address = format!("http://{}", app.local_addr());
        let store = app.store().clone();
        let context = app.context();
        let (tx, rx) = oneshot::channel();
        tokio::spawn(app.run(async {
            let _ = rx.await;
        }));
        TestApp {
            address,
            context,
            client: reqwest::Client::new(),
            store,
            shutdown: Some(tx),
            db,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Creates an account and returns a fresh API key for it.
    pub async fn account_with_key(&self, name: &str) -> String {
        admin(
            &self.store,
            AdminCommand::Account(AccountCommand::Create { name: name.into() }),
        )
        .await;
        self.issue_key(name).await["api_key"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// An admin command against this server's database and master key.
    pub async fn admin(&self, command: AdminCommand) -> Value {
        let database = self.db.database_args();
        let keys = MasterKeyArgs {
            master_key: Some(MASTER_KEY.into()),
            ..Default::default()
        };
        warden::admin::execute(&self.store, &database, &keys, command)
            .await
            .expect("admin command succeeds")
    }

    pub async fn issue_key(&self, account: &str) -> Value {
        admin(
            &self.store,
            AdminCommand::Key(KeyCommand::Issue {
                account: account.into(),
            }),
        )
        .await
    }
}

/// Typed requests, each with an API key as the bearer. They return the
/// status and JSON body, or the response itself where a test reads its
/// headers or raw body.
impl TestApp {
    fn request(&self, method: Method, path: &str, key: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path)).bearer_auth(key)
    }

    pub async fn get_policy(&self, key: &str) -> (u16, Value) {
        answer(self.request(Method::GET, "/v1/agent-policy", key)).await
    }

    pub async fn put_policy(&self, key: &str, policy: &Value) -> (u16, Value) {
        let request = self.request(Method::PUT, "/v1/agent-policy", key);
        answer(request.json(policy)).await
    }

    pub async fn delete_policy(&self, key: &str) -> reqwest::Response {
        let request = self.request(Method::DELETE, "/v1/agent-policy", key);
        request.send().await.unwrap()
    }

    pub async fn get_settings(&self, key: &str) -> (u16, Value) {
        answer(self.request(Method::GET, "/v1/diagnostics/settings", key)).await
    }

    pub async fn put_settings(&self, key: &str, settings: &Value) -> (u16, Value) {
        let request = self.request(Method::PUT, "/v1/diagnostics/settings", key);
        answer(request.json(settings)).await
    }

    /// The capability-gap report; `query` is empty or starts with `?`.
    pub async fn get_capability_gaps(&self, key: &str, query: &str) -> (u16, Value) {
        let path = format!("/v1/diagnostics/capability-gaps{query}");
        answer(self.request(Method::GET, &path, key)).await
    }

    pub async fn put_credential(&self, key: &str, reference: &str, body: &Value) -> (u16, Value) {
        let path = format!("/v1/capability-credentials/{reference}");
        answer(self.request(Method::PUT, &path, key).json(body)).await
    }

    pub async fn delete_credential(&self, key: &str, reference: &str) -> (u16, Value) {
        let path = format!("/v1/capability-credentials/{reference}");
        answer(self.request(Method::DELETE, &path, key)).await
    }

    /// Publishes one capability in the `orders` domain, under a fresh
    /// idempotency key.
    pub async fn create_capability(&self, key: &str, definition: Value) -> (u16, Value) {
        let request = self.request(Method::POST, "/v1/capabilities", key);
        let body = json!({"domain": "orders", "capability": definition});
        answer(request.header("idempotency-key", new_key()).json(&body)).await
    }

    /// Imports a manifest of capabilities in the `orders` domain.
    pub async fn import_capabilities(
        &self,
        key: &str,
        idempotency_key: &str,
        definitions: Vec<Value>,
    ) -> reqwest::Response {
        let request = self.request(Method::POST, "/v1/capabilities/import", key);
        let body = json!({"domain": "orders", "capabilities": definitions});
        let request = request.header("idempotency-key", idempotency_key);
        request.json(&body).send().await.unwrap()
    }

    pub async fn disable_capability(&self, key: &str, id: &str, if_match: &str) -> (u16, Value) {
        let path = format!("/v1/capabilities/{id}/disable");
        let request = self.request(Method::POST, &path, key);
        answer(request.header("if-match", if_match)).await
    }

    /// A contract test of a capability with these arguments.
    pub async fn test_capability(&self, key: &str, id: &str, arguments: Value) -> (u16, Value) {
        let path = format!("/v1/capabilities/{id}/test");
        let body = json!({"arguments": arguments});
        answer(self.request(Method::POST, &path, key).json(&body)).await
    }

    /// A message on the HTTP channel, as JSON.
    pub async fn send_message(&self, key: &str, body: &Value) -> (u16, Value) {
        let request = self.request(Method::POST, "/v1/channels/http/messages", key);
        answer(request.json(body)).await
    }

    /// A message on the HTTP channel, as multipart (`payload`, `image`).
    pub async fn send_multipart(&self, key: &str, form: reqwest::multipart::Form) -> (u16, Value) {
        let request = self.request(Method::POST, "/v1/channels/http/messages", key);
        answer(request.multipart(form)).await
    }
}

/// Sends the request: its status and JSON body.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    status_and_json(request.send().await.unwrap()).await
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
