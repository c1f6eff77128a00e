//! Typed requests to a Warden server, in-process (`TestApp`) or the real
//! binary (`ServerProcess`), each with one account's API key as the bearer:
//! every route's path, headers and body shape written once.

use super::fixtures::new_key;
use super::status_and_json;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};
use std::future::{Future, IntoFuture};
use std::pin::Pin;

/// One account's requests to one server.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    address: String,
    key: String,
}

/// A request ready to go. Awaited, it is sent and answers its status and
/// JSON body; `response` keeps the headers and raw body; `request` hands
/// it over to a test that sends it itself (one whose server may be killed
/// mid-request, or that records the bytes it got).
pub struct Call(RequestBuilder);

impl Call {
    pub fn request(self) -> RequestBuilder {
        self.0
    }

    pub async fn response(self) -> reqwest::Response {
        self.0.send().await.unwrap()
    }
}

impl IntoFuture for Call {
    type Output = (u16, Value);
    type IntoFuture = Pin<Box<dyn Future<Output = (u16, Value)> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { status_and_json(self.response().await).await })
    }
}

impl ApiClient {
    /// `address` is the server's base URL (`http://127.0.0.1:PORT`).
    pub fn new(http: reqwest::Client, address: &str, key: &str) -> Self {
        ApiClient {
            http,
            address: address.to_owned(),
            key: key.to_owned(),
        }
    }

    fn call(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{path}", self.address);
        self.http.request(method, url).bearer_auth(&self.key)
    }

    /// Any GET with the key as the bearer, for a route without a typed request.
    pub fn get(&self, path: &str) -> Call {
        Call(self.call(Method::GET, path))
    }

    pub fn get_policy(&self) -> Call {
        Call(self.call(Method::GET, "/v1/agent-policy"))
    }

    pub fn put_policy(&self, policy: &Value) -> Call {
        Call(self.call(Method::PUT, "/v1/agent-policy").json(policy))
    }

    pub fn delete_policy(&self) -> Call {
        Call(self.call(Method::DELETE, "/v1/agent-policy"))
    }

    pub fn get_settings(&self) -> Call {
        Call(self.call(Method::GET, "/v1/diagnostics/settings"))
    }

    pub fn put_settings(&self, settings: &Value) -> Call {
        Call(
            self.call(Method::PUT, "/v1/diagnostics/settings")
                .json(settings),
        )
    }

    /// The capability-gap report; `query` is empty or starts with `?`.
    pub fn get_capability_gaps(&self, query: &str) -> Call {
        let path = format!("/v1/diagnostics/capability-gaps{query}");
        Call(self.call(Method::GET, &path))
    }

    pub fn put_credential(&self, reference: &str, body: &Value) -> Call {
        let path = format!("/v1/capability-credentials/{reference}");
        Call(self.call(Method::PUT, &path).json(body))
    }

    pub fn delete_credential(&self, reference: &str) -> Call {
        let path = format!("/v1/capability-credentials/{reference}");
        Call(self.call(Method::DELETE, &path))
    }

    pub fn list_capabilities(&self) -> Call {
        Call(self.call(Method::GET, "/v1/capabilities"))
    }

    pub fn get_capability(&self, id: &str) -> Call {
        Call(self.call(Method::GET, &format!("/v1/capabilities/{id}")))
    }

    /// Publishes one capability in the `orders` domain, under a fresh
    /// idempotency key.
    pub fn create_capability(&self, definition: Value) -> Call {
        let body = json!({"domain": "orders", "capability": definition});
        let request = self.call(Method::POST, "/v1/capabilities");
        Call(request.header("idempotency-key", new_key()).json(&body))
    }

    /// Imports a manifest of capabilities in the `orders` domain.
    pub fn import_capabilities(&self, idempotency_key: &str, definitions: Vec<Value>) -> Call {
        let body = json!({"domain": "orders", "capabilities": definitions});
        let request = self.call(Method::POST, "/v1/capabilities/import");
        Call(
            request
                .header("idempotency-key", idempotency_key)
                .json(&body),
        )
    }

    /// A new revision of a capability of the `orders` domain.
    pub fn revise_capability(&self, id: &str, if_match: &str, definition: Value) -> Call {
        let body = json!({"domain": "orders", "capability": definition});
        let request = self.call(Method::PATCH, &format!("/v1/capabilities/{id}"));
        Call(request.header("if-match", if_match).json(&body))
    }

    pub fn enable_capability(&self, id: &str, if_match: &str) -> Call {
        let path = format!("/v1/capabilities/{id}/enable");
        Call(self.call(Method::POST, &path).header("if-match", if_match))
    }

    pub fn disable_capability(&self, id: &str, if_match: &str) -> Call {
        let path = format!("/v1/capabilities/{id}/disable");
        Call(self.call(Method::POST, &path).header("if-match", if_match))
    }

    /// A contract test of a capability with these arguments.
    pub fn test_capability(&self, id: &str, arguments: Value) -> Call {
        let path = format!("/v1/capabilities/{id}/test");
        let body = json!({"arguments": arguments});
        Call(self.call(Method::POST, &path).json(&body))
    }

    /// A message on the HTTP channel, as JSON.
    pub fn send_message(&self, body: &Value) -> Call {
        Call(
            self.call(Method::POST, "/v1/channels/http/messages")
                .json(body),
        )
    }

    /// A message on the HTTP channel, as multipart (`payload`, `image`).
    pub fn send_multipart(&self, form: reqwest::multipart::Form) -> Call {
        let request = self.call(Method::POST, "/v1/channels/http/messages");
        Call(request.multipart(form))
    }

    /// The host's report of what became of an interaction's operation.
    pub fn report_operation_result(
        &self,
        conversation: &str,
        idempotency_key: &str,
        result: &Value,
    ) -> Call {
        let path = format!("/v1/conversations/{conversation}/operation-results");
        let request = self.call(Method::POST, &path);
        Call(
            request
                .header("idempotency-key", idempotency_key)
                .json(result),
        )
    }
}
