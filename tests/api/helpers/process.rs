//! The real `warden` binary as a child process.

use super::client::ApiClient;
use super::{ENVIRONMENT, MASTER_KEY, TestDb, guest_cache_dir};
use serde_json::Value;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The real `warden` binary as a child process.
pub struct ServerProcess {
    pub child: tokio::process::Child,
    pub address: String,
    /// Every log line the server has written so far.
    pub logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    http: reqwest::Client,
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
            http: reqwest::Client::new(),
        }
    }

    /// This server's typed requests for the account of `key`.
    pub fn api(&self, key: &str) -> ApiClient {
        ApiClient::new(self.http.clone(), &self.address, key)
    }

    /// Every log line the server has written up to now. The pipe is read by
    /// a task of its own, so a line written before an answer may not have
    /// been read yet when the answer arrives; lines come in the order they
    /// were written, so once a marker request's `request finished` line is
    /// read, every line written before it has been read too.
    pub async fn logs_so_far(&self) -> Vec<String> {
        let mark = format!("/log-mark-{}", uuid::Uuid::new_v4().simple());
        self.get(&mark).await;
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                {
                    let logs = self.logs.lock().unwrap();
                    if logs.iter().any(|line| line.contains(&mark)) {
                        return logs.clone();
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the marker request's log line is written within 10 s")
    }

    /// An unauthenticated GET of `path` (health, the docs UI), answered.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        let url = format!("{}{path}", self.address);
        self.http.get(url).send().await.unwrap()
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

/// Runs the real binary's `warden ARGS` on the test database and returns
/// the JSON it prints; fails the test if the command fails.
pub async fn cli(db: &TestDb, args: &[&str]) -> Value {
    let out = warden_command(db).args(args).output().await.unwrap();
    assert!(
        out.status.success(),
        "warden {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Creates `account` and issues it an API key through the real binary's
/// CLI (for tests whose server is the binary itself); returns the key.
pub async fn cli_account_with_key(db: &TestDb, account: &str) -> String {
    cli(db, &["admin", "account", "create", account]).await;
    cli(db, &["admin", "key", "issue", account]).await["api_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Starts `warden serve` with these variables, expecting it to refuse to
/// start (a configuration mistake); returns what it printed on stderr.
pub async fn serve_refuses(db: &TestDb, env: &[(&str, &str)]) -> String {
    let mut command = warden_command(db);
    command.env("WARDEN_MASTER_KEY", MASTER_KEY).arg("serve");
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "warden serve started with {env:?}: {stderr}"
    );
    stderr
}
