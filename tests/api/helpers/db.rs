//! Fresh databases: a temporary SQLite file, or a PostgreSQL database
//! created for one test and dropped after it.

use super::{Backend, ENVIRONMENT};
use sqlx::{Connection, Executor, PgConnection};
use warden::cli::DatabaseArgs;

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

    /// A store on this database, opened as the server opens it (its
    /// migrations run); each call is another pool, as another replica's.
    pub async fn store(&self) -> warden::store::Store {
        warden::store::Store::connect(&self.url).await.unwrap()
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

    /// Another handle on this database, as a second replica would open it;
    /// dropping it leaves the database to this one.
    pub fn shared(&self) -> TestDb {
        TestDb {
            url: self.url.clone(),
            dir: tempfile::tempdir().unwrap(),
            pg_name: None,
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
