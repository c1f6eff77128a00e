//! Durability and shutdown of the real binary. The mixed-workload crash
//! harness (many kill points, every kind of write) is `crash_harness.rs`.

use crate::helpers::*;
use serde_json::json;
use std::time::Duration;

const WRITERS: usize = 4;

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_writes_keeps_every_acknowledged_write(backend: Backend) {
    let db = TestDb::new(backend).await;
    let mut keys = Vec::new();
    for i in 0..WRITERS {
        keys.push(cli_account_with_key(&db, &format!("a{i}")).await);
    }

    let mut server = ServerProcess::start(&db, &[]).await;
    let writers: Vec<_> = keys
        .iter()
        .map(|key| {
            let api = server.api(key);
            // Each writer PUTs "write i" in sequence and remembers the last acknowledged revision.
            tokio::spawn(async move {
                let mut acked = 0i64;
                for i in 0.. {
                    let body = json!({"version": 1, "instructions": format!("write {i}")});
                    // The server is killed mid-write: a failed send ends the writer.
                    let request = api.put_policy(&body).request();
                    match request.timeout(Duration::from_secs(5)).send().await {
                        Ok(r) if r.status().is_success() => {
                            let revision = r
                                .json::<serde_json::Value>()
                                .await
                                .map(|b| b["revision"].as_i64().unwrap());
                            match revision {
                                Ok(rev) => acked = rev,
                                Err(_) => break,
                            }
                        }
                        _ => break,
                    }
                }
                acked
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(700)).await;
    server.child.start_kill().unwrap(); // SIGKILL
    server.child.wait().await.unwrap();
    let mut acked = Vec::new();
    for writer in writers {
        acked.push(writer.await.unwrap());
    }
    eprintln!("acknowledged revisions before SIGKILL: {acked:?}");
    assert!(
        acked.iter().all(|&a| a > 0),
        "every writer got some writes through: {acked:?}"
    );

    let server = ServerProcess::start(&db, &[]).await;
    assert_eq!(server.get("/health").await.status(), 200);
    for (key, acked) in keys.iter().zip(acked) {
        let (status, body) = server.api(key).get_policy().await;
        assert_eq!(status, 200, "{body}");
        let revision = body["revision"].as_i64().unwrap();
        // At most the one unacknowledged in-flight write may also have landed.
        assert!(
            revision == acked || revision == acked + 1,
            "acked {acked}, stored {revision}"
        );
        assert_eq!(
            body["policy"]["instructions"],
            format!("write {}", revision - 1),
            "no torn write"
        );
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_server_cleanly(backend: Backend) {
    let db = TestDb::new(backend).await;
    let mut server = ServerProcess::start(&db, &[]).await;
    let pid = server.child.id().unwrap().to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .expect("exits within 10 s")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
