//! `make bench`'s load benchmark: what a user feels of Warden under
//! concurrent load, next to what the same work costs without it.
//!
//! It starts, all on loopback:
//! - a host endpoint answering fixed JSON (this binary again, `role endpoint`);
//! - a bare relay: an axum handler making the same outbound reqwest call,
//!   with no validation, signing or storage (`role relay`);
//! - `warden serve` (the release build cargo made for this bench) on a fresh
//!   SQLite file, then on a fresh PostgreSQL database, with an account and
//!   key made by `warden admin`, a credential and the walkthrough's
//!   `order_status` capability pointing at the endpoint;
//!
//! and loads each (`load.rs`: `wrk` closed loop at 1/8/32/128 connections,
//! its own open loop at fixed arrival rates): `GET /health`, a contract test
//! (`POST /v1/capabilities/{id}/test`), the same call as an MCP `tools/call`
//! (`POST /v1/mcp`, at 1 and 8 connections), a message turn that calls
//! `order_status` (a new conversation each time) with 1, 100 and 1,000
//! capabilities registered, and a 5-turn conversation; the same turn on a
//! pair of servers, one with metrics and tracing on and one without, in
//! alternating slices (`observed.rs`); the contract test
//! and the turn past capacity, at twice what 8 connections sustained
//! (`overload.rs`, scenario `past_capacity`). CPU per request and
//! peak RSS come from /proc of the process under load. It writes the table
//! into `docs/benchmarks.md` (between markers; the prose around it is kept)
//! and the plot to `docs/benchmarks-latency.svg`.
//!
//! Environment:
//! - `WARDEN_BENCH_QUICK=1`: a few seconds per run, fewer levels; prints,
//!   writes no docs (unless `WARDEN_BENCH_WRITE=1`);
//! - `WARDEN_BENCH_BACKENDS=sqlite` (default `sqlite,postgres`);
//! - `WARDEN_BENCH_ONLY=turn_1,relay`: only these scenarios;
//! - `WARDEN_BENCH_CONNECTIONS=8,128`: these closed-loop levels (8 sizes
//!   `past_capacity`);
//! - `WARDEN_BENCH_RATES=500,2000`: these open-loop arrival rates (empty:
//!   none; an A/B of the closed loop alone, with no overload's aftermath
//!   in the database between runs);
//! - `WARDEN_BENCH_POSTGRES_URL` (default the test suite's server);
//! - `WARDEN_BENCH_WARDEN_EXE=/path/to/warden`: load that build of Warden
//!   instead of this one (an A/B comparison with another commit);
//! - `WARDEN_BENCH_PROFILE=turn_1`: `perf record` Warden during that
//!   scenario's 8-connection run, and draw `docs/profile-<scenario>-<db>.svg`;
//! - `WARDEN_BENCH_OVERLOAD=30`: seconds of `past_capacity`'s phase at
//!   twice capacity (default 30, 3 in the quick mode; the drop after it
//!   lasts a third as long, at least 2 s);
//!   `WARDEN_BENCH_OVERLOAD_SAMPLES=/tmp/past` writes each of its requests
//!   (due time, the generator's lateness, latency, outcome) to
//!   `/tmp/past-<scenario>-<db>.csv`;
//! - `WARDEN_BENCH_COUNT=400`: count that many requests in instructions
//!   under callgrind (`counted.rs`), on a server of their own: the observed
//!   pair's turns, `capability_test` and `mcp_call` (400 in the full mode
//!   even unset, none in the quick mode unless set; 0 for none) and, only
//!   when set, `turn_1`; the window's dumps are kept in `target/callgrind/`
//!   for `callgrind_annotate`;
//! - `WARDEN_BENCH_SMOKE=1` (`make test`, with the quick mode): fail if
//!   any closed-loop run or soak slice saw an error;
//! - `WARDEN_BENCH_SOAK=600`: instead of all the above, the soak
//!   (`soak.rs`, `make soak`): that many seconds of steady load per database,
//!   watched for growth; writes its own section of `docs/benchmarks.md`;
//! - `WARDEN_BENCH_GROWTH=1`: instead of all the above, the growth run
//!   (`growth.rs`, `make growth`): each request with little data and with a
//!   lot, the platform queue draining a large backlog, the files and tables
//!   around the purge (`WARDEN_BENCH_GROWTH_SCALE=0.01` for a quick look,
//!   `WARDEN_BENCH_GROWTH_REQUESTS`, `WARDEN_BENCH_ONLY=requests,drain,purge`
//!   for some of it); with `WARDEN_BENCH_WRITE=1` it writes its own section
//!   of `docs/benchmarks.md`.

