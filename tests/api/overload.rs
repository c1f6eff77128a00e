//! Past capacity (issue 28 item 2): a request takes a place among those
//! using the server's own resources (`local_work`) right after admission,
//! and gives it up while it waits for anyone else. With one place: a
//! request stuck on a database lock holds it, and the next request is
//! refused 503 with `Retry-After` while health answers; once the lock goes,
//! service is back. A call to a slow host endpoint and a client slow to send
//! its body hold no place: the server keeps serving others meanwhile. The
//! figures under real overload (admitted p99, refusal latency, recovery)
//! are `make bench`'s `past_capacity` rows (docs/benchmarks.md).

use crate::helpers::endpoint::{FakeEndpoint, json_response};
use crate::helpers::fixtures::{CREDENTIAL, account_ready};
use crate::helpers::shop::order_status;
use crate::helpers::*;
use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden::cli::ClientLimits;

/// One place for local work; while shedding, a request that finds it
/// taken is refused at once (the default).
fn one_place() -> ClientLimits {
    ClientLimits {
        max_local_work: Some(1),
        ..ClientLimits::DEFAULT
    }
}

/// Another client's transaction holding what the server's credential
/// writes need: SQLite's write lock, or PostgreSQL's exclusive lock on the
/// credentials table (reads go on). Dropped, it rolls back.
enum HeldLock {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl HeldLock {
    async fn take(db: &TestDb) -> HeldLock {
        if db.url.starts_with("sqlite") {
            let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .unwrap();
            HeldLock::Sqlite(conn)
        } else {
            let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("BEGIN; LOCK TABLE capability_credentials IN EXCLUSIVE MODE")
                .execute(&mut conn)
                .await
                .unwrap();
            HeldLock::Postgres(conn)
        }
    }

    async fn release(self) {
        match self {
            HeldLock::Sqlite(mut conn) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap();
            }
            HeldLock::Postgres(mut conn) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap();
            }
        }
    }
}

/// `GET /v1/capabilities` of `key`: its status, body and `Retry-After`.
async fn list(app: &TestApp, key: &str) -> (u16, Value, Option<String>) {
    let response = app.api(key).list_capabilities().response().await;
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = status_and_json(response).await;
    (status, body, retry_after)
}

/// A credential write of `key`'s account, in the background: with
/// [`HeldLock`] taken, it waits on the lock holding its places.
fn credential_write(app: &TestApp, key: &str) -> tokio::task::JoinHandle<(u16, Value)> {
    let api = app.api(key);
    tokio::spawn(async move {
        let secret = json!({"auth_type": "bearer", "secret": "rotated-token-456"});
        api.put_credential(CREDENTIAL, &secret).await
    })
}

/// `list` of `key` until it is not 200 (3 s at most): the first refusal.
async fn first_refusal(app: &TestApp, key: &str) -> (u16, Value, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let answer = list(app, key).await;
        if answer.0 != 200 || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_capacity_the_excess_is_refused_with_retry_after_and_service_returns(
    backend: Backend,
) {
    let app = TestApp::spawn_with_limits(backend, one_place()).await;
    let key = account_ready(&app, "busy").await;
    let lock = HeldLock::take(&app.db).await;
    // A credential write waits on the lock, in the only place.
    let writer = credential_write(&app, &key);
    // The next requests find no room: refused, with Retry-After.
    let (status, body, retry_after) = first_refusal(&app, &key).await;
    assert_eq!(status, 503, "{body}");
    assert_flat_error(&body, "SERVICE_UNAVAILABLE");
    assert_eq!(retry_after.as_deref(), Some("1"));
    let health = app.client.get(app.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200, "health answers past capacity");

    // The lock goes: the waiting write finishes, and service is back.
    lock.release().await;
    let (status, body) = writer.await.unwrap();
    assert!((200..300).contains(&status), "{status} {body}");
    let (status, body, _) = list(&app, &key).await;
    assert_eq!(status, 200, "{body}");
}

/// An account with as many requests in progress as it may is refused on
/// arrival when its key was lately admitted (`known_keys`): with the only
/// local place taken, its request is refused by its account's bound, not
/// after waiting for a place it would not have been given work for.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_at_its_bound_is_refused_before_it_waits_for_a_place(backend: Backend) {
    let app = TestApp::spawn_with_limits(
        backend,
        ClientLimits {
            max_in_flight_per_account: 1,
            ..one_place()
        },
    )
    .await;
    let key = account_ready(&app, "busy").await;
    let other = app.account_with_key("other").await;
    let lock = HeldLock::take(&app.db).await;
    // A credential write holds the account's one place and the only local
    // place, waiting on the lock.
    let writer = credential_write(&app, &key);
    // Another account finds no local place (its key is read only after one).
    let (status, body, _) = first_refusal(&app, &other).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body["error"], "the server is at capacity; retry after the time given in Retry-After",
        "{body}"
    );
    // The busy account is refused by its own bound, before the wait.
    let (status, body, retry_after) = list(&app, &key).await;
    assert_eq!(status, 503, "{body}");
    assert_flat_error(&body, "SERVICE_UNAVAILABLE");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(
        body["error"],
        "this account has too many requests in progress; retry after the time given in Retry-After",
        "{body}"
    );

    lock.release().await;
    let (status, body) = writer.await.unwrap();
    assert!((200..300).contains(&status), "{status} {body}");
    for key in [&key, &other] {
        let (status, body, _) = list(&app, key).await;
        assert_eq!(status, 200, "{body}");
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_slow_endpoint_holds_no_place(backend: Backend) {
    let app = TestApp::spawn_with_limits(backend, one_place()).await;
    let key = account_ready(&app, "patient").await;
    let endpoint = FakeEndpoint::start(|_| async {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        json_response(
            StatusCode::OK,
            &json!({"status": "enviado", "carrier": "SEUR"}),
        )
    })
    .await;
    let (status, created) = app
        .create_capability(&key, order_status(&endpoint.base))
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let test = {
        let api = app.api(&key);
        tokio::spawn(async move {
            let response = api
                .test_capability(&id, json!({"order": "A-1001"}))
                .response()
                .await;
            status_and_json(response).await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while endpoint.hits() == 0 {
        assert!(
            Instant::now() < deadline,
            "the call never reached the endpoint"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // While the only place's request waits for the endpoint, others are served.
    for _ in 0..3 {
        let (status, body, _) = list(&app, &key).await;
        assert_eq!(status, 200, "a waiting call holds no place: {body}");
    }
    assert_eq!(endpoint.hits(), 1, "the call was still in progress");
    let (status, body) = test.await.unwrap();
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("passed")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_slow_to_send_its_body_holds_no_place() {
    let app = TestApp::spawn_with_limits(Backend::Sqlite, one_place()).await;
    let key = account_ready(&app, "trickle").await;
    let body = json!({"auth_type": "bearer", "secret": "slowly-sent-token"}).to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let address = app.address.trim_start_matches("http://").to_owned();
    let mut upload = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "PUT /v1/capability-credentials/{CREDENTIAL} HTTP/1.1\r\nhost: warden\r\n\
         authorization: Bearer {key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{first}",
        body.len()
    );
    upload.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Half a body in, the rest not yet: others are served meanwhile.
    for _ in 0..3 {
        let (status, body, _) = list(&app, &key).await;
        assert_eq!(status, 200, "a trickling upload holds no place: {body}");
    }
    upload.write_all(rest.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), upload.read(&mut answer))
        .await
        .expect("the upload is answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 201"),
        "{answer}"
    );
}
