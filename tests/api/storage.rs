//! The repository itself, on both backends.

use crate::helpers::*;
use warden::domain::diagnostics::DiagnosticMode;
use warden::domain::policy::AgentPolicy;
use warden::store::accounts::KeyRefusal;
use warden::store::{Constraint, StoreError};

fn policy(text: &str) -> AgentPolicy {
    AgentPolicy {
        version: 1,
        instructions: Some(text.into()),
        allowed_topics: None,
        out_of_scope_response: None,
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_claims_expire_and_are_purged(backend: Backend) {
    use warden::store::idempotency::Claim;
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let claim = async |key: &str, hash: &str| {
        store
            .claim_idempotency_key(&account, key, hash)
            .await
            .unwrap()
    };
    assert_eq!(claim("k1", "h1").await, Claim::Fresh);
    assert_eq!(claim("k1", "h1").await, Claim::InFlight);
    assert_eq!(claim("k1", "h2").await, Claim::KeyReused);
    assert_eq!(claim("k2", "h1").await, Claim::Fresh);
    assert_eq!(purge_idempotency_records(&store).await, 0);
    // Age both records past retention (and k1's claim past abandonment).
    let age = "UPDATE idempotency_records SET expires_at = 0, created_at = 0";
    match &store {
        warden::store::Store::Sqlite(p) => {
            sqlx::query(age).execute(p).await.unwrap();
        }
        warden::store::Store::Postgres(p) => {
            sqlx::query(age).execute(p.pool()).await.unwrap();
        }
    }
    assert_eq!(
        claim("k1", "h2").await,
        Claim::Fresh,
        "an expired key is free again"
    );
    assert_eq!(
        purge_idempotency_records(&store).await,
        1,
        "k2 purged; k1 is a fresh claim"
    );
    store.release_idempotency_key(&account, "k1").await.unwrap();
    assert_eq!(store.count_idempotency_records(&account).await.unwrap(), 0);
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_names_are_unique(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    store.create_account("acme").await.unwrap();
    assert!(matches!(
        store.create_account("acme").await,
        Err(StoreError::Conflict(Constraint::AccountName))
    ));
    assert!(store.find_account("acme").await.unwrap().is_some());
    assert!(store.find_account("nobody").await.unwrap().is_none());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticate_distinguishes_refusals(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    store
        .insert_api_key(&account, "key_a", "hash_a", "prod")
        .await
        .unwrap();
    assert_eq!(
        store.authenticate("hash_a", "prod").await.unwrap(),
        Ok(account)
    );
    assert_eq!(
        store.authenticate("hash_a", "staging").await.unwrap(),
        Err(KeyRefusal::OtherEnvironment)
    );
    assert_eq!(
        store.authenticate("hash_b", "prod").await.unwrap(),
        Err(KeyRefusal::Unknown)
    );
    store.revoke_api_key("key_a").await.unwrap();
    store.revoke_api_key("key_a").await.unwrap();
    assert_eq!(
        store.authenticate("hash_a", "prod").await.unwrap(),
        Err(KeyRefusal::Revoked)
    );
    assert!(matches!(
        store.revoke_api_key("key_zz").await,
        Err(StoreError::NotFound)
    ));
}

/// The hot point reads (key, credential) run on SQLite on the asking
/// thread's own connection, not sqlx's: they must still see every commit
/// made before them through any other connection or replica, decode blobs
/// and closed words as sqlx did, and report a stored word outside its set
/// as corrupt.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_reads_see_every_earlier_commit_of_another_replica(backend: Backend) {
    use warden::crypto::sealed::Sealed;
    use warden::domain::credential::{AuthType, CredentialStatus};
    let db = TestDb::new(backend).await;
    let reader = db.store().await;
    let writer = db.store().await;
    let account = writer.create_account("acme").await.unwrap();
    writer
        .insert_api_key(&account, "key_a", "hash_a", "prod")
        .await
        .unwrap();
    // Read many times, so that every runtime thread holds a connection
    // (and its read statement cached) before the key is revoked.
    for _ in 0..20 {
        assert_eq!(
            reader.authenticate("hash_a", "prod").await.unwrap(),
            Ok(account)
        );
    }
    writer.revoke_api_key("key_a").await.unwrap();
    for _ in 0..20 {
        assert_eq!(
            reader.authenticate("hash_a", "prod").await.unwrap(),
            Err(KeyRefusal::Revoked)
        );
    }

    let sealed = Sealed {
        key_id: "mk_1".into(),
        nonce: vec![0, 1, 2, 255],
        ciphertext: vec![9; 40],
    };
    assert!(
        reader
            .get_credential(&account, "crm")
            .await
            .unwrap()
            .is_none()
    );
    writer
        .put_credential(&account, "crm", AuthType::Bearer, None, &sealed)
        .await
        .unwrap();
    let row = reader
        .get_credential(&account, "crm")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.auth_type, AuthType::Bearer);
    assert_eq!(row.status, CredentialStatus::Configured);
    assert_eq!(row.header_name, None);
    assert_eq!(row.sealed(), Some(sealed));

    let sql = "UPDATE capability_credentials SET auth_type = 'telepathy'";
    match &writer {
        warden::store::Store::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        warden::store::Store::Postgres(p) => sqlx::query(sql).execute(p.pool()).await.map(|_| ()),
    }
    .unwrap();
    assert!(matches!(
        reader.get_credential(&account, "crm").await,
        Err(StoreError::Corrupt(_))
    ));
}

/// Point reads asked at once (on PostgreSQL, the reads of one statement
/// that queue behind the one on its way are sent as one statement:
/// `store/read_batches.rs`) each get their own answer: the right account
/// or refusal for each key, the right credential or none for each account.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_reads_asked_at_once_each_get_their_own_answer(backend: Backend) {
    use warden::crypto::sealed::Sealed;
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let acme = store.create_account("acme").await.unwrap();
    let globex = store.create_account("globex").await.unwrap();
    for (account, key, environment) in [
        (&acme, "a", "prod"),
        (&globex, "b", "prod"),
        (&acme, "r", "prod"),
        (&globex, "s", "staging"),
    ] {
        store
            .insert_api_key(
                account,
                &format!("key_{key}"),
                &format!("hash_{key}"),
                environment,
            )
            .await
            .unwrap();
    }
    store.revoke_api_key("key_r").await.unwrap();
    let sealed = Sealed {
        key_id: "mk_1".into(),
        nonce: vec![1; 12],
        ciphertext: vec![7; 40],
    };
    store
        .put_credential(
            &acme,
            "crm",
            warden::domain::credential::AuthType::Bearer,
            None,
            &sealed,
        )
        .await
        .unwrap();

    let expected = |key: &str| match key {
        "hash_a" => Ok(acme),
        "hash_b" => Ok(globex),
        "hash_r" => Err(KeyRefusal::Revoked),
        "hash_s" => Err(KeyRefusal::OtherEnvironment),
        _ => Err(KeyRefusal::Unknown),
    };
    // 45 keys (not a whole number of the largest batch) and 21 credentials.
    let keys: Vec<&str> = ["hash_a", "hash_b", "hash_r", "hash_s", "hash_x"]
        .into_iter()
        .cycle()
        .take(45)
        .collect();
    let (judged, credentials) = futures::future::join(
        futures::future::join_all(keys.iter().map(|key| store.authenticate(key, "prod"))),
        futures::future::join_all(
            (0..21).map(|i| store.get_credential(if i % 3 == 0 { &globex } else { &acme }, "crm")),
        ),
    )
    .await;
    for (key, judged) in keys.iter().zip(judged) {
        assert_eq!(judged.unwrap(), expected(key), "{key}");
    }
    for (i, credential) in credentials.into_iter().enumerate() {
        let credential = credential.unwrap();
        if i % 3 == 0 {
            assert!(credential.is_none(), "globex has no credential: {i}");
        } else {
            assert_eq!(
                credential.map(|c| c.sealed()),
                Some(Some(sealed.clone())),
                "{i}"
            );
        }
    }
    if let warden::store::Store::Postgres(postgres) = &store {
        assert!(
            postgres.reads_gathered() > 0,
            "reads asked at once were read together"
        );
    }
}

/// A coverage-gap event with id `id`, for the tests that need a write.
fn gap_event(id: &str) -> warden::store::gap_events::GapEvent {
    use warden::domain::diagnostics::{GapKind, GapReason};
    warden::store::gap_events::GapEvent {
        id: id.into(),
        kind: GapKind::CoverageGap,
        reason_code: GapReason::NoMatchingCapability,
        conversation_id: None,
        capability: None,
        message_text: None,
        occurred_at: 1,
    }
}

/// On SQLite a write transaction runs on the asking thread's own
/// connection and never waits there for the write lock: while another
/// process holds it, the write waits off the thread (other tasks on the
/// same one-thread runtime keep running), then commits once it is free.
#[tokio::test(flavor = "current_thread")]
async fn a_sqlite_write_waits_for_another_process_without_holding_its_thread() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let db = TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    // Warm this thread's connection with a first write.
    store
        .record_gap_event(&account, &gap_event("gap_1"))
        .await
        .unwrap();

    // "Another process": a connection of its own, outside the store,
    // holding the write lock for a while.
    use sqlx::Connection;
    let mut other = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let release = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    });
    store
        .record_gap_event(&account, &gap_event("gap_2"))
        .await
        .unwrap();
    // The write waited for the lock: the other process let go first, and
    // meanwhile this one thread ran the ticker.
    assert!(release.is_finished(), "the write did not wait for the lock");
    assert!(
        ticks.load(Ordering::Relaxed) >= 10,
        "the waiting write held the runtime's only thread"
    );
    ticker.abort();
    let page = store.list_gap_events(&account, 10, None).await.unwrap();
    assert_eq!(page.len(), 2, "both events committed");
}