mod callgrind;
mod conversation;
mod counted;
mod drain;
mod growth;
mod load;
mod observed;
mod open_client;
mod overload;
mod procs;
mod profile;
mod report;
mod roles;
mod seed;
mod sizes;
mod soak;

use load::{Measured, RequestSpec};
use procs::Proc;
use report::{Mode, Row};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The turn every message scenario sends: selects and calls `order_status`.
pub const TURN_TEXT: &str = "¿Dónde está mi pedido A-1001?";

pub struct Config {
    pub quick: bool,
    run: Duration,
    warmup: Duration,
    connections: Vec<usize>,
    /// Levels for the 100- and 1,000-capability turns and the conversation.
    few_connections: Vec<usize>,
    rates: Vec<u32>,
    backends: Vec<String>,
    only: Option<Vec<String>>,
    /// The scenario whose 8-connection run is profiled (`profile.rs`).
    profile: Option<String>,
    /// The soak's length per database, if this run is the soak (`soak.rs`).
    soak: Option<Duration>,
    /// Fail on errors where none are expected (`make test`'s smoke).
    smoke: bool,
    /// The growth run's settings, if this run is it (`growth.rs`).
    growth: Option<growth::Settings>,
}

impl Config {
    fn from_env() -> Config {
        let quick = std::env::var("WARDEN_BENCH_QUICK").is_ok_and(|v| v == "1");
        let list = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .collect::<Vec<_>>()
            })
        };
        Config {
            quick,
            run: Duration::from_secs(if quick { 3 } else { 10 }),
            warmup: Duration::from_secs(if quick { 1 } else { 3 }),
            connections: match numbers("WARDEN_BENCH_CONNECTIONS") {
                Some(levels) => levels,
                None if quick => vec![1, 8],
                None => vec![1, 8, 32, 128],
            },
            few_connections: vec![1, 8],
            rates: match numbers("WARDEN_BENCH_RATES") {
                Some(rates) => rates,
                None if quick => vec![500, 2000],
                None => vec![250, 500, 1000, 2000, 4000],
            },
            backends: list("WARDEN_BENCH_BACKENDS")
                .unwrap_or_else(|| vec!["sqlite".into(), "postgres".into()]),
            only: list("WARDEN_BENCH_ONLY"),
            profile: std::env::var("WARDEN_BENCH_PROFILE").ok(),
            smoke: std::env::var("WARDEN_BENCH_SMOKE").is_ok_and(|v| v == "1"),
            soak: std::env::var("WARDEN_BENCH_SOAK").ok().map(|v| {
                Duration::from_secs(v.trim().parse().expect("WARDEN_BENCH_SOAK is seconds"))
            }),
            growth: growth::Settings::from_env(),
        }
    }

    /// How many turns of the observed pair are counted in instructions
    /// (`observed::counted`): `WARDEN_BENCH_COUNT`, else 400 in the full
    /// mode and none in the quick one.
    fn counted_turns(&self) -> usize {
        match std::env::var("WARDEN_BENCH_COUNT") {
            Ok(turns) => turns
                .parse()
                .expect("WARDEN_BENCH_COUNT is a number of turns"),
            Err(_) if self.quick => 0,
            Err(_) => 400,
        }
    }

    /// Whether `scenario` is counted too, on a server of its own (it adds
    /// minutes): `capability_test` and `mcp_call`, issue 27's judge, in
    /// the full mode or when `WARDEN_BENCH_COUNT` asks; `turn_1` only when
    /// it asks.
    fn counts(&self, scenario: &str) -> bool {
        let asked = std::env::var_os("WARDEN_BENCH_COUNT").is_some();
        self.wants(scenario) && self.counted_turns() > 0 && (asked || scenario != "turn_1")
    }

    fn wants(&self, scenario: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.iter().any(|o| o == scenario))
    }
}

