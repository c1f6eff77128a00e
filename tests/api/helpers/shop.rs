//! A small shop for conversation tests: one loopback host endpoint serving
//! three capabilities (order status, a customer's orders, and a preparation
//! capability for an address change), an account with its credential,
//! helpers to send messages (with or without an image) and read the replies,
//! and an image whose bytes show if it is ever stored.

use crate::helpers::endpoint::*;
use crate::helpers::fixtures::*;
use crate::helpers::*;
use axum::http::StatusCode;
use serde_json::{Value, json};

pub const OPERATION_REF: &str = "opref_SECRET_7f3a9c";
pub const SELECTION_REF: &str = "selref_SECRET_51be";
pub const OPTION_REF: &str = "optref_SECRET_c0de";
/// A field the endpoint returns but no output schema declares.
pub const INTERNAL_FIELD_VALUE: &str = "margin-0.31-internal";

pub struct Shop {
    pub app: TestApp,
    pub key: String,
    pub endpoint: FakeEndpoint,
    /// Capability ids by name.
    pub ids: std::collections::HashMap<String, String>,
}

/// What the shop's endpoint answers, by path and arguments.
fn answer(path: &str, arguments: &Value) -> (StatusCode, Value) {
    let order = arguments["order"].as_str().unwrap_or("");
    match path {
        "/orders/status" => match order {
            "A-1001" => (
                StatusCode::OK,
                json!({"status": "enviado", "carrier": "Correos", "customer_name": "Ana Pérez",
                       "internal_margin": INTERNAL_FIELD_VALUE}),
            ),
            "A-2002" => (
                StatusCode::OK,
                json!({"status": "preparando", "carrier": "SEUR", "customer_name": "C-77812"}),
            ),
            "A-5000" => (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "boom"})),
            _ => (StatusCode::OK, json!({})),
        },
        "/customers/orders" => match arguments["customer"].as_str() {
            Some("Ana Pérez") => (
                StatusCode::OK,
                json!({"orders": [{"order": "A-1001", "status": "enviado"}]}),
            ),
            Some("Luis Gómez") => (
                StatusCode::OK,
                json!({"orders": [{"order": "B-3003", "status": "entregado"}]}),
            ),
            _ => (StatusCode::OK, json!({"orders": []})),
        },
        "/orders/prepare-address-change" => match order {
            "A-1001" => (
                StatusCode::OK,
                json!({"type": "confirm_operation", "operation": "change_address",
                       "operation_ref": OPERATION_REF, "expires_at": "2099-01-01T00:00:00Z",
                       "preview": {"title": "Cambiar la dirección del pedido A-1001",
                                   "fields": [{"label": "Nueva dirección", "value": "Calle Mayor 1"}]}}),
            ),
            "A-2002" => (
                StatusCode::OK,
                json!({"type": "selection", "operation": "change_address", "selection_ref": SELECTION_REF,
                       "expires_at": "2099-01-01T00:00:00Z", "title": "¿Qué dirección?",
                       "options": [{"option_ref": OPTION_REF, "label": "Casa"},
                                   {"option_ref": "optref_SECRET_2", "label": "Oficina"}]}),
            ),
            "A-3003" => (
                StatusCode::OK,
                json!({"type": "confirm_operation", "operation": "change_address",
                       "operation_ref": OPERATION_REF, "expires_at": "2000-01-01T00:00:00Z",
                       "preview": {"title": "Caducada", "fields": []}}),
            ),
            _ => (StatusCode::OK, json!({"type": "not_found"})),
        },
        "/orders/prepare-return" | "/orders/prepare-refund" => {
            let operation = if path.ends_with("return") {
                "return_items"
            } else {
                "refund_order"
            };
            (
                StatusCode::OK,
                json!({"type": "confirm_operation", "operation": operation,
                       "operation_ref": OPERATION_REF, "expires_at": "2099-01-01T00:00:00Z",
                       "preview": {"title": format!("{operation} {order}"), "fields": []}}),
            )
        }
        _ => (StatusCode::NOT_FOUND, json!({})),
    }
}

fn string(max: u64) -> Value {
    json!({"type": "string", "maxLength": max})
}

fn order_input() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["order"],
        "properties": {"order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]{4}$",
                                 "description": "el número de pedido (por ejemplo A-1234)"}}})
}

