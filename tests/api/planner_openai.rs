//! The OpenAI-compatible planner against a scripted fake backend: what it
//! sends, how it reads answers, and how it fails.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use warden::agent::language::Said;
use warden::agent::planner::openai::{OpenAiConfig, OpenAiPlanner};
use warden::agent::planner::{
    CapabilityOffer, EffectivePolicy, HistoryEntry, Offered, Plan, PlanOutcome, PlanRequest,
    PlannerError, ReplyRequest,
};
use warden::channel::image::{ImageFormat, InboundImage};
use warden::domain::message::MessageRole;

use crate::helpers::fake_inference::{FakeInference, FakeReply};

const OUT_OF_SCOPE: &str = "Solo puedo ayudarte con pedidos.";
const INSTRUCTIONS: &str = "You are the order assistant of Acme.";

fn policy() -> EffectivePolicy {
    EffectivePolicy {
        instructions: INSTRUCTIONS.into(),
        topics: vec![("orders".into(), "order status and delivery".into())],
        out_of_scope_response: OUT_OF_SCOPE.into(),
    }
}

fn order_status() -> CapabilityOffer {
    CapabilityOffer {
        name: "order_status".into(),
        description: "Looks up the status of an order.".into(),
        when_to_use: "the user asks where an order is".into(),
        examples: Vec::new().into(),
        input_schema: std::sync::Arc::new(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["order_number"],
            "properties": {
                "order_number": { "type": "string", "maxLength": 20 },
                "email": { "type": "string", "maxLength": 120 },
                "channel": { "enum": ["web", "store"] },
            },
        })),
        output_schema: std::sync::Arc::new(json!({})),
        preparation: false,
        fingerprint: Default::default(),
    }
}

fn store_hours() -> CapabilityOffer {
    CapabilityOffer {
        name: "store_hours".into(),
        description: "Opening hours of a store.".into(),
        when_to_use: "the user asks when a store opens".into(),
        examples: Vec::new().into(),
        input_schema: std::sync::Arc::new(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["city"],
            "properties": { "city": { "type": "string", "maxLength": 40 } },
        })),
        output_schema: std::sync::Arc::new(json!({})),
        preparation: false,
        fingerprint: Default::default(),
    }
}

fn planner(fake: &FakeInference, timeout: Duration) -> OpenAiPlanner {
    OpenAiPlanner::new(OpenAiConfig {
        // A trailing slash must not double up in the path.
        url: format!("{}/", fake.base_url()),
        model: "fake-model".into(),
        api_key: Some("sk-test-key".into()),
        timeout,
    })
}

/// Plans one turn ("where is my order?") with both offers and no history.
async fn plan_with(replies: Vec<FakeReply>) -> (FakeInference, Result<PlanOutcome, PlannerError>) {
    let fake = FakeInference::start(replies).await;
    let policy = policy();
    let offers = [order_status(), store_hours()];
    let none = Default::default();
    let offered: Vec<Offered<'_>> = offers
        .iter()
        .map(|offer| Offered {
            offer,
            patterns: &none,
        })
        .collect();
    let request = PlanRequest {
        policy: &policy,
        capabilities: &offered,
        history: &[],
        said: &Said::new("¿Dónde está mi pedido A-123?"),
        image: None,
        previous_capability: None,
    };
    let outcome = planner(&fake, Duration::from_secs(5)).plan(&request).await;
    (fake, outcome)
}

/// The planner gave up as unavailable after exactly `calls` requests.
fn assert_unavailable_after(
    outcome: &Result<PlanOutcome, PlannerError>,
    fake: &FakeInference,
    calls: usize,
) {
    assert!(
        matches!(outcome, Err(PlannerError::Unavailable(_))),
        "{outcome:?}"
    );
    assert_eq!(fake.requests().len(), calls);
}

/// The plan to call `capability` with `arguments` (a JSON object).
fn call(capability: &str, arguments: Value) -> Plan {
    Plan::Call {
        capability: capability.into(),
        arguments: arguments.as_object().cloned().expect("an object"),
    }
}

