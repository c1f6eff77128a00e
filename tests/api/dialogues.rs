//! The dialogue set (`tests/dialogues/`): multi-turn scripts, written as
//! data, run against a real server and a fake host endpoint that logs every
//! call, once with the built-in planner and once with the model planner
//! pointed at a scripted OpenAI-compatible double. Every turn asserts what
//! a user and the host can observe: which capability was called with
//! exactly which arguments (or none), facts the reply must and must not
//! state, its language, the interaction, the trace's reason.
//!
//! The model double proposes, by default, what a careful model would: the
//! turn's expected call with its expected arguments, or a plain answer; a
//! turn may make it propose a mistake instead (a stale value, an invented
//! argument, a preparation without intent, a capability that is not
//! offered, an ungrounded reply), which the engine must correct.
//!
//! `WARDEN_DIALOGUE_REPORT=1` runs the whole set without failing and prints
//! the pass rate per rule and planner (`make bench`); `WARDEN_DIALOGUE=text`
//! runs only the scripts whose name contains `text`;
//! `WARDEN_DIALOGUE_JOBS` sets how many scripts run at once (default 6);
//! `WARDEN_DIALOGUE_SHOW=1` prints every turn.
//! The format is described in docs/conversation.md.

use crate::helpers::endpoint::{FakeEndpoint, Received, json_response};
use crate::helpers::fixtures::{account_ready, new_key};
use crate::helpers::shop::{IMAGE_MARKER, message_with_image, png_with_marker};
use crate::helpers::*;
use axum::body::{Body, Bytes};
use axum::http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden::cli::PlannerArgs;

const DIALOGUES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dialogues");
/// Identifier prefixes that must never reach a reply (rule 5).
const INTERNAL_PREFIXES: [&str; 7] = ["cap_", "conv_", "int_", "msg_", "run_", "cred_", "key_"];
/// An output field the fixture's endpoint returns and no schema declares.
const UNDECLARED_VALUE: &str = "margin-0.31-internal";
/// Opaque references of the fixture's interactions start with one of these.
const OPAQUE_PREFIXES: [&str; 3] = ["opref_", "selref_", "optref_"];

// ---------------------------------------------------------------------------
// The set, as data

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Lang {
    Es,
    En,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PlannerKind {
    Builtin,
    Model,
}

impl PlannerKind {
    fn name(self) -> &'static str {
        match self {
            PlannerKind::Builtin => "builtin",
            PlannerKind::Model => "model",
        }
    }
}

fn both_planners() -> Vec<PlannerKind> {
    vec![PlannerKind::Builtin, PlannerKind::Model]
}

/// Marks an expectation a script left unsaid (as opposed to `null`).
fn unset() -> Value {
    Value::String("\u{0}unset".into())
}

fn is_unset(v: &Value) -> bool {
    *v == unset()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(skip)]
    name: String,
    /// One line: what the dialogue shows.
    about: String,
    language: Lang,
    /// Runtime rules of contract section 1 the dialogue exercises.
    #[serde(default)]
    rules: Vec<u8>,
    /// Numbered failures of issue 13 the dialogue reproduces.
    #[serde(default)]
    issue: Vec<u8>,
    #[serde(default = "both_planners")]
    planners: Vec<PlannerKind>,
    #[serde(default)]
    setup: Setup,
    turns: Vec<Turn>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// An agent policy to PUT before the first turn.
    policy: Option<Value>,
    /// Capabilities disabled before the first turn.
    #[serde(default)]
    disable: Vec<String>,
}

/// What a turn must show. Every field may be overridden per planner.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// `null` (no host call) or `{"capability": {arguments}}`.
    #[serde(default = "unset")]
    call: Value,
    /// The capability the trace's selection event names.
    selects: Option<String>,
    /// The `reason_code` of the trace's last event.
    reason: Option<String>,
    reply_has: Option<Vec<String>>,
    reply_lacks: Option<Vec<String>>,
    reply_is: Option<String>,
    reply_starts: Option<String>,
    /// The interaction's `type`; unset or `null`: no interaction.
    #[serde(default = "unset")]
    interaction: Value,
    /// The reply's language; unset: the script's; `null`: not checked.
    #[serde(default = "unset")]
    language: Value,
}

impl Default for Expect {
    fn default() -> Self {
        Expect {
            call: unset(),
            selects: None,
            reason: None,
            reply_has: None,
            reply_lacks: None,
            reply_is: None,
            reply_starts: None,
            interaction: unset(),
            language: unset(),
        }
    }
}

impl Expect {
    /// `self` with every field `over` sets.
    fn overlaid(&self, over: &Expect) -> Expect {
        let pick = |a: &Value, b: &Value| if is_unset(b) { a.clone() } else { b.clone() };
        Expect {
            call: pick(&self.call, &over.call),
            selects: over.selects.clone().or_else(|| self.selects.clone()),
            reason: over.reason.clone().or_else(|| self.reason.clone()),
            reply_has: over.reply_has.clone().or_else(|| self.reply_has.clone()),
            reply_lacks: over
                .reply_lacks
                .clone()
                .or_else(|| self.reply_lacks.clone()),
            reply_is: over.reply_is.clone().or_else(|| self.reply_is.clone()),
            reply_starts: over
                .reply_starts
                .clone()
                .or_else(|| self.reply_starts.clone()),
            interaction: pick(&self.interaction, &over.interaction),
            language: pick(&self.language, &over.language),
        }
    }
}