/// A comma-separated list of numbers from the environment (empty items
/// skipped, so an empty value is an empty list); `None` when unset.
fn numbers<T: std::str::FromStr>(name: &str) -> Option<Vec<T>> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                item.parse()
                    .unwrap_or_else(|_| panic!("{name}: numbers, not {item:?}"))
            })
            .collect(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("role") {
        return roles::run(&args[2..]);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

/// Something under load: a process and the request it is sent.
struct Target<'a> {
    scenario: &'static str,
    backend: &'static str,
    pid: u32,
    spec: RequestSpec,
    config: &'a Config,
    work: &'a Path,
}

impl Target<'_> {
    async fn measure(&self, mode: Mode) -> Row {
        self.measure_for(mode, self.config.run).await
    }

    /// One run of `run`'s length.
    async fn measure_for(&self, mode: Mode, run: Duration) -> Row {
        procs::reset_peak_rss(self.pid);
        let cpu_before = procs::cpu(self.pid);
        let m: Measured = match mode {
            Mode::Closed(connections) => {
                let (spec, work) = (self.spec.clone(), self.work.to_owned());
                tokio::task::spawn_blocking(move || {
                    load::closed_loop(&spec, connections, run, &work)
                })
                .await
                .unwrap()
            }
            Mode::Open(rate) => load::open_loop(&self.spec, rate as f64, run).await,
        };
        let cpu = procs::cpu(self.pid) - cpu_before;
        let row = Row {
            scenario: self.scenario,
            backend: self.backend,
            mode,
            m,
            cpu_us_per_request: cpu.as_secs_f64() * 1e6 / m.ok.max(1) as f64,
            peak_rss_mib: procs::peak_rss_mib(self.pid),
        };
        println!("{}", report::line(&row));
        row
    }

    async fn warm_up(&self) {
        let (spec, warmup, work) = (self.spec.clone(), self.config.warmup, self.work.to_owned());
        tokio::task::spawn_blocking(move || load::closed_loop(&spec, 8, warmup, &work))
            .await
            .unwrap();
    }

    /// Closed loop at `levels`, then open loop up to saturation if `open`.
    async fn sweep(&self, levels: &[usize], open: bool, rows: &mut Vec<Row>) {
        if !self.config.wants(self.scenario) {
            return;
        }
        self.warm_up().await;
        for &c in levels {
            let profile = (c == 8 && self.config.profile.as_deref() == Some(self.scenario))
                .then(|| profile::Recording::start(self.pid, self.config.run, self.work));
            rows.push(self.measure(Mode::Closed(c)).await);
            if let Some(recording) = profile {
                recording.finish(
                    &PathBuf::from(env!("CARGO_MANIFEST_DIR")),
                    &format!("{}-{}", self.scenario, self.backend),
                );
            }
        }
        if open {
            for &rate in &self.config.rates {
                let row = self.measure(Mode::Open(rate)).await;
                rows.push(row);
                // Past saturation every higher rate only queues more.
                if row.m.errors > 0 || row.m.throughput < 0.9 * rate as f64 {
                    break;
                }
            }
        }
    }
}

