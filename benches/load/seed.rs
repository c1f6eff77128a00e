//! Rows written straight into the real schema, for the growth run
//! (`growth.rs`): 100,000 conversations or 1,000,000 gap events through the
//! API would take longer than the run itself. Each kind of row is shaped as
//! the store code writes it (the file named beside each function): the same
//! columns, ids made by the service's own `random_id`, the closed sets'
//! words, Unix milliseconds, and the pseudonyms the webhook derives.
//!
//! One text per statement serves both databases (`$n` parameters, as the
//! store's); many rows go in one statement and many statements in one
//! transaction, short enough that a running `warden serve` waits at most a
//! moment for SQLite's write lock.

use std::time::Duration;

use sqlx::Connection;
use warden::domain::id::random_id;

/// A connection of the benchmark's own to the database under test.
pub enum Db {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

/// Runs `$body` with `$conn` bound to the concrete connection of `$db`.
macro_rules! on_conn {
    ($db:expr, $conn:ident => $body:expr) => {
        match $db {
            Db::Sqlite($conn) => $body,
            Db::Postgres($conn) => $body,
        }
    };
}
pub(crate) use on_conn;

/// One value of a row; a column that is NULL is left out of the insert.
pub enum Cell {
    Int(i64),
    Text(String),
}

/// Bound parameters per statement: far under both databases' limits.
const PARAMETERS_PER_STATEMENT: usize = 8_000;
/// Rows per transaction: a moment of SQLite's write lock each.
const ROWS_PER_TRANSACTION: usize = 10_000;

pub const DAY_MILLIS: i64 = 24 * 60 * 60 * 1000;

impl Db {
    pub async fn connect(url: &str) -> Db {
        if url.starts_with("sqlite:") {
            use sqlx::sqlite::{SqliteConnectOptions, SqliteSynchronous};
            use std::str::FromStr;
            let options = SqliteConnectOptions::from_str(url)
                .unwrap()
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(30))
                .foreign_keys(true);
            Db::Sqlite(
                sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap(),
            )
        } else {
            Db::Postgres(sqlx::PgConnection::connect(url).await.unwrap())
        }
    }

    /// `count` rows of `table`, row `i` made by `row(i)`, in short transactions.
    pub async fn insert_rows<F>(&mut self, table: &str, columns: &[&str], count: usize, row: F)
    where
        F: FnMut(usize) -> Vec<Cell>,
    {
        self.insert(table, columns, count, ROWS_PER_TRANSACTION, row)
            .await
    }

    /// The same, all in one transaction: a running server sees every row
    /// at once or none.
    pub async fn insert_rows_at_once<F>(
        &mut self,
        table: &str,
        columns: &[&str],
        count: usize,
        row: F,
    ) where
        F: FnMut(usize) -> Vec<Cell>,
    {
        self.insert(table, columns, count, count.max(1), row).await
    }

    async fn insert<F>(
        &mut self,
        table: &str,
        columns: &[&str],
        count: usize,
        per_transaction: usize,
        mut row: F,
    ) where
        F: FnMut(usize) -> Vec<Cell>,
    {
        let per_statement = (PARAMETERS_PER_STATEMENT / columns.len()).max(1);
        let begin = match self {
            Db::Sqlite(_) => "BEGIN IMMEDIATE",
            Db::Postgres(_) => "BEGIN",
        };
        let mut done = 0;
        while done < count {
            let in_transaction = per_transaction.min(count - done);
            on_conn!(self, conn => { sqlx::raw_sql(begin).execute(&mut *conn).await.unwrap(); });
            let end = done + in_transaction;
            while done < end {
                let n = per_statement.min(end - done);
                let sql = insert_sql(table, columns, n);
                let rows: Vec<Vec<Cell>> = (done..done + n).map(&mut row).collect();
                on_conn!(self, conn => {
                    let mut query = sqlx::query(&sql);
                    for cell in rows.into_iter().flatten() {
                        query = match cell {
                            Cell::Int(v) => query.bind(v),
                            Cell::Text(v) => query.bind(v),
                        };
                    }
                    query.execute(&mut *conn).await.unwrap_or_else(|e| panic!("seeding {table}: {e}"));
                });
                done += n;
            }
            on_conn!(self, conn => { sqlx::raw_sql("COMMIT").execute(&mut *conn).await.unwrap(); });
        }
    }