/// SQLite's WAL starts over before it reaches the safety net
/// (`store::wal_checkpoint`, RESTART at half of it), even while readers
/// never leave it: under steady writes a PASSIVE checkpoint alone never
/// lets the WAL start over, and its safety net then checkpointed inside a
/// commit, on a runtime thread, under the write gate. The WAL file keeps
/// its largest size, so its size after the writes is the most it held:
/// without the RESTART it reaches the safety net (40–41 MiB); with it,
/// 23–29 MiB here. A PASSIVE checkpoint's sync of the database file on a
/// slow disk let it reach 36–54 MiB before the RESTART was due, until the
/// commit past three quarters of the net (29.5 MiB) restarted it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_wal_starts_over_before_its_safety_net_while_readers_stay() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    const PAGE: u64 = 4096;
    const SAFETY_NET_PAGES: u64 = 10_000;
    let db = TestDb::new(Backend::Sqlite).await;
    let store = Arc::new(db.store().await);
    let account = store.create_account("acme").await.unwrap();
    let wal = format!("{}-wal", db.url.trim_start_matches("sqlite://"));

    // Two readers, one after the other without a pause: the WAL is never
    // without one for long.
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let (store, stop) = (store.clone(), stop.clone());
        readers.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                store.list_gap_events(&account, 5, None).await.unwrap();
            }
        });
    }
    // Each event a page of its own and then some: past twice the safety
    // net in all.
    let text = "x".repeat(3_000);
    let mut written = 0;
    while written < 2 * SAFETY_NET_PAGES * PAGE {
        let mut event = gap_event(&format!("gap_{written}"));
        event.message_text = Some(text.clone());
        event.occurred_at = written as i64;
        store.record_gap_event(&account, &event).await.unwrap();
        written += PAGE;
        // As a request's task does between two writes (it awaits its
        // client): without it this loop never gives its thread up, and the
        // checkpoint's task, woken to queue for the gate, may wait seconds
        // for a thread while the WAL grows.
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = readers.join_next().await {
        done.unwrap();
    }
    let largest = std::fs::metadata(&wal).unwrap().len();
    println!(
        "the WAL file's largest size: {:.1} MiB",
        largest as f64 / 1048576.0
    );
    assert!(
        largest < SAFETY_NET_PAGES * PAGE,
        "the WAL grew to {} MiB: it did not start over before the safety net",
        largest >> 20
    );
}

