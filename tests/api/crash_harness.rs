//! Crash safety of the real `warden` binary under a mixed workload.
//!
//! Each round starts `warden serve`, lets [`WORKERS`] concurrent writers run
//! a random mix of writes (capability imports, revisions, enable/disable,
//! credential rotation and revocation, agent-policy writes, message turns that
//! open host interactions, operation results), SIGKILLs the process at a
//! random moment, restarts it and checks, directly in the database and
//! through the API:
//!
//! - every acknowledged (2xx) write is present: capabilities at least at the
//!   acknowledged revision, with that revision's change, state and definition
//!   in the history; credentials configured with the acknowledged secret or
//!   revoked; the policy; turns, interactions and operation results;
//! - at most the one write each writer had in flight may also have landed,
//!   and then whole (on PostgreSQL such a write can still commit after the
//!   process died, the statement being at the server already: the checks
//!   wait until the dead process's sessions are gone);
//! - no partial import: every capability of an import exists, or none;
//!   each capability's revisions are exactly `1..=revision`, and its head
//!   row agrees with the history;
//! - idempotency records: every `done` record names what exists; replaying
//!   an acknowledged key returns the same body with `Idempotency-Replayed: true`;
//! - another account can still write.
//!
//! Kill points per backend: `WARDEN_CRASH_ROUNDS` (default 50, what `make
//! test` runs). The long run:
//! `WARDEN_CRASH_ROUNDS=1000 cargo test --test api -- crash_harness --nocapture`.
//! The seed of the random choices is printed first; `WARDEN_CRASH_SEED=N`
//! replays them (the timing, and so the exact interleaving, still varies).

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::{configure_credential, new_key, valid_definition};
use crate::helpers::shop::{order_status, prepare_address_change};
use crate::helpers::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden::store::Store;

/// Concurrent writers per round.
const WORKERS: usize = 6;
const DEFAULT_ROUNDS: usize = 50;
/// The server is killed this long (ms, uniformly) after the writers start.
const KILL_AFTER_MS: std::ops::RangeInclusive<u64> = 20..=350;
const ACCOUNT: &str = "crash";
const BYSTANDER: &str = "bystander";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The PostgreSQL application name of the harness's own connections.
const CHECKER: &str = "crash-checker";
const STATUSES: [&str; 5] = ["succeeded", "failed", "cancelled", "rejected", "expired"];

/// `(id, name, lifecycle_status, revision, definition)` of a capability.
type Head = (String, String, String, i64, String);
/// `(capability_id, revision, change, lifecycle_status, definition)`.
type HistoryRow = (String, i64, String, String, String);

/// Runs `sqlx::query_as(sql).fetch_all` on whichever pool the store holds.
macro_rules! rows {
    ($store:expr, $ty:ty, $sql:expr) => {
        match $store {
            Store::Sqlite(pool) => sqlx::query_as::<_, $ty>($sql).fetch_all(pool).await,
            Store::Postgres(pool) => sqlx::query_as::<_, $ty>($sql).fetch_all(pool.pool()).await,
        }
        .unwrap()
    };
}

// ---------------------------------------------------------------- the ledger

/// One write to a capability, as acknowledged (or attempted).
#[derive(Clone, Debug, PartialEq)]
struct CapWrite {
    revision: i64,
    change: &'static str,
    status: &'static str,
    /// A marker the revised definition carries.
    marker: Option<String>,
}

#[derive(Debug)]
struct Capability {
    name: String,
    owner: usize,
    /// Acknowledged writes (and, after a restart, ones found to have landed).
    known: Vec<CapWrite>,
    /// The write sent and not (yet) acknowledged.
    in_flight: Option<CapWrite>,
    revision: i64,
    status: &'static str,
    /// The last round that acknowledged (or found landed) a write.
    round: usize,
}

#[derive(Debug)]
struct ImportAttempt {
    key: String,
    definitions: Vec<Value>,
    names: Vec<String>,
    owner: usize,
    round: usize,
    /// The 201 body and the ids it named.
    acked: Option<(String, Vec<String>)>,
}

#[derive(Clone, Debug, PartialEq)]
enum CredentialState {
    Configured {
        auth_type: &'static str,
        header: Option<&'static str>,
        secret: String,
    },
    Revoked,
}

/// Last acknowledged value and the one attempted since (one writer each).
#[derive(Debug)]
struct Tracked<T> {
    acked: Option<T>,
    in_flight: Option<T>,
}

impl<T: PartialEq + std::fmt::Debug> Tracked<T> {
    /// Checks what the database holds after a restart: the acknowledged
    /// value, or the one in flight when the kill came (it may have landed).
    /// Returns whether that unacknowledged write landed.
    fn reconcile(&mut self, what: &str, observed: Option<T>) -> bool {
        assert!(
            observed == self.acked || (observed.is_some() && observed == self.in_flight),
            "{what}: stored {observed:?}, acknowledged {:?}, in flight {:?}",
            self.acked,
            self.in_flight
        );
        let landed = self.in_flight.take().is_some() && observed != self.acked;
        self.acked = observed;
        landed
    }
}

impl<T> Default for Tracked<T> {
    fn default() -> Self {
        Tracked {
            acked: None,
            in_flight: None,
        }
    }
}

#[derive(Debug)]
struct Turn {
    conversation: String,
    message_id: String,
    interaction: Option<String>,
    round: usize,
}

