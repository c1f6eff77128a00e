//! What the data takes on disk, before and after the purge (growth run,
//! `growth.rs`): the SQLite file, its write-ahead log and the free pages
//! inside the file (which new rows reuse; `secure_delete` zeroes them, no
//! `auto_vacuum` gives them back), or each growing PostgreSQL table with its
//! indexes and TOAST (`pg_total_relation_size`) and the whole database.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::seed::{Db, on_conn};

/// The tables that grow with use and that the purge reaches.
const TABLES: &[&str] = &[
    "conversations",
    "conversation_messages",
    "gap_events",
    "platform_inbound",
    "platform_conversations",
];

/// One thing measured on disk, in bytes.
#[derive(Clone, Debug)]
pub struct Reading {
    pub what: String,
    pub bytes: u64,
}

/// Everything measured at one moment.
pub type Readings = Vec<Reading>;

pub async fn read(db: &mut Db, sqlite_file: Option<&Path>) -> Readings {
    match db {
        Db::Sqlite(conn) => {
            let file = sqlite_file.expect("the SQLite file");
            let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            let page: i64 = sqlx::query_scalar("PRAGMA page_size")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            let free: i64 = sqlx::query_scalar("PRAGMA freelist_count")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            vec![
                Reading {
                    what: "database file".into(),
                    bytes: size(file),
                },
                Reading {
                    what: "write-ahead log".into(),
                    bytes: size(&file.with_extension("db-wal")),
                },
                Reading {
                    what: "free pages in the file".into(),
                    bytes: (page * free) as u64,
                },
            ]
        }
        Db::Postgres(conn) => {
            let mut readings = Vec::new();
            for table in TABLES {
                let bytes: i64 = sqlx::query_scalar("SELECT pg_total_relation_size($1::regclass)")
                    .bind(*table)
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
                readings.push(Reading {
                    what: (*table).into(),
                    bytes: bytes as u64,
                });
            }
            let total: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            readings.push(Reading {
                what: "whole database".into(),
                bytes: total as u64,
            });
            readings
        }
    }
}

/// Waits for the start-up purge's log line (`startup::housekeeping`, JSON
/// logs) and returns its fields and how long after `since` it came.
pub async fn wait_for_purge(
    log: &Path,
    since: Instant,
    limit: Duration,
) -> Option<(serde_json::Value, Duration)> {
    while since.elapsed() < limit {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            // Flattened: the event's fields sit beside `message`.
            let message = event["message"].as_str().unwrap_or("");
            if message == "expired data purged" {
                return Some((event, since.elapsed()));
            }
            if message.starts_with("retention purge interrupted") {
                panic!("the purge failed: {line}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// How the space of the purged rows was made reusable before they were
/// written again (PostgreSQL; SQLite's free pages are reusable at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vacuum {
    /// Autovacuum went through every purged table on its own.
    Autovacuum,
    /// Autovacuum had not (within the wait) and nothing else was done.
    NotYet,
    /// Autovacuum is off on this server (the CI configuration): a plain
    /// `VACUUM` of the purged tables stood in for it.
    Explicit,
}

/// The tables the purge deletes from: the others have nothing dead.
const PURGED: [&str; 3] = ["conversations", "conversation_messages", "platform_inbound"];

/// PostgreSQL: waits (up to `limit`) until autovacuum has been through every
/// purged table since `after` (a `now()` of the database), as it does
/// unprompted once enough rows are dead; where it is off, vacuums them.
pub async fn vacuum(db: &mut Db, after: &str, limit: Duration) -> Vacuum {
    let Db::Postgres(conn) = db else {
        return Vacuum::Autovacuum;
    };
    let on: String = sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    if on != "on" {
        for table in PURGED {
            sqlx::raw_sql(&format!("VACUUM {table}"))
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        return Vacuum::Explicit;
    }
    let started = Instant::now();
    let purged: Vec<String> = PURGED.map(String::from).to_vec();
    while started.elapsed() < limit {
        let done: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname = ANY($1) \
             AND last_autovacuum >= $2::timestamptz",
        )
        .bind(&purged)
        .bind(after)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        if done as usize == purged.len() {
            return Vacuum::Autovacuum;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Vacuum::NotYet
}

/// The database's clock, as text (PostgreSQL), to compare autovacuum's times with.
pub async fn database_now(db: &mut Db) -> String {
    on_conn!(db, conn => sqlx::query_scalar::<_, String>("SELECT CAST(CURRENT_TIMESTAMP AS TEXT)")
        .fetch_one(&mut *conn).await.unwrap())
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