/// sqlx's connections leave the WAL checkpoint to `wal_checkpoint` too:
/// with SQLite's default, each of their commits past 1,000 pages
/// checkpointed inside itself, under the write gate, with two `fsync`s (a
/// retention purge's every batch, while the turns queued behind it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlx_commits_do_not_checkpoint_before_the_safety_net() {
    let db = TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let warden::store::Store::Sqlite(pool) = &store else {
        unreachable!("a SQLite store")
    };
    sqlx::query("CREATE TABLE filler (x BLOB)")
        .execute(pool)
        .await
        .unwrap();
    // ~1,500 pages in 15 commits of the store's own sqlx connections.
    for _ in 0..15 {
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) \
             INSERT INTO filler SELECT zeroblob(3000) FROM n",
        )
        .execute(pool)
        .await
        .unwrap();
    }
    // A checkpoint at 1,000 pages would have let the next commit start
    // the WAL over: it would hold the last ~500 only.
    let (_, wal_pages, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(pool)
        .await
        .unwrap();
    assert!(wal_pages >= 1_500, "the WAL held {wal_pages} pages");
}

/// An in-memory SQLite database is one connection's own: its reads cannot
/// run on another connection, and go through the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_database_reads_through_its_one_connection() {
    let store = warden::store::Store::connect("sqlite::memory:")
        .await
        .unwrap();
    let account = store.create_account("acme").await.unwrap();
    store
        .insert_api_key(&account, "key_a", "hash_a", "prod")
        .await
        .unwrap();
    assert_eq!(
        store.authenticate("hash_a", "prod").await.unwrap(),
        Ok(account)
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_across_restarts(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    store.create_account("acme").await.unwrap();
    store.close().await;
    let again = db.store().await;
    assert!(again.find_account("acme").await.unwrap().is_some());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_policy_writes_get_distinct_revisions(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let writes = (0..20).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .put_policy(&account, &policy(&format!("w{i}")))
                .await
                .unwrap()
                .revision
        })
    });
    let mut revisions: Vec<i64> = futures_join(writes).await;
    revisions.sort();
    assert_eq!(
        revisions,
        (1..=20).collect::<Vec<_>>(),
        "each write is one atomic step"
    );
    let stored = store.get_policy(&account).await.unwrap().unwrap();
    assert_eq!(stored.revision, 20);
    assert!(store.delete_policy(&account).await.unwrap());
    assert!(!store.delete_policy(&account).await.unwrap());
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostic_mode_reports_creation_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    assert_eq!(store.get_diagnostic_mode(&account).await.unwrap(), None);
    assert!(
        store
            .put_diagnostic_mode(&account, DiagnosticMode::Text)
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_diagnostic_mode(&account, DiagnosticMode::Disabled)
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_diagnostic_mode(&account).await.unwrap(),
        Some(DiagnosticMode::Disabled)
    );
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// PostgreSQL connections are handed out without a ping while freshly
/// released (docs/benchmarks.md, fix 10); one that sat idle is pinged, and
/// one the server dropped meanwhile is replaced, not handed to a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_postgresql_connection_the_server_dropped_is_replaced() {
    use sqlx::Connection;
    let db = TestDb::new(Backend::Postgres).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let warden::store::Store::Postgres(postgres) = &store else {
        unreachable!("a PostgreSQL store")
    };
    let pool = postgres.pool();
    // A read on the lane too (store/pg_lane.rs), which keeps its connection.
    store.turn_basis(&account).await.unwrap();
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_all(pool)
        .await
        .unwrap();
    // Another session ends every backend of the pool's database.
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    assert!(end_every_other_session(&mut admin).await > 0 && !pids.is_empty());
    // Idle past the trusted moment: the next acquire pings, finds the
    // connection gone and opens another; every read succeeds.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    for _ in 0..3 {
        let read = store.get_policy(&account).await;
        assert!(
            matches!(read, Ok(None)),
            "a read after the server dropped the pool's connections: {:?}",
            read.err()
        );
        let lane_read = store.turn_basis(&account).await;
        assert!(
            lane_read.is_ok(),
            "a lane read after the server dropped its connection: {:?}",
            lane_read.err()
        );
    }
}

