//! Flat cost as data grows (issue 28 item 3): every statement the service
//! runs under a representative workload, read from the real binary's own
//! statement log, is planned on the database it ran on, and a plan that
//! reads the whole of a table that grows with use fails the test.
//!
//! The statements are not listed here by hand: `warden serve` runs with
//! sqlx's statement log on (`sqlx::query=debug`, JSON lines; the text
//! carries no bound values) through turns (a new conversation, a continued
//! one, a confirmation and a selection, an operation result, a gap), a
//! contract test, the capability and credential routes, the policy, the
//! gaps page and its cursor, an MCP call, a platform delivery with its
//! claim and send, and the start-up purges. A statement added later is
//! planned as soon as the workload reaches it.
//!
//! How a full scan is recognised:
//! - SQLite: `EXPLAIN QUERY PLAN` says `SCAN <table>` (with or without
//!   `USING INDEX`, which reads the whole index) instead of `SEARCH`.
//! - PostgreSQL: the generic plan (`plan_cache_mode = force_generic_plan`,
//!   so no bound value shapes it) with `enable_seqscan = off`, so that the
//!   planner's preference for a sequential scan of a small test table is
//!   not mistaken for a missing index: a `Seq Scan` then means no index can
//!   serve, and an index scan without an `Index Cond` reads the whole index.

use crate::helpers::fake_send_api::FakeSendApi;
use crate::helpers::fixtures::*;
use crate::helpers::shop::*;
use crate::helpers::*;
use crate::platform_durability::{delivery, platform_env, post, register_number};
use serde_json::{Value, json};
use sqlx::Connection;
use std::collections::BTreeSet;

/// Tables whose size does not grow with traffic: one row per account,
/// key, number or signing key, or a fixed set. Every other table grows
/// with conversations, calls, deliveries or gaps, and must never be read
/// whole by a statement the service runs.
const BOUNDED_TABLES: &[&str] = &[
    "_sqlx_migrations",
    "accounts",
    "api_keys",
    "signing_keys",
    "master_key_check",
    "platform_numbers",
];

/// Plans that read a growing table whole on purpose, with the reason. Each
/// entry is `(backend, a fragment of the statement, the table)`.
const ACCEPTED_SCANS: &[(&str, &str, &str, &str)] = &[(
    "sqlite",
    "ORDER BY m.claim_round, m.seq LIMIT 1",
    "m",
    "the platform worker's claim walks the claim-order index from its \
     start and stops at the first claimable message: the unfinished rows \
     come first in that order, and the index holds only them",
)];

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_statement_of_the_workload_reads_a_growing_table_whole(backend: Backend) {
    let db = TestDb::new(backend).await;
    let statements = run_workload(&db).await;
    assert!(
        statements.len() >= 20,
        "the statement log was read: {} statements",
        statements.len()
    );
    let plans = match backend {
        Backend::Sqlite => sqlite_plans(&db, &statements).await,
        Backend::Postgres => postgres_plans(&db, &statements).await,
    };
    let mut full_scans = Vec::new();
    for plan in &plans {
        for table in &plan.whole_tables {
            let accepted = ACCEPTED_SCANS.iter().any(|(b, fragment, t, _)| {
                *b == backend_name(backend) && plan.sql.contains(fragment) && t == table
            });
            if !BOUNDED_TABLES.contains(&table.as_str()) && !accepted {
                full_scans.push(format!("{table}: {}\n  plan: {}", plan.sql, plan.text));
            }
        }
    }
    println!(
        "{} distinct statements planned on {}; {} read a growing table whole",
        plans.len(),
        backend_name(backend),
        full_scans.len()
    );
    assert!(
        full_scans.is_empty(),
        "statements that read a growing table whole:\n{}",
        full_scans.join("\n")
    );
}

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    }
}

/// One planned statement: its text, the plan as the database printed it,
/// and the growing-or-not tables it reads whole.
struct Plan {
    sql: String,
    text: String,
    whole_tables: Vec<String>,
}

