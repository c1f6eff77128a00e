//! The OpenAI-compatible planner: chat completions with tools, against any
//! backend that speaks that wire format (OpenAI, vLLM, llama.cpp, Ollama…).
//!
//! The planner only proposes; the engine enforces the runtime rules. What
//! this module guarantees on its own: at most one call per turn (the first
//! tool call wins), no guessed arguments (malformed ones are retried once,
//! then dropped), bounded retries, bounded answers, and nothing private in
//! the logs (no message, image, answer or key).
//!
//! About 700 lines, one concern: the request a planner sends and how it
//! reads, retries, bounds and measures the answer are read together.

use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::CONTENT_LENGTH;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use super::{
    CapabilityOffer, EffectivePolicy, HistoryEntry, Offered, Plan, PlanOutcome, PlanRequest,
    PlannerError, ReplyRequest,
};
use crate::domain::closed_set::closed_set;
use crate::domain::message::MessageRole;
use crate::trace_context::Leaf;
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use warden_channel::image::InboundImage;

/// HTTP calls per `plan` or `reply`: the first and at most one retry.
const MAX_ATTEMPTS: u32 = 2;
/// Pause before retrying a transient failure (reported in `retry_delay`).
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// History entries sent to the model: enough context, bounded prompt size.
const MAX_HISTORY: usize = 12;
/// Largest backend answer read; a hostile backend cannot exhaust memory.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

const PLAN_RULES: &str = "Rules:\n\
- Answer in the language of the user's message.\n\
- Call at most one tool per turn.\n\
- Never invent argument values. If a value the tool needs is missing, ask the user for it instead of calling the tool.\n\
- Do not answer questions about live data (availability, prices, statuses, records) without calling a tool; if no tool fits, say that you cannot look it up.";

const REPLY_RULES: &str = "Write a short reply to the user using ONLY the data below; \
if a value is not in the data, do not state it; never mention internal identifiers. \
Answer in the language of the user's message.";

#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL, e.g. `http://127.0.0.1:9000/v1`; `/chat/completions` is appended.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Deadline of one inference call (connect, send and read the answer).
    pub timeout: Duration,
}