/// A lane connection (`store/pg_lane.rs`) whose socket closes under a read
/// that waits (here for a table another session locked; closed by a proxy
/// between Warden and the server, with no word from the server) ends the
/// read with an error instead of leaving it waiting for an answer that
/// cannot come; the next read opens another connection. A connection the
/// server ended while it was idle is noticed before use, without waiting
/// for the ping that a long idle time brings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_connection_closed_under_a_waiting_read_ends_the_read() {
    use sqlx::Connection;
    use std::time::Duration;
    let db = TestDb::new(Backend::Postgres).await;
    let proxy = CuttingProxy::start(&db.url).await;
    let store = warden::store::Store::connect(&proxy.url).await.unwrap();
    let account = store.create_account("acme").await.unwrap();
    store.turn_basis(&account).await.unwrap();

    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut admin).await.unwrap();
    sqlx::query("LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
        .execute(&mut admin)
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let store = store.clone();
        async move { store.turn_basis(&account).await }
    });
    // The read waits for the lock (seen by the server), then its socket goes.
    let mut observer = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut blocked = 0_i64;
    for _ in 0..200 {
        blocked = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut observer)
        .await
        .unwrap();
        if blocked > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(blocked, 1, "the lane's read waits for the lock");
    proxy.cut();
    let ended = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the read ends once its connection is gone, without its answer")
        .unwrap();
    assert!(
        matches!(ended, Err(StoreError::Unavailable(_))),
        "a read whose connection closed: {ended:?}"
    );
    sqlx::query("ROLLBACK").execute(&mut admin).await.unwrap();
    store.turn_basis(&account).await.unwrap();

    // The server ends the lane's connection while it is idle: the next read,
    // well within the time a connection is trusted without a ping, opens
    // another one instead of failing on the closed one.
    assert!(end_every_other_session(&mut observer).await > 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read = store.turn_basis(&account).await;
    assert!(
        read.is_ok(),
        "a lane read after the server ended its idle connection: {read:?}"
    );
}