async fn bench() {
    let config = Config::from_env();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Another build of Warden to load instead (an A/B comparison with an
    // older commit's `target/release/warden`).
    let warden_exe = std::env::var_os("WARDEN_BENCH_WARDEN_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_warden")));
    let work = tempfile::Builder::new()
        .prefix("warden-load-")
        .tempdir()
        .unwrap();
    let work = work.path();
    let started_at = std::time::SystemTime::now();
    let load_before = procs::load_average();
    println!(
        "load benchmark ({}), warden = {}, load average {load_before}",
        if config.quick { "quick" } else { "full" },
        warden_exe.display()
    );

    let (endpoint, endpoint_port) = Proc::role("endpoint", &["endpoint"]);
    let endpoint_url = format!("http://127.0.0.1:{endpoint_port}/orders/status");
    if let Some(settings) = &config.growth {
        let results = growth::Growth {
            settings,
            parts: growth::Parts {
                requests: config.wants("requests"),
                drain: config.wants("drain"),
                purge: config.wants("purge"),
            },
            exe: &warden_exe,
            work,
            root: &root,
            endpoint_url: &endpoint_url,
            client: &reqwest::Client::new(),
        }
        .run(&config.backends)
        .await;
        drop(endpoint);
        if config.smoke {
            for r in &results {
                let Some(drain) = &r.drain else {
                    continue;
                };
                assert_eq!(
                    drain.sent, drain.backlog,
                    "{}: the backlog did not drain",
                    r.backend
                );
            }
        }
        let text = growth::markdown(settings, &results, &load_before, &procs::load_average());
        println!("\n{text}");
        if std::env::var("WARDEN_BENCH_WRITE").is_ok_and(|v| v == "1") {
            report::write_section(&root, growth::BEGIN, growth::END, &text);
            println!("wrote the growth section of docs/benchmarks.md");
        }
        return;
    }
    let (relay, relay_port) = Proc::role("relay", &["relay", &endpoint_url]);
    let order = json!({"order": "A-1001"}).to_string();
    let json_post = |url: String, body: &str| RequestSpec {
        method: "POST",
        url,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: Some(body.to_owned()),
        vary_order: true,
    };

    let mut rows = Vec::new();
    let mut soaks = Vec::new();
    let mut overloads = Vec::new();
    let mut counted = Vec::new();
    let overload_high = match std::env::var("WARDEN_BENCH_OVERLOAD") {
        Ok(v) => v.trim().parse().expect("WARDEN_BENCH_OVERLOAD is seconds"),
        Err(_) if config.quick => 3,
        Err(_) => 30,
    };
    let (overload_high, overload_low) = (
        Duration::from_secs(overload_high),
        Duration::from_secs((overload_high / 3).max(2)),
    );
    let baseline = |scenario, pid, spec| Target {
        scenario,
        backend: "-",
        pid,
        spec,
        config: &config,
        work,
    };
    if config.soak.is_none() {
        baseline(
            "endpoint",
            endpoint.pid(),
            json_post(endpoint_url.clone(), &order),
        )
        .sweep(&config.connections, false, &mut rows)
        .await;
        baseline(
            "relay",
            relay.pid(),
            json_post(format!("http://127.0.0.1:{relay_port}/relay"), &order),
        )
        .sweep(&config.connections, true, &mut rows)
        .await;
    }

    let client = reqwest::Client::new();
    for backend in config.backends.clone() {
        let backend: &'static str = match backend.as_str() {
            "sqlite" => "sqlite",
            "postgres" => "postgres",
            other => panic!("unknown backend {other}"),
        };
        let database = Database::create(backend, work).await;
        let port = procs::free_port();
        let base = format!("http://127.0.0.1:{port}");
        let log = work.join(format!("warden-{backend}.log"));
        let mut warden = Proc::warden(&warden_exe, port, &database.url, work, &log);
        procs::wait_ready(
            &client,
            &format!("{base}/health"),
            &mut warden,
            Duration::from_secs(180),
        )
        .await;
        procs::admin(&warden_exe, &database.url, &["account", "create", "bench"]);
        let key = procs::admin(&warden_exe, &database.url, &["key", "issue", "bench"])["api_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let setup = Setup {
            client: &client,
            base: &base,
            key: &key,
            root: &root,
            endpoint_url: &endpoint_url,
        };
        let capability = setup.prepare().await;
        let authed = |method, path: &str, body: Option<String>| RequestSpec {
            method,
            url: format!("{base}{path}"),
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Authorization".into(), format!("Bearer {key}")),
            ],
            body,
            vary_order: true,
        };
        let turn_body =
            json!({"user_id": "bench-user", "message": {"type": "text", "body": TURN_TEXT}})
                .to_string();
        let test_spec = authed(
            "POST",
            &format!("/v1/capabilities/{capability}/test"),
            Some(json!({"arguments": {"order": "A-1001"}}).to_string()),
        );
        let turn_spec = authed(
            "POST",
            "/v1/channels/http/messages",
            Some(turn_body.clone()),
        );
        // The same call as an MCP client makes it (2026-07-28, stateless).
        let mut mcp_spec = authed(
            "POST",
            "/v1/mcp",
            Some(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "order_status", "arguments": {"order": "A-1001"},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}})
                .to_string(),
            ),
        );
        mcp_spec.headers.extend([
            ("MCP-Protocol-Version".into(), "2026-07-28".into()),
            ("Mcp-Method".into(), "tools/call".into()),
            ("Mcp-Name".into(), "order_status".into()),
        ]);
        if let Some(duration) = config.soak {
            let sqlite_file = (backend == "sqlite").then(|| work.join("bench.db"));
            soaks.push(
                soak::run(
                    backend,
                    warden.pid(),
                    [("turn_1", turn_spec), ("capability_test", test_spec)],
                    duration,
                    soak::slice(config.quick),
                    sqlite_file.as_deref(),
                    work,
                )
                .await,
            );
            drop(warden);
            database.drop().await;
            continue;
        }
        // Where a server counted in instructions runs (`counted.rs`).
        let at = counted::At {
            exe: &warden_exe,
            database_url: &database.url,
            work,
            backend,
        };
        let target = |scenario, spec| Target {
            scenario,
            backend,
            pid: warden.pid(),
            spec,
            config: &config,
            work,
        };
        target(
            "health",
            RequestSpec {
                method: "GET",
                url: format!("{base}/health"),
                headers: vec![],
                body: None,
                vary_order: false,
            },
        )
        .sweep(&config.connections, false, &mut rows)
        .await;
        // Before the contract test's open loop, whose overload leaves work
        // running for a while after it.
        target("mcp_call", mcp_spec.clone())
            .sweep(&config.few_connections, false, &mut rows)
            .await;
        target("capability_test", test_spec.clone())
            .sweep(&config.connections, true, &mut rows)
            .await;
        let turn = |scenario| target(scenario, turn_spec.clone());
        turn("turn_1")
            .sweep(&config.connections, true, &mut rows)
            .await;
        // Requests counted in instructions (`Config::counts`): issue 27's
        // pair, and issue 28's turn when asked for.
        for (scenario, spec) in [
            ("capability_test", &test_spec),
            ("mcp_call", &mcp_spec),
            ("turn_1", &turn_spec),
        ] {
            if config.counts(scenario) {
                let turns = config.counted_turns();
                counted.extend(counted::count(&at, scenario, spec, false, turns).await);
            }
        }
        if config.wants("past_capacity") {
            for (scenario, spec) in [("capability_test", &test_spec), ("turn_1", &turn_spec)] {
                // Capacity: what 8 connections sustained in this run.
                let capacity = rows
                    .iter()
                    .find(|r| {
                        r.scenario == scenario && r.backend == backend && r.mode == Mode::Closed(8)
                    })
                    .map(|r| r.m.throughput);
                let Some(capacity) = capacity else {
                    println!("past_capacity: no 8-connection run of {scenario} to size it by");
                    continue;
                };
                // Let the open loops' leftover work finish first.
                tokio::time::sleep(Duration::from_secs(2)).await;
                database.settle().await;
                let run = overload::run(
                    scenario,
                    backend,
                    spec,
                    &format!("{base}/health"),
                    capacity,
                    overload_high,
                    overload_low,
                )
                .await;
                println!("{}", run.line());
                overloads.push(run);
            }
        }
        if config.wants("turn_1_observed") {
            rows.extend(
                observed::paired(
                    &warden_exe,
                    &database.url,
                    work,
                    backend,
                    &turn_spec,
                    &config,
                    &config.few_connections,
                )
                .await,
            );
            if config.counted_turns() > 0 {
                counted.extend(observed::counted(&at, &turn_spec, &config).await);
            }
        }
        if config.wants("conversation_5") {
            rows.extend(conversation::sweep(&config, &base, &key, warden.pid(), backend).await);
        }
        if config.wants("turn_100") || config.wants("turn_1000") {
            setup.register_more(1, 100).await;
            turn("turn_100")
                .sweep(&config.few_connections, false, &mut rows)
                .await;
            setup.register_more(100, 1000).await;
            turn("turn_1000")
                .sweep(&config.few_connections, false, &mut rows)
                .await;
        }
        drop(warden);
        database.drop().await;
    }
    drop((endpoint, relay));

    let load_after = procs::load_average();
    if config.smoke {
        let failed: Vec<String> =
            rows.iter()
                .filter(|r| matches!(r.mode, Mode::Closed(_)) && r.m.errors > 0)
                .map(report::line)
                .chain(soaks.iter().flat_map(|s| {
                    s.samples.iter().filter(|x| x.errors > 0).map(move |x| {
                        format!("soak {} at {:?}: {} errors", s.backend, x.at, x.errors)
                    })
                }))
                .collect();
        assert!(
            failed.is_empty(),
            "errors under load:\n{}",
            failed.join("\n")
        );
    }
    if config.soak.is_some() {
        let text = soak::markdown(&soaks, &load_before, &load_after);
        println!("\n{text}");
        if std::env::var("WARDEN_BENCH_WRITE").is_ok_and(|v| v != "0") {
            report::write_section(&root, soak::BEGIN, soak::END, &text);
            println!("wrote the soak section of docs/benchmarks.md");
        }
        return;
    }
    let mut text = report::markdown(
        &rows,
        &counted,
        &config,
        &load_before,
        &load_after,
        started_at,
    );
    if !counted.is_empty() {
        text += &counted::markdown(&counted);
    }
    if !overloads.is_empty() {
        text += &overload::markdown(&overloads, overload_high, overload_low);
    }
    println!("\n{text}");
    let write = (!config.quick && config.only.is_none())
        || std::env::var("WARDEN_BENCH_WRITE").is_ok_and(|v| v == "1");
    if write {
        report::write_docs(&root, &text, &rows);
        println!("wrote docs/benchmarks.md and docs/benchmarks-latency.svg");
    }
}

