//! The 5-turn conversation: each of `c` clients holds conversations one
//! after another (each turn needs the last one's `conversation_id`, which
//! `wrk`'s one-request scripts cannot carry), and every turn's latency counts.
//! Turns 3 and 4 call `order_status`; turn 2 asks for the order number.

use crate::Config;
use crate::load::summarize;
use crate::procs;
use crate::report::{Mode, Row};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TURNS: [&str; 5] = [
    "Hola",
    "¿Dónde está mi pedido?",
    "A-1001",
    "¿Dónde está mi pedido A-1001?",
    "Gracias",
];

pub async fn sweep(
    config: &Config,
    base: &str,
    key: &str,
    pid: u32,
    backend: &'static str,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for &clients in &config.few_connections {
        procs::reset_peak_rss(pid);
        let cpu_before = procs::cpu(pid);
        let started = Instant::now();
        let deadline = started + config.run;
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..clients {
            let (base, key) = (base.to_owned(), key.to_owned());
            tasks.spawn(async move { client(worker, &base, &key, deadline).await });
        }
        let mut latencies = Vec::new();
        let mut errors = 0;
        while let Some(done) = tasks.join_next().await {
            let (l, e) = done.unwrap();
            latencies.extend(l);
            errors += e;
        }
        let mut m = summarize(&mut latencies, started.elapsed().as_secs_f64());
        m.errors = errors;
        let cpu = procs::cpu(pid) - cpu_before;
        let row = Row {
            scenario: "conversation_5",
            backend,
            mode: Mode::Closed(clients),
            m,
            cpu_us_per_request: cpu.as_secs_f64() * 1e6 / m.ok.max(1) as f64,
            peak_rss_mib: procs::peak_rss_mib(pid),
        };
        println!("{}", crate::report::line(&row));
        rows.push(row);
    }
    rows
}

async fn client(worker: usize, base: &str, key: &str, deadline: Instant) -> (Vec<Duration>, u64) {
    let http = reqwest::Client::new();
    let (mut latencies, mut errors) = (Vec::new(), 0);
    let mut n = 0;
    while Instant::now() < deadline {
        n += 1;
        let user = format!("bench-conv-{worker}-{n}");
        let mut conversation: Option<String> = None;
        for text in TURNS {
            let mut body = json!({"user_id": user, "message": {"type": "text", "body": text}});
            if let Some(id) = &conversation {
                body["conversation_id"] = json!(id);
            }
            let sent = Instant::now();
            let answer = http
                .post(format!("{base}/v1/channels/http/messages"))
                .bearer_auth(key)
                .json(&body)
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            let reply: Option<Value> = match answer {
                Ok(r) if r.status().is_success() => r.json().await.ok(),
                _ => None,
            };
            match reply {
                Some(reply) => {
                    latencies.push(sent.elapsed());
                    conversation = reply["conversation_id"].as_str().map(str::to_owned);
                }
                None => {
                    errors += 1;
                    break;
                }
            }
        }
    }
    (latencies, errors)
}
