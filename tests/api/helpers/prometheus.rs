//! A real Prometheus server (Debian's `prometheus`, installed by
//! scripts/ensure-prometheus.sh) started on loopback with a one-second
//! scrape interval, queried through its HTTP API; and `promtool`.

use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub struct Prometheus {
    _child: tokio::process::Child,
    pub base: String,
    _data: tempfile::TempDir,
    http: reqwest::Client,
}

fn tool(name: &str) -> &'static str {
    for candidate in ["/usr/bin/prometheus", "/usr/bin/promtool"] {
        if candidate.ends_with(name) && Path::new(candidate).exists() {
            return candidate;
        }
    }
    panic!("{name} is not installed: run scripts/ensure-prometheus.sh (make test does)");
}

/// A free loopback port (bound and released; Prometheus takes it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (host:port, path /metrics) every
    /// second, and waits until it is ready.
    pub async fn start(target: &str) -> Prometheus {
        let data = tempfile::tempdir().unwrap();
        let config = data.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n\
                 scrape_configs:\n  - job_name: warden\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = tokio::process::Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            _data: data,
            http: reqwest::Client::new(),
        };
        let ready = format!("{}/-/ready", prometheus.base);
        for _ in 0..300 {
            if let Ok(response) = prometheus.http.get(&ready).send().await
                && response.status().is_success()
            {
                return prometheus;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("prometheus was not ready within 30 s");
    }

    /// An instant query's samples: (labels, value).
    pub async fn query(&self, expr: &str) -> Vec<(Value, f64)> {
        let response: Value = self
            .http
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", expr)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(response["status"], "success", "{expr}: {response}");
        response["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{expr}: {response}"))
            .iter()
            .map(|sample| {
                let value = sample["value"][1].as_str().unwrap().parse().unwrap();
                (sample["metric"].clone(), value)
            })
            .collect()
    }

    /// The one value of a query that sums to a single sample (0 when empty).
    pub async fn value(&self, expr: &str) -> f64 {
        let samples = self.query(expr).await;
        assert!(samples.len() <= 1, "{expr}: {samples:?}");
        samples.first().map_or(0.0, |(_, v)| *v)
    }

    /// Waits until Prometheus has scraped the target once more after now,
    /// successfully.
    pub async fn wait_for_scrape(&self) {
        let since = now_seconds();
        for _ in 0..100 {
            // `timestamp()` of a plain selector is the sample's own time
            // (of any other expression, the evaluation time).
            let at = self.query("timestamp(up{job=\"warden\"})").await;
            let up = self.query("up{job=\"warden\"}").await;
            if at.first().is_some_and(|(_, at)| *at > since)
                && up.first().is_some_and(|(_, up)| *up == 1.0)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("prometheus did not scrape warden within 20 s");
    }
}

pub fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `promtool ARGS` with `input` on standard input: (success, output).
pub async fn promtool(args: &[&str], input: Option<&str>) -> (bool, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(tool("promtool"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).await.unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