/// The account's credential and capabilities, through the API.
struct Setup<'a> {
    client: &'a reqwest::Client,
    base: &'a str,
    key: &'a str,
    root: &'a Path,
    endpoint_url: &'a str,
}

impl Setup<'_> {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        extra: Option<(&str, String)>,
        body: &Value,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.key)
            .json(body);
        if let Some((name, value)) = extra {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The credential and `order_status`; checks a turn calls it. Its id.
    async fn prepare(&self) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::PUT,
                "/v1/capability-credentials/cred_orders",
                None,
                &json!({"auth_type": "bearer", "secret": "bench-secret"}),
            )
            .await;
        assert_eq!(status, 201, "credential: {body}");
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(self.root.join("examples/manifests/walkthrough.json"))
                .unwrap(),
        )
        .unwrap();
        let mut definition = manifest["capabilities"][0].clone();
        assert_eq!(definition["name"], "order_status");
        definition["url"] = json!(self.endpoint_url);
        let id = self.create(&definition).await;
        let (status, reply) = self
            .call(
                reqwest::Method::POST,
                "/v1/channels/http/messages",
                None,
                &json!({"user_id": "bench-user", "message": {"type": "text", "body": TURN_TEXT}}),
            )
            .await;
        assert_eq!(status, 200, "turn: {reply}");
        let called = reply["capability_trace"]["events"]
            .as_array()
            .is_some_and(|events| {
                events.iter().any(|e| {
                    e["stage"] == "execution"
                        && e["capability"] == "order_status"
                        && e["reason_code"] == "ok"
                })
            });
        assert!(called, "the bench turn did not call order_status: {reply}");
        id
    }

    async fn create(&self, definition: &Value) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/capabilities",
                Some(("Idempotency-Key", uuid::Uuid::new_v4().to_string())),
                &json!({"domain": "pedidos", "capability": definition}),
            )
            .await;
        assert_eq!(status, 201, "create capability: {body}");
        body["id"].as_str().unwrap().to_owned()
    }

    /// Capabilities `from..to` (besides `order_status`, which is number 0):
    /// unrelated catalogue look-ups, each with a patterned property.
    async fn register_more(&self, from: usize, to: usize) {
        for i in from..to {
            let definition = json!({
                "name": format!("catalog_sheet_{i}"),
                "description": format!("Ficha técnica del artículo de catálogo {i}"),
                "when_to_use": "Cuando el usuario pide la ficha técnica de un artículo del catálogo",
                "method": "POST",
                "url": self.endpoint_url,
                "auth": {"type": "bearer", "credential_ref": "cred_orders"},
                "input_schema": {"type": "object", "additionalProperties": false, "required": ["sku"],
                    "properties": {"sku": {"type": "string", "maxLength": 20, "pattern": "^SKU-[0-9]{4}$",
                        "description": "la referencia del artículo"}}},
                "output_schema": {"type": "object", "additionalProperties": false,
                    "properties": {"status": {"type": "string", "maxLength": 40}}},
                "business_rules": [],
                "examples": [],
                "side_effect": "read",
                "requires_approval": false,
                "timeout_ms": 5000,
                "retry_count": 0
            });
            self.create(&definition).await;
        }
        // The turn must still pick order_status among them.
        let (status, reply) = self
            .call(
                reqwest::Method::POST,
                "/v1/channels/http/messages",
                None,
                &json!({"user_id": "bench-user", "message": {"type": "text", "body": TURN_TEXT}}),
            )
            .await;
        assert_eq!(status, 200, "turn: {reply}");
        assert!(
            reply.to_string().contains("\"result_received\""),
            "with {to} capabilities the turn no longer calls order_status: {reply}"
        );
    }
}

