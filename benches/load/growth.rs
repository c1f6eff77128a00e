//! The growth run (issue 28 item 3; `make growth`, `WARDEN_BENCH_GROWTH=1`):
//! whether what a request costs stays flat as an account's data grows. Each
//! measure is taken twice in one run on one server, with little data and
//! with a lot, and judged by the ratio (within 20 %):
//!
//! 1. a turn continuing a conversation with 1,000 earlier messages (made
//!    through the API, 500 turns each) against a turn in a new one; a
//!    conversation whose history window is full (20–40 earlier messages)
//!    stands beside them, so what history costs is told apart from growth;
//! 2. a turn (new conversation) in an account with 100,000 conversations,
//!    written straight into the schema (`seed.rs`), against the same account
//!    before them, and in a fresh account beside them;
//! 3. the capability-gaps page with 1,000,000 events: the first page, the
//!    second and the last, reached by cursors built as the service builds
//!    `next_before` (`to_rfc3339` of the event's time, its id), against the
//!    same pages with ~100 events that real turns recorded;
//! 4. the platform workers draining a backlog of 100,000 messages (100
//!    numbers at their default cap of 1,000 each, beside a week of 100,000
//!    finished ones): the rate over the last tenth against the first
//!    (`drain.rs`);
//! 5. the SQLite file and the PostgreSQL tables before and after the purge
//!    (which `warden serve` runs at start-up and then hourly), and after as
//!    many rows as it removed are written again: whether space is given
//!    back or reused (`sizes.rs`).
//!
//! Three servers per database, on the same data: the first (retention off,
//! so nothing it measures is purged under it) for 1–3; the second drains
//! the backlog, written in one transaction once its start-up purge is
//! over; the third starts with the default retention and purges. Half the seeded
//! conversations are older than the 90 days kept, and the week of finished
//! platform messages older than the 7 days kept.
//!
//! Figures are p50/p99 of requests sent one at a time (1 connection) after
//! a few unmeasured ones, and CPU per request from /proc of `warden serve`
//! (on PostgreSQL the database's work is in its own processes, so the
//! latency is the judge). `WARDEN_BENCH_GROWTH_SCALE=0.01` shrinks every
//! size; `WARDEN_BENCH_GROWTH_REQUESTS` (300) sets the requests per figure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::drain::{Drain, FakeSendApi};
use crate::load::{self, Measured};
use crate::procs::{self, Proc};
use crate::seed::{self, DAY_MILLIS, Db, Inbound, InboundRun};
use crate::sizes::{self, Readings, Vacuum};
use crate::{Database, Setup};

/// The run's sizes and pace, from the environment.
#[derive(Clone, Debug)]
pub struct Settings {
    pub scale: f64,
    pub requests: usize,
}

impl Settings {
    pub fn from_env() -> Option<Settings> {
        if !std::env::var("WARDEN_BENCH_GROWTH").is_ok_and(|v| v == "1") {
            return None;
        }
        let number = |name: &str, default: f64| {
            std::env::var(name).ok().map_or(default, |v| {
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} is a number"))
            })
        };
        Some(Settings {
            scale: number("WARDEN_BENCH_GROWTH_SCALE", 1.0),
            requests: number("WARDEN_BENCH_GROWTH_REQUESTS", 300.0) as usize,
        })
    }

    fn sizes(&self) -> Sizes {
        let scaled = |n: f64, least: usize| ((n * self.scale).round() as usize).max(least);
        let backlog = scaled(100_000.0, 200);
        Sizes {
            earlier_messages: scaled(1_000.0, 60) / 2 * 2,
            conversations: scaled(100_000.0, 200),
            gap_events: scaled(1_000_000.0, 2 * SMALL_GAPS),
            backlog,
            // Numbers at their default cap of 1,000 unfinished messages.
            numbers: backlog.div_ceil(1_000),
        }
    }
}

/// The large-data sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    earlier_messages: usize,
    conversations: usize,
    gap_events: usize,
    backlog: usize,
    numbers: usize,
}