/// Ends every other session on `connection`'s database (as an operator's
/// `pg_terminate_backend` would): how many it ended.
async fn end_every_other_session(connection: &mut sqlx::PgConnection) -> usize {
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(connection)
    .await
    .unwrap();
    ended.len()
}

/// A TCP proxy on loopback in front of the test's PostgreSQL server, whose
/// `cut` closes every connection through it at once (later ones pass).
struct CuttingProxy {
    url: String,
    cuts: tokio::sync::watch::Sender<u64>,
}

impl CuttingProxy {
    async fn start(url: &str) -> Self {
        let (before, rest) = url.split_once("://").expect("a URL");
        let (login, rest) = rest.rsplit_once('@').map_or(("", rest), |(l, r)| (l, r));
        let (upstream, database) = rest.split_once('/').expect("a database in the URL");
        let upstream = upstream.to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let login = if login.is_empty() {
            String::new()
        } else {
            format!("{login}@")
        };
        let (cuts, watch) = tokio::sync::watch::channel(0_u64);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let mut watch = watch.clone();
                let generation = *watch.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|now| *now != generation) => {}
                    }
                });
            }
        });
        CuttingProxy {
            url: format!("{before}://{login}{at}/{database}"),
            cuts,
        }
    }

    fn cut(&self) {
        self.cuts.send_modify(|generation| *generation += 1);
    }
}

/// PostgreSQL's hot reads and writes run on connections of their own
/// (`store/pg_lane.rs`), handed back without sqlx's release ping. One whose
/// work failed or was cut off inside its transaction is closed, never handed
/// on: the cut-off turn leaves no transaction open and nothing written, and
/// the next reads and writes succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_write_cut_off_inside_its_transaction_leaves_nothing_open() {
    use sqlx::Connection;
    use std::time::{Duration, Instant};
    let db = TestDb::new(Backend::Postgres).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    store
        .record_gap_event(&account, &gap_event("gap_1"))
        .await
        .unwrap();
    // A write that fails (the same id again): the store's error, and the
    // lane serves the next read.
    assert!(
        store
            .record_gap_event(&account, &gap_event("gap_1"))
            .await
            .is_err()
    );
    store.turn_basis(&account).await.unwrap();

    // A turn's write cut off inside its transaction: the conversation is
    // updated and its messages are written, then it waits for a lock on the
    // gap events. (A turn continuing a conversation: one starting a
    // conversation may be written with others, by a task of its own,
    // `a_turn_whose_caller_went_away_before_its_group_was_sent_is_not_written`.)
    store
        .commit_turn(
            &account,
            &starting_turn("conv_cut", None, "msg_cut_1", "msg_cut_2"),
        )
        .await
        .unwrap();
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let mut lock = admin.begin().await.unwrap();
    sqlx::query("LOCK TABLE gap_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let writer = tokio::spawn({
        let store = store.clone();
        async move {
            let gap = gap_event("gap_cut");
            let mut turn = starting_turn("conv_cut", None, "msg_cut_3", "msg_cut_4");
            turn.new_conversation = None;
            turn.gap_event = Some(&gap);
            store.commit_turn(&account, &turn).await
        }
    });
    let sessions = |condition: &'static str| {
        let url = db.url.clone();
        let database = database.clone();
        async move {
            let mut watcher = sqlx::PgConnection::connect(&url).await.unwrap();
            let sql = format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND {condition}"
            );
            let count: i64 = sqlx::query_scalar(&sql)
                .bind(&database)
                .fetch_one(&mut watcher)
                .await
                .unwrap();
            count
        }
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions("wait_event_type = 'Lock'").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the write never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer.abort();
    assert!(writer.await.unwrap_err().is_cancelled());
    lock.rollback().await.unwrap();
    // Its connection was closed: the server ends that session and its
    // transaction instead of keeping it open for the next user.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions("state LIKE 'idle in transaction%'").await > 0 {
        assert!(Instant::now() < deadline, "a transaction was left open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store
        .record_gap_event(&account, &gap_event("gap_2"))
        .await
        .unwrap();
    let ids: Vec<String> = store
        .list_gap_events(&account, 10, None)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(!ids.contains(&"gap_cut".to_string()), "{ids:?}");
    let cut = store.find_conversation(&account, "conv_cut").await.unwrap();
    let said = store.recent_messages(&cut.unwrap(), 10).await.unwrap();
    assert_eq!(said.len(), 2, "the cut-off turn's messages were written");
}