/// Redacted: the configuration may end up in a log line, the key must not.
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[derive(Clone)]
pub struct OpenAiPlanner {
    config: OpenAiConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl OpenAiPlanner {
    pub fn new(config: OpenAiConfig) -> Self {
        let client = reqwest::Client::builder()
            // An environment proxy would see every prompt and the key.
            .no_proxy()
            // A redirect could carry the bearer key to another host.
            .redirect(reqwest::redirect::Policy::none())
            // Backstop only: `exchange` enforces the deadline itself.
            .timeout(config.timeout)
            .user_agent(concat!("warden/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the HTTP client configuration is valid");
        let endpoint = format!("{}/chat/completions", config.url.trim_end_matches('/'));
        OpenAiPlanner {
            config,
            endpoint,
            client,
        }
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// One turn's proposal. Malformed tool arguments are retried once, then
    /// proposed as a call without arguments (the engine asks for them); the
    /// same holds when the retry itself fails: the model did choose a tool.
    pub async fn plan(&self, request: &PlanRequest<'_>) -> Result<PlanOutcome, PlannerError> {
        let body = plan_body(&self.config.model, request);
        let mut budget = Budget::default();
        let mut chosen: Option<String> = None;
        loop {
            let proposal = self
                .complete_with_retry(&body, &mut budget, ModelPurpose::Planner)
                .await
                .and_then(|message| read_proposal(message, request));
            match proposal {
                Ok(Proposal::Plan(plan)) => return Ok(budget.outcome(plan)),
                Ok(Proposal::MalformedCall(capability)) if budget.exhausted() => {
                    return Ok(budget.outcome(call_without_arguments(capability)));
                }
                Ok(Proposal::MalformedCall(capability)) => {
                    tracing::warn!("the model sent malformed tool arguments; asking again");
                    chosen = Some(capability);
                }
                Err(reason) => {
                    return match chosen {
                        Some(capability) => Ok(budget.outcome(call_without_arguments(capability))),
                        None => Err(PlannerError::Unavailable(reason)),
                    };
                }
            }
        }
    }

    /// A reply written from the pruned result only, with no tools offered.
    pub async fn reply(&self, request: &ReplyRequest<'_>) -> Result<String, PlannerError> {
        let body = reply_body(&self.config.model, request);
        let mut budget = Budget::default();
        self.complete_with_retry(&body, &mut budget, ModelPurpose::Planner)
            .await
            .and_then(read_reply)
            .map_err(PlannerError::Unavailable)
    }

    /// Calls the backend, retrying a transient failure after a pause while
    /// the budget lasts. The error is a reason safe to log.
    /// A JSON-mode completion (`response_format: json_object`): the
    /// operator's `system` prompt and the `user` content. The answer's text
    /// as the model wrote it (`None`: it wrote none); whether it is the JSON
    /// asked for is the caller's to judge. One retry on a transient failure.
    pub async fn json_completion(
        &self,
        system: &str,
        user: &str,
    ) -> Result<Option<String>, PlannerError> {
        let body = json!({
            "model": self.config.model,
            "messages": [
                system_message(system.to_owned()),
                {"role": "user", "content": user},
            ],
            "response_format": {"type": "json_object"},
        });
        let mut budget = Budget::default();
        let message = self
            .complete_with_retry(&body, &mut budget, ModelPurpose::PromptIntegration)
            .await
            .map_err(PlannerError::Unavailable)?;
        Ok(message.content)
    }

    async fn complete_with_retry(
        &self,
        body: &Value,
        budget: &mut Budget,
        purpose: ModelPurpose,
    ) -> Result<AssistantMessage, String> {
        loop {
            budget.attempts += 1;
            match self.exchange(body, purpose).await {
                Ok(message) => return Ok(message),
                Err(CallError::Transient(reason)) if !budget.exhausted() => {
                    tracing::warn!(%reason, "inference call failed; retrying once");
                    crate::local_work::outside(tokio::time::sleep(RETRY_PAUSE)).await;
                    budget.retry_delay += RETRY_PAUSE;
                }
                Err(CallError::Transient(reason) | CallError::Fatal(reason)) => {
                    tracing::warn!(%reason, attempts = budget.attempts, "inference call failed");
                    return Err(reason);
                }
            }
        }
    }

    /// One HTTP call, the whole exchange within the configured deadline.
    ///
    /// The model layer's one instrumentation point: the `chat {model}` span
    /// (OpenTelemetry GenAI conventions: the model, the token counts when
    /// reported; never the prompt or the answer), whose `traceparent` the
    /// request carries, and `warden_model_calls_total` /
    /// `warden_model_call_duration_seconds` by purpose and outcome.
    async fn exchange(
        &self,
        body: &Value,
        purpose: ModelPurpose,
    ) -> Result<AssistantMessage, CallError> {
        let mut span = Leaf::start(SpanKind::Client, || {
            (
                format!("chat {}", self.config.model).into(),
                crate::trace_context::attributes(
                    [
                        KeyValue::new("gen_ai.operation.name", "chat"),
                        KeyValue::new("gen_ai.request.model", self.config.model.clone()),
                        KeyValue::new("warden.model.purpose", purpose.as_str()),
                    ],
                    3,
                ),
            )
        });
        let started = std::time::Instant::now();
        let attempt = async {
            let mut headers = reqwest::header::HeaderMap::new();
            span.inject(&mut headers);
            let mut call = self.client.post(&self.endpoint).headers(headers).json(body);
            if let Some(key) = &self.config.api_key {
                call = call.bearer_auth(key);
            }
            let response = call.send().await.map_err(transport_error)?;
            check_status(response.status())?;
            let bytes = read_bounded(response).await?;
            parse_completion(&bytes, &mut span)
        };
        // Waiting for the model is not local work (`local_work`).
        let answered =
            crate::local_work::outside(tokio::time::timeout(self.config.timeout, attempt))
                .await
                .unwrap_or(Err(CallError::Transient("the call timed out".into())));
        let outcome = match &answered {
            Ok(_) => "ok",
            Err(CallError::Transient(_)) => "transient_error",
            Err(CallError::Fatal(_)) => "error",
        };
        if answered.is_err() {
            span.set_attribute(|| KeyValue::new("error.type", outcome));
        }
        crate::metrics::model_call(purpose.as_str(), outcome, started.elapsed());
        answered
    }
}

closed_set! {
    /// What a model call is for (the model metric's `purpose`).
    pub enum ModelPurpose {
        Planner = "planner",
        PromptIntegration = "prompt_integration",
    }
}

/// HTTP calls made and time spent pausing, shared by both kinds of retry
/// so that one `plan` never makes more than `MAX_ATTEMPTS` calls.
#[derive(Default)]
struct Budget {
    attempts: u32,
    retry_delay: Duration,
}

impl Budget {
    fn exhausted(&self) -> bool {
        self.attempts >= MAX_ATTEMPTS
    }

    fn outcome(&self, plan: Plan) -> PlanOutcome {
        PlanOutcome {
            plan,
            attempts: self.attempts,
            retry_delay: self.retry_delay,
        }
    }
}

/// Why one call failed. The reasons never quote the backend's body, which
/// could echo the prompt.
enum CallError {
    /// Worth one more try: unreachable, timed out, overloaded.
    Transient(String),
    /// Trying again would get the same answer.
    Fatal(String),
}

fn transport_error(err: reqwest::Error) -> CallError {
    if err.is_timeout() {
        CallError::Transient("the call timed out".into())
    } else if err.is_connect() {
        CallError::Transient("the backend could not be reached".into())
    } else if err.is_builder() {
        CallError::Fatal("the inference URL is not usable".into())
    } else {
        CallError::Transient("the connection failed".into())
    }
}

fn check_status(status: StatusCode) -> Result<(), CallError> {
    if status.is_success() {
        Ok(())
    } else if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        Err(CallError::Transient(format!(
            "the backend answered {status}"
        )))
    } else {
        Err(CallError::Fatal(format!("the backend answered {status}")))
    }
}

/// Reads the body, refusing to go past `MAX_RESPONSE_BYTES`.
async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, CallError> {
    let too_large = || CallError::Fatal(format!("the answer exceeds {MAX_RESPONSE_BYTES} bytes"));
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_RESPONSE_BYTES as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

// ---------------------------------------------------------------------------
// The answer

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    /// Token counts, when the backend reports them (the `chat` span's
    /// `gen_ai.usage.*`).
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Choice {
    message: AssistantMessage,
}

#[derive(Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Deserialize)]
struct ToolCall {
    function: FunctionCall,
}

#[derive(Deserialize)]
struct FunctionCall {
    name: String,
    /// A JSON-encoded string on the wire; some backends send the object.
    #[serde(default)]
    arguments: Value,
}

/// `choices[0].message`, or a fatal error for anything else; the token
/// counts the backend reported go on the call's span.
fn parse_completion(bytes: &[u8], span: &mut Leaf) -> Result<AssistantMessage, CallError> {
    let not_completion = || CallError::Fatal("the answer is not a chat completion".into());
    let completion: Completion = serde_json::from_slice(bytes).map_err(|_| not_completion())?;
    if let Some(usage) = &completion.usage {
        for (key, tokens) in [
            ("gen_ai.usage.input_tokens", usage.prompt_tokens),
            ("gen_ai.usage.output_tokens", usage.completion_tokens),
        ] {
            if let Some(tokens) = tokens {
                span.set_attribute(|| {
                    KeyValue::new(key, i64::try_from(tokens).unwrap_or(i64::MAX))
                });
            }
        }
    }
    completion
        .choices
        .into_iter()
        .next()
        .map(|choice| choice.message)
        .ok_or_else(not_completion)
}

enum Proposal {
    Plan(Plan),
    /// The model chose this tool but its arguments are not a JSON object.
    MalformedCall(String),
}

fn read_proposal(message: AssistantMessage, request: &PlanRequest<'_>) -> Result<Proposal, String> {
    // Rule 1: one call per turn. Later calls are ignored, never queued.
    if let Some(call) = message
        .tool_calls
        .and_then(|calls| calls.into_iter().next())
    {
        return Ok(read_call(call.function, request.capabilities));
    }
    let text = message.content.as_deref().map(str::trim).unwrap_or("");
    if text.is_empty() {
        return Err("the model answered neither text nor a tool call".into());
    }
    Ok(Proposal::Plan(read_text(text, request.policy)))
}

fn read_call(function: FunctionCall, offers: &[Offered<'_>]) -> Proposal {
    let Some(mut arguments) = parse_arguments(function.arguments) else {
        return Proposal::MalformedCall(function.name);
    };
    // Strict mode made every optional argument nullable: a null there means
    // "not given", not a value.
    if let Some(offer) = offers.iter().find(|o| o.name == function.name) {
        strip_optional_nulls(&mut arguments, &offer.input_schema);
    }
    Proposal::Plan(Plan::Call {
        capability: function.name,
        arguments,
    })
}

/// The arguments as an object, or `None` when they are not one.
fn parse_arguments(raw: Value) -> Option<Map<String, Value>> {
    let parsed = match raw {
        Value::String(text) if text.trim().is_empty() => return Some(Map::new()),
        Value::String(text) => serde_json::from_str(&text).ok()?,
        Value::Null => return Some(Map::new()),
        other => other,
    };
    match parsed {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn read_text(text: &str, policy: &EffectivePolicy) -> Plan {
    let out_of_scope = policy.out_of_scope_response.trim();
    if !out_of_scope.is_empty() && text == out_of_scope {
        Plan::OutOfScope
    } else {
        Plan::Answer {
            text: text.to_owned(),
        }
    }
}

fn call_without_arguments(capability: String) -> Plan {
    Plan::Call {
        capability,
        arguments: Map::new(),
    }
}

fn read_reply(message: AssistantMessage) -> Result<String, String> {
    let text = message.content.as_deref().map(str::trim).unwrap_or("");
    if text.is_empty() {
        Err("the model wrote no reply".into())
    } else {
        Ok(text.to_owned())
    }
}

// ---------------------------------------------------------------------------
// The request

fn plan_body(model: &str, request: &PlanRequest<'_>) -> Value {
    let mut messages = vec![system_message(plan_instructions(request.policy))];
    messages.extend(history_messages(request.history));
    messages.push(user_message(request.said.text(), request.image));
    let mut body = json!({ "model": model, "messages": messages });
    // Backends reject `tool_choice` without tools: offer none at all then.
    if !request.capabilities.is_empty() {
        let tools: Vec<Value> = request.capabilities.iter().map(|o| tool(o)).collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(false);
    }
    body
}

fn plan_instructions(policy: &EffectivePolicy) -> String {
    let mut sections = Vec::new();
    if !policy.instructions.trim().is_empty() {
        sections.push(policy.instructions.trim().to_owned());
    }
    if !policy.topics.is_empty() {
        let topics: Vec<String> = policy
            .topics
            .iter()
            .map(|(name, description)| format!("- {name}: {description}"))
            .collect();
        sections.push(format!("Allowed topics:\n{}", topics.join("\n")));
    }
    let mut rules = PLAN_RULES.to_owned();
    if !policy.topics.is_empty() {
        rules.push_str(&format!(
            "\n- If the request is outside the allowed topics, reply with exactly this text and nothing else: {}",
            policy.out_of_scope_response.trim()
        ));
    }
    sections.push(rules);
    sections.join("\n\n")
}

fn history_messages(history: &[HistoryEntry]) -> impl Iterator<Item = Value> + '_ {
    let start = history.len().saturating_sub(MAX_HISTORY);
    history[start..].iter().map(|entry| {
        let role = match entry.role {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
        };
        json!({ "role": role, "content": entry.text })
    })
}

fn system_message(text: String) -> Value {
    json!({ "role": "system", "content": text })
}

/// The user's turn; with an image, a text part and an inline image part.
fn user_message(text: &str, image: Option<&InboundImage>) -> Value {
    let Some(image) = image else {
        return json!({ "role": "user", "content": text });
    };
    let data_url = format!(
        "data:{};base64,{}",
        image.format.media_type(),
        base64::engine::general_purpose::STANDARD.encode(&image.bytes)
    );
    json!({
        "role": "user",
        "content": [
            { "type": "text", "text": text },
            { "type": "image_url", "image_url": { "url": data_url } },
        ],
    })
}

fn tool(offer: &CapabilityOffer) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": offer.name,
            "description": format!("{} Use when: {}", offer.description, offer.when_to_use),
            "parameters": strict_schema(&offer.input_schema),
            "strict": true,
        },
    })
}

fn reply_body(model: &str, request: &ReplyRequest<'_>) -> Value {
    let instructions = match request.policy.instructions.trim() {
        "" => REPLY_RULES.to_owned(),
        policy => format!("{policy}\n\n{REPLY_RULES}"),
    };
    let data = format!(
        "Data returned by the capability \"{}\" (JSON):\n{}",
        request.capability.name, request.result
    );
    json!({
        "model": model,
        "messages": [
            system_message(instructions),
            system_message(data),
            { "role": "user", "content": request.message },
        ],
    })
}

// ---------------------------------------------------------------------------
// Strict mode

/// The input schema as strict mode wants it: every property of every object
/// listed in `required`, the optional ones made nullable instead.
fn strict_schema(schema: &Value) -> Value {
    let mut strict = schema.clone();
    make_strict(&mut strict);
    strict
}

fn make_strict(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = node.get_mut(key) {
            alternatives.iter_mut().for_each(make_strict);
        }
    }
    if let Some(items) = node.get_mut("items") {
        make_strict(items);
    }
    // `not` is left alone: it states which combinations are forbidden, and
    // making it strict would change what it forbids.
    let required = required_names(node);
    let Some(Value::Object(properties)) = node.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        make_strict(property);
        if !required.contains(name) {
            make_nullable(property);
        }
    }
    let all: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
    node.insert("required".into(), Value::Array(all));
    node.insert("additionalProperties".into(), Value::Bool(false));
}