/// Gap events the small-data pages are measured with.
const SMALL_GAPS: usize = 100;
/// The gaps page's size (the contract's default).
const PAGE: usize = 50;
/// Unmeasured requests before each figure.
const WARM_UP: usize = 10;
/// Longest a figure's requests may take (a slow page is still shown).
const FIGURE_LIMIT: Duration = Duration::from_secs(60);
/// Within this ratio of its counterpart, a cost is flat.
const FLAT: f64 = 1.2;
/// Conversations continued in turn by the full-window figure (each gets
/// `requests / WINDOW_CONVERSATIONS` more turns during it).
const WINDOW_CONVERSATIONS: usize = 30;
/// Conversations with 1,000 earlier messages, continued in turn.
const LONG_CONVERSATIONS: usize = 5;
/// How long autovacuum is given to go through the purged tables (its
/// default nap is a minute).
const AUTOVACUUM_WAIT: Duration = Duration::from_secs(150);
/// Kept by default (`WARDEN_CONVERSATION_RETENTION_DAYS`).
const CONVERSATION_DAYS: i64 = 90;
/// Finished platform messages are kept this long (`retention.rs`).
const FINISHED_PLATFORM_DAYS: i64 = 7;

/// A message no capability of the account serves: a coverage gap.
const GAP_TEXT: &str = "¿Tenéis tarjetas regalo para bodas?";

/// The parts of the growth run to take (`WARDEN_BENCH_ONLY=requests,drain,purge`).
#[derive(Clone, Copy, Debug)]
pub struct Parts {
    /// Items 1–3.
    pub requests: bool,
    /// Item 4.
    pub drain: bool,
    /// Item 5.
    pub purge: bool,
}

/// What the growth run needs from the benchmark.
pub struct Growth<'a> {
    pub settings: &'a Settings,
    pub parts: Parts,
    pub exe: &'a Path,
    pub work: &'a Path,
    pub root: &'a Path,
    pub endpoint_url: &'a str,
    pub client: &'a reqwest::Client,
}

/// One measure with its figure.
#[derive(Clone, Debug)]
pub struct Figure {
    pub case: String,
    pub m: Measured,
    pub cpu_us: f64,
}

/// A figure with a lot of data against its small-data counterpart.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub measure: &'static str,
    pub small: Figure,
    pub large: Figure,
}

impl Comparison {
    fn ratio(&self, of: impl Fn(&Figure) -> f64) -> f64 {
        of(&self.large) / of(&self.small)
    }

    /// The ratio as the table shows it (`–` where the small figure is 0:
    /// CPU under one clock tick per request).
    fn ratio_text(&self, of: impl Fn(&Figure) -> f64) -> String {
        let r = self.ratio(of);
        if r.is_finite() {
            format!("{r:.2}")
        } else {
            "–".into()
        }
    }

    pub fn flat(&self) -> bool {
        self.ratio(|f| f.m.p50_ms) <= FLAT
    }
}

/// The purge and what it left on disk.
#[derive(Clone, Debug)]
pub struct Purge {
    pub before: Readings,
    pub after: Readings,
    /// After as many rows as the purge removed were written again.
    pub rewritten: Readings,
    /// The purge's log line (its counts).
    pub removed: Value,
    pub took: Duration,
    /// PostgreSQL: how the purged tables were vacuumed before the rows
    /// were written again.
    pub vacuum: Option<Vacuum>,
}

/// One database's growth run.
pub struct BackendGrowth {
    pub backend: &'static str,
    pub comparisons: Vec<Comparison>,
    pub drain: Option<Drain>,
    pub purge: Option<Purge>,
}

/// A `warden serve` of the run and where it logs.
struct Server {
    proc: Proc,
    base: String,
    log: PathBuf,
}

/// An account made by `warden admin`, with its key and row id.
struct Account {
    key: String,
    id: i64,
}