#[tokio::test]
async fn a_tool_call_becomes_a_call_with_optional_nulls_removed() {
    let (fake, outcome) = plan_with(vec![FakeReply::tool_call(
        "order_status",
        json!({ "order_number": "A-123", "email": null, "channel": null }),
    )])
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.plan,
        call("order_status", json!({ "order_number": "A-123" }))
    );
    assert_eq!(outcome.attempts, 1);
    assert_eq!(outcome.retry_delay, Duration::ZERO);
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn only_the_first_of_several_tool_calls_is_honoured() {
    let (fake, outcome) = plan_with(vec![FakeReply::ToolCalls(vec![
        ("store_hours".into(), r#"{"city":"Lima"}"#.into()),
        ("order_status".into(), r#"{"order_number":"A-123"}"#.into()),
    ])])
    .await;
    assert_eq!(
        outcome.unwrap().plan,
        call("store_hours", json!({ "city": "Lima" }))
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn malformed_arguments_are_retried_once_then_dropped() {
    let (fake, outcome) = plan_with(vec![FakeReply::ToolCall {
        name: "order_status".into(),
        arguments: r#"{"order_number": "A-1"#.into(),
    }])
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.plan, call("order_status", json!({})));
    assert_eq!(outcome.attempts, 2);
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        fake.requests()[0],
        fake.requests()[1],
        "the same call, asked again"
    );
}

#[tokio::test]
async fn malformed_arguments_then_good_ones_are_used() {
    let (_fake, outcome) = plan_with(vec![
        FakeReply::ToolCall {
            name: "order_status".into(),
            arguments: "[\"A-123\"]".into(),
        },
        FakeReply::tool_call("order_status", json!({ "order_number": "A-123" })),
    ])
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.plan,
        call("order_status", json!({ "order_number": "A-123" }))
    );
    assert_eq!(outcome.attempts, 2);
}

#[tokio::test]
async fn malformed_arguments_then_a_failure_still_propose_the_tool() {
    let (fake, outcome) = plan_with(vec![
        FakeReply::ToolCall {
            name: "order_status".into(),
            arguments: "not json".into(),
        },
        FakeReply::Status(500),
    ])
    .await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.plan, call("order_status", json!({})));
    assert_eq!(outcome.attempts, 2);
    assert_eq!(fake.requests().len(), 2, "never more than two calls");
}

#[tokio::test]
async fn text_becomes_an_answer() {
    let (_fake, outcome) =
        plan_with(vec![FakeReply::text("  ¿Cuál es tu número de pedido?\n")]).await;
    let outcome = outcome.unwrap();
    assert_eq!(
        outcome.plan,
        Plan::Answer {
            text: "¿Cuál es tu número de pedido?".into()
        }
    );
    assert_eq!(outcome.attempts, 1);
}

#[tokio::test]
async fn the_out_of_scope_text_becomes_out_of_scope() {
    let (_fake, outcome) = plan_with(vec![FakeReply::text(OUT_OF_SCOPE)]).await;
    assert_eq!(outcome.unwrap().plan, Plan::OutOfScope);
}

#[tokio::test]
async fn an_empty_message_is_unavailable() {
    let empty =
        json!({ "choices": [{ "index": 0, "message": { "role": "assistant", "content": "" } }] });
    let (fake, outcome) = plan_with(vec![FakeReply::Json(empty)]).await;
    assert_unavailable_after(&outcome, &fake, 1);
}

#[tokio::test]
async fn a_server_error_twice_is_unavailable_after_two_calls() {
    let (fake, outcome) = plan_with(vec![FakeReply::Status(500)]).await;
    assert_unavailable_after(&outcome, &fake, 2);
}

#[tokio::test]
async fn a_server_error_then_success_counts_two_attempts_and_the_pause() {
    let (_fake, outcome) = plan_with(vec![
        FakeReply::Status(429),
        FakeReply::text("Hola, ¿en qué te ayudo?"),
    ])
    .await;
    let outcome = outcome.unwrap();
    assert!(matches!(outcome.plan, Plan::Answer { .. }));
    assert_eq!(outcome.attempts, 2);
    assert_eq!(outcome.retry_delay, Duration::from_millis(200));
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let (fake, outcome) = plan_with(vec![FakeReply::Status(400)]).await;
    assert_unavailable_after(&outcome, &fake, 1);
}