    /// One integer the statement answers (a count, an id).
    pub async fn scalar(&mut self, sql: &str, bind: &[&str]) -> i64 {
        on_conn!(self, conn => {
            let mut query = sqlx::query_scalar::<_, i64>(sql);
            for value in bind {
                query = query.bind(*value);
            }
            query.fetch_one(&mut *conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
        })
    }

    /// One text the statement answers.
    pub async fn text(&mut self, sql: &str, bind: &[&str]) -> String {
        on_conn!(self, conn => {
            let mut query = sqlx::query_scalar::<_, String>(sql);
            for value in bind {
                query = query.bind(*value);
            }
            query.fetch_one(&mut *conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
        })
    }

    pub async fn account_id(&mut self, name: &str) -> i64 {
        self.scalar("SELECT id FROM accounts WHERE name = $1", &[name])
            .await
    }

    pub async fn close(self) {
        on_conn!(self, conn => { let _ = conn.close().await; });
    }
}

fn insert_sql(table: &str, columns: &[&str], rows: usize) -> String {
    let width = columns.len();
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let params: Vec<String> = (1..=width).map(|c| format!("${}", r * width + c)).collect();
            format!("({})", params.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES {}",
        columns.join(", "),
        values.join(", ")
    )
}

pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `count` conversations of `account`, each holding one turn (the user's
/// message and the reply) as `commit_turn` writes it
/// (`src/store/conversations.rs`), their last activity spread evenly over
/// the `span` before `newest`, oldest first (so messages' `seq` follows time).
pub async fn conversations(db: &mut Db, account: i64, count: usize, newest: i64, span: i64) {
    let step = span / count.max(1) as i64;
    let at = |i: usize| newest - span + i as i64 * step;
    let ids: Vec<String> = (0..count).map(|_| random_id("conv_")).collect();
    let tag = random_id("");
    db.insert_rows(
        "conversations",
        &[
            "id",
            "account_id",
            "user_id",
            "created_at",
            "updated_at",
            "language",
            "last_capability",
        ],
        count,
        |i| {
            vec![
                Cell::Text(ids[i].clone()),
                Cell::Int(account),
                Cell::Text(format!("growth-user-{tag}-{i}")),
                Cell::Int(at(i)),
                Cell::Int(at(i)),
                Cell::Text("es".into()),
                Cell::Text("order_status".into()),
            ]
        },
    )
    .await;
    db.insert_rows(
        "conversation_messages",
        &["id", "conversation_id", "role", "body", "created_at"],
        count * 2,
        |m| {
            let (i, reply) = (m / 2, m % 2 == 1);
            let order = format!("A-{:04}", i % 10_000);
            vec![
                Cell::Text(random_id("msg_")),
                Cell::Text(ids[i].clone()),
                Cell::Text(if reply { "assistant" } else { "user" }.into()),
                Cell::Text(if reply {
                    format!("El pedido {order} está en estado shipped.")
                } else {
                    format!("¿Dónde está mi pedido {order}?")
                }),
                Cell::Int(at(i)),
            ]
        },
    )
    .await;
}

/// `count` capability-gap events of `account` as a turn records them in the
/// default `metadata` mode (`src/store/gap_events.rs`: no message text): a
/// coverage gap of one of `conversations`, spread evenly over the `span`
/// before `newest`.
pub async fn gap_events(
    db: &mut Db,
    account: i64,
    count: usize,
    conversations: &[String],
    newest: i64,
    span: i64,
) {
    let step = span / count.max(1) as i64;
    db.insert_rows(
        "gap_events",
        &[
            "id",
            "account_id",
            "kind",
            "reason_code",
            "conversation_id",
            "occurred_at",
        ],
        count,
        |i| {
            vec![
                Cell::Text(random_id("gap_")),
                Cell::Int(account),
                Cell::Text("coverage_gap".into()),
                Cell::Text("no_matching_capability".into()),
                Cell::Text(conversations[i % conversations.len()].clone()),
                Cell::Int(newest - span + i as i64 * step),
            ]
        },
    )
    .await;
}

/// The platform numbers of a backlog, as `warden admin webhook register`
/// writes them without a token of their own (the server's fallback token
/// sends their replies; `src/store/platform.rs`).
pub async fn platform_numbers(db: &mut Db, account: i64, count: usize) -> Vec<String> {
    let numbers: Vec<String> = (0..count).map(|k| format!("1555000{k:04}")).collect();
    let now = now_millis();
    db.insert_rows(
        "platform_numbers",
        &["phone_number_id", "account_id", "created_at"],
        count,
        |k| {
            vec![
                Cell::Text(numbers[k].clone()),
                Cell::Int(account),
                Cell::Int(now),
            ]
        },
    )
    .await;
    numbers
}

/// Where a seeded platform message is in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// Accepted by the webhook, waiting for a worker.
    Queued,
    /// Replied and finished: the ids kept for deduplication, the text and
    /// the sender's id erased (`finish_platform_message`).
    Replied,
}

/// A run of platform messages: `count` of them, round-robin over `numbers`,
/// each from its own sender, arrived one millisecond apart from `arrived`.
pub struct InboundRun<'a> {
    pub account: i64,
    /// The account's pseudonym salt (`accounts.pseudonym_salt`).
    pub salt: &'a str,
    pub numbers: &'a [String],
    pub count: usize,
    pub arrived: i64,
    pub state: Inbound,
    /// The claim round of each number's first message: the highest round
    /// claimed before it (the insert never goes below it).
    pub first_round: i64,
    /// Distinguishes this run's platform message ids.
    pub tag: &'a str,
    /// The digits this run's senders' ids begin with (each its own sender).
    pub senders: &'a str,
}

/// The messages `enqueue_platform_message` would have queued
/// (`src/store/platform.rs`): message `i` goes to number `i % numbers`,
/// whose `j`-th unfinished message takes claim round `first_round + j`, as
/// the insert computes it when nothing was claimed meanwhile. The sender's
/// pseudonym is the webhook's (`user_subject` under the account's salt).
pub async fn platform_inbound(db: &mut Db, run: &InboundRun<'_>) {
    let numbers = run.numbers.len();
    let queued = run.state == Inbound::Queued;
    let mut columns = vec![
        "platform_message_id",
        "account_id",
        "phone_number_id",
        "user_pseudonym",
        "state",
        "attempts",
        "claim_round",
        "next_attempt_at",
        "received_at",
        "updated_at",
    ];
    if queued {
        columns.extend(["recipient", "body"]);
    }
    let row = |i: usize| {
        let sender = format!("{}{i:08}", run.senders);
        let at = run.arrived + i as i64;
        let mut row = vec![
            Cell::Text(format!("wamid.{}.{i}", run.tag)),
            Cell::Int(run.account),
            Cell::Text(run.numbers[i % numbers].clone()),
            Cell::Text(warden::signing::context::user_subject(run.salt, &sender)),
            Cell::Text(if queued { "queued" } else { "replied" }.into()),
            Cell::Int(if queued { 0 } else { 1 }),
            Cell::Int(run.first_round + (i / numbers) as i64),
            Cell::Int(at),
            Cell::Int(at),
            Cell::Int(if queued { at } else { at + 1_000 }),
        ];
        if queued {
            row.extend([Cell::Text(sender), Cell::Text("hola, ¿qué tal?".into())]);
        }
        row
    };
    // A backlog appears at once to the workers already running, as a
    // backlog stands when they come back; finished history in short bites.
    if queued {
        db.insert_rows_at_once("platform_inbound", &columns, run.count, row)
            .await;
    } else {
        db.insert_rows("platform_inbound", &columns, run.count, row)
            .await;
    }
}
