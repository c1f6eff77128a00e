//! The server under test, in-process on port 0, and its typed requests.

use super::{Backend, MASTER_KEY, TestDb, admin, guest_cache_dir};
use serde_json::Value;
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

    async fn spawn_configured(
        db: TestDb,
        dev_allow_loopback: bool,
        planner: PlannerArgs,
        limits: warden::cli::ClientLimits,
    ) -> Self {
        let serve = ServeArgs {
            listen: "127.0.0.1:0".parse().unwrap(),
            sandbox: warden::cli::SandboxArgs {
                policy_guest: None,
                guest_cache_dir: Some(guest_cache_dir()),
                dev_allow_loopback,
            },
            planner,
            limits,
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

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
