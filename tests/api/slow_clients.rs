//! Slow, idle and numerous clients cannot hold the server (`ClientLimits`):
//! trickled headers and bodies are cut off, idle connections closed, the
//! connection cap holds, a slow request answers 503 at its deadline while
//! its work still completes, and shutdown waits a bounded time. Bounds here
//! are generous upper limits; what is asserted is that the cut happens at all.

use crate::helpers::fixtures::account_ready;
use crate::helpers::raw_http::{read_head, skip_body};
use crate::helpers::shop::order_status;
use crate::helpers::*;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use warden::cli::ClientLimits;

fn short_limits() -> ClientLimits {
    ClientLimits {
        header_read_timeout_ms: 1_000,
        body_read_timeout_ms: 1_000,
        request_timeout_ms: 1_000,
        ..ClientLimits::DEFAULT
    }
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.address.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Writes `bytes` one at a time, `every` apart, until the server closes the
/// connection or `bytes` runs out. Returns what the server answered.
async fn trickle(stream: &mut TcpStream, bytes: &[u8], every: Duration) -> (bool, Vec<u8>) {
    let mut answer = Vec::new();
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() {
            return (true, answer);
        }
        let mut buffer = [0u8; 4096];
        match tokio::time::timeout(every, stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (true, answer),
            Ok(Ok(n)) => answer.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
    }
    // Everything was sent: whatever the server does next, it did not cut us off.
    (false, answer)
}

/// A policy upload whose body never completes: one byte of a hundred.
fn unfinished_upload(key: &str) -> String {
    format!(
        "PUT /v1/agent-policy HTTP/1.1\r\nhost: warden\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
    )
}

/// Reads until the server closes the connection (or `limit` passes).
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut answer = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    Some(answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_headers_are_cut_off() {
    let app = TestApp::spawn_with_limits(Backend::Sqlite, short_limits()).await;
    let mut stream = connect(&app).await;
    // 60 header bytes at 200 ms each would take 12 s; the limit is 1 s.
    let request = b"GET /health HTTP/1.1\r\nhost: warden\r\nx-padding: aaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let started = Instant::now();
    let (cut, _) = trickle(&mut stream, request, Duration::from_millis(200)).await;
    assert!(cut, "the server closed the trickling connection");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let app = TestApp::spawn_with_limits(Backend::Sqlite, short_limits()).await;
    let mut silent = connect(&app).await;
    assert!(
        read_to_close(&mut silent, Duration::from_secs(8))
            .await
            .is_some(),
        "a silent connection is closed"
    );
    // A keep-alive connection that goes idle after one request is closed too.
    let mut kept = connect(&app).await;
    kept.write_all(b"GET /health HTTP/1.1\r\nhost: warden\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut kept, Duration::from_secs(8))
        .await
        .expect("closed when idle");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_bodies_are_cut_off_with_an_error() {
    // The body deadline, not the whole-request one, is what cuts here.
    let limits = ClientLimits {
        request_timeout_ms: 30_000,
        ..short_limits()
    };
    let app = TestApp::spawn_with_limits(Backend::Sqlite, limits).await;
    let key = app.account_with_key("slow").await;
    let body = json!({"version": 1, "instructions": "Answer briefly and politely."}).to_string();
    let head = format!(
        "PUT /v1/agent-policy HTTP/1.1\r\nhost: warden\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = connect(&app).await;
    stream.write_all(head.as_bytes()).await.unwrap();
    let (cut, mut answer) = trickle(&mut stream, body.as_bytes(), Duration::from_millis(200)).await;
    assert!(cut, "the upload was cut off");
    if let Some(rest) = read_to_close(&mut stream, Duration::from_secs(2)).await {
        answer.extend(rest);
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("\"code\":\"BAD_REQUEST\""), "{text}");
    // Nothing was stored.
    assert_eq!(app.get_policy(&key).await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_stays_responsive_under_200_trickling_connections() {
    let app = TestApp::spawn_with_limits(
        Backend::Sqlite,
        ClientLimits {
            header_read_timeout_ms: 5_000,
            // The tricklers and the probes share 127.0.0.1: what is shown
            // here is the header deadline, not the per-client limit.
            max_connections_per_client: 0,
            ..ClientLimits::DEFAULT
        },
    )
    .await;
    let mut tricklers = Vec::new();
    for _ in 0..200 {
        let mut stream = connect(&app).await;
        tricklers.push(tokio::spawn(async move {
            let request =
                b"GET /health HTTP/1.1\r\nhost: warden\r\nx-slow: 1111111111111111111111111111111111111111\r\n\r\n";
            trickle(&mut stream, request, Duration::from_millis(250)).await.0
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..20 {
        let response = tokio::time::timeout(
            Duration::from_secs(2),
            app.client.get(app.url("/health")).send(),
        )
        .await
        .expect("health answers while 200 clients trickle")
        .unwrap();
        assert_eq!(response.status(), 200);
    }
    let mut cut = 0;
    for t in tricklers {
        cut += usize::from(t.await.unwrap());
    }
    assert_eq!(cut, 200, "every trickling client was cut off");
}

/// A burst of new connections while none can be served waits in the
/// kernel's backlog (`http_server::LISTEN_BACKLOG`): every one is
/// established, none dropped to retry a second later (the standard
/// library's backlog of 128 held about that many).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connections_beyond_the_cap_waits_in_the_backlog() {
    const BURST: usize = 400;
    let app = TestApp::spawn_with_limits(
        Backend::Sqlite,
        ClientLimits {
            max_connections: 1,
            max_connections_per_client: 0,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
            ..ClientLimits::DEFAULT
        },
    )
    .await;
    let key = app.account_with_key("uploads").await;
    let mut busy = connect(&app).await;
    busy.write_all(unfinished_upload(&key).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A dropped connection request is retried after 1 s, 3 s, 7 s …: a
    // backlog too short shows as connections not made within 3 s.
    let burst = (0..BURST).map(|_| {
        let address = app.address.trim_start_matches("http://").to_owned();
        tokio::spawn(async move {
            tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(address))
                .await
                .ok()
                .and_then(Result::ok)
        })
    });
    let mut established = Vec::new();
    for connection in futures::future::join_all(burst).await {
        established.extend(connection.unwrap());
    }
    assert_eq!(
        established.len(),
        BURST,
        "every connection of the burst is established and waits its turn"
    );
    drop(busy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_busy_one_to_finish() {
    // Idle connections make room at once (greedy_clients.rs); busy ones,
    // here four uploads in progress, keep their slot until they end.
    let app = TestApp::spawn_with_limits(
        Backend::Sqlite,
        ClientLimits {
            max_connections: 4,
            header_read_timeout_ms: 2_000,
            body_read_timeout_ms: 2_000,
            ..ClientLimits::DEFAULT
        },
    )
    .await;
    let key = app.account_with_key("uploads").await;
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = connect(&app).await;
        stream
            .write_all(unfinished_upload(&key).as_bytes())
            .await
            .unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = connect(&app).await;
    fifth
        .write_all(b"GET /health HTTP/1.1\r\nhost: warden\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(700), fifth.read(&mut buffer)).await;
    assert!(
        early.is_err(),
        "the fifth connection is not served while four uploads are in progress"
    );
    // The uploads are cut at the body deadline; then the fifth is served.
    let answer = read_to_close(&mut fifth, Duration::from_secs(10))
        .await
        .expect("served later");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_next_busy_connection_to_answer_makes_room_and_only_it() {
    // Two uploads in progress fill a cap of two. A third client waits; the
    // first upload to finish answers with `connection: close` and makes
    // its room; the second keeps its keep-alive.
    let app = TestApp::spawn_with_limits(
        Backend::Sqlite,
        ClientLimits {
            max_connections: 2,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 10_000,
            ..ClientLimits::DEFAULT
        },
    )
    .await;
    let key = app.account_with_key("uploads").await;
    let mut first = connect(&app).await;
    let mut second = connect(&app).await;
    for upload in [&mut first, &mut second] {
        upload
            .write_all(unfinished_upload(&key).as_bytes())
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = connect(&app).await;
    third
        .write_all(b"GET /health HTTP/1.1\r\nhost: warden\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buffer)).await;
    assert!(early.is_err(), "the third waits while both are busy");

    // The rest of a 100-byte JSON body: `{` was sent with the head.
    let rest = format!("{}}}", " ".repeat(98));
    first.write_all(rest.as_bytes()).await.unwrap();
    let head = read_head(&mut first)
        .await
        .expect("the first upload is answered");
    assert!(head.contains("connection: close"), "{head}");
    let answer = read_to_close(&mut third, Duration::from_secs(5))
        .await
        .expect("the third is served once the first closes");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    second.write_all(rest.as_bytes()).await.unwrap();
    let head = read_head(&mut second)
        .await
        .expect("the second upload is answered");
    assert!(!head.contains("connection: close"), "{head}");
    skip_body(&mut second, &head).await;
    second
        .write_all(b"GET /health HTTP/1.1\r\nhost: warden\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut second)
        .await
        .expect("the second connection is still open");
    assert!(head.starts_with("http/1.1 200"), "{head}");
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_answers_503_and_its_work_still_completes(backend: Backend) {
    let app = TestApp::spawn_with_limits(backend, short_limits()).await;
    let key = account_ready(&app, "slow").await;
    let endpoint = crate::helpers::endpoint::FakeEndpoint::start(|_| async {
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        crate::helpers::endpoint::json_response(
            axum::http::StatusCode::OK,
            &json!({"status": "shipped"}),
        )
    })
    .await;
    let (status, body) = app
        .create_capability(&key, order_status(&endpoint.base))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let (status, body) = app
        .test_capability(&key, &id, json!({"order": "A-1001"}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_flat_error(&body, "SERVICE_UNAVAILABLE");
    // The test itself ran to its end and was recorded.
    let mut recorded = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if app.db.contains("shipped").await || endpoint.hits() == 1 && app.db.contains(&id).await {
            recorded = true;
            break;
        }
    }
    assert!(recorded, "the detached test finished and stored its record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_a_bounded_time_for_a_stuck_request() {
    let db = TestDb::new(Backend::Sqlite).await;
    let key = cli_account_with_key(&db, "slow").await;
    let server = ServerProcess::start(
        &db,
        &[
            ("WARDEN_SHUTDOWN_GRACE_MS", "1000"),
            ("WARDEN_BODY_READ_TIMEOUT_MS", "120000"),
        ],
    )
    .await;
    let mut stuck = TcpStream::connect(server.address.trim_start_matches("http://"))
        .await
        .unwrap();
    // A body that never completes keeps its request in flight.
    stuck
        .write_all(unfinished_upload(&key).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id().unwrap().to_string();
    let started = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let logs = server.logs.clone();
    let mut child = server.child;
    let exited = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
    let exit = exited
        .unwrap_or_else(|_| {
            panic!(
                "the server exits within its shutdown grace plus margin; its log: {:#?}",
                logs.lock().unwrap()
            )
        })
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
}