/// Drives the real binary through the workload and returns every distinct
/// statement its log shows (reads and writes; transaction control and
/// session settings left out).
async fn run_workload(db: &TestDb) -> BTreeSet<String> {
    let key = cli_account_with_key(db, "shop").await;
    register_number(db).await;
    let send_api = FakeSendApi::start().await;
    let mut env = platform_env(&send_api);
    env.retain(|(name, _)| *name != "WARDEN_LOG");
    env.push(("WARDEN_LOG", "warn,warden=info,sqlx::query=debug".into()));
    env.push(("WARDEN_LOG_FORMAT", "json".into()));
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = ServerProcess::start(db, &pairs).await;
    let api = server.api(&key);
    let endpoint = shop_endpoint().await;

    configure_credential(&api).await;
    let (status, imported) = api
        .import_capabilities(&new_key(), shop_definitions(&endpoint.base))
        .await;
    assert_eq!(status, 201, "{imported}");
    let order_status = imported["capabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = api.list_capabilities().await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.get_capability(&order_status).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .test_capability(&order_status, json!({"order": "A-1001"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let policy = json!({"version": 1, "instructions": "Responde en español."});
    let (status, body) = api.put_policy(&policy).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.get_policy().await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .put_settings(&json!({"diagnostic_message_mode": "text"}))
        .await;
    assert_eq!(status, 201, "{body}");

    let say = |conversation: Option<String>, text: &str| {
        let mut body = json!({"user_id": "user-42", "message": {"type": "text", "body": text}});
        if let Some(c) = conversation {
            body["conversation_id"] = json!(c);
        }
        let api = api.clone();
        async move {
            let (status, body) = api.send_message(&body).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    // A new conversation that calls a capability, then continues it.
    let first = say(None, "¿Dónde está mi pedido A-1001?").await;
    let c = conversation(&first);
    say(Some(c.clone()), "¿Y el pedido A-2002?").await;
    // A confirmation, reported back as the host's operation result.
    let confirm = say(
        Some(c.clone()),
        "Quiero cambiar la dirección del pedido A-1001",
    )
    .await;
    if let Some(interaction) = confirm["interaction"]["id"].as_str() {
        let result = json!({"interaction_id": interaction, "operation": "change_address", "status": "succeeded"});
        let (status, body) = api.report_operation_result(&c, &new_key(), &result).await;
        assert_eq!(status, 200, "{body}");
    }
    // A selection, and a message nothing can answer (a gap).
    say(None, "Quiero cambiar la dirección del pedido A-2002").await;
    say(None, "¿Tenéis tarjetas regalo para bodas?").await;
    // The gaps page, then its next page by cursor.
    let (status, page) = api.get_capability_gaps("?limit=1").await;
    assert_eq!(status, 200, "{page}");
    let (status, body) = api
        .get_capability_gaps("?limit=1&before=2099-01-01T00:00:00Z&before_id=gap_z")
        .await;
    assert_eq!(status, 200, "{body}");
    // An MCP tool call, through the same executor.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "order_status", "arguments": {"order": "A-1001"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "plans", "version": "1"}}}});
    let answered = reqwest::Client::new()
        .post(format!("{}/v1/mcp", server.address))
        .bearer_auth(&key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "order_status")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    // A platform delivery: queued, claimed, answered and sent.
    let client = reqwest::Client::new();
    let bytes = delivery(
        "34600111222",
        "wamid.34600111222.1",
        "¿Dónde está mi pedido A-1001?",
    );
    assert!(post(&client, &server.address, &bytes).await);
    send_api.wait_for(1, 60).await;
    // Deleting a credential reads which capabilities use it.
    let (status, body) = api.delete_credential("cred_unused").await;
    assert!(status == 404 || status == 204, "{status} {body}");

    let logs = server.logs_so_far().await;
    statements_in(&logs)
}

/// The distinct statements sqlx logged, each as the text it sent.
fn statements_in(logs: &[String]) -> BTreeSet<String> {
    let mut statements = BTreeSet::new();
    for line in logs {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["target"] != "sqlx::query" {
            continue;
        }
        let full = event["db.statement"].as_str().unwrap_or("").trim();
        let text = if full.is_empty() {
            event["summary"].as_str().unwrap_or("").trim()
        } else {
            full
        };
        let normalised = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let verb = normalised
            .split(' ')
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        if matches!(
            verb.as_str(),
            "SELECT" | "INSERT" | "UPDATE" | "DELETE" | "WITH"
        ) {
            statements.insert(normalised);
        }
    }
    statements
}

async fn sqlite_plans(db: &TestDb, statements: &BTreeSet<String>) -> Vec<Plan> {
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    let mut plans = Vec::new();
    for sql in statements {
        let rows: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("EXPLAIN QUERY PLAN {sql}: {e}"));
        let details: Vec<&str> = rows.iter().map(|(_, _, _, d)| d.as_str()).collect();
        let whole_tables = details
            .iter()
            .filter_map(|d| d.strip_prefix("SCAN "))
            // A literal row or VALUES list is not a table.
            .filter(|rest| !rest.starts_with("CONSTANT ROW") && !rest.contains("VALUES CLAUSE"))
            .map(|rest| rest.split(' ').next().unwrap_or(rest).to_owned())
            .collect();
        plans.push(Plan {
            sql: sql.clone(),
            text: details.join(" | "),
            whole_tables,
        });
    }
    plans
}

async fn postgres_plans(db: &TestDb, statements: &BTreeSet<String>) -> Vec<Plan> {
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut plans = Vec::new();
    for sql in statements {
        let parameters = (1..=64)
            .take_while(|n| sql.contains(&format!("${n}")))
            .count();
        sqlx::raw_sql(&format!("PREPARE planned AS {sql}"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("PREPARE {sql}: {e}"));
        let nulls = vec!["NULL"; parameters].join(", ");
        let execute = if parameters == 0 {
            "EXPLAIN (FORMAT JSON) EXECUTE planned".to_owned()
        } else {
            format!("EXPLAIN (FORMAT JSON) EXECUTE planned({nulls})")
        };
        let plan: Value = sqlx::query_scalar(&execute)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{execute} for {sql}: {e}"));
        sqlx::raw_sql("DEALLOCATE planned")
            .execute(&mut conn)
            .await
            .unwrap();
        let mut whole_tables = Vec::new();
        whole_reads(&plan[0]["Plan"], &mut whole_tables);
        plans.push(Plan {
            sql: sql.clone(),
            text: plan.to_string(),
            whole_tables,
        });
    }
    plans
}

/// Tables a PostgreSQL plan node (or one beneath it) reads whole.
fn whole_reads(node: &Value, tables: &mut Vec<String>) {
    let kind = node["Node Type"].as_str().unwrap_or("");
    if let Some(table) = node["Relation Name"].as_str() {
        let whole = match kind {
            "Seq Scan" => true,
            "Index Scan" | "Index Only Scan" | "Bitmap Index Scan" => {
                node.get("Index Cond").is_none()
            }
            _ => false,
        };
        if whole {
            tables.push(table.to_owned());
        }
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        whole_reads(child, tables);
    }
}