#[tokio::test]
async fn a_hanging_backend_is_unavailable_within_the_timeout() {
    let fake = FakeInference::start(vec![FakeReply::Hang]).await;
    let policy = policy();
    let request = PlanRequest {
        policy: &policy,
        capabilities: &[],
        history: &[],
        said: &Said::new("hola"),
        image: None,
        previous_capability: None,
    };
    let started = Instant::now();
    let outcome = planner(&fake, Duration::from_millis(300))
        .plan(&request)
        .await;
    let elapsed = started.elapsed();
    assert!(matches!(outcome, Err(PlannerError::Unavailable(_))));
    // Two calls of 300 ms and one pause of 200 ms, with some slack.
    assert!(elapsed >= Duration::from_millis(800), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_unavailable() {
    // Bind then drop a listener: nothing listens on that port any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let planner = OpenAiPlanner::new(OpenAiConfig {
        url: format!("http://127.0.0.1:{port}/v1"),
        model: "fake-model".into(),
        api_key: None,
        timeout: Duration::from_secs(2),
    });
    let policy = policy();
    let request = PlanRequest {
        policy: &policy,
        capabilities: &[],
        history: &[],
        said: &Said::new("hola"),
        image: None,
        previous_capability: None,
    };
    assert!(matches!(
        planner.plan(&request).await,
        Err(PlannerError::Unavailable(_))
    ));
}

#[tokio::test]
async fn garbage_is_unavailable_without_retry() {
    let (fake, outcome) = plan_with(vec![FakeReply::Garbage]).await;
    assert_unavailable_after(&outcome, &fake, 1);
}

#[tokio::test]
async fn json_that_is_not_a_completion_is_unavailable() {
    let (fake, outcome) = plan_with(vec![FakeReply::Json(json!({ "choices": [] }))]).await;
    assert_unavailable_after(&outcome, &fake, 1);
}

#[tokio::test]
async fn the_request_offers_strict_tools_and_the_policy() {
    let (fake, _) = plan_with(vec![FakeReply::text("ok")]).await;
    let recorded = fake.recorded();
    assert_eq!(recorded.len(), 1);
    let authorization = recorded[0].headers.get("authorization").unwrap();
    assert_eq!(authorization, "Bearer sk-test-key");

    let body = &recorded[0].body;
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["parallel_tool_calls"], false);

    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains(INSTRUCTIONS), "{system}");
    assert!(
        system.contains("orders: order status and delivery"),
        "{system}"
    );
    assert!(system.contains(OUT_OF_SCOPE), "{system}");
    assert_eq!(
        messages[1],
        json!({ "role": "user", "content": "¿Dónde está mi pedido A-123?" })
    );

    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    let function = &tools[0]["function"];
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(function["name"], "order_status");
    assert_eq!(function["strict"], true);
    assert_eq!(
        function["description"],
        "Looks up the status of an order. Use when: the user asks where an order is"
    );
    let parameters = &function["parameters"];
    assert_eq!(parameters["additionalProperties"], false);
    // Every property is listed (serde_json orders keys by name).
    assert_eq!(
        parameters["required"],
        json!(["channel", "email", "order_number"])
    );
    let properties = &parameters["properties"];
    assert_eq!(
        properties["order_number"],
        json!({ "type": "string", "maxLength": 20 })
    );
    assert_eq!(
        properties["email"],
        json!({ "type": ["string", "null"], "maxLength": 120 })
    );
    assert_eq!(
        properties["channel"],
        json!({ "enum": ["web", "store", null] })
    );
}

#[tokio::test]
async fn no_tools_are_offered_when_there_are_no_capabilities() {
    let fake = FakeInference::start(vec![FakeReply::text("Hola")]).await;
    let policy = EffectivePolicy {
        instructions: INSTRUCTIONS.into(),
        topics: vec![],
        out_of_scope_response: OUT_OF_SCOPE.into(),
    };
    let request = PlanRequest {
        policy: &policy,
        capabilities: &[],
        history: &[],
        said: &Said::new("hola"),
        image: None,
        previous_capability: None,
    };
    let planner = OpenAiPlanner::new(OpenAiConfig {
        url: fake.base_url(),
        model: "fake-model".into(),
        api_key: None,
        timeout: Duration::from_secs(5),
    });
    planner.plan(&request).await.unwrap();
    let recorded = fake.recorded();
    assert!(recorded[0].headers.get("authorization").is_none());
    let body = &recorded[0].body;
    assert!(body.get("tools").is_none());
    assert!(body.get("tool_choice").is_none());
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        !system.contains(OUT_OF_SCOPE),
        "no topics, no out-of-scope rule"
    );
}

