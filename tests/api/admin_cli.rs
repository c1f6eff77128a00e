//! `warden admin …` as an operator runs it: the real binary, JSON on stdout.

use crate::helpers::*;
use serde_json::Value;

struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

async fn run(db: &TestDb, args: &[&str]) -> Output {
    let out = warden_command(db).args(args).output().await.unwrap();
    Output {
        success: out.status.success(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn json_line(out: &Output) -> Value {
    assert!(out.success, "command failed: {}", out.stderr);
    assert_eq!(
        out.stdout.lines().count(),
        1,
        "one JSON object per command: {:?}",
        out.stdout
    );
    serde_json::from_str(&out.stdout).unwrap()
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_accounts_and_keys_that_work_until_revoked(backend: Backend) {
    let db = TestDb::new(backend).await;
    assert_eq!(
        json_line(&run(&db, &["admin", "account", "create", "acme"]).await),
        serde_json::json!({"account": "acme"})
    );

    let again = run(&db, &["admin", "account", "create", "acme"]).await;
    assert!(!again.success);
    assert!(again.stdout.is_empty());
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert!(
        !run(&db, &["admin", "account", "create", "has space"])
            .await
            .success
    );
    assert!(!run(&db, &["admin", "key", "issue", "nobody"]).await.success);
    assert!(
        !run(&db, &["admin", "key", "revoke", "key_unknown"])
            .await
            .success
    );

    let issued = json_line(&run(&db, &["admin", "key", "issue", "acme"]).await);
    let key = issued["api_key"].as_str().unwrap().to_owned();
    let key_id = issued["key_id"].as_str().unwrap().to_owned();
    assert_eq!(issued["account"], "acme");
    assert_eq!(issued.as_object().unwrap().len(), 3);

    let app = TestApp::spawn_on(db).await;
    let policy = serde_json::json!({"version": 1, "instructions": "x"});
    assert_eq!(app.put_policy(&key, &policy).await.0, 201);

    let revoked = json_line(&run(&app.db, &["admin", "key", "revoke", &key_id]).await);
    assert_eq!(
        revoked,
        serde_json::json!({"key_id": key_id, "status": "revoked"})
    );
    assert_eq!(app.get_policy(&key).await.0, 401);

    // The key is stored only as a hash.
    match backend {
        Backend::Sqlite => {
            let bytes = app.db.sqlite_bytes();
            assert!(!bytes.is_empty());
            let needle = key.as_bytes();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "the API key is in the database file"
            );
        }
        Backend::Postgres => {
            let warden::store::Store::Postgres(postgres) = &app.store else {
                unreachable!()
            };
            let pool = postgres.pool();
            let rows: Vec<(String,)> =
                sqlx::query_as("SELECT row_to_json(k)::text FROM api_keys k")
                    .fetch_all(pool)
                    .await
                    .unwrap();
            assert_eq!(rows.len(), 1);
            assert!(!rows[0].0.contains(&key), "the API key is in the database");
        }
    }
}

#[tokio::test]
async fn help_explains_commands_and_environment() {
    let db = TestDb::new(Backend::Sqlite).await;
    let top = run(&db, &["--help"]).await;
    assert!(top.success);
    for word in [
        "serve",
        "admin",
        "WARDEN_DATABASE_URL",
        "WARDEN_ENVIRONMENT",
        "WARDEN_LOG",
    ] {
        assert!(top.stdout.contains(word), "--help lacks {word}");
    }
    let serve = run(&db, &["serve", "--help"]).await;
    for word in [
        "WARDEN_LISTEN",
        "WARDEN_MASTER_KEY",
        "WARDEN_MASTER_KEY_FILE",
        "WARDEN_LOG_FORMAT",
    ] {
        assert!(serve.stdout.contains(word), "serve --help lacks {word}");
    }
}

#[tokio::test]
async fn postgres_without_a_master_key_refuses_to_start() {
    let db = TestDb::new(Backend::Postgres).await;
    let out = run(&db, &["serve"]).await;
    assert!(!out.success);
    assert!(out.stderr.contains("WARDEN_MASTER_KEY"), "{}", out.stderr);
}

#[tokio::test]
async fn sqlite_without_a_master_key_creates_a_private_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let db = TestDb::new(Backend::Sqlite).await;
    let mut command = warden_command(&db);
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let key_file = db.dir().join("warden.db.key");
    for _ in 0..200 {
        if key_file.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    child.kill().await.unwrap();
    let mode = std::fs::metadata(&key_file)
        .expect("key file created")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_key_rotate_command_reseals_under_the_new_key(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let old = warden::crypto::master_key::Keyring::new(
        warden::crypto::master_key::MasterKey::from_base64(MASTER_KEY).unwrap(),
        vec![],
    );
    let spec = warden::domain::credential::CredentialSpec::from_json(
        &serde_json::json!({"auth_type": "bearer", "secret": "rotate-me"}),
    )
    .unwrap();
    let reference = warden::domain::credential::CredentialRef::parse("cred_rot").unwrap();
    warden::vault::store_credential(&store, &old, &account, &reference, &spec)
        .await
        .unwrap();
    store.close().await;

    let old_file = db.dir().join("old.key");
    std::fs::write(&old_file, MASTER_KEY).unwrap();
    let new_key = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
    let rotate = |previous: bool| {
        let mut command = warden_command(&db);
        command
            .args(["admin", "master-key", "rotate"])
            .env("WARDEN_MASTER_KEY", new_key);
        if previous {
            command.env("WARDEN_MASTER_KEY_PREVIOUS_FILE", &old_file);
        }
        command
    };
    let failed = rotate(false).output().await.unwrap();
    assert!(
        !failed.status.success(),
        "without the previous key the old secret cannot be re-sealed"
    );
    let out = rotate(true).output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["resealed"], 1);
    assert!(report["master_key_id"].as_str().unwrap().starts_with("mk_"));
    let out = rotate(false).output().await.unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            report["resealed"].as_u64(),
            report["already_current"].as_u64()
        ),
        (Some(0), Some(1))
    );
}