/// A turn writes its user and assistant messages in one statement; the
/// history still reads them in the order they were said, turn after turn.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversations_messages_keep_the_order_they_were_said(backend: Backend) {
    use crate::helpers::shop::{Shop, conversation};
    let shop = Shop::open(backend).await;
    let (status, first) = shop.say(None, "¿Dónde está mi pedido A-1001?").await;
    assert_eq!(status, 200, "{first}");
    let id = conversation(&first);
    for text in ["¿Y el pedido A-1002?", "Gracias, ¿y el A-1003?"] {
        let (status, body) = shop.say(Some(&id), text).await;
        assert_eq!(status, 200, "{body}");
    }
    let sql = format!(
        "SELECT role || ':' || body FROM conversation_messages WHERE conversation_id = '{id}' ORDER BY seq"
    );
    let said: Vec<String> = match &shop.app.store {
        warden::store::Store::Sqlite(p) => sqlx::query_scalar(&sql).fetch_all(p).await.unwrap(),
        warden::store::Store::Postgres(p) => {
            sqlx::query_scalar(&sql).fetch_all(p.pool()).await.unwrap()
        }
    };
    let roles: Vec<&str> = said.iter().map(|m| m.split(':').next().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ],
        "{said:#?}"
    );
    assert!(
        said[0].ends_with("A-1001?")
            && said[2].ends_with("A-1002?")
            && said[4].ends_with("A-1003?")
    );
}

/// The retention purge's batch of expired idempotency records, as the
/// hourly housekeeping runs it.
async fn purge_idempotency_records(store: &warden::store::Store) -> u64 {
    use warden::store::retention::AgedRecords;
    store
        .purge_aged_batch(
            AgedRecords::IdempotencyRecords,
            warden::clock::now_millis(),
            100,
        )
        .await
        .unwrap()
}

/// What an older build wrote into the two tables migration 0022 reshapes
/// (rebuilt on SQLite, re-indexed on PostgreSQL), in SQL both take.
const WRITTEN_BEFORE_0022: &[&str] = &[
    "INSERT INTO accounts (name, created_at) VALUES ('acme', 1)",
    "INSERT INTO capabilities (id, account_id, name, domain, lifecycle_status, revision, definition, \
     created_at, updated_at) SELECT 'cap_old', id, 'order_status', 'orders', 'active', 1, '{}', 1, 1 FROM accounts",
    "INSERT INTO conversations (id, account_id, user_id, created_at, updated_at) \
     SELECT 'conv_old', id, 'u', 1, 1 FROM accounts",
    "INSERT INTO conversation_messages (id, conversation_id, role, body, created_at) VALUES \
     ('msg_1', 'conv_old', 'user', 'first', 1), ('msg_2', 'conv_old', 'assistant', 'second', 1), \
     ('msg_3', 'conv_old', 'user', 'third', 2)",
    "INSERT INTO capability_tests (id, account_id, capability_id, revision, status, reason, http_status, \
     attempts, duration_ms, created_at) SELECT 'ctest_older', id, 'cap_old', 1, 'passed', NULL, 200, 1, 5, 10 \
     FROM accounts",
    "INSERT INTO capability_tests (id, account_id, capability_id, revision, status, reason, http_status, \
     attempts, duration_ms, created_at) SELECT 'ctest_newer', id, 'cap_old', 1, 'failed', 'timeout', NULL, 2, 9, 20 \
     FROM accounts",
];