/// A fresh database for one backend's run.
struct Database {
    url: String,
    /// PostgreSQL: the server's admin URL and the database's name, to drop it.
    postgres: Option<(String, String)>,
}

impl Database {
    async fn create(backend: &str, work: &Path) -> Database {
        if backend == "sqlite" {
            return Database {
                url: format!("sqlite://{}", work.join("bench.db").display()),
                postgres: None,
            };
        }
        use sqlx::{Connection, Executor};
        let admin = std::env::var("WARDEN_BENCH_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("warden_bench_{}", std::process::id());
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .expect("PostgreSQL (scripts/ensure-postgres.sh starts it)");
        conn.execute(format!("DROP DATABASE IF EXISTS \"{name}\"").as_str())
            .await
            .unwrap();
        conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
            .await
            .unwrap();
        let url = match admin.rfind('/') {
            Some(i) => format!("{}/{name}", &admin[..i]),
            None => panic!("WARDEN_BENCH_POSTGRES_URL has no database part"),
        };
        Database {
            url,
            postgres: Some((admin, name)),
        }
    }

    /// PostgreSQL: what the runs before wrote is written back now
    /// (`CHECKPOINT`), before a phase whose recovery is timed. Otherwise
    /// the server's timed checkpoint (every 5 min from the last, its
    /// writes spread over 4.5 min) ended inside the contract test's phase
    /// of a full run, whose commits then waited for its sync 1.8 s after
    /// the drop: timed as the overload's aftermath (docs/benchmarks.md,
    /// "Where PostgreSQL's own CPU goes"). SQLite's checkpoints are
    /// Warden's own and stay in what is timed.
    async fn settle(&self) {
        if let Some((admin, _)) = &self.postgres {
            use sqlx::{Connection, Executor};
            let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
            conn.execute("CHECKPOINT").await.unwrap();
        }
    }

    async fn drop(self) {
        if let Some((admin, name)) = self.postgres {
            use sqlx::{Connection, Executor};
            let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
            let _ = conn
                .execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
                .await;
        }
    }
}
