//! Test fixtures: fresh databases, an in-process server on port 0, the real
//! binary as a child process, and the template that runs a test on both
//! backends.

pub use rstest::rstest;
pub use rstest_reuse::apply;
use rstest_reuse::template;
use serde_json::Value;
use sqlx::{Connection, Executor, PgConnection};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;
use warden::cli::{
    AccountCommand, AdminCommand, DatabaseArgs, KeyCommand, MasterKeyArgs, PlannerArgs, ServeArgs,
};
use warden::startup::Application;
use warden::store::Store;

pub const ENVIRONMENT: &str = "test";
/// base64 of 32 bytes, for servers that need a configured master key.
pub const MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The two databases every `#[apply(backends)]` test runs on, as two cases
/// named `sqlite` and `postgres` (so `cargo test --test api -- sqlite` runs
/// the SQLite half alone). A test is an `async fn name(backend: Backend)`
/// under `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`.
#[template]
#[rstest]
#[case::sqlite(Backend::Sqlite)]
#[case::postgres(Backend::Postgres)]
pub fn backends(#[case] backend: Backend) {}

fn postgres_admin_url() -> String {
    std::env::var("WARDEN_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A fresh, empty database: a temporary SQLite file, or a PostgreSQL
/// database created for this test and dropped (with its connections) after.
pub struct TestDb {
    pub url: String,
    dir: tempfile::TempDir,
    pg_name: Option<String>,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}", dir.path().join("warden.db").display());
                TestDb {
                    url,
                    dir,
                    pg_name: None,
                }
            }
            Backend::Postgres => {
                let name = format!("warden_test_{}", uuid::Uuid::new_v4().simple());
                let admin = postgres_admin_url();
                let mut conn = PgConnection::connect(&admin).await.unwrap_or_else(|err| {
                    panic!(
                        "this test also runs on PostgreSQL, which did not answer at {admin} ({err}).\n\
                         Start it with `make postgres` (scripts/ensure-postgres.sh), point \
                         WARDEN_TEST_POSTGRES_URL at another server, or run the SQLite half \
                         alone with `cargo test --test api -- sqlite`."
                    )
                });
                conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
                    .await
                    .unwrap();
                let base = admin.rsplit_once('/').unwrap().0;
                TestDb {
                    url: format!("{base}/{name}"),
                    dir,
                    pg_name: Some(name),
                }
            }
        }
    }

    /// The SQLite database file (and its WAL) as bytes, for secrecy checks.
    pub fn sqlite_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().contains("warden.db") {
                bytes.extend(std::fs::read(path).unwrap());
            }
        }
        bytes
    }

    /// Whether `needle` appears anywhere in the stored data: the SQLite file
    /// and its WAL byte for byte, or every row of every PostgreSQL table
    /// (as text, and as the hex form PostgreSQL prints for bytea).
    pub async fn contains(&self, needle: &str) -> bool {
        match &self.pg_name {
            None => {
                let bytes = self.sqlite_bytes();
                assert!(!bytes.is_empty(), "the database file exists");
                bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            }
            Some(_) => {
                let mut conn = PgConnection::connect(&self.url).await.unwrap();
                let tables: Vec<(String,)> = sqlx::query_as(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
                let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
                for (table,) in tables {
                    let rows: Vec<(String,)> =
                        sqlx::query_as(&format!("SELECT row_to_json(t)::text FROM \"{table}\" t"))
                            .fetch_all(&mut conn)
                            .await
                            .unwrap();
                    if rows
                        .iter()
                        .any(|(r,)| r.contains(needle) || r.contains(&hex))
                    {
                        return true;
                    }
                }
                false
            }
        }
    }

    /// Whether these bytes appear in the stored data: raw in the SQLite
    /// files, or in PostgreSQL's hex form of bytea (or as base64 or hex text).
    pub async fn contains_bytes(&self, needle: &[u8]) -> bool {
        use base64::Engine;
        let hex: String = needle.iter().map(|b| format!("{b:02x}")).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(needle);
        let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(needle);
        let raw = self.pg_name.is_none()
            && self
                .sqlite_bytes()
                .windows(needle.len())
                .any(|w| w == needle);
        raw || self.contains(&hex).await
            || self.contains(&b64).await
            || self.contains(&b64url).await
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn database_args(&self) -> DatabaseArgs {
        DatabaseArgs {
            database_url: self.url.clone(),
            environment: ENVIRONMENT.into(),
        }
    }

    /// Drops the PostgreSQL database now, closing every connection to it.
    pub async fn drop_postgres_now(&mut self) {
        if let Some(name) = self.pg_name.take() {
            drop_postgres(&name).await;
        }
    }
}

async fn drop_postgres(name: &str) {
    if let Ok(mut conn) = PgConnection::connect(&postgres_admin_url()).await {
        let _ = conn
            .execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
            .await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(name) = self.pg_name.take() {
            // Drop cannot await; a short-lived runtime on its own thread can.
            let _ = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(drop_postgres(&name))
            })
            .join();
        }
    }
}