#[derive(Deserialize)]
struct Turn {
    /// The user's message.
    user: Option<String>,
    /// Instead of a message: the host reports this terminal status of the
    /// last interaction (`POST /v1/conversations/{id}/operation-results`).
    host_report: Option<String>,
    /// Attach a small PNG to the message (multipart).
    #[serde(default)]
    image: bool,
    #[serde(flatten)]
    expect: Expect,
    /// Expectations that differ with the built-in planner.
    #[serde(default)]
    builtin: Expect,
    /// What the model double does this turn, and expectations that differ.
    #[serde(default)]
    model: ModelTurn,
}

const TURN_KEYS: &[&str] = &[
    "user",
    "host_report",
    "image",
    "builtin",
    "model",
    "call",
    "selects",
    "reason",
    "reply_has",
    "reply_lacks",
    "reply_is",
    "reply_starts",
    "interaction",
    "language",
];
const EXPECT_KEYS: &[&str] = &[
    "call",
    "selects",
    "reason",
    "reply_has",
    "reply_lacks",
    "reply_is",
    "reply_starts",
    "interaction",
    "language",
];
const MODEL_KEYS: &[&str] = &["propose", "propose_many", "answer", "reply"];

#[derive(Deserialize, Default)]
struct ModelTurn {
    /// The model proposes this call (`{"capability": {arguments}}`) instead
    /// of the expected one.
    propose: Option<Value>,
    /// The model proposes several calls in one answer.
    propose_many: Option<Vec<Value>>,
    /// The model answers this text instead of proposing a call.
    answer: Option<String>,
    /// The model writes this reply from the result (default: every value
    /// of the result, introduced in the conversation's language).
    reply: Option<String>,
    #[serde(flatten)]
    expect: Expect,
}

/// `{"name": {arguments}}` as `(name, arguments)`.
fn one_call(v: &Value) -> Option<(String, Value)> {
    let map = v.as_object()?;
    if map.len() != 1 {
        return None;
    }
    let (name, arguments) = map.iter().next()?;
    arguments
        .is_object()
        .then(|| (name.clone(), arguments.clone()))
}

fn check_keys(value: &Value, allowed: &[&str], what: &str) -> Result<(), String> {
    match value.as_object() {
        Some(map) => match map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown key {k:?} in {what}")),
            None => Ok(()),
        },
        None => Err(format!("{what} is not an object")),
    }
}

fn load_script(path: &Path) -> Result<Script, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let raw: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    for (i, turn) in raw["turns"].as_array().into_iter().flatten().enumerate() {
        let at = format!("turn {}", i + 1);
        check_keys(turn, TURN_KEYS, &at)?;
        if let Some(b) = turn.get("builtin") {
            check_keys(b, EXPECT_KEYS, &format!("{at} builtin"))?;
        }
        if let Some(m) = turn.get("model") {
            let keys: Vec<&str> = EXPECT_KEYS.iter().chain(MODEL_KEYS).copied().collect();
            check_keys(m, &keys, &format!("{at} model"))?;
        }
    }
    let mut script: Script = serde_json::from_value(raw).map_err(|e| e.to_string())?;
    script.name = path.file_stem().unwrap().to_string_lossy().into_owned();
    if script.turns.is_empty() {
        return Err("no turns".into());
    }
    for (i, turn) in script.turns.iter().enumerate() {
        let at = i + 1;
        match (&turn.user, &turn.host_report) {
            (Some(_), None) => {
                if is_unset(&turn.expect.call) {
                    return Err(format!(
                        "turn {at}: say which call is expected (`\"call\": null` for none)"
                    ));
                }
            }
            (None, Some(_)) => {}
            _ => return Err(format!("turn {at}: exactly one of user and host_report")),
        }
        for call in [
            &turn.expect.call,
            &turn.builtin.call,
            &turn.model.expect.call,
        ] {
            if !(is_unset(call) || call.is_null() || one_call(call).is_some()) {
                return Err(format!(
                    "turn {at}: a call is {{\"capability\": {{arguments}}}}"
                ));
            }
        }
        for proposal in turn
            .model
            .propose
            .iter()
            .chain(turn.model.propose_many.iter().flatten())
        {
            if one_call(proposal).is_none() {
                return Err(format!(
                    "turn {at}: a proposal is {{\"capability\": {{arguments}}}}"
                ));
            }
        }
    }
    Ok(script)
}