pub fn order_status(base: &str) -> Value {
    let mut d = valid_definition("order_status");
    d["description"] = json!("Consulta el estado de un pedido y su transportista");
    d["when_to_use"] =
        json!("Cuando el usuario pregunta dónde está su pedido, su envío o su estado");
    d["url"] = json!(format!("{base}/orders/status"));
    d["input_schema"] = order_input();
    d["output_schema"] = json!({"type": "object", "additionalProperties": false, "properties": {
        "status": string(40), "carrier": string(40), "customer_name": string(80)}});
    d["retry_count"] = json!(0);
    d
}

pub fn customer_orders(base: &str) -> Value {
    let mut d = valid_definition("customer_orders");
    d["description"] = json!("Lista los pedidos de un cliente por su nombre");
    d["when_to_use"] = json!("Cuando preguntan por los pedidos de un cliente");
    d["url"] = json!(format!("{base}/customers/orders"));
    d["input_schema"] = json!({"type": "object", "additionalProperties": false, "required": ["customer"],
        "properties": {"customer": {"type": "string", "maxLength": 60, "description": "el nombre del cliente"}}});
    d["output_schema"] = json!({"type": "object", "additionalProperties": false, "properties": {
        "orders": {"type": "array", "maxItems": 20, "items": {"type": "object", "additionalProperties": false,
            "properties": {"order": string(20), "status": string(40)}}}}});
    d["context_bindings"] =
        json!({"customer": {"from_capability": "order_status", "field": "customer_name"}});
    d
}

pub fn prepare_address_change(base: &str) -> Value {
    preparation(
        base,
        "prepare_address_change",
        "Prepara el cambio de dirección de envío de un pedido",
        "Cuando el usuario quiere cambiar la dirección de un pedido",
        "/orders/prepare-address-change",
    )
}

/// A preparation capability of an order, called on `path` of the shop's endpoint.
pub fn preparation(base: &str, name: &str, description: &str, when: &str, path: &str) -> Value {
    let mut d = valid_definition(name);
    d["description"] = json!(description);
    d["when_to_use"] = json!(when);
    d["url"] = json!(format!("{base}{path}"));
    d["input_schema"] = order_input();
    d["result_handling"] = json!("host_interaction");
    d["output_schema"] = json!({"type": "object", "additionalProperties": false, "properties": {
        "type": {"type": "string", "maxLength": 32, "enum": ["confirm_operation", "selection", "not_found"]},
        "operation": string(64), "operation_ref": string(256), "selection_ref": string(256),
        "expires_at": string(40), "title": string(200),
        "preview": {"type": "object", "additionalProperties": false, "properties": {
            "title": string(200),
            "fields": {"type": "array", "maxItems": 20, "items": {"type": "object", "additionalProperties": false,
                "properties": {"label": string(100), "value": string(500)}}}}},
        "options": {"type": "array", "maxItems": 20, "items": {"type": "object", "additionalProperties": false,
            "properties": {"option_ref": string(256), "label": string(200), "description": string(500)}}}
    }});
    d
}

/// The shop's host endpoint on loopback, answering as [`answer`] says.
pub async fn shop_endpoint() -> FakeEndpoint {
    FakeEndpoint::start(|request: Received| async move {
        let arguments: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let (status, body) = answer(request.uri.path(), &arguments);
        json_response(status, &body)
    })
    .await
}

/// The shop's three capabilities against the endpoint at `base`, in the
/// order `Shop::ids` names them.
pub fn shop_definitions(base: &str) -> Vec<Value> {
    vec![
        order_status(base),
        customer_orders(base),
        prepare_address_change(base),
    ]
}

impl Shop {
    pub async fn open(backend: Backend) -> Shop {
        Self::open_with(TestApp::spawn(backend).await).await
    }

    pub async fn open_with(app: TestApp) -> Shop {
        let key = account_ready(&app, "shop").await;
        let endpoint = shop_endpoint().await;
        let definitions = shop_definitions(&endpoint.base);
        let (status, body) =
            status_and_json(app.import_capabilities(&key, &new_key(), definitions).await).await;
        assert_eq!(status, 201, "{body}");
        let ids = ["order_status", "customer_orders", "prepare_address_change"]
            .iter()
            .zip(body["capabilities"].as_array().unwrap())
            .map(|(n, r)| ((*n).to_owned(), r["id"].as_str().unwrap().to_owned()))
            .collect();
        Shop {
            app,
            key,
            endpoint,
            ids,
        }
    }