#[derive(Debug)]
struct ResultAttempt {
    conversation: String,
    interaction: String,
    key: String,
    body: Value,
    round: usize,
    acked: Option<String>,
}

#[derive(Default)]
struct Ledger {
    imports: Vec<ImportAttempt>,
    capabilities: BTreeMap<String, Capability>,
    credentials: HashMap<usize, Tracked<CredentialState>>,
    /// `(revision, instructions)`; only worker 0 writes the policy.
    policy: Tracked<(i64, String)>,
    turns: Vec<Turn>,
    /// Interactions a worker may report on: `(worker, conversation, interaction)`.
    open_interactions: Vec<(usize, String, String)>,
    results: Vec<ResultAttempt>,
    acked: BTreeMap<&'static str, usize>,
    unacknowledged: usize,
}

impl Ledger {
    fn ack(&mut self, kind: &'static str) {
        *self.acked.entry(kind).or_default() += 1;
    }
}

// ------------------------------------------------------------ the workload

struct Round {
    api: ApiClient,
    ledger: Arc<Mutex<Ledger>>,
    round: usize,
}

/// A response read to the end, or `None` when the server is gone.
async fn send(
    request: reqwest::RequestBuilder,
) -> Option<(u16, reqwest::header::HeaderMap, String)> {
    let response = request.timeout(REQUEST_TIMEOUT).send().await.ok()?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.ok()?;
    Some((status, headers, text))
}

impl Round {
    /// One writer: random writes until the server stops answering.
    async fn worker(self: Arc<Self>, w: usize, mut rng: StdRng) {
        for seq in 0.. {
            let alive = match rng.gen_range(0..15) {
                0..=2 => self.import(w, seq, &mut rng).await,
                3..=5 => self.revise(w, seq, &mut rng).await,
                6..=7 => self.transition(w, &mut rng).await,
                8..=9 => self.credential(w, seq, &mut rng).await,
                10 => self.policy(w, seq, &mut rng).await,
                11..=12 => self.message(w).await,
                _ => self.report(w, &mut rng).await,
            };
            if !alive {
                return;
            }
        }
    }

