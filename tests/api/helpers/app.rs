//! The server under test, in-process on port 0, and its typed requests.

use super::client::ApiClient;
use super::{Backend, MASTER_KEY, TestDb, admin, guest_cache_dir};
use serde_json::Value;
use tokio::sync::oneshot;
use warden::cli::{
    AccountCommand, AdminCommand, KeyCommand, MasterKeyArgs, PlannerArgs, ServeArgs,
};
use warden::startup::Application;
use warden::store::Store;

/// What every test server shares: port 0, the run's compiled-guest cache,
/// loopback endpoints allowed (the tests' fakes listen on 127.0.0.1).
fn serve_args() -> ServeArgs {
    ServeArgs::local()
        .with_guest_cache(guest_cache_dir())
        .with_loopback_endpoints(true)
}

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
        let serve = serve_args().with_loopback_endpoints(false);
        Self::serve(TestDb::new(backend).await, serve).await
    }

    /// A server with the loopback development switch on, so capabilities can
    /// call endpoints the test runs on 127.0.0.1.
    pub async fn spawn_on(db: TestDb) -> Self {
        Self::serve(db, serve_args()).await
    }

    /// A second server on this one's database: another replica.
    pub async fn replica(&self) -> Self {
        Self::spawn_on(self.db.shared()).await
    }

    /// A loopback-enabled server with these client limits.
    pub async fn spawn_with_limits(backend: Backend, limits: warden::cli::ClientLimits) -> Self {
        let serve = serve_args().with_limits(limits);
        Self::serve(TestDb::new(backend).await, serve).await
    }

    /// A loopback-enabled server whose planner is configured by `planner`
    /// (an OpenAI-compatible backend, typically the test's fake).
    pub async fn spawn_with_planner(backend: Backend, planner: PlannerArgs) -> Self {
        let serve = serve_args().with_planner(planner);
        Self::serve(TestDb::new(backend).await, serve).await
    }

    /// A loopback-enabled server whose policy guest is the component at `guest`.
    pub async fn spawn_with_guest(backend: Backend, guest: std::path::PathBuf) -> Self {
        let serve = serve_args().with_policy_guest(guest);
        Self::serve(TestDb::new(backend).await, serve).await
    }

    /// A loopback-enabled server with these MCP settings and client limits.
    pub async fn spawn_with_mcp(
        db: TestDb,
        mcp: warden::cli::McpArgs,
        limits: warden::cli::ClientLimits,
    ) -> Self {
        Self::serve(db, serve_args().with_mcp(mcp).with_limits(limits)).await
    }

    /// A loopback-enabled server with the messaging-platform channel configured.
    pub async fn spawn_with_platform(db: TestDb, platform: warden::cli::PlatformArgs) -> Self {
        Self::serve(db, serve_args().with_platform(platform)).await
    }

    /// A loopback-enabled server with prompt integrations' verifier
    /// configured and this planner (the model prompt integrations call).
    pub async fn spawn_with_prompt(
        db: TestDb,
        planner: PlannerArgs,
        prompt: warden::cli::PromptArgs,
    ) -> Self {
        let serve = serve_args().with_planner(planner).with_prompt(prompt);
        Self::serve(db, serve).await
    }

    async fn serve(db: TestDb, serve: ServeArgs) -> Self {
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

/// Typed requests, each with an API key as the bearer (written once, in
/// `ApiClient`). They return the status and JSON body, or the response
/// itself where a test reads its headers or raw body.
impl TestApp {
    /// This server's typed requests for the account of `key`.
    pub fn api(&self, key: &str) -> ApiClient {
        ApiClient::new(self.client.clone(), &self.address, key)
    }

    pub async fn get_policy(&self, key: &str) -> (u16, Value) {
        self.api(key).get_policy().await
    }

    pub async fn put_policy(&self, key: &str, policy: &Value) -> (u16, Value) {
        self.api(key).put_policy(policy).await
    }

    pub async fn delete_policy(&self, key: &str) -> reqwest::Response {
        self.api(key).delete_policy().response().await
    }

    pub async fn get_settings(&self, key: &str) -> (u16, Value) {
        self.api(key).get_settings().await
    }

    pub async fn put_settings(&self, key: &str, settings: &Value) -> (u16, Value) {
        self.api(key).put_settings(settings).await
    }

    /// The capability-gap report; `query` is empty or starts with `?`.
    pub async fn get_capability_gaps(&self, key: &str, query: &str) -> (u16, Value) {
        self.api(key).get_capability_gaps(query).await
    }

    pub async fn put_credential(&self, key: &str, reference: &str, body: &Value) -> (u16, Value) {
        self.api(key).put_credential(reference, body).await
    }

    pub async fn delete_credential(&self, key: &str, reference: &str) -> (u16, Value) {
        self.api(key).delete_credential(reference).await
    }

    /// Publishes one capability in the `orders` domain, under a fresh
    /// idempotency key.
    pub async fn create_capability(&self, key: &str, definition: Value) -> (u16, Value) {
        self.api(key).create_capability(definition).await
    }

    /// Imports a manifest of capabilities in the `orders` domain.
    pub async fn import_capabilities(
        &self,
        key: &str,
        idempotency_key: &str,
        definitions: Vec<Value>,
    ) -> reqwest::Response {
        let api = self.api(key);
        api.import_capabilities(idempotency_key, definitions)
            .response()
            .await
    }

    pub async fn disable_capability(&self, key: &str, id: &str, if_match: &str) -> (u16, Value) {
        self.api(key).disable_capability(id, if_match).await
    }

    /// A contract test of a capability with these arguments.
    pub async fn test_capability(&self, key: &str, id: &str, arguments: Value) -> (u16, Value) {
        self.api(key).test_capability(id, arguments).await
    }

    /// A message on the HTTP channel, as JSON.
    pub async fn send_message(&self, key: &str, body: &Value) -> (u16, Value) {
        self.api(key).send_message(body).await
    }

    /// A message on the HTTP channel, as multipart (`payload`, `image`).
    pub async fn send_multipart(&self, key: &str, form: reqwest::multipart::Form) -> (u16, Value) {
        self.api(key).send_multipart(form).await
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