    /// Sends one text message; `conversation` continues an earlier one.
    pub async fn say(&self, conversation: Option<&str>, text: &str) -> (u16, Value) {
        let mut body = json!({"user_id": "user-42", "message": {"type": "text", "body": text}});
        if let Some(c) = conversation {
            body["conversation_id"] = json!(c);
        }
        self.send(body).await
    }

    pub async fn send(&self, body: Value) -> (u16, Value) {
        self.app.send_message(&self.key, &body).await
    }

    /// A text message with an image, as multipart: a `payload` part and an
    /// `image` part of this type.
    pub async fn send_with_image(&self, text: &str, mime: &str, image: Vec<u8>) -> (u16, Value) {
        let payload = json!({"message": {"type": "text", "body": text}});
        let form = message_with_image(&payload, image, mime);
        self.app.send_multipart(&self.key, form).await
    }

    /// The rule-4 references the store keeps for one of the shop's conversations.
    pub async fn references(
        &self,
        conversation: &str,
    ) -> Vec<warden::store::conversations::StoredReference> {
        let store = &self.app.store;
        let account = store.find_account("shop").await.unwrap().unwrap();
        let row = store
            .find_conversation(&account, conversation)
            .await
            .unwrap()
            .unwrap();
        store.conversation_references(&row).await.unwrap()
    }

    /// Moves an issued interaction's expiry into the past, as time would.
    pub async fn expire_interaction(&self, interaction: &str) {
        let sql = format!("UPDATE interactions SET expires_at = 0 WHERE id = '{interaction}'");
        match &self.app.store {
            warden::store::Store::Sqlite(p) => sqlx::query(&sql).execute(p).await.map(|_| ()),
            warden::store::Store::Postgres(p) => {
                sqlx::query(&sql).execute(p.pool()).await.map(|_| ())
            }
        }
        .unwrap();
    }

    /// Paths the endpoint was called on, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.endpoint
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.uri.path().to_owned(),
                    serde_json::from_slice(&r.body).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    pub async fn report(
        &self,
        conversation: &str,
        idempotency_key: &str,
        body: Value,
    ) -> (u16, Value) {
        let response = self
            .app
            .client
            .post(self.app.url(&format!(
                "/v1/conversations/{conversation}/operation-results"
            )))
            .bearer_auth(&self.key)
            .header("idempotency-key", idempotency_key)
            .json(&body)
            .send()
            .await
            .unwrap();
        status_and_json(response).await
    }
}

/// Bytes that would show if any part of the image were stored.
pub const IMAGE_MARKER: &[u8] = b"WARDEN-IMAGE-MARKER-9b1e";

/// A PNG signature followed by a marker chunk: recognised as PNG by its bytes.
pub fn png_with_marker() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde".to_vec();
    bytes.extend_from_slice(IMAGE_MARKER);
    bytes.extend(std::iter::repeat_n(0xA5u8, 2048));
    bytes
}

/// The reply text of a message response.
pub fn reply(body: &Value) -> &str {
    body["message"]["body"]
        .as_str()
        .unwrap_or_else(|| panic!("no reply in {body}"))
}

pub fn conversation(body: &Value) -> String {
    body["conversation_id"].as_str().unwrap().to_owned()
}

/// `(stage, status, capability, reason_code)` of each trace event.
pub fn trace(body: &Value) -> Vec<(String, Option<String>, String)> {
    body["capability_trace"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["stage"].as_str().unwrap().to_owned(),
                e["capability"].as_str().map(str::to_owned),
                e["reason_code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A message request as multipart: the `payload` part (JSON) and one
/// `image` part of type `mime`.
pub fn message_with_image(payload: &Value, image: Vec<u8>, mime: &str) -> reqwest::multipart::Form {
    reqwest::multipart::Form::new()
        .part(
            "payload",
            reqwest::multipart::Part::text(payload.to_string())
                .mime_str("application/json")
                .unwrap(),
        )
        .part(
            "image",
            reqwest::multipart::Part::bytes(image)
                .file_name("photo")
                .mime_str(mime)
                .unwrap(),
        )
}