impl Growth<'_> {
    pub async fn run(&self, backends: &[String]) -> Vec<BackendGrowth> {
        let sizes = self.settings.sizes();
        println!(
            "growth run: {sizes:?}, {} requests per figure",
            self.settings.requests
        );
        let send_api = FakeSendApi::start().await;
        let mut results = Vec::new();
        for backend in backends {
            let backend: &'static str = match backend.as_str() {
                "sqlite" => "sqlite",
                "postgres" => "postgres",
                other => panic!("unknown backend {other}"),
            };
            results.push(self.backend(backend, sizes, &send_api).await);
        }
        results
    }

    async fn backend(
        &self,
        backend: &'static str,
        sizes: Sizes,
        send_api: &FakeSendApi,
    ) -> BackendGrowth {
        println!("growth ({backend})");
        let database = Database::create(backend, self.work).await;
        let sqlite_file = (backend == "sqlite").then(|| self.work.join("bench.db"));
        let server = self.start(&database, "measure", false, send_api).await;
        let mut db = Db::connect(&database.url).await;
        let comparisons = if self.parts.requests {
            self.requests_as_data_grows(&server, &database, &mut db, sizes)
                .await
        } else {
            Vec::new()
        };
        drop(server);

        let drain = if self.parts.drain {
            Some(self.drain(&database, &mut db, sizes, send_api).await)
        } else {
            None
        };
        let purge = if self.parts.purge {
            Some(
                self.purge(&database, &mut db, sqlite_file.as_deref(), send_api)
                    .await,
            )
        } else {
            None
        };
        db.close().await;
        database.drop().await;
        BackendGrowth {
            backend,
            comparisons,
            drain,
            purge,
        }
    }

    /// Items 1–3: each request with little data, the data grown, again.
    async fn requests_as_data_grows(
        &self,
        server: &Server,
        database: &Database,
        db: &mut Db,
        sizes: Sizes,
    ) -> Vec<Comparison> {
        let pid = server.proc.pid();
        let main = self.account(database, db, "growth").await;
        self.prepare(server, &main).await;
        let big = self.account(database, db, "growth-big").await;
        self.prepare(server, &big).await;
        let turn = |account: &Account, conversation: Option<&str>| {
            self.turn(
                &server.base,
                &account.key,
                conversation,
                &random_order_text(),
            )
        };

        // Small data.
        let new_conversation = self
            .figure(pid, "new conversation", |_| turn(&main, None))
            .await;
        let window = self
            .converse(&server.base, &main.key, WINDOW_CONVERSATIONS, 10)
            .await;
        let full_window = self
            .figure(pid, "20–40 earlier messages", |i| {
                turn(&main, Some(&window[i % window.len()]))
            })
            .await;
        let fresh_account = self
            .figure(pid, "its account fresh", |_| turn(&big, None))
            .await;
        let small_gaps = self.record_gaps(server, db, &main).await;
        let [small_first, small_second, small_last] =
            self.gap_pages(server, db, &main, small_gaps).await;

        // The data grows.
        let earlier = sizes.earlier_messages;
        let long = self
            .converse(&server.base, &main.key, LONG_CONVERSATIONS, earlier / 2)
            .await;
        println!("  {LONG_CONVERSATIONS} conversations of {earlier} messages");
        let now = seed::now_millis();
        seed::conversations(
            db,
            big.id,
            sizes.conversations,
            now - DAY_MILLIS,
            2 * CONVERSATION_DAYS * DAY_MILLIS,
        )
        .await;
        println!("  seeded {} conversations", sizes.conversations);
        let owned: Vec<String> = long.iter().chain(&window).cloned().collect();
        let seeded_gaps = sizes.gap_events - small_gaps as usize;
        seed::gap_events(
            db,
            main.id,
            seeded_gaps,
            &owned,
            now - DAY_MILLIS,
            2 * CONVERSATION_DAYS * DAY_MILLIS,
        )
        .await;
        let gaps = small_gaps + seeded_gaps as i64;
        println!("  seeded {seeded_gaps} gap events ({gaps} in all)");
        for table in ["conversations", "conversation_messages", "gap_events"] {
            analyze(db, table).await;
        }
        settle(db).await;

        // Large data.
        let long_history = self
            .figure(
                pid,
                &format!("{}+ earlier messages", thousands(earlier)),
                |i| turn(&main, Some(&long[i % long.len()])),
            )
            .await;
        let big_account = self
            .figure(
                pid,
                &format!(
                    "{} conversations in the account",
                    thousands(sizes.conversations)
                ),
                |_| turn(&big, None),
            )
            .await;
        let fresh = self.account(database, db, "growth-fresh").await;
        self.prepare(server, &fresh).await;
        let fresh_beside = self
            .figure(pid, "a fresh account beside them", |_| turn(&fresh, None))
            .await;
        let [large_first, large_second, large_last] = self.gap_pages(server, db, &main, gaps).await;

        let compare = |measure, small: &Figure, large: Figure| Comparison {
            measure,
            small: small.clone(),
            large,
        };
        vec![
            compare(
                "turn in a long conversation",
                &new_conversation,
                long_history.clone(),
            ),
            compare("turn in a long conversation", &full_window, long_history),
            compare("turn in a large account", &fresh_account, big_account),
            compare("turn in a large account", &fresh_account, fresh_beside),
            compare("capability-gaps page", &small_first, large_first),
            compare("capability-gaps page", &small_second, large_second),
            compare("capability-gaps page", &small_last, large_last),
        ]
    }

    /// Item 4: a backlog drained by the workers of a server just started.
    async fn drain(
        &self,
        database: &Database,
        db: &mut Db,
        sizes: Sizes,
        send_api: &FakeSendApi,
    ) -> Drain {
        // The drain's server starts first, so its start-up purge is over
        // before the backlog lands (in one transaction: the workers find
        // all of it at once); the finished week, older than the 7 days
        // kept, waits for the next start's purge (item 5).
        let platform = self.account(database, db, "growth-platform").await;
        let salt = db
            .text(
                "SELECT pseudonym_salt FROM accounts WHERE name = $1",
                &["growth-platform"],
            )
            .await;
        let numbers = seed::platform_numbers(db, platform.id, sizes.numbers).await;
        let sent_before = send_api.sent();
        let server = self.start(database, "drain", false, send_api).await;
        let now = seed::now_millis();
        let history_rounds = sizes.backlog.div_ceil(sizes.numbers) as i64;
        seed::platform_inbound(
            db,
            &InboundRun {
                account: platform.id,
                salt: &salt,
                numbers: &numbers,
                count: sizes.backlog,
                arrived: now - (FINISHED_PLATFORM_DAYS + 1) * DAY_MILLIS,
                state: Inbound::Replied,
                first_round: 1,
                tag: "week",
                senders: "347",
            },
        )
        .await;
        seed::platform_inbound(
            db,
            &InboundRun {
                account: platform.id,
                salt: &salt,
                numbers: &numbers,
                count: sizes.backlog,
                arrived: now - sizes.backlog as i64,
                state: Inbound::Queued,
                // The highest round the finished week claimed.
                first_round: history_rounds,
                tag: "backlog",
                senders: "346",
            },
        )
        .await;
        // Statistics with the backlog in them, as autovacuum's analyze takes
        // them within its nap (a minute) of so many new rows: taken before
        // it, PostgreSQL plans the claim's per-user check as a walk of the
        // whole unfinished backlog (docs/benchmarks.md, "Growth").
        analyze(db, "platform_inbound").await;
        println!(
            "  a backlog of {} on {} numbers",
            sizes.backlog, sizes.numbers
        );
        let syncs_before = wal_syncs(db).await;
        let mut drain = crate::drain::watch(
            send_api,
            sent_before,
            server.proc.pid(),
            sizes.backlog as u64,
            Duration::from_secs(60),
        )
        .await;
        drop(server);
        if let (Some(before), Some(after)) = (syncs_before, wal_syncs(db).await) {
            drain.wal_syncs_per_item = Some((after - before) as f64 / drain.sent.max(1) as f64);
        }
        let replied = db
            .scalar(
                "SELECT COUNT(*) FROM platform_inbound WHERE state = 'replied' AND platform_message_id LIKE $1",
                &["wamid.backlog.%"],
            )
            .await;
        println!("  {replied} of the backlog replied");
        drain
    }

    /// Item 5: sizes, the start-up purge, sizes, as many rows again, sizes.
    async fn purge(
        &self,
        database: &Database,
        db: &mut Db,
        sqlite_file: Option<&Path>,
        send_api: &FakeSendApi,
    ) -> Purge {
        let before = sizes::read(db, sqlite_file).await;
        let started = Instant::now();
        let server = self.start(database, "purge", true, send_api).await;
        let (removed, took) =
            sizes::wait_for_purge(&server.log, started, Duration::from_secs(1800))
                .await
                .expect("the start-up purge finished within 30 minutes");
        println!("  purged in {:.1} s: {removed}", took.as_secs_f64());
        let after = sizes::read(db, sqlite_file).await;
        let vacuum = if matches!(db, Db::Postgres(_)) {
            let now = sizes::database_now(db).await;
            Some(sizes::vacuum(db, &now, AUTOVACUUM_WAIT).await)
        } else {
            None
        };
        // As many rows again, recent ones: do they fill the freed space?
        let count = |field: &str| removed[field].as_u64().unwrap_or(0) as usize;
        let big = db.account_id("growth-big").await;
        let now = seed::now_millis();
        if count("conversations") > 0 {
            seed::conversations(db, big, count("conversations"), now, DAY_MILLIS).await;
        }
        if count("platform_messages") > 0 {
            let platform = db.account_id("growth-platform").await;
            let salt = db
                .text(
                    "SELECT pseudonym_salt FROM accounts WHERE name = $1",
                    &["growth-platform"],
                )
                .await;
            let numbers: Vec<String> = (0..count("platform_messages").div_ceil(1_000))
                .map(|k| format!("1555000{k:04}"))
                .collect();
            seed::platform_inbound(
                db,
                &InboundRun {
                    account: platform,
                    salt: &salt,
                    numbers: &numbers,
                    count: count("platform_messages"),
                    arrived: now - DAY_MILLIS,
                    state: Inbound::Replied,
                    first_round: 1,
                    tag: "again",
                    senders: "348",
                },
            )
            .await;
        }
        let rewritten = sizes::read(db, sqlite_file).await;
        drop(server);
        Purge {
            before,
            after,
            rewritten,
            removed,
            took,
            vacuum,
        }
    }

    async fn start(
        &self,
        database: &Database,
        name: &str,
        retention: bool,
        send_api: &FakeSendApi,
    ) -> Server {
        let port = procs::free_port();
        let base = format!("http://127.0.0.1:{port}");
        let log = self.work.join(format!("growth-{name}.log"));
        let mut extra: Vec<(&str, String)> = vec![
            ("WARDEN_LOG_FORMAT", "json".into()),
            ("WARDEN_WEBHOOK_VERIFY_TOKEN", "growth-verify".into()),
            ("WARDEN_WEBHOOK_APP_SECRET", "growth-secret".into()),
            ("WARDEN_PLATFORM_API_URL", send_api.base.clone()),
            ("WARDEN_PLATFORM_ACCESS_TOKEN", "growth-token".into()),
        ];
        if !retention {
            for setting in [
                "WARDEN_CONVERSATION_RETENTION_DAYS",
                "WARDEN_GAP_TEXT_RETENTION_DAYS",
                "WARDEN_AUDIT_RETENTION_DAYS",
            ] {
                extra.push((setting, "off".into()));
            }
        }
        let mut proc = Proc::warden_with(self.exe, port, &database.url, self.work, &log, &extra);
        procs::wait_ready(
            self.client,
            &format!("{base}/health"),
            &mut proc,
            Duration::from_secs(180),
        )
        .await;
        Server { proc, base, log }
    }

    async fn account(&self, database: &Database, db: &mut Db, name: &str) -> Account {
        procs::admin(self.exe, &database.url, &["account", "create", name]);
        let key = procs::admin(self.exe, &database.url, &["key", "issue", name])["api_key"]
            .as_str()
            .unwrap()
            .to_owned();
        Account {
            key,
            id: db.account_id(name).await,
        }
    }

    /// The credential and `order_status`, as every load scenario has them.
    async fn prepare(&self, server: &Server, account: &Account) {
        Setup {
            client: self.client,
            base: &server.base,
            key: &account.key,
            root: self.root,
            endpoint_url: self.endpoint_url,
        }
        .prepare()
        .await;
    }

    fn turn(
        &self,
        base: &str,
        key: &str,
        conversation: Option<&str>,
        text: &str,
    ) -> reqwest::RequestBuilder {
        let mut body = json!({"user_id": "growth-user", "message": {"type": "text", "body": text}});
        if let Some(id) = conversation {
            body["conversation_id"] = json!(id);
        }
        self.client
            .post(format!("{base}/v1/channels/http/messages"))
            .bearer_auth(key)
            .json(&body)
    }

    fn gaps(&self, base: &str, key: &str, cursor: Option<&str>) -> reqwest::RequestBuilder {
        let query = match cursor {
            Some(cursor) => format!("limit={PAGE}&{cursor}"),
            None => format!("limit={PAGE}"),
        };
        self.client
            .get(format!("{base}/v1/diagnostics/capability-gaps?{query}"))
            .bearer_auth(key)
    }

    /// `conversations` conversations of `turns` turns each (each asking
    /// after an order, so each calls `order_status`), several at once; their ids.
    async fn converse(
        &self,
        base: &str,
        key: &str,
        conversations: usize,
        turns: usize,
    ) -> Vec<String> {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..conversations {
            let (client, base, key) = (self.client.clone(), base.to_owned(), key.to_owned());
            tasks.spawn(async move {
                let mut id: Option<String> = None;
                for _ in 0..turns {
                    let mut body = json!({"user_id": "growth-user",
                        "message": {"type": "text", "body": random_order_text()}});
                    if let Some(id) = &id {
                        body["conversation_id"] = json!(id);
                    }
                    let reply: Value = client
                        .post(format!("{base}/v1/channels/http/messages"))
                        .bearer_auth(&key)
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    id = Some(
                        reply["conversation_id"]
                            .as_str()
                            .unwrap_or_else(|| panic!("turn: {reply}"))
                            .to_owned(),
                    );
                }
                id.unwrap()
            });
        }
        tasks.join_all().await
    }

    /// ~100 gap events made by real turns; how many there are.
    async fn record_gaps(&self, server: &Server, db: &mut Db, account: &Account) -> i64 {
        for _ in 0..SMALL_GAPS {
            let status = self
                .turn(&server.base, &account.key, None, GAP_TEXT)
                .send()
                .await
                .unwrap()
                .status();
            assert!(status.is_success(), "gap turn: {status}");
        }
        let count = db
            .scalar(
                "SELECT COUNT(*) FROM gap_events WHERE account_id = (SELECT id FROM accounts WHERE name = $1)",
                &["growth"],
            )
            .await;
        assert!(
            count as usize > PAGE,
            "only {count} gap events from {SMALL_GAPS} gap turns"
        );
        count
    }

    /// The gaps page's first, second and last page of `account`'s
    /// `events`; a page reached by a cursor is checked full before it is
    /// measured.
    async fn gap_pages(
        &self,
        server: &Server,
        db: &mut Db,
        account: &Account,
        events: i64,
    ) -> [Figure; 3] {
        let pid = server.proc.pid();
        let count = thousands(events as usize);
        let mut figures = Vec::new();
        for (page, offset) in [
            ("first", None),
            ("second", Some(PAGE as i64 - 1)),
            ("last", Some(events - PAGE as i64 - 1)),
        ] {
            let cursor = match offset {
                Some(offset) => {
                    let cursor = self.cursor_after(db, account.id, offset).await;
                    self.check_page(&server.base, &account.key, Some(&cursor))
                        .await;
                    Some(cursor)
                }
                None => None,
            };
            let case = format!("{page} page, {count} events");
            figures.push(
                self.figure(pid, &case, |_| {
                    self.gaps(&server.base, &account.key, cursor.as_deref())
                })
                .await,
            );
        }
        figures
            .try_into()
            .unwrap_or_else(|_| unreachable!("three pages"))
    }

    /// The cursor of the account's event at `offset` (0: the newest), as
    /// the service writes `next_before` and `next_before_id`: the page it
    /// asks for begins with the event after it.
    async fn cursor_after(&self, db: &mut Db, account: i64, offset: i64) -> String {
        let sql = format!(
            "SELECT occurred_at, id FROM gap_events WHERE account_id = {account} \
             ORDER BY occurred_at DESC, id DESC LIMIT 1 OFFSET {offset}"
        );
        let (at, id): (i64, String) =
            seed::on_conn!(db, conn => sqlx::query_as(&sql).fetch_one(&mut *conn).await.unwrap());
        let before = warden::clock::to_rfc3339(at);
        format!("before={before}&before_id={id}")
    }

    /// Checks the page holds a full page of events before it is measured.
    async fn check_page(&self, base: &str, key: &str, cursor: Option<&str>) {
        let page: Value = self
            .gaps(base, key, cursor)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let events = page["events"].as_array().map_or(0, Vec::len);
        assert_eq!(events, PAGE, "the gaps page ({cursor:?}): {page}");
    }

    /// `requests` requests one at a time after a few unmeasured ones.
    async fn figure<F>(&self, pid: u32, case: &str, mut next: F) -> Figure
    where
        F: FnMut(usize) -> reqwest::RequestBuilder,
    {
        load::sequential(WARM_UP, FIGURE_LIMIT, &mut next).await;
        let (cpu, reads) = (procs::cpu(pid), procs::read_syscalls(pid));
        let m = load::sequential(self.settings.requests, FIGURE_LIMIT, &mut next).await;
        let cpu_us = (procs::cpu(pid) - cpu).as_secs_f64() * 1e6 / m.ok.max(1) as f64;
        // Reads the server made per request: SQLite pages its cache lacked.
        let reads = (procs::read_syscalls(pid) - reads) as f64 / m.ok.max(1) as f64;
        println!(
            "  {case:<44} {:>5} ok {:>3} errors  p50 {:>8.2} ms  p99 {:>8.2} ms  cpu {:>7.0} µs/req  reads {reads:>6.1}/req",
            m.ok, m.errors, m.p50_ms, m.p99_ms, cpu_us
        );
        assert_eq!(m.errors, 0, "{case}: requests failed");
        Figure {
            case: case.to_owned(),
            m,
            cpu_us,
        }
    }
}