/// Lets a property also be `null`, without loosening anything else.
fn make_nullable(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    // A constant or a combination cannot simply gain a type: offer null as
    // an alternative next to it.
    let combined = ["const", "anyOf", "oneOf"]
        .iter()
        .any(|k| node.contains_key(*k));
    if combined || !(node.contains_key("type") || node.contains_key("enum")) {
        let inner = std::mem::take(schema);
        *schema = json!({ "anyOf": [inner, { "type": "null" }] });
        return;
    }
    match node.get_mut("type") {
        Some(Value::String(single)) if single != "null" => {
            let single = std::mem::take(single);
            node.insert("type".into(), json!([single, "null"]));
        }
        Some(Value::Array(types)) => push_unique(types, json!("null")),
        _ => {}
    }
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        push_unique(values, Value::Null);
    }
}

fn push_unique(values: &mut Vec<Value>, value: Value) {
    if !values.contains(&value) {
        values.push(value);
    }
}

fn required_names(node: &Map<String, Value>) -> HashSet<String> {
    node.get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Removes null values of properties the original schema left optional, at
/// every level where that schema declares properties.
fn strip_optional_nulls(arguments: &mut Map<String, Value>, schema: &Value) {
    let Some(node) = schema.as_object() else {
        return;
    };
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required = required_names(node);
    arguments.retain(|name, value| !value.is_null() || required.contains(name));
    for (name, value) in arguments.iter_mut() {
        if let Some(property) = properties.get(name) {
            strip_nested(value, property);
        }
    }
}

fn strip_nested(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => strip_optional_nulls(map, schema),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| strip_nested(item, item_schema));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