fn script_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "shop") {
                script_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

/// Every script of the set, sorted by name; a malformed one fails here.
fn load_set() -> Vec<Script> {
    let mut files = Vec::new();
    script_files(Path::new(DIALOGUES), &mut files);
    let mut scripts: Vec<Script> = files
        .iter()
        .map(|path| load_script(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect();
    scripts.sort_by(|a, b| a.name.cmp(&b.name));
    for pair in scripts.windows(2) {
        assert_ne!(pair[0].name, pair[1].name, "two scripts with one name");
    }
    scripts
}

/// The fixture shop: capability definitions (`{base}` stands for the fake
/// endpoint's address) and the endpoint's answers by path and arguments.
struct Fixture {
    manifest: Value,
    answers: Vec<Answer>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Answer {
    path: String,
    /// `null`: the answer for any other arguments on this path.
    arguments: Value,
    status: u16,
    body: Value,
}

impl Fixture {
    fn load() -> Fixture {
        let read = |name: &str| -> Value {
            let path = Path::new(DIALOGUES).join("shop").join(name);
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let answers: Vec<Answer> =
            serde_json::from_value(read("answers.json")["answers"].clone()).unwrap();
        Fixture {
            manifest: read("manifest.json"),
            answers,
        }
    }

    fn answer(&self, path: &str, arguments: &Value) -> (StatusCode, Value) {
        let found = self
            .answers
            .iter()
            .find(|a| a.path == path && a.arguments == *arguments)
            .or_else(|| {
                self.answers
                    .iter()
                    .find(|a| a.path == path && a.arguments.is_null())
            });
        match found {
            Some(a) => (StatusCode::from_u16(a.status).unwrap(), a.body.clone()),
            None => (StatusCode::NOT_FOUND, json!({"error": "no such path"})),
        }
    }

    /// Every opaque reference the endpoint may hand out.
    fn opaque_refs(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.answers {
            collect_strings(&a.body, &mut |s| {
                if OPAQUE_PREFIXES.iter().any(|p| s.starts_with(p)) {
                    out.push(s.to_owned());
                }
            });
        }
        out
    }

    fn definitions(&self, base: &str) -> Vec<Value> {
        self.manifest["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let mut d = d.clone();
                let url = d["url"].as_str().unwrap().replace("{base}", base);
                d["url"] = json!(url);
                d
            })
            .collect()
    }

    /// Capability name by endpoint path.
    fn capability_paths(&self) -> HashMap<String, String> {
        self.manifest["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let path = d["url"].as_str().unwrap().replace("{base}", "");
                (path, d["name"].as_str().unwrap().to_owned())
            })
            .collect()
    }
}

fn collect_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, f)),
        Value::Object(map) => map.values().for_each(|i| collect_strings(i, f)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// The model double

#[derive(Clone)]
enum Proposal {
    Calls(Vec<(String, Value)>),
    Text(String),
}

/// What the double does for one script's current turn.
struct ModelTurnState {
    proposal: Proposal,
    reply: Option<String>,
    language: Lang,
    requests: Vec<Value>,
}

/// An OpenAI-compatible chat-completions double shared by every script on
/// one server: a request belongs to the script whose marker its policy
/// instructions carry. Plan requests (tools offered) get the turn's
/// proposal, reply requests the turn's reply.
struct ModelDouble {
    base: String,
    scripts: Arc<Mutex<HashMap<String, ModelTurnState>>>,
}

/// The marker of a script in its account's policy instructions.
fn marker(script: &str) -> String {
    format!("[dialogue:{script}]")
}

impl ModelDouble {
    async fn start() -> ModelDouble {
        let scripts: Arc<Mutex<HashMap<String, ModelTurnState>>> = Arc::default();
        let shared = scripts.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: Bytes| {
                let scripts = shared.clone();
                async move {
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let text = request.to_string();
                    let mut scripts = scripts.lock().unwrap();
                    let Some(state) = scripts
                        .iter_mut()
                        .find(|(name, _)| text.contains(&marker(name)))
                        .map(|(_, state)| state)
                    else {
                        return json_response(StatusCode::BAD_REQUEST, &json!({"error": "no dialogue marker"}));
                    };
                    state.requests.push(request.clone());
                    let message = match reply_data(&request) {
                        Some(data) => {
                            let text = state
                                .reply
                                .clone()
                                .unwrap_or_else(|| default_reply(&data, state.language));
                            json!({"role": "assistant", "content": text})
                        }
                        None => match &state.proposal {
                            Proposal::Text(text) => json!({"role": "assistant", "content": text}),
                            Proposal::Calls(calls) => {
                                let calls: Vec<Value> = calls
                                    .iter()
                                    .enumerate()
                                    .map(|(i, (name, arguments))| {
                                        json!({"id": format!("call_{i}"), "type": "function",
                                           "function": {"name": name, "arguments": arguments.to_string()}})
                                    })
                                    .collect();
                                json!({"role": "assistant", "content": null, "tool_calls": calls})
                            }
                        },
                    };
                    completion(message)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        ModelDouble { base, scripts }
    }

    fn set_turn(&self, script: &str, language: Lang, proposal: Proposal, reply: Option<String>) {
        let mut scripts = self.scripts.lock().unwrap();
        let state = scripts
            .entry(script.to_owned())
            .or_insert_with(|| ModelTurnState {
                proposal: Proposal::Text(String::new()),
                reply: None,
                language,
                requests: Vec::new(),
            });
        state.proposal = proposal;
        state.reply = reply;
    }

    /// Every request one script's turns made, oldest first.
    fn requests(&self, script: &str) -> Vec<Value> {
        self.scripts
            .lock()
            .unwrap()
            .get(script)
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }
}

/// The capability result a reply request carries, if it is one.
fn reply_data(request: &Value) -> Option<Value> {
    if request.get("tools").is_some() {
        return None;
    }
    request["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find_map(|c| {
            let rest = c.strip_prefix("Data returned by the capability")?;
            serde_json::from_str(rest.split_once('\n')?.1).ok()
        })
}

/// A grounded reply: every value of the result, in the conversation's
/// language.
fn default_reply(data: &Value, language: Lang) -> String {
    let mut values = Vec::new();
    collect_scalars(data, &mut values);
    let lead = match language {
        Lang::Es => "Esto es lo que he encontrado en el sistema:",
        Lang::En => "Here is what I found in the system:",
    };
    format!("{lead} {}.", values.join(", "))
}

fn collect_scalars(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.values().for_each(|x| collect_scalars(x, out)),
        Value::Array(a) => a.iter().for_each(|x| collect_scalars(x, out)),
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        _ => {}
    }
}

fn completion(message: Value) -> Response<Body> {
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json_response(
        StatusCode::OK,
        &json!({"id": "chatcmpl-dialogue", "object": "chat.completion", "created": 0,
            "model": "dialogue-double",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}),
    )
}

// ---------------------------------------------------------------------------
// The scripts against a server

/// One server per planner and database; every script runs in an account of
/// its own, with a fake host endpoint of its own.
struct Server {
    planner: PlannerKind,
    app: TestApp,
    model: Option<ModelDouble>,
}

impl Server {
    async fn start(backend: Backend, planner: PlannerKind) -> Server {
        let model = match planner {
            PlannerKind::Builtin => None,
            PlannerKind::Model => Some(ModelDouble::start().await),
        };
        let app = match &model {
            None => TestApp::spawn(backend).await,
            Some(m) => {
                TestApp::spawn_with_planner(
                    backend,
                    PlannerArgs {
                        inference_url: Some(m.base.clone()),
                        inference_model: Some("dialogue-double".into()),
                        inference_api_key: None,
                        inference_timeout_ms: 10_000,
                    },
                )
                .await
            }
        };
        Server {
            planner,
            app,
            model,
        }
    }
}

/// One script's account on a server.
struct World<'s> {
    app: &'s TestApp,
    script: String,
    key: String,
    endpoint: FakeEndpoint,
    /// Capability name by endpoint path, and id by name.
    names: HashMap<String, String>,
    ids: HashMap<String, String>,
}

impl<'s> World<'s> {
    async fn open(
        server: &'s Server,
        fixture: &Arc<Fixture>,
        script: &Script,
        account: &str,
    ) -> World<'s> {
        let app = &server.app;
        let key = account_ready(app, account).await;
        let answers = fixture.clone();
        let endpoint = FakeEndpoint::start(move |request: Received| {
            let answers = answers.clone();
            async move {
                let arguments: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
                let (status, body) = answers.answer(request.uri.path(), &arguments);
                json_response(status, &body)
            }
        })
        .await;
        let definitions = fixture.definitions(&endpoint.base);
        let names: Vec<String> = definitions
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        let (status, body) =
            status_and_json(app.import_capabilities(&key, &new_key(), definitions).await).await;
        assert_eq!(status, 201, "the fixture imports: {body}");
        let ids = names
            .into_iter()
            .zip(body["capabilities"].as_array().unwrap())
            .map(|(n, r)| (n, r["id"].as_str().unwrap().to_owned()))
            .collect();
        World {
            app,
            script: script.name.clone(),
            key,
            endpoint,
            names: fixture.capability_paths(),
            ids,
        }
    }

    async fn setup(&self, setup: &Setup) -> Result<(), String> {
        // The account's policy carries the script's marker (how the shared
        // model double tells scripts apart) and whatever the script sets.
        let mut policy = setup
            .policy
            .clone()
            .unwrap_or_else(|| json!({"version": 1}));
        let instructions = policy["instructions"]
            .as_str()
            .unwrap_or(warden::agent::planner::DEFAULT_INSTRUCTIONS)
            .to_owned();
        policy["instructions"] = json!(format!("{instructions}\n{}", marker(&self.script)));
        let (status, body) = self.app.put_policy(&self.key, &policy).await;
        if !(200..300).contains(&status) {
            return Err(format!("the policy was refused: {status} {body}"));
        }
        for name in &setup.disable {
            let id = self.ids.get(name).ok_or(format!("no capability {name}"))?;
            let (status, body) = self.app.disable_capability(&self.key, id, "1").await;
            if !(200..300).contains(&status) {
                return Err(format!("{name} was not disabled: {status} {body}"));
            }
        }
        Ok(())
    }

    /// Host calls so far: `(capability, arguments)`.
    fn calls(&self) -> Vec<(String, Value)> {
        self.endpoint
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|r| {
                let path = r.uri.path();
                (
                    self.names
                        .get(path)
                        .cloned()
                        .unwrap_or_else(|| format!("<unknown path {path}>")),
                    serde_json::from_slice(&r.body).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    async fn say(&self, conversation: Option<&str>, text: &str, image: bool) -> (u16, Value) {
        let mut payload =
            json!({"user_id": "dialogue-user", "message": {"type": "text", "body": text}});
        if let Some(c) = conversation {
            payload["conversation_id"] = json!(c);
        }
        if image {
            let form = message_with_image(&payload, png_with_marker(), "image/png");
            self.app.send_multipart(&self.key, form).await
        } else {
            self.app.send_message(&self.key, &payload).await
        }
    }

    async fn report(&self, conversation: &str, interaction: &Value, status: &str) -> (u16, Value) {
        let body = json!({"interaction_id": interaction["interaction_id"],
            "operation": interaction["operation"], "status": status});
        let response = self
            .app
            .client
            .post(self.app.url(&format!(
                "/v1/conversations/{conversation}/operation-results"
            )))
            .bearer_auth(&self.key)
            .header("idempotency-key", new_key())
            .json(&body)
            .send()
            .await
            .unwrap();
        status_and_json(response).await
    }
}

/// Why a script failed: where, what was expected, and the whole response.
struct Failure {
    script: String,
    planner: PlannerKind,
    backend: Backend,
    turn: usize,
    said: String,
    problems: Vec<String>,
    response: Value,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "── {} [{} planner, {:?}] turn {}: {:?}",
            self.script,
            self.planner.name(),
            self.backend,
            self.turn,
            self.said
        )?;
        for p in &self.problems {
            writeln!(f, "   ✗ {p}")?;
        }
        writeln!(
            f,
            "   response: {}",
            serde_json::to_string_pretty(&self.response).unwrap_or_default()
        )
    }
}

async fn run_script(
    server: Arc<Server>,
    fixture: Arc<Fixture>,
    script: Arc<Script>,
    backend: Backend,
    account: String,
) -> Result<(), Failure> {
    let planner = server.planner;
    let world = World::open(&server, &fixture, &script, &account).await;
    let fail = |turn: usize, said: &str, problems: Vec<String>, response: Value| Failure {
        script: script.name.clone(),
        planner,
        backend,
        turn,
        said: said.to_owned(),
        problems,
        response,
    };
    if let Err(e) = world.setup(&script.setup).await {
        return Err(fail(0, "(setup)", vec![e], Value::Null));
    }
    let opaque = fixture.opaque_refs();
    let mut conversation: Option<String> = None;
    let mut last_interaction: Option<Value> = None;
    for (i, turn) in script.turns.iter().enumerate() {
        let number = i + 1;
        let over = match planner {
            PlannerKind::Builtin => &turn.builtin,
            PlannerKind::Model => &turn.model.expect,
        };
        let mut expect = turn.expect.overlaid(over);
        let (proposal, model_reply) = model_turn(turn, &expect, &script);
        if planner == PlannerKind::Model
            && turn.model.answer.is_none()
            && turn.model.expect.reason.is_none()
            && expect.reason.as_deref() == Some("no_capability")
        {
            // A model says it cannot look this up in a plain answer; the
            // engine records that as an answer, not as a coverage gap.
            expect.reason = Some("answered".into());
        }
        let before = world.calls().len();
        let (said, status, body) = if let Some(text) = &turn.user {
            if let Some(model) = &server.model {
                model.set_turn(&script.name, script.language, proposal, model_reply);
            }
            let (status, body) = world.say(conversation.as_deref(), text, turn.image).await;
            (text.clone(), status, body)
        } else {
            let status_text = turn.host_report.as_deref().unwrap_or_default();
            let said = format!("(host reports {status_text})");
            let (Some(c), Some(interaction)) = (&conversation, &last_interaction) else {
                return Err(fail(
                    number,
                    &said,
                    vec!["no interaction to report on".into()],
                    Value::Null,
                ));
            };
            let (status, body) = world.report(c, interaction, status_text).await;
            (said, status, body)
        };
        let calls = world.calls();
        if show_turns() {
            eprintln!(
                "{} [{}] {number}. {said}\n   calls {:?}\n   reply {:?}",
                script.name,
                planner.name(),
                &calls[before..],
                body["message"]["body"].as_str().unwrap_or_default()
            );
        }
        let problems = check_turn(
            &world,
            &script,
            turn,
            &expect,
            status,
            &body,
            &calls[before..],
            &opaque,
        );
        if !problems.is_empty() {
            return Err(fail(number, &said, problems, body));
        }
        if turn.user.is_some() {
            conversation = body["conversation_id"].as_str().map(str::to_owned);
            if body.get("interaction").is_some() {
                last_interaction = Some(body["interaction"].clone());
            }
        }
    }
    // Rules 5 and 10 over the whole conversation: no opaque reference or
    // capability id reached the model. (Storage is checked once for the
    // whole set: `stored_secrets`.)
    let mut problems = Vec::new();
    if let Some(model) = &server.model {
        let sent = serde_json::to_string(&model.requests(&script.name)).unwrap();
        for secret in opaque.iter().filter(|s| sent.contains(s.as_str())) {
            problems.push(format!(
                "the opaque reference {secret} was sent to the model"
            ));
        }
        for id in world.ids.values().filter(|id| sent.contains(id.as_str())) {
            problems.push(format!("the capability id {id} was sent to the model"));
        }
    }
    if !problems.is_empty() {
        return Err(fail(
            script.turns.len(),
            "(after the last turn)",
            problems,
            Value::Null,
        ));
    }
    Ok(())
}

/// Rules 10 and 11 over every conversation a server held: no opaque
/// reference and no image byte was stored.
async fn stored_secrets(server: &Server, fixture: &Fixture) -> Vec<String> {
    let mut problems = Vec::new();
    for secret in fixture.opaque_refs() {
        if server.app.db.contains(&secret).await {
            problems.push(format!("the opaque reference {secret} was stored"));
        }
    }
    if server.app.db.contains_bytes(IMAGE_MARKER).await {
        problems.push("image bytes were stored".into());
    }
    problems
}

/// `WARDEN_DIALOGUE_SHOW=1`: print every turn (what was said, the calls,
/// the reply), for reading the dialogues while writing or extending them.
fn show_turns() -> bool {
    std::env::var("WARDEN_DIALOGUE_SHOW").is_ok_and(|v| v == "1")
}

/// What the model double does this turn: the script's mistake if it names
/// one, else what a careful model would do.
fn model_turn(turn: &Turn, expect: &Expect, script: &Script) -> (Proposal, Option<String>) {
    let m = &turn.model;
    let proposal = if let Some(many) = &m.propose_many {
        Proposal::Calls(many.iter().filter_map(one_call).collect())
    } else if let Some(p) = &m.propose {
        Proposal::Calls(one_call(p).into_iter().collect())
    } else if let Some(text) = &m.answer {
        Proposal::Text(text.clone())
    } else if let Some(call) = one_call(&expect.call) {
        Proposal::Calls(vec![call])
    } else if let Some(name) = &expect.selects {
        // It asks through the engine: the capability, nothing invented.
        Proposal::Calls(vec![(name.clone(), json!({}))])
    } else {
        Proposal::Text(default_answer(expect, script))
    };
    (proposal, m.reply.clone())
}

/// A plain answer when no call is expected: the policy's out-of-scope text,
/// or that it cannot look this up, or a greeting.
fn default_answer(expect: &Expect, script: &Script) -> String {
    match (expect.reason.as_deref(), script.language) {
        (Some("out_of_scope"), _) => script
            .setup
            .policy
            .as_ref()
            .and_then(|p| p["out_of_scope_response"].as_str())
            .unwrap_or_default()
            .to_owned(),
        (Some("answered"), Lang::Es) => "¡Hola! ¿En qué puedo ayudarte?".into(),
        (Some("answered"), Lang::En) => "Hello! How can I help you?".into(),
        // The engine's own words for this: the model says the same.
        (_, Lang::Es) => "Todavía no tengo una forma de consultar eso.".into(),
        (_, Lang::En) => "I don't have a way to look that up yet.".into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn check_turn(
    world: &World,
    script: &Script,
    turn: &Turn,
    expect: &Expect,
    status: u16,
    body: &Value,
    calls: &[(String, Value)],
    opaque: &[String],
) -> Vec<String> {
    let mut problems = Vec::new();
    if status != 200 {
        problems.push(format!("status {status}, expected 200"));
        return problems;
    }
    let reply = body["message"]["body"].as_str().unwrap_or_default();
    let events = body["capability_trace"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();

    // Rule 1 and the call itself.
    if turn.host_report.is_some() {
        if !calls.is_empty() {
            problems.push(format!("the host was called on a report: {calls:?}"));
        }
    } else if expect.call.is_null() {
        if !calls.is_empty() {
            problems.push(format!("expected no host call, got {calls:?}"));
        }
    } else if let Some((name, arguments)) = one_call(&expect.call) {
        match calls {
            [(called, args)] if *called == name && *args == arguments => {}
            [] => problems.push(format!(
                "expected a call of {name} with {arguments}, got none"
            )),
            _ => problems.push(format!(
                "expected one call of {name} with {arguments}, got {calls:?}"
            )),
        }
    }
    if let Some(selects) = &expect.selects {
        let selected: Vec<&str> = events
            .iter()
            .filter(|e| e["stage"] == "selection")
            .filter_map(|e| e["capability"].as_str())
            .collect();
        if selected != [selects.as_str()] {
            problems.push(format!(
                "expected {selects} selected, the trace selected {selected:?}"
            ));
        }
    }
    if let Some(reason) = &expect.reason {
        let last = events
            .last()
            .and_then(|e| e["reason_code"].as_str())
            .unwrap_or_default();
        if last != reason {
            problems.push(format!("expected reason {reason}, got {last}"));
        }
    }

    // What the reply says.
    if let Some(exact) = &expect.reply_is
        && reply != exact
    {
        problems.push(format!("expected the reply {exact:?}"));
    }
    if let Some(start) = &expect.reply_starts
        && !reply.starts_with(start.as_str())
    {
        problems.push(format!("expected the reply to start with {start:?}"));
    }
    for fact in expect.reply_has.iter().flatten() {
        if !reply.contains(fact.as_str()) {
            problems.push(format!("the reply lacks {fact:?}"));
        }
    }
    for fact in expect.reply_lacks.iter().flatten() {
        if reply.contains(fact.as_str()) {
            problems.push(format!("the reply states {fact:?}"));
        }
    }
    let language = if is_unset(&expect.language) {
        Some(script.language)
    } else {
        serde_json::from_value::<Option<Lang>>(expect.language.clone()).unwrap_or_else(|e| {
            problems.push(format!("bad language in the script: {e}"));
            None
        })
    };
    if let Some(language) = language {
        let facts: Vec<&str> = expect
            .reply_has
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if let Err(why) = written_in(reply, &facts, language) {
            problems.push(format!("the reply is not in {language:?}: {why}"));
        }
    }

    // The interaction.
    let interaction = body.get("interaction");
    match expect.interaction.as_str() {
        Some(kind) if !is_unset(&expect.interaction) => {
            if interaction.and_then(|i| i["type"].as_str()) != Some(kind) {
                problems.push(format!("expected a {kind} interaction"));
            }
        }
        _ => {
            if interaction.is_some() && turn.host_report.is_none() {
                problems.push("expected no interaction".into());
            }
        }
    }

    // Rules 5, 6 and 10 on every turn: no internal identifier, no
    // undeclared field, opaque references only in this turn's interaction.
    let text = body.to_string();
    for id in world.ids.values() {
        if text.contains(id.as_str()) {
            problems.push(format!("the response names the capability id {id}"));
        }
    }
    for prefix in INTERNAL_PREFIXES {
        if reply.contains(prefix) {
            problems.push(format!(
                "the reply names an internal identifier ({prefix}…)"
            ));
        }
    }
    if text.contains(UNDECLARED_VALUE) {
        problems.push("an undeclared output field reached the response".into());
    }
    let outside: Value = match body {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "interaction")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    };
    let outside = outside.to_string();
    for secret in opaque {
        if outside.contains(secret.as_str()) {
            problems.push(format!(
                "the opaque reference {secret} is outside the interaction"
            ));
        }
    }
    problems
}

/// Whether `reply` reads as `language`, judged by common function words
/// (the facts the script asserts are data and do not count). A reply of
/// bare data with no function word of either language passes.
fn written_in(reply: &str, facts: &[&str], language: Lang) -> Result<(), String> {
    const ES: &[&str] = &[
        "el",
        "la",
        "los",
        "las",
        "de",
        "del",
        "que",
        "en",
        "un",
        "una",
        "es",
        "por",
        "para",
        "con",
        "tu",
        "mi",
        "hay",
        "lo",
        "se",
        "y",
        "al",
        "qué",
        "cuál",
        "dónde",
        "está",
        "puedo",
        "quieres",
        "necesito",
        "encontré",
        "esto",
        "algo",
        "más",
        "ayudarte",
        "nada",
        "hola",
        "no",
        "operación",
        "pedido",
        "tienda",
        "dime",
        "sí",
        "he",
        "sistema",
        "esa",
        "ese",
        "consulta",
        "información",
        "continuar",
        "cuál",
        "elige",
        "revisa",
        "confirma",
        "listo",
        "ningún",
        "ninguna",
        "pude",
        "momento",
        "inténtalo",
    ];
    const EN: &[&str] = &[
        "the",
        "of",
        "to",
        "in",
        "is",
        "are",
        "it",
        "your",
        "you",
        "my",
        "i",
        "what",
        "which",
        "where",
        "when",
        "can",
        "could",
        "would",
        "please",
        "found",
        "here",
        "this",
        "that",
        "there",
        "for",
        "with",
        "and",
        "anything",
        "else",
        "help",
        "order",
        "store",
        "need",
        "don't",
        "have",
        "was",
        "no",
        "information",
        "system",
        "continue",
        "choose",
        "review",
        "confirm",
        "done",
        "operation",
        "couldn't",
        "right",
        "now",
        "try",
        "again",
        "later",
        "welcome",
        "hello",
        "how",
    ];
    let mut text = reply.to_lowercase();
    for fact in facts {
        text = text.replace(&fact.to_lowercase(), " ");
    }
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let count = |list: &[&str]| words.iter().filter(|w| list.contains(w)).count();
    let marks = text.chars().filter(|c| "¿¡áéíóúñ".contains(*c)).count();
    let (es, en) = (count(ES) + marks.min(2), count(EN));
    let (mine, other) = match language {
        Lang::Es => (es, en),
        Lang::En => (en, es),
    };
    if mine > other || (mine == 0 && other == 0) {
        Ok(())
    } else {
        Err(format!("{es} Spanish and {en} English function words"))
    }
}

// ---------------------------------------------------------------------------
// The whole set

#[derive(Default)]
struct Tally {
    passed: usize,
    total: usize,
}

async fn run_set(backend: Backend) {
    let started = Instant::now();
    let report_only = std::env::var("WARDEN_DIALOGUE_REPORT").is_ok_and(|v| v == "1");
    let filter = std::env::var("WARDEN_DIALOGUE").unwrap_or_default();
    let jobs: usize = std::env::var("WARDEN_DIALOGUE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let fixture = Arc::new(Fixture::load());
    let scripts: Vec<Arc<Script>> = load_set()
        .into_iter()
        .filter(|s| s.name.contains(&filter))
        .map(Arc::new)
        .collect();
    assert!(!scripts.is_empty(), "no dialogue matches {filter:?}");

    let builtin = Arc::new(Server::start(backend, PlannerKind::Builtin).await);
    let model = Arc::new(Server::start(backend, PlannerKind::Model).await);
    let gate = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (n, script) in scripts.iter().enumerate() {
        for &planner in &script.planners {
            let server = match planner {
                PlannerKind::Builtin => builtin.clone(),
                PlannerKind::Model => model.clone(),
            };
            let (fixture, script, gate) = (fixture.clone(), script.clone(), gate.clone());
            let account = format!("dialogue-{n}");
            set.spawn(async move {
                let _permit = gate.acquire_owned().await.unwrap();
                let outcome = tokio::time::timeout(
                    Duration::from_secs(120),
                    run_script(server, fixture, script.clone(), backend, account),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(Failure {
                        script: script.name.clone(),
                        planner,
                        backend,
                        turn: 0,
                        said: String::new(),
                        problems: vec!["timed out after 120 s".into()],
                        response: Value::Null,
                    })
                });
                (script, planner, outcome)
            });
        }
    }
    let mut by_rule: BTreeMap<(String, PlannerKind), Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut runs = 0;
    while let Some(joined) = set.join_next().await {
        let (script, planner, outcome) = joined.expect("a dialogue task panicked");
        runs += 1;
        let passed = outcome.is_ok();
        let mut keys: Vec<String> = script
            .rules
            .iter()
            .map(|r| format!("rule {r:>2}"))
            .collect();
        keys.extend(script.issue.iter().map(|i| format!("issue 13.{i}")));
        keys.push(format!("{:?} scripts", script.language).to_lowercase());
        keys.push("all scripts".into());
        for key in keys {
            let tally = by_rule.entry((key, planner)).or_default();
            tally.total += 1;
            tally.passed += usize::from(passed);
        }
        if let Err(failure) = outcome {
            failures.push(failure);
        }
    }
    failures.sort_by(|a, b| (&a.script, a.planner).cmp(&(&b.script, b.planner)));
    for server in [&builtin, &model] {
        let problems = stored_secrets(server, &fixture).await;
        if !problems.is_empty() {
            failures.push(Failure {
                script: "(the whole set)".into(),
                planner: server.planner,
                backend,
                turn: 0,
                said: String::new(),
                problems,
                response: Value::Null,
            });
        }
    }

    let mut table = format!(
        "dialogue set on {backend:?}: {} scripts, {runs} runs, {:.1} s\n{:<16} {:>12} {:>12}\n",
        scripts.len(),
        started.elapsed().as_secs_f64(),
        "",
        "builtin",
        "model"
    );
    let mut rows: Vec<&String> = by_rule.keys().map(|(k, _)| k).collect();
    rows.dedup();
    for row in rows {
        let cell = |p: PlannerKind| {
            by_rule
                .get(&(row.clone(), p))
                .map_or("-".to_owned(), |t| format!("{}/{}", t.passed, t.total))
        };
        let _ = writeln!(
            table,
            "{row:<16} {:>12} {:>12}",
            cell(PlannerKind::Builtin),
            cell(PlannerKind::Model)
        );
    }
    eprintln!("{table}");
    if report_only {
        for f in &failures {
            eprintln!(
                "failed: {} [{}] turn {}: {}",
                f.script,
                f.planner.name(),
                f.turn,
                f.problems.join("; ")
            );
        }
        return;
    }
    if !failures.is_empty() {
        let mut text = String::new();
        for f in &failures {
            let _ = write!(text, "{f}");
        }
        panic!("{} of {runs} dialogue runs failed:\n{text}", failures.len());
    }
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dialogue_set(backend: Backend) {
    run_set(backend).await;
}

#[test]
fn the_set_is_large_balanced_and_covers_every_rule_and_issue_item() {
    let scripts = load_set();
    let spanish = scripts.iter().filter(|s| s.language == Lang::Es).count();
    let english = scripts.len() - spanish;
    assert!(scripts.len() >= 80, "{} scripts", scripts.len());
    assert!(
        spanish.abs_diff(english) <= 2,
        "{spanish} Spanish, {english} English"
    );
    for rule in 1..=13u8 {
        let n = scripts.iter().filter(|s| s.rules.contains(&rule)).count();
        assert!(n >= 3, "rule {rule} is covered by {n} scripts");
    }
    for item in 1..=7u8 {
        let n = scripts.iter().filter(|s| s.issue.contains(&item)).count();
        assert!(n >= 1, "issue 13 item {item} has no dialogue");
    }
    for s in &scripts {
        let prefix = match s.language {
            Lang::Es => "es-",
            Lang::En => "en-",
        };
        assert!(s.name.starts_with(prefix), "{}: name it {prefix}…", s.name);
        assert!(!s.about.trim().is_empty(), "{}: say what it shows", s.name);
    }
}