    async fn import(&self, w: usize, seq: usize, rng: &mut StdRng) -> bool {
        let n = rng.gen_range(1..=3);
        let names: Vec<String> = (0..n)
            .map(|i| format!("r{}-w{w}-s{seq}-{i}of{n}", self.round))
            .collect();
        let definitions: Vec<Value> = names.iter().map(|n| valid_definition(n)).collect();
        let key = new_key();
        let index = {
            let mut ledger = self.ledger.lock().unwrap();
            ledger.imports.push(ImportAttempt {
                key: key.clone(),
                definitions: definitions.clone(),
                names: names.clone(),
                owner: w,
                round: self.round,
                acked: None,
            });
            ledger.imports.len() - 1
        };
        let request = self.api.import_capabilities(&key, definitions).request();
        let Some((status, _, text)) = send(request).await else {
            return false;
        };
        assert_eq!(status, 201, "import: {text}");
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let ids: Vec<String> = parsed["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        let mut ledger = self.ledger.lock().unwrap();
        for (id, name) in ids.iter().zip(&names) {
            ledger
                .capabilities
                .insert(id.clone(), created(name, w, self.round));
        }
        ledger.imports[index].acked = Some((text, ids));
        ledger.ack("import");
        true
    }

    /// A capability this worker owns, with its current revision and state.
    fn pick_owned(
        &self,
        w: usize,
        rng: &mut StdRng,
    ) -> Option<(String, String, i64, &'static str)> {
        let ledger = self.ledger.lock().unwrap();
        let owned: Vec<_> = ledger
            .capabilities
            .iter()
            .filter(|(_, c)| c.owner == w)
            .collect();
        if owned.is_empty() {
            return None;
        }
        let (id, c) = owned[rng.gen_range(0..owned.len())];
        Some((id.clone(), c.name.clone(), c.revision, c.status))
    }

    fn set_in_flight(&self, id: &str, write: &CapWrite) {
        self.ledger
            .lock()
            .unwrap()
            .capabilities
            .get_mut(id)
            .unwrap()
            .in_flight = Some(write.clone());
    }

    fn acknowledge(&self, id: &str, write: CapWrite, kind: &'static str) {
        let mut ledger = self.ledger.lock().unwrap();
        let cap = ledger.capabilities.get_mut(id).unwrap();
        cap.revision = write.revision;
        cap.status = write.status;
        cap.round = self.round;
        cap.in_flight = None;
        cap.known.push(write);
        ledger.ack(kind);
    }

    async fn revise(&self, w: usize, seq: usize, rng: &mut StdRng) -> bool {
        let Some((id, name, revision, status)) = self.pick_owned(w, rng) else {
            return self.import(w, seq, rng).await;
        };
        let marker = format!("marca-r{}-w{w}-s{seq}", self.round);
        let mut definition = valid_definition(&name);
        // English, like the fixture: the Spanish turns keep choosing the shop's capabilities.
        definition["description"] = json!(format!("Looks up the status of an order ({marker})"));
        let write = CapWrite {
            revision: revision + 1,
            change: "revised",
            status,
            marker: Some(marker),
        };
        self.set_in_flight(&id, &write);
        let if_match = revision.to_string();
        let request = self
            .api
            .revise_capability(&id, &if_match, definition)
            .request();
        let Some((code, _, text)) = send(request).await else {
            return false;
        };
        assert_eq!(code, 200, "revise {id}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["revision"], write.revision, "{text}");
        self.acknowledge(&id, write, "revise");
        true
    }

    async fn transition(&self, w: usize, rng: &mut StdRng) -> bool {
        let Some((id, _, revision, status)) = self.pick_owned(w, rng) else {
            return self.message(w).await;
        };
        let (verb, change, target) = if status == "active" {
            ("disable", "disabled", "disabled")
        } else {
            ("enable", "enabled", "active")
        };
        let write = CapWrite {
            revision: revision + 1,
            change,
            status: target,
            marker: None,
        };
        self.set_in_flight(&id, &write);
        let if_match = revision.to_string();
        let request = match verb {
            "disable" => self.api.disable_capability(&id, &if_match),
            _ => self.api.enable_capability(&id, &if_match),
        };
        let Some((code, _, text)) = send(request.request()).await else {
            return false;
        };
        assert_eq!(code, 200, "{verb} {id}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (body["revision"].as_i64(), body["lifecycle_status"].as_str()),
            (Some(write.revision), Some(target)),
            "{text}"
        );
        self.acknowledge(&id, write, change);
        true
    }

    /// Rotates (PUT, any auth type) or revokes (DELETE) the worker's own credential.
    async fn credential(&self, w: usize, seq: usize, rng: &mut StdRng) -> bool {
        let reference = worker_credential(w);
        let state = if rng.gen_bool(0.25) {
            CredentialState::Revoked
        } else {
            let tag = format!("{}x{w}x{seq}x{}", self.round, rng.r#gen::<u32>());
            match rng.gen_range(0..3) {
                0 => CredentialState::Configured {
                    auth_type: "bearer",
                    header: None,
                    secret: format!("tok-{tag}"),
                },
                1 => CredentialState::Configured {
                    auth_type: "api_key",
                    header: Some(if rng.gen_bool(0.5) {
                        "x-api-key"
                    } else {
                        "x-api-token"
                    }),
                    secret: format!("key-{tag}"),
                },
                _ => CredentialState::Configured {
                    auth_type: "basic",
                    header: None,
                    secret: format!("YmFzaWM{tag}"),
                },
            }
        };
        self.ledger
            .lock()
            .unwrap()
            .credentials
            .entry(w)
            .or_default()
            .in_flight = Some(state.clone());
        let request = match &state {
            CredentialState::Revoked => self.api.delete_credential(&reference),
            CredentialState::Configured {
                auth_type,
                header,
                secret,
            } => {
                let mut body = json!({"auth_type": auth_type, "secret": secret});
                if let Some(h) = header {
                    body["header_name"] = json!(h);
                }
                self.api.put_credential(&reference, &body)
            }
        };
        let Some((code, _, text)) = send(request.request()).await else {
            return false;
        };
        let mut ledger = self.ledger.lock().unwrap();
        let tracked = ledger.credentials.get_mut(&w).unwrap();
        match (&state, code) {
            (CredentialState::Revoked, 404) => tracked.in_flight = None, // never configured: nothing to revoke
            (CredentialState::Revoked, 200) | (CredentialState::Configured { .. }, 201) => {
                tracked.acked = tracked.in_flight.take();
                ledger.ack("credential");
            }
            _ => panic!("credential {reference}: {code} {text}"),
        }
        true
    }

    async fn policy(&self, w: usize, seq: usize, rng: &mut StdRng) -> bool {
        if w != 0 {
            return self.message(w).await;
        }
        let instructions = format!(
            "Responde en español (r{} s{seq} {}).",
            self.round,
            rng.r#gen::<u16>()
        );
        let revision = {
            let mut ledger = self.ledger.lock().unwrap();
            let revision = ledger.policy.acked.as_ref().map_or(0, |p| p.0) + 1;
            ledger.policy.in_flight = Some((revision, instructions.clone()));
            revision
        };
        let policy = json!({"version": 1, "instructions": instructions});
        let request = self.api.put_policy(&policy).request();
        let Some((code, _, text)) = send(request).await else {
            return false;
        };
        assert!(code == 200 || code == 201, "policy: {code} {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["revision"], revision, "{text}");
        let mut ledger = self.ledger.lock().unwrap();
        ledger.policy.acked = ledger.policy.in_flight.take();
        ledger.ack("policy");
        true
    }

    /// A turn that prepares an address change: an interaction for the host.
    async fn message(&self, w: usize) -> bool {
        let message = json!({"user_id": format!("user-{w}"),
            "message": {"type": "text", "body": "Quiero cambiar la dirección de envío del pedido A-1001"}});
        let request = self.api.send_message(&message).request();
        let Some((code, _, text)) = send(request).await else {
            return false;
        };
        assert_eq!(code, 200, "message: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        let conversation = body["conversation_id"].as_str().unwrap().to_owned();
        let interaction = body["interaction"]["interaction_id"]
            .as_str()
            .map(str::to_owned);
        let mut ledger = self.ledger.lock().unwrap();
        if let Some(i) = &interaction {
            ledger
                .open_interactions
                .push((w, conversation.clone(), i.clone()));
        }
        ledger.turns.push(Turn {
            conversation,
            message_id: body["message"]["id"].as_str().unwrap().to_owned(),
            interaction,
            round: self.round,
        });
        ledger.ack("message");
        true
    }

    async fn report(&self, w: usize, rng: &mut StdRng) -> bool {
        let open = {
            let mut ledger = self.ledger.lock().unwrap();
            let mine: Vec<usize> = (0..ledger.open_interactions.len())
                .filter(|&i| ledger.open_interactions[i].0 == w)
                .collect();
            (!mine.is_empty()).then(|| {
                ledger
                    .open_interactions
                    .swap_remove(mine[rng.gen_range(0..mine.len())])
            })
        };
        let Some((_, conversation, interaction)) = open else {
            return self.message(w).await;
        };
        let status = STATUSES[rng.gen_range(0..STATUSES.len())];
        let body =
            json!({"interaction_id": interaction, "operation": "change_address", "status": status});
        let key = new_key();
        let index = {
            let mut ledger = self.ledger.lock().unwrap();
            ledger.results.push(ResultAttempt {
                conversation: conversation.clone(),
                interaction,
                key: key.clone(),
                body: body.clone(),
                round: self.round,
                acked: None,
            });
            ledger.results.len() - 1
        };
        let request = self
            .api
            .report_operation_result(&conversation, &key, &body)
            .request();
        let Some((code, _, text)) = send(request).await else {
            return false;
        };
        assert_eq!(code, 200, "operation result: {text}");
        let mut ledger = self.ledger.lock().unwrap();
        ledger.results[index].acked = Some(text);
        ledger.ack("operation_result");
        true
    }
}

fn created(name: &str, owner: usize, round: usize) -> Capability {
    Capability {
        name: name.to_owned(),
        owner,
        known: vec![CapWrite {
            revision: 1,
            change: "created",
            status: "active",
            marker: None,
        }],
        in_flight: None,
        revision: 1,
        status: "active",
        round,
    }
}

fn worker_credential(w: usize) -> String {
    format!("cred_worker_{w}")
}

// ------------------------------------------------------------ the harness

struct Harness {
    db: TestDb,
    store: Store,
    key: String,
    bystander_key: String,
    ledger: Arc<Mutex<Ledger>>,
    rng: StdRng,
    _endpoint: FakeEndpoint,
    endpoint_base: String,
    account_id: i64,
    /// Capabilities published at set-up, outside the ledger's imports.
    setup_names: BTreeSet<String>,
    /// Kill points after which sessions of the dead process were still open.
    rounds_with_orphans: usize,
}

async fn start(db: &TestDb) -> ServerProcess {
    ServerProcess::start(db, &[("WARDEN_DEV_ALLOW_LOOPBACK", "1")]).await
}

/// The host endpoint: every address-change preparation gets a fresh opaque reference.
async fn host_endpoint() -> FakeEndpoint {
    FakeEndpoint::start(|request: Received| async move {
        let body = match request.uri.path() {
            "/orders/prepare-address-change" => json!({"type": "confirm_operation", "operation": "change_address",
                "operation_ref": format!("opref_{}", uuid::Uuid::new_v4().simple()), "expires_at": "2099-01-01T00:00:00Z",
                "preview": {"title": "Cambiar la dirección del pedido A-1001", "fields": []}}),
            _ => json!({"status": "enviado", "carrier": "Correos"}),
        };
        json_response(axum::http::StatusCode::OK, &body)
    })
    .await
}

impl Harness {
    async fn new(backend: Backend, seed: u64) -> Self {
        let db = TestDb::new(backend).await;
        cli(&db, &["admin", "account", "create", ACCOUNT]).await;
        cli(&db, &["admin", "account", "create", BYSTANDER]).await;
        let key = cli(&db, &["admin", "key", "issue", ACCOUNT]).await["api_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let bystander_key = cli(&db, &["admin", "key", "issue", BYSTANDER]).await["api_key"]
            .as_str()
            .unwrap()
            .to_owned();
        let store = match backend {
            Backend::Sqlite => db.store().await,
            Backend::Postgres => Store::connect(&format!("{}?application_name={CHECKER}", db.url))
                .await
                .unwrap(),
        };
        let account_id = store.find_account(ACCOUNT).await.unwrap().unwrap().number();
        let endpoint = host_endpoint().await;
        Harness {
            store,
            key,
            bystander_key,
            ledger: Default::default(),
            rng: StdRng::seed_from_u64(seed),
            endpoint_base: endpoint.base.clone(),
            _endpoint: endpoint,
            account_id,
            setup_names: BTreeSet::new(),
            rounds_with_orphans: 0,
            db,
        }
    }

    /// Both accounts get the fixtures' credential; the main one the shop's capabilities.
    async fn set_up(&mut self, server: &ServerProcess) {
        for key in [&self.key, &self.bystander_key] {
            configure_credential(&server.api(key)).await;
        }
        let definitions = vec![
            order_status(&self.endpoint_base),
            prepare_address_change(&self.endpoint_base),
        ];
        let api = server.api(&self.key);
        let (status, body) = api.import_capabilities(&new_key(), definitions).await;
        assert_eq!(status, 201, "{body}");
        self.setup_names = ["order_status", "prepare_address_change"]
            .map(String::from)
            .into();
    }

    /// One kill point: writers run against `server` until it is SIGKILLed.
    async fn round(&mut self, round: usize, mut server: ServerProcess) {
        let shared = Arc::new(Round {
            api: server.api(&self.key),
            ledger: self.ledger.clone(),
            round,
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                tokio::spawn(
                    shared
                        .clone()
                        .worker(w, StdRng::seed_from_u64(self.rng.r#gen())),
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(self.rng.gen_range(KILL_AFTER_MS))).await;
        server.child.start_kill().unwrap(); // SIGKILL
        server.child.wait().await.unwrap();
        for worker in workers {
            worker.await.unwrap();
        }
        self.wait_for_orphaned_statements().await;
    }

    /// On PostgreSQL a statement the killed process had already sent still
    /// runs to its end (and an autocommit one commits): such a write is
    /// unacknowledged, may land, and must be decided before the checks read.
    /// Every session but the checker's belongs to the dead process here.
    async fn wait_for_orphaned_statements(&mut self) {
        let Store::Postgres(postgres) = &self.store else {
            return;
        };
        let pool = postgres.pool();
        let sql = format!(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND backend_type = 'client backend' AND application_name <> '{CHECKER}'"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut first = true;
        loop {
            let left: i64 = sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap();
            if left == 0 {
                return;
            }
            if first {
                self.rounds_with_orphans += 1;
                first = false;
            }
            assert!(
                Instant::now() < deadline,
                "{left} sessions of the killed server still open after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Every invariant, in the database first, then through the restarted server.
    async fn check(&mut self, round: usize, server: &ServerProcess) {
        let landed = self.check_capabilities().await;
        self.check_credentials_and_policy().await;
        self.check_conversations().await;
        self.check_idempotency_records().await;
        self.check_through_the_api(round, server, &landed).await;
    }

    /// Capabilities, their history and import atomicity. Reconciles the
    /// ledger with what landed unacknowledged; returns the ids touched.
    async fn check_capabilities(&mut self) -> BTreeSet<String> {
        let a = self.account_id;
        let heads: Vec<Head> = rows!(
            &self.store,
            Head,
            &format!(
                "SELECT id, name, lifecycle_status, revision, definition FROM capabilities WHERE account_id = {a}"
            )
        );
        let history: Vec<HistoryRow> = rows!(
            &self.store,
            HistoryRow,
            &format!(
                "SELECT r.capability_id, r.revision, r.change, r.lifecycle_status, r.definition FROM capability_revisions r \
                      JOIN capabilities c ON c.id = r.capability_id WHERE c.account_id = {a} ORDER BY r.capability_id, r.revision"
            )
        );
        let records: HashMap<String, (String, Option<String>)> = rows!(&self.store, (String, String, Option<String>),
            &format!("SELECT idempotency_key, state, response_body FROM idempotency_records WHERE account_id = {a}"))
            .into_iter().map(|(k, s, b)| (k, (s, b))).collect();
        let mut revisions: HashMap<&str, Vec<&HistoryRow>> = HashMap::new();
        for row in &history {
            revisions.entry(row.0.as_str()).or_default().push(row);
        }
        let by_name: HashMap<&str, &Head> = heads.iter().map(|h| (h.1.as_str(), h)).collect();

        // Revisions 1..=revision, contiguous; the head agrees with its last revision.
        for (id, name, status, revision, definition) in &heads {
            let rows = revisions
                .get(id.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let numbers: Vec<i64> = rows.iter().map(|r| r.1).collect();
            assert_eq!(
                numbers,
                (1..=*revision).collect::<Vec<_>>(),
                "{name} ({id}): revisions not contiguous"
            );
            assert_eq!(rows[0].2, "created", "{name}: first revision");
            let last = rows.last().unwrap();
            assert_eq!(
                (&last.3, &last.4),
                (status, definition),
                "{name}: head and history disagree"
            );
        }

        let mut ledger = self.ledger.lock().unwrap();
        let mut landed = BTreeSet::new();
        // Imports: all of an import, or none; acknowledged ones whole, with the ids answered.
        let mut owned_names: BTreeSet<&str> = self.setup_names.iter().map(String::as_str).collect();
        let mut unacked_landed = Vec::new();
        for attempt in &ledger.imports {
            owned_names.extend(attempt.names.iter().map(String::as_str));
            let present: Vec<&str> = attempt
                .names
                .iter()
                .filter_map(|n| by_name.get(n.as_str()).map(|h| h.0.as_str()))
                .collect();
            assert!(
                present.is_empty() || present.len() == attempt.names.len(),
                "partial import {}: {} of {:?}",
                attempt.key,
                present.len(),
                attempt.names
            );
            let record = records.get(&attempt.key);
            match (&attempt.acked, present.is_empty()) {
                (Some((text, ids)), false) => {
                    assert_eq!(
                        present,
                        ids.iter().map(String::as_str).collect::<Vec<_>>(),
                        "import {}: other ids",
                        attempt.key
                    );
                    assert_eq!(
                        record,
                        Some(&("done".to_owned(), Some(text.clone()))),
                        "import {}: idempotency record",
                        attempt.key
                    );
                }
                (Some(_), true) => panic!(
                    "acknowledged import {} ({:?}) is missing",
                    attempt.key, attempt.names
                ),
                (None, false) => {
                    // Landed unacknowledged: then its record is done and names these ids.
                    let (state, body) = record.unwrap_or_else(|| {
                        panic!("import {} landed without its record", attempt.key)
                    });
                    assert_eq!(state, "done");
                    let body: Value = serde_json::from_str(body.as_deref().unwrap()).unwrap();
                    let ids: Vec<&str> = body["capabilities"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["id"].as_str().unwrap())
                        .collect();
                    assert_eq!(
                        ids, present,
                        "import {}: record and capabilities disagree",
                        attempt.key
                    );
                    unacked_landed.push((
                        present.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                        attempt.names.clone(),
                        attempt.owner,
                        attempt.round,
                    ));
                }
                (None, true) => assert!(
                    record.is_none_or(|(state, _)| state == "in_flight"),
                    "import {} did not land but its record is {record:?}",
                    attempt.key
                ),
            }
        }
        for (id, name, ..) in &heads {
            assert!(
                owned_names.contains(name.as_str()),
                "capability {name} ({id}) comes from no import"
            );
        }
        for (ids, names, owner, round) in unacked_landed {
            for (id, name) in ids.into_iter().zip(names) {
                // Found by an earlier check already: the ledger follows it since.
                if ledger.capabilities.contains_key(&id) {
                    continue;
                }
                ledger.unacknowledged += 1;
                landed.insert(id.clone());
                ledger.capabilities.insert(id, created(&name, owner, round));
            }
        }
        // Every acknowledged write is in the history; at most the in-flight one more.
        let mut newly_known = 0;
        for (id, cap) in ledger.capabilities.iter_mut() {
            let (stored_id, _, status, revision, _) = by_name
                .get(cap.name.as_str())
                .unwrap_or_else(|| panic!("capability {id} is missing"));
            assert_eq!(stored_id, id, "{}: another id", cap.name);
            let rows = &revisions[id.as_str()];
            let acked = cap.known.last().unwrap().revision;
            let ceiling = cap.in_flight.as_ref().map_or(acked, |w| w.revision);
            assert!(
                (acked..=ceiling).contains(revision),
                "{id} ({}): revision {revision}, acknowledged {acked}, in flight {:?}; history {:?}; known {:?}",
                cap.name,
                cap.in_flight,
                rows.iter()
                    .map(|r| (
                        r.1,
                        &r.2,
                        &r.3,
                        serde_json::from_str::<Value>(&r.4).unwrap()["description"].clone()
                    ))
                    .collect::<Vec<_>>(),
                cap.known
            );
            let same = |w: &CapWrite| {
                let row = rows[(w.revision - 1) as usize];
                row.2 == w.change
                    && row.3 == w.status
                    && w.marker.as_ref().is_none_or(|m| row.4.contains(m.as_str()))
            };
            for write in &cap.known {
                assert!(
                    same(write),
                    "{id}: acknowledged {write:?} is not in the history {:?}",
                    rows[(write.revision - 1) as usize]
                );
            }
            if let Some(write) = cap.in_flight.take() {
                // Landed or not, the server is asked about it too.
                landed.insert(id.clone());
                if *revision == write.revision {
                    assert!(same(&write), "{id}: the in-flight {write:?} landed torn");
                    cap.known.push(write);
                    newly_known += 1;
                }
            }
            cap.revision = *revision;
            cap.status = if status == "active" {
                "active"
            } else {
                "disabled"
            };
        }
        ledger.unacknowledged += newly_known;
        landed
    }

    async fn check_credentials_and_policy(&mut self) {
        let keyring = warden::crypto::master_key::Keyring::new(
            warden::crypto::master_key::MasterKey::from_base64(MASTER_KEY).unwrap(),
            vec![],
        );
        let account = self.store.find_account(ACCOUNT).await.unwrap().unwrap();
        let workers: Vec<usize> = self
            .ledger
            .lock()
            .unwrap()
            .credentials
            .keys()
            .copied()
            .collect();
        for w in workers {
            let reference = worker_credential(w);
            let row = self
                .store
                .get_credential(&account, &reference)
                .await
                .unwrap();
            let observed = match &row {
                None => None,
                Some(r) if r.status.as_str() == "revoked" => {
                    assert!(
                        r.ciphertext.is_none(),
                        "{reference}: revoked but the secret is kept"
                    );
                    Some(CredentialState::Revoked)
                }
                Some(r) => {
                    let open =
                        warden::vault::open_credential(&self.store, &keyring, &account, &reference)
                            .await
                            .unwrap()
                            .expect("configured credential opens");
                    let (auth_type, header) = match r.auth_type.as_str() {
                        "bearer" => ("bearer", None),
                        "basic" => ("basic", None),
                        _ => (
                            "api_key",
                            Some(if open.header_name.as_deref() == Some("x-api-key") {
                                "x-api-key"
                            } else {
                                "x-api-token"
                            }),
                        ),
                    };
                    Some(CredentialState::Configured {
                        auth_type,
                        header,
                        secret: open.secret.as_str().to_owned(),
                    })
                }
            };
            let mut ledger = self.ledger.lock().unwrap();
            let tracked = ledger.credentials.get_mut(&w).unwrap();
            if tracked.reconcile(&reference, observed) {
                ledger.unacknowledged += 1;
            }
        }

        let stored: Vec<(String, i64)> = rows!(
            &self.store,
            (String, i64),
            &format!(
                "SELECT policy, revision FROM agent_policies WHERE account_id = {}",
                self.account_id
            )
        );
        let observed = stored.first().map(|(policy, revision)| {
            let policy: Value = serde_json::from_str(policy).unwrap();
            (
                *revision,
                policy["instructions"].as_str().unwrap().to_owned(),
            )
        });
        let mut ledger = self.ledger.lock().unwrap();
        if ledger.policy.reconcile("policy", observed) {
            ledger.unacknowledged += 1;
        }
    }

    /// Turns, interactions and operation results.
    async fn check_conversations(&mut self) {
        let a = self.account_id;
        let messages: BTreeSet<(String, String)> = rows!(&self.store, (String, String),
            &format!("SELECT m.id, m.conversation_id FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id \
                      WHERE c.account_id = {a}")).into_iter().collect();
        let interactions: HashMap<String, (String, String)> = rows!(
            &self.store,
            (String, String, String),
            &format!("SELECT id, conversation_id, status FROM interactions WHERE account_id = {a}")
        )
        .into_iter()
        .map(|(i, c, s)| (i, (c, s)))
        .collect();
        let ledger = self.ledger.lock().unwrap();
        for turn in &ledger.turns {
            assert!(
                messages.contains(&(turn.message_id.clone(), turn.conversation.clone())),
                "acknowledged turn {turn:?} is missing"
            );
            if let Some(i) = &turn.interaction {
                let (conversation, _) = interactions
                    .get(i)
                    .unwrap_or_else(|| panic!("interaction of {turn:?} is missing"));
                assert_eq!(conversation, &turn.conversation);
            }
        }
        let attempted: HashMap<&str, Vec<&ResultAttempt>> =
            ledger.results.iter().fold(HashMap::new(), |mut m, r| {
                m.entry(r.interaction.as_str()).or_default().push(r);
                m
            });
        for (id, (_, status)) in &interactions {
            if status == "pending" {
                continue;
            }
            let reports = attempted
                .get(id.as_str())
                .unwrap_or_else(|| panic!("interaction {id} closed ({status}) by no report"));
            assert!(
                reports.iter().any(|r| r.body["status"] == status.as_str()),
                "interaction {id}: {status}, reported {reports:?}"
            );
        }
        for report in ledger.results.iter().filter(|r| r.acked.is_some()) {
            let (_, status) = &interactions[&report.interaction];
            assert_eq!(
                report.body["status"],
                status.as_str(),
                "acknowledged report {} not applied",
                report.key
            );
        }
    }

    /// Every `done` record names what exists; acknowledged keys are `done` with their answer.
    async fn check_idempotency_records(&mut self) {
        let a = self.account_id;
        let records: Vec<(String, String, Option<i64>, Option<String>)> = rows!(
            &self.store,
            (String, String, Option<i64>, Option<String>),
            &format!(
                "SELECT idempotency_key, state, response_status, response_body FROM idempotency_records WHERE account_id = {a}"
            )
        );
        let capabilities: BTreeSet<String> = rows!(
            &self.store,
            (String,),
            &format!("SELECT id FROM capabilities WHERE account_id = {a}")
        )
        .into_iter()
        .map(|(id,)| id)
        .collect();
        let messages: BTreeSet<String> = rows!(&self.store, (String,),
            &format!("SELECT m.id FROM conversation_messages m JOIN conversations c ON c.id = m.conversation_id WHERE c.account_id = {a}"))
            .into_iter().map(|(id,)| id).collect();
        let interactions: HashMap<String, String> = rows!(
            &self.store,
            (String, String),
            &format!("SELECT id, status FROM interactions WHERE account_id = {a}")
        )
        .into_iter()
        .collect();
        let mut by_key = HashMap::new();
        for (key, state, status, body) in &records {
            by_key.insert(key.as_str(), (state.as_str(), body.as_deref()));
            match state.as_str() {
                "in_flight" => assert!(
                    status.is_none() && body.is_none(),
                    "{key}: an in-flight claim with an answer"
                ),
                "done" => {
                    let body: Value = serde_json::from_str(
                        body.as_deref()
                            .unwrap_or_else(|| panic!("{key}: done without a body")),
                    )
                    .unwrap();
                    if let Some(list) = body["capabilities"].as_array() {
                        assert_eq!(*status, Some(201));
                        for c in list {
                            assert!(
                                capabilities.contains(c["id"].as_str().unwrap()),
                                "{key}: names a missing capability {c}"
                            );
                        }
                    } else {
                        assert_eq!(*status, Some(200), "{key}: {body}");
                        let interaction = body["interaction_id"]
                            .as_str()
                            .unwrap_or_else(|| panic!("{key}: unknown record {body}"));
                        assert_eq!(
                            interactions.get(interaction).map(String::as_str),
                            body["status"].as_str(),
                            "{key}: interaction not closed as recorded"
                        );
                        assert!(
                            messages.contains(body["message"]["id"].as_str().unwrap()),
                            "{key}: its message is missing"
                        );
                    }
                }
                other => panic!("{key}: unknown state {other}"),
            }
        }
        let ledger = self.ledger.lock().unwrap();
        for report in &ledger.results {
            match (&report.acked, by_key.get(report.key.as_str())) {
                (Some(text), record) => assert_eq!(
                    record,
                    Some(&("done", Some(text.as_str()))),
                    "report {}",
                    report.key
                ),
                (None, Some(("done", _))) => {
                    assert_eq!(
                        interactions[&report.interaction],
                        report.body["status"].as_str().unwrap(),
                        "report {}",
                        report.key
                    )
                }
                _ => {}
            }
        }
    }

    /// What the restarted server answers: replays, the touched capabilities,
    /// the policy, a turn in an earlier conversation, another account's writes.
    async fn check_through_the_api(
        &mut self,
        round: usize,
        server: &ServerProcess,
        landed: &BTreeSet<String>,
    ) {
        let api = server.api(&self.key);
        let (imports, results, touched, policy, conversation) = {
            let ledger = self.ledger.lock().unwrap();
            let recent_or_sampled = |r: usize, rng: &mut StdRng| r == round || rng.gen_bool(0.02);
            let imports: Vec<(String, Vec<Value>, String)> = ledger
                .imports
                .iter()
                .filter(|i| i.acked.is_some() && recent_or_sampled(i.round, &mut self.rng))
                .map(|i| {
                    (
                        i.key.clone(),
                        i.definitions.clone(),
                        i.acked.as_ref().unwrap().0.clone(),
                    )
                })
                .collect();
            let results: Vec<(String, String, Value, String)> = ledger
                .results
                .iter()
                .filter(|r| r.acked.is_some() && recent_or_sampled(r.round, &mut self.rng))
                .map(|r| {
                    (
                        r.conversation.clone(),
                        r.key.clone(),
                        r.body.clone(),
                        r.acked.clone().unwrap(),
                    )
                })
                .collect();
            let touched: Vec<(String, i64, &'static str)> = ledger
                .capabilities
                .iter()
                .filter(|(id, c)| {
                    landed.contains(*id) || c.round == round || self.rng.gen_bool(0.02)
                })
                .map(|(id, c)| (id.clone(), c.revision, c.status))
                .collect();
            let conversation = ledger
                .turns
                .iter()
                .rev()
                .find(|t| t.round == round)
                .map(|t| t.conversation.clone());
            (
                imports,
                results,
                touched,
                ledger.policy.acked.clone(),
                conversation,
            )
        };
        for (key, definitions, text) in imports {
            let response = api.import_capabilities(&key, definitions).response().await;
            assert_replayed(response, 201, &text, &key).await;
        }
        for (conversation, key, body, text) in results {
            let report = api.report_operation_result(&conversation, &key, &body);
            let response = report.response().await;
            assert_replayed(response, 200, &text, &key).await;
        }
        for (id, revision, status) in touched {
            let (code, body) = api.get_capability(&id).await;
            assert_eq!(code, 200, "{id}: {body}");
            assert_eq!(
                (body["revision"].as_i64(), body["lifecycle_status"].as_str()),
                (Some(revision), Some(status)),
                "{id}: {body}"
            );
            let numbers: Vec<i64> = body["revisions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["revision"].as_i64().unwrap())
                .collect();
            assert_eq!(numbers, (1..=revision).collect::<Vec<_>>(), "{id}: {body}");
        }
        let (code, body) = api.get_policy().await;
        match policy {
            Some((revision, instructions)) => {
                assert_eq!(code, 200, "{body}");
                assert_eq!(
                    (
                        body["revision"].as_i64(),
                        body["policy"]["instructions"].as_str()
                    ),
                    (Some(revision), Some(instructions.as_str())),
                    "{body}"
                );
            }
            None => assert_eq!(code, 404, "{body}"),
        }
        if let Some(conversation) = conversation {
            let message = json!({"conversation_id": conversation,
                "message": {"type": "text", "body": "gracias"}});
            let (code, body) = api.send_message(&message).await;
            assert_eq!(
                code, 200,
                "a conversation of the killed server goes on: {body}"
            );
        }
        // Another account writes as if nothing happened.
        let bystander = server.api(&self.bystander_key);
        let policy = json!({"version": 1, "instructions": format!("Ronda {round}.")});
        let (code, body) = bystander.put_policy(&policy).await;
        assert!(
            (200..300).contains(&code),
            "bystander policy: {code} {body}"
        );
        let manifest = vec![valid_definition(&format!("bystander-{round}"))];
        let (code, body) = bystander.import_capabilities(&new_key(), manifest).await;
        assert_eq!(code, 201, "bystander import: {body}");
    }
}

async fn assert_replayed(response: reqwest::Response, status: u16, first: &str, key: &str) {
    assert_eq!(response.status().as_u16(), status, "replay of {key}");
    assert_eq!(
        response
            .headers()
            .get("idempotency-replayed")
            .map(|v| v.as_bytes()),
        Some(&b"true"[..]),
        "replay of {key}"
    );
    assert_eq!(
        response.text().await.unwrap(),
        first,
        "replay of {key}: another body"
    );
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_workload_survives_sigkill_at_random_points(backend: Backend) {
    let rounds = env_number("WARDEN_CRASH_ROUNDS").map_or(DEFAULT_ROUNDS, |n| n as usize);
    let seed = env_number("WARDEN_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("crash harness {backend:?}: {rounds} kill points, WARDEN_CRASH_SEED={seed}");
    let started = Instant::now();
    let mut harness = Harness::new(backend, seed).await;
    let mut server = start(&harness.db).await;
    harness.set_up(&server).await;
    for round in 1..=rounds {
        harness.round(round, server).await;
        server = start(&harness.db).await;
        harness.check(round, &server).await;
    }
    let ledger = harness.ledger.lock().unwrap();
    eprintln!(
        "crash harness {backend:?}: {rounds} kill points survived in {:.1} s; acknowledged {:?}; \
             unacknowledged writes found landed whole: {}; kill points the dead process's sessions outlived: {}",
        started.elapsed().as_secs_f64(),
        ledger.acked,
        ledger.unacknowledged,
        harness.rounds_with_orphans
    );
    if rounds >= 10 {
        for kind in [
            "import",
            "revise",
            "disabled",
            "enabled",
            "credential",
            "policy",
            "message",
            "operation_result",
        ] {
            assert!(
                ledger.acked.get(kind).is_some_and(|&n| n > 0),
                "no {kind} was acknowledged: {:?}",
                ledger.acked
            );
        }
    }
}