/// One compiled-guest cache for the whole test run: compiling the guest
/// takes seconds in a debug build, loading the cached form milliseconds.
pub fn guest_cache_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-cache");
    std::fs::create_dir_all(&dir).unwrap();
    // The sandbox refuses a cache directory others can write (whatever the umask).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
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

pub async fn admin(store: &Store, command: AdminCommand) -> Value {
    admin_in(store, ENVIRONMENT, command).await
}

/// An admin command as run on a deployment of another environment.
pub async fn admin_in(store: &Store, environment: &str, command: AdminCommand) -> Value {
    let database = DatabaseArgs {
        database_url: String::new(),
        environment: environment.into(),
    };
    warden::admin::execute(store, &database, &MasterKeyArgs::default(), command)
        .await
        .expect("admin command succeeds")
}

/// Status and parsed JSON body of a response (`Value::Null` when empty).
pub async fn status_and_json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"))
    };
    (status, body)
}

/// Asserts the flat error shape `{error, code}` and nothing else.
pub fn assert_flat_error(body: &Value, code: &str) {
    let object = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is not an object: {body}"));
    assert_eq!(
        object.len(),
        2,
        "flat error has exactly error and code: {body}"
    );
    assert_eq!(body["code"], code, "{body}");
    assert!(body["error"].is_string(), "{body}");
}

/// Asserts the nested error shape `{error: {code, message}}`.
pub fn assert_nested_error(body: &Value, code: &str) {
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// The real `warden` binary as a child process.
pub struct ServerProcess {
    pub child: tokio::process::Child,
    pub address: String,
    /// Every log line the server has written so far.
    pub logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts `warden serve` on a random port and waits until it listens.
    pub async fn start(db: &TestDb, extra_env: &[(&str, &str)]) -> Self {
        let mut command = warden_command(db);
        command
            .arg("serve")
            .env("WARDEN_LISTEN", "127.0.0.1:0")
            .env("WARDEN_MASTER_KEY", MASTER_KEY);
        for (k, v) in extra_env {
            command.env(k, v);
        }
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let address = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                logs.lock().unwrap().push(line.clone());
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if event["message"] == "warden is listening" {
                    return event["address"].as_str().unwrap().to_owned();
                }
            }
            panic!(
                "warden exited before listening:\n{}",
                logs.lock().unwrap().join("\n")
            );
        })
        .await
        .expect("warden starts listening within 60 s");
        // Keep draining the log so the child never blocks on a full pipe.
        let sink = logs.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        ServerProcess {
            child,
            address: format!("http://{address}"),
            logs,
        }
    }
}

/// `warden` with the test database and JSON logs, ready for arguments.
pub fn warden_command(db: &TestDb) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("WARDEN_DATABASE_URL", &db.url)
        .env("WARDEN_ENVIRONMENT", ENVIRONMENT)
        .env("WARDEN_LOG_FORMAT", "json")
        .env("WARDEN_LOG", "info")
        .env("WARDEN_GUEST_CACHE_DIR", guest_cache_dir())
        .current_dir(db.dir());
    command
}
