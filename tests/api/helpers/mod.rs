//! Test fixtures: fresh databases (`db`), an in-process server on port 0
//! (`app`), the real binary as a child process (`process`), the typed
//! requests both answer (`client`), fakes for host endpoints and the
//! inference backend, the capability fixtures and a small shop; and the
//! template that runs a test on both backends.

mod app;
mod client;
mod db;
pub mod endpoint;
pub mod fake_inference;
pub mod fake_send_api;
pub mod fake_verifier;
pub mod fixtures;
mod process;
pub mod prometheus;
pub mod raw_http;
pub mod shop;
pub mod sql;

pub use app::TestApp;
pub use client::ApiClient;
pub use db::TestDb;
pub use process::{ServerProcess, cli, cli_account_with_key, serve_refuses, warden_command};
pub use rstest::rstest;
pub use rstest_reuse::apply;
use rstest_reuse::template;
use serde_json::Value;
use warden::cli::{AdminCommand, DatabaseArgs, MasterKeyArgs};
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