#[tokio::test]
async fn history_is_bounded_to_the_last_twelve_entries() {
    let fake = FakeInference::start(vec![FakeReply::text("ok")]).await;
    let history: Vec<HistoryEntry> = (0..20)
        .map(|i| HistoryEntry {
            role: if i % 2 == 0 {
                MessageRole::User
            } else {
                MessageRole::Assistant
            },
            text: format!("turn {i}"),
        })
        .collect();
    let policy = policy();
    let request = PlanRequest {
        policy: &policy,
        capabilities: &[],
        history: &history,
        said: &Said::new("and now?"),
        image: None,
        previous_capability: None,
    };
    planner(&fake, Duration::from_secs(5))
        .plan(&request)
        .await
        .unwrap();
    let body = &fake.requests()[0];
    let messages = body["messages"].as_array().unwrap();
    // system + 12 history entries + the message
    assert_eq!(messages.len(), 14);
    assert_eq!(messages[1], json!({ "role": "user", "content": "turn 8" }));
    assert_eq!(
        messages[2],
        json!({ "role": "assistant", "content": "turn 9" })
    );
    assert_eq!(
        messages[12],
        json!({ "role": "assistant", "content": "turn 19" })
    );
    assert_eq!(
        messages[13],
        json!({ "role": "user", "content": "and now?" })
    );
}

#[tokio::test]
async fn an_image_is_sent_inline_as_a_data_url() {
    let fake = FakeInference::start(vec![FakeReply::text("ok")]).await;
    let png = b"\x89PNG\r\n\x1a\nfake-image-bytes".to_vec();
    let image = InboundImage {
        format: ImageFormat::Png,
        bytes: png.into(),
    };
    let policy = policy();
    let request = PlanRequest {
        policy: &policy,
        capabilities: &[],
        history: &[],
        said: &Said::new("¿Qué pedido es este?"),
        image: Some(&image),
        previous_capability: None,
    };
    planner(&fake, Duration::from_secs(5))
        .plan(&request)
        .await
        .unwrap();
    let body = &fake.requests()[0];
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(user["role"], "user");
    let parts = user["content"].as_array().unwrap();
    assert_eq!(
        parts[0],
        json!({ "type": "text", "text": "¿Qué pedido es este?" })
    );
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        parts[1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgpmYWtlLWltYWdlLWJ5dGVz"
    );
}

#[tokio::test]
async fn reply_sends_the_result_without_tools() {
    let fake =
        FakeInference::start(vec![FakeReply::text(" Tu pedido A-123 está en camino. ")]).await;
    let policy = policy();
    let offer = order_status();
    let result = json!({ "status": "in_transit", "eta": "2024-05-02" });
    let request = ReplyRequest {
        policy: &policy,
        message: "¿Dónde está mi pedido A-123?",
        capability: &offer,
        result: &result,
    };
    let reply = planner(&fake, Duration::from_secs(5))
        .reply(&request)
        .await
        .unwrap();
    assert_eq!(reply, "Tu pedido A-123 está en camino.");

    let recorded = fake.recorded();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0].headers.get("authorization").unwrap(),
        "Bearer sk-test-key"
    );
    let body = &recorded[0].body;
    assert!(body.get("tools").is_none());
    assert!(body.get("tool_choice").is_none());
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains(INSTRUCTIONS), "{system}");
    assert!(system.contains("ONLY the data below"), "{system}");
    let data = messages[1]["content"].as_str().unwrap();
    assert!(data.contains("order_status"), "{data}");
    assert!(data.contains(&result.to_string()), "{data}");
    assert_eq!(
        messages.last().unwrap(),
        &json!({ "role": "user", "content": "¿Dónde está mi pedido A-123?" })
    );
}

#[tokio::test]
async fn reply_retries_once_then_is_unavailable() {
    let fake = FakeInference::start(vec![FakeReply::Status(503)]).await;
    let policy = policy();
    let offer = order_status();
    let result = json!({ "status": "in_transit" });
    let request = ReplyRequest {
        policy: &policy,
        message: "¿Dónde está mi pedido?",
        capability: &offer,
        result: &result,
    };
    let planner = planner(&fake, Duration::from_secs(5));
    assert!(matches!(
        planner.reply(&request).await,
        Err(PlannerError::Unavailable(_))
    ));
    assert_eq!(fake.requests().len(), 2);

    // An empty reply is no reply.
    fake.set_script(vec![FakeReply::text("   ")]);
    assert!(matches!(
        planner.reply(&request).await,
        Err(PlannerError::Unavailable(_))
    ));
    assert_eq!(fake.requests().len(), 3);
}