/// Migration 0022 keeps every row an older build wrote: a conversation's
/// messages in their order, with a new message after them, and a
/// capability's contract-test records listed newest first, with their
/// ids (no longer indexed alone) and every column.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_before_migration_0022_are_kept_in_order(backend: Backend) {
    let db = TestDb::new(backend).await;
    sql::database_before_migration(&db, backend, 22, WRITTEN_BEFORE_0022).await;
    let store = db.store().await;
    let account = store.find_account("acme").await.unwrap().unwrap();

    let records = store
        .list_test_records(&account, "cap_old", 10)
        .await
        .unwrap();
    let listed: Vec<(&str, i64)> = records
        .iter()
        .map(|r| (r.id.as_str(), r.created_at))
        .collect();
    assert_eq!(listed, [("ctest_newer", 20), ("ctest_older", 10)]);
    assert_eq!(records[0].reason.as_deref(), Some("timeout"));

    let conversation = store
        .find_conversation(&account, "conv_old")
        .await
        .unwrap()
        .unwrap();
    let bodies = |messages: Vec<warden::store::conversations::StoredMessage>| -> Vec<String> {
        messages.into_iter().map(|m| m.body).collect()
    };
    let kept = store.recent_messages(&conversation, 10).await.unwrap();
    assert_eq!(bodies(kept), ["first", "second", "third"]);
    let next = "INSERT INTO conversation_messages (id, conversation_id, role, body, created_at) \
                VALUES ('msg_4', 'conv_old', 'assistant', 'fourth', 3)";
    assert_eq!(sql::execute_on(&store, next).await, 1);
    let after = store.recent_messages(&conversation, 10).await.unwrap();
    assert_eq!(bodies(after), ["first", "second", "third", "fourth"]);
}

/// Records written at once (on PostgreSQL, several in one statement) are
/// each stored, and one the schema refuses (an id already taken) fails
/// only its own caller: the others' records are neither lost nor refused
/// with it.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_written_at_once_are_each_stored_or_refused_alone(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    store
        .record_gap_event(&account, &gap_event("gap_taken"))
        .await
        .unwrap();
    let ids: Vec<String> = (0..40)
        .map(|i| match i {
            17 => "gap_taken".to_owned(),
            i => format!("gap_{i}"),
        })
        .collect();
    let outcomes = futures::future::join_all(ids.iter().map(|id| {
        let (store, account) = (&store, &account);
        async move { store.record_gap_event(account, &gap_event(id)).await }
    }))
    .await;
    for (id, outcome) in ids.iter().zip(&outcomes) {
        if id == "gap_taken" {
            assert!(
                matches!(outcome, Err(StoreError::Conflict(_))),
                "{id}: {outcome:?}"
            );
        } else {
            assert!(outcome.is_ok(), "{id}: {outcome:?}");
        }
    }
    let mut stored: Vec<String> = store
        .list_gap_events(&account, 100, None)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.id)
        .collect();
    stored.sort();
    let mut expected: Vec<String> = ids.clone();
    expected.sort();
    assert_eq!(stored, expected, "every record once, the taken id once");
}

/// A turn starting `conversation` (for `user`, when given) with its two
/// messages.
fn starting_turn<'a>(
    conversation: &'a str,
    user: Option<&'a str>,
    user_message: &'a str,
    assistant_message: &'a str,
) -> warden::store::conversations::TurnRecord<'a> {
    use warden::store::conversations::{NewConversation, NewMessage, PendingChange, TurnRecord};
    TurnRecord {
        conversation_id: conversation,
        new_conversation: Some(NewConversation { user_id: user }),
        decided_language: None,
        called_capability: None,
        user_message: NewMessage {
            id: user_message,
            body: "hola",
            metadata: None,
        },
        assistant_message: NewMessage {
            id: assistant_message,
            body: "hola",
            metadata: None,
        },
        interaction: None,
        set_references: Vec::new(),
        clear_references: Vec::new(),
        pending: PendingChange::Keep,
        gap_event: None,
        started_at: warden::clock::now_millis(),
        platform_reply: None,
    }
}