/// `n` with a comma between thousands, as the docs write numbers.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The order question with a random order number, as the load scenarios
/// send it (no cache of Warden's sees only repeats).
fn random_order_text() -> String {
    let n: u32 = rand::Rng::gen_range(&mut rand::thread_rng(), 0..10_000);
    format!("¿Dónde está mi pedido A-{n:04}?")
}

/// Fresh statistics after a bulk load, as autovacuum's analyze would take
/// them soon after (PostgreSQL); SQLite plans without statistics.
async fn analyze(db: &mut Db, table: &str) {
    if let Db::Postgres(conn) = db {
        sqlx::raw_sql(&format!("ANALYZE {table}"))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}

/// The seeded rows written out before the large-data half is measured: an
/// account that grew over months has no bulk load waiting for the disk,
/// and hundreds of megabytes being written back (PostgreSQL's checkpoint,
/// SQLite's WAL) slow every commit's sync meanwhile, which would be timed
/// as the turns' growth ("The seeding's aftermath" in docs/benchmarks.md).
async fn settle(db: &mut Db) {
    let started = Instant::now();
    let sql = match db {
        Db::Postgres(_) => "CHECKPOINT",
        Db::Sqlite(_) => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    seed::on_conn!(db, conn => { sqlx::raw_sql(sql).execute(&mut *conn).await.unwrap(); });
    println!(
        "  settled ({sql}) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

pub const BEGIN: &str =
    "<!-- load-growth:begin (generated by `make growth`; edit outside the markers) -->";
pub const END: &str = "<!-- load-growth:end -->";

/// The growth section of docs/benchmarks.md.
pub fn markdown(
    settings: &Settings,
    results: &[BackendGrowth],
    load_before: &str,
    load_after: &str,
) -> String {
    let sizes = settings.sizes();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Growth: {} earlier messages, {} conversations, {} gap events, a backlog of {} platform messages \
         (scale {}); {} requests per figure, one at a time, after {WARM_UP} unmeasured; load average \
         (1/5/15 min) {load_before} before, {load_after} after. `×` is the large-data figure over its \
         small-data counterpart, measured minutes apart on the same server; flat means × p50 ≤ {FLAT:.2}.\n",
        thousands(sizes.earlier_messages),
        thousands(sizes.conversations),
        thousands(sizes.gap_events),
        thousands(sizes.backlog),
        settings.scale,
        settings.requests,
    );
    s += "| db | measure | small data | p50 ms | p99 ms | CPU µs/req | large data | p50 ms | p99 ms | CPU µs/req | × p50 | × p99 | × CPU | flat |\n";
    s += "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n";
    for r in results {
        for c in &r.comparisons {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.2} | {:.0} | {} | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} |",
                r.backend,
                c.measure,
                c.small.case,
                c.small.m.p50_ms,
                c.small.m.p99_ms,
                c.small.cpu_us,
                c.large.case,
                c.large.m.p50_ms,
                c.large.m.p99_ms,
                c.large.cpu_us,
                c.ratio_text(|f| f.m.p50_ms),
                c.ratio_text(|f| f.m.p99_ms),
                c.ratio_text(|f| f.cpu_us),
                if c.flat() { "yes" } else { "**no**" },
            );
        }
    }
    s += "\nThe platform queue draining its backlog (2 workers, the default), beside a week of as many finished messages; \
          the rate from the first reply over the first tenth, and over the last tenth:\n\n";
    s += "| db | backlog | replied | drained in s | first 10 %: msg/s | CPU µs/msg | last 10 %: msg/s | CPU µs/msg | × time per msg | WAL syncs per msg | flat |\n";
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for r in results {
        let Some(d) = &r.drain else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {} | {} |",
            r.backend,
            d.backlog,
            d.sent,
            d.seconds,
            d.first.per_second(),
            d.first.cpu_us_per_item,
            d.last.per_second(),
            d.last.cpu_us_per_item,
            d.cost_ratio(),
            d.wal_syncs_per_item
                .map_or_else(|| "–".to_owned(), |n| format!("{n:.2}")),
            if d.cost_ratio() <= FLAT && d.sent == d.backlog {
                "yes"
            } else {
                "**no**"
            },
        );
    }
    s += "\nOn disk before the purge, after it, and after as many rows as it removed were written again (recent ones, \
          which the purge keeps), MiB:\n\n";
    s += "| db | what | before purge | after purge | after writing as many again |\n|---|---|---:|---:|---:|\n";
    for r in results {
        let Some(p) = &r.purge else {
            continue;
        };
        for (i, reading) in p.before.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {:.1} |",
                r.backend,
                reading.what,
                sizes::mib(reading.bytes),
                sizes::mib(p.after[i].bytes),
                sizes::mib(p.rewritten[i].bytes),
            );
        }
    }
    s += "\n";
    for r in results {
        let Some(p) = &r.purge else {
            continue;
        };
        let n = |field: &str| p.removed[field].as_u64().unwrap_or(0);
        let _ = writeln!(
            s,
            "- {}: the start-up purge removed {} conversations ({} messages, in {} batches) and {} finished \
             platform messages in {:.1} s{}.",
            r.backend,
            n("conversations"),
            n("messages"),
            n("batches"),
            n("platform_messages"),
            p.took.as_secs_f64(),
            match p.vacuum {
                Some(Vacuum::Autovacuum) =>
                    "; autovacuum went through the purged tables before the rows were written again",
                Some(Vacuum::NotYet) =>
                    "; autovacuum had not yet been through the purged tables when the rows were written again",
                Some(Vacuum::Explicit) =>
                    "; autovacuum is off on this server (the CI configuration), so a plain `VACUUM` of the \
                     purged tables stood in for it before the rows were written again",
                None => "",
            }
        );
    }
    s
}

/// The PostgreSQL server's WAL syncs so far (`pg_stat_wal`); SQLite: none
/// counted (in WAL mode with `synchronous=NORMAL` no commit syncs).
async fn wal_syncs(db: &mut Db) -> Option<i64> {
    match db {
        Db::Postgres(_) => Some(db.scalar("SELECT wal_sync FROM pg_stat_wal", &[]).await),
        Db::Sqlite(_) => None,
    }
}