/// Turns starting conversations at once (on PostgreSQL written together,
/// `store/write_groups.rs`) each keep their own outcome: one for a user
/// erased meanwhile is refused, one whose conversation id is taken fails
/// with the conflict, and every other is stored once, whole.
#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_starting_conversations_at_once_each_keep_their_own_outcome(backend: Backend) {
    use warden::store::conversations::CommitOutcome;
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    store
        .commit_turn(
            &account,
            &starting_turn("conv_taken", None, "msg_first_u", "msg_first_a"),
        )
        .await
        .unwrap();
    store
        .erase_user(&account, "user_gone", warden::clock::now_millis())
        .await
        .unwrap();
    let ids: Vec<(String, String, String)> = (0..32)
        .map(|i| {
            let conversation = match i {
                11 => "conv_taken".to_owned(),
                i => format!("conv_{i}"),
            };
            (conversation, format!("msg_{i}_u"), format!("msg_{i}_a"))
        })
        .collect();
    let outcomes = futures::future::join_all(ids.iter().enumerate().map(|(i, (c, u, a))| {
        let (store, account) = (&store, &account);
        let user = match i {
            23 => Some("user_gone"),
            i if i % 2 == 0 => Some("user_kept"),
            _ => None,
        };
        async move {
            store
                .commit_turn(account, &starting_turn(c, user, u, a))
                .await
        }
    }))
    .await;
    for (i, outcome) in outcomes.iter().enumerate() {
        match i {
            11 => assert!(
                matches!(outcome, Err(StoreError::Conflict(_))),
                "{i}: {outcome:?}"
            ),
            23 => assert!(
                matches!(outcome, Ok(CommitOutcome::UserErased)),
                "{i}: {outcome:?}"
            ),
            _ => assert!(
                matches!(outcome, Ok(CommitOutcome::Committed)),
                "{i}: {outcome:?}"
            ),
        }
    }
    for (i, (conversation, _, _)) in ids.iter().enumerate() {
        let found = store
            .find_conversation(&account, conversation)
            .await
            .unwrap();
        let messages = match &found {
            Some(row) => store.recent_messages(row, 10).await.unwrap().len(),
            None => 0,
        };
        if i == 23 {
            assert!(found.is_none(), "{conversation} was written");
        } else {
            assert_eq!(messages, 2, "{conversation}: both messages, once");
        }
    }
}

/// PostgreSQL writes turns that start conversations together, in a task of
/// their own (`store/write_groups.rs`): a turn whose caller goes away while
/// it waits behind the group on its way is not written, as its own
/// transaction cut off would not have been; a turn already on its way is
/// written whole, with its group, as one whose `COMMIT` was sent is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_caller_went_away_before_its_group_was_sent_is_not_written() {
    use sqlx::Connection;
    use std::time::{Duration, Instant};
    use warden::store::conversations::CommitOutcome;
    let db = TestDb::new(Backend::Postgres).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let mut admin = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut lock = admin.begin().await.unwrap();
    sqlx::query("LOCK TABLE gap_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let turn = |conversation: &'static str, with_gap: bool| {
        let store = store.clone();
        tokio::spawn(async move {
            let gap = gap_event(&format!("gap_{conversation}"));
            let (user, assistant) = (format!("{conversation}_u"), format!("{conversation}_a"));
            let mut turn = starting_turn(conversation, None, &user, &assistant);
            if with_gap {
                turn.gap_event = Some(&gap);
            }
            store.commit_turn(&account, &turn).await
        })
    };
    // On its way, and held at the gap events' lock.
    let on_its_way = turn("conv_sent", true);
    let mut watcher = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the write never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Queued behind it; one of them goes away, and so does the caller of
    // the one on its way.
    let kept = [turn("conv_kept_1", false), turn("conv_kept_2", false)];
    let gone = turn("conv_gone", false);
    tokio::time::sleep(Duration::from_millis(200)).await;
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    on_its_way.abort();
    assert!(on_its_way.await.unwrap_err().is_cancelled());
    lock.rollback().await.unwrap();
    for kept in kept {
        assert!(matches!(kept.await.unwrap(), Ok(CommitOutcome::Committed)));
    }
    for (conversation, written) in [
        ("conv_sent", true),
        ("conv_kept_1", true),
        ("conv_kept_2", true),
        ("conv_gone", false),
    ] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let found = loop {
            let found = store
                .find_conversation(&account, conversation)
                .await
                .unwrap();
            if found.is_some() == written || Instant::now() > deadline {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(found.is_some(), written, "{conversation}");
    }
    let gaps = store.list_gap_events(&account, 10, None).await.unwrap();
    assert_eq!(gaps.len(), 1, "the turn on its way, whole");
}
