//! JSON-RPC 2.0 as MCP's Streamable HTTP transport carries it: one message
//! per POST (a batch is refused), ids that are strings or integers (never
//! null), `params` an object. Anything else is answered with the standard
//! codes; nothing here can fail in any other way (`fuzz/`'s `mcp_jsonrpc`).

use serde::Serialize;
use serde_json::{Map, Value};

/// Every JSON-RPC error code this server answers: JSON-RPC's own, MCP's
/// (2026-07-28 `basic/index` "Error Codes"), and one of Warden's, outside
/// the range JSON-RPC reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    /// MCP: the HTTP headers do not match the body, or one is missing.
    HeaderMismatch,
    /// MCP: the requested protocol revision is not served here.
    UnsupportedProtocolVersion,
    /// Warden: the account has as many tool calls in progress as it may;
    /// retry after the time given (`Retry-After`, `data.retryAfterMs`).
    Busy,
}

impl RpcCode {
    pub fn number(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::InternalError => -32603,
            RpcCode::HeaderMismatch => -32020,
            RpcCode::UnsupportedProtocolVersion => -32022,
            // Application-defined codes belong outside -32768..-32000.
            RpcCode::Busy => -31000,
        }
    }
}

/// A request id: a string or an integer (MCP forbids null).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Id {
    Number(i64),
    Text(String),
}

/// One message the client sent: a request (with an id) or a notification.
#[derive(Debug)]
pub struct Incoming {
    pub id: Option<Id>,
    pub method: String,
    pub params: Map<String, Value>,
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: RpcCode, message: impl Into<String>) -> Self {
        RpcError {
            code: code.number(),
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn is(&self, code: RpcCode) -> bool {
        self.code == code.number()
    }
}

/// A body that is no acceptable message, with the id when one could be read.
#[derive(Debug)]
pub struct Refusal {
    pub id: Option<Id>,
    pub error: RpcError,
}

/// A response: `result` or `error`, never both. The id is omitted when the
/// request's could not be read (MCP 2025-11-25 and later allow it).
#[derive(Serialize)]
pub struct Response<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

impl<'a> Response<'a> {
    pub fn result(id: &'a Id, result: Value) -> Self {
        Response {
            jsonrpc: "2.0",
            id: Some(id),
            result: Some(result),
            error: None,
        }
    }

    pub fn error(id: Option<&'a Id>, error: &'a RpcError) -> Self {
        Response {
            jsonrpc: "2.0",
            id,
            result: None,
            error: Some(error),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // Strings, numbers and JSON values only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// Reads one message from a POST body.
pub fn parse(body: &[u8]) -> Result<Incoming, Refusal> {
    let refuse = |id: Option<Id>, code: RpcCode, message: &str| Refusal {
        id,
        error: RpcError::new(code, message),
    };
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        refuse(
            None,
            RpcCode::ParseError,
            &format!("the body is not JSON: {e}"),
        )
    })?;
    // Escaped (`\u0000`) it is valid JSON, yet no text Warden handles may hold it.
    if warden_channel::bounds::refuse_nul(&value).is_err() {
        return Err(refuse(
            None,
            RpcCode::ParseError,
            "the body holds U+0000, which is refused",
        ));
    }
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(refuse(
                None,
                RpcCode::InvalidRequest,
                "batches are not accepted: send one JSON-RPC message per request",
            ));
        }
        _ => {
            return Err(refuse(
                None,
                RpcCode::InvalidRequest,
                "the body must be one JSON-RPC message (an object)",
            ));
        }
    };
    let id = match object.get("id") {
        None => None,
        Some(Value::String(text)) => Some(Id::Text(text.clone())),
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().map(Id::Number),
        Some(_) => {
            return Err(refuse(
                None,
                RpcCode::InvalidRequest,
                "id must be a string or an integer",
            ));
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refuse(
            id,
            RpcCode::InvalidRequest,
            "jsonrpc must be \"2.0\"",
        ));
    }
    let method = match object.get("method") {
        Some(Value::String(method)) => method.clone(),
        None if object.contains_key("result") || object.contains_key("error") => {
            return Err(refuse(
                id,
                RpcCode::InvalidRequest,
                "this server sends no requests, so it takes no responses",
            ));
        }
        _ => {
            return Err(refuse(
                id,
                RpcCode::InvalidRequest,
                "method must be a string",
            ));
        }
    };
    let params = match object.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params.clone(),
        Some(_) => {
            return Err(refuse(
                id,
                RpcCode::InvalidRequest,
                "params must be an object",
            ));
        }
    };
    Ok(Incoming { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(body: &str) -> i64 {
        parse(body.as_bytes()).unwrap_err().error.code
    }

    #[test]
    fn reads_requests_and_notifications() {
        let request =
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#).unwrap();
        assert_eq!(request.id, Some(Id::Number(7)));
        assert_eq!(request.method, "tools/list");
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(note.id.is_none());
        assert!(note.params.is_empty());
        let text = parse(br#"{"jsonrpc":"2.0","id":"a","method":"x"}"#).unwrap();
        assert_eq!(text.id, Some(Id::Text("a".into())));
    }

    #[test]
    fn refuses_what_is_not_one_message_with_the_standard_codes() {
        assert_eq!(code("{"), -32700);
        assert_eq!(code(""), -32700);
        assert_eq!(code(r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#), -32600);
        assert_eq!(code("3"), -32600);
        assert_eq!(code(r#"{"id":1,"method":"x"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":3}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), -32600);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            -32600
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\u0000"}}"#),
            -32700
        );
    }

    /// What `fuzz/`'s `mcp_jsonrpc` checks, over its seeds cut and flipped.
    #[test]
    fn every_cut_or_flipped_seed_is_a_message_or_a_standard_refusal() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/mcp_jsonrpc");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let seed = std::fs::read(entry.unwrap().path()).unwrap();
            for cut in 0..=seed.len() {
                for flip in [None, Some(cut)] {
                    let mut bytes = seed[..cut].to_vec();
                    if let Some(at) = flip.filter(|at| *at < bytes.len()) {
                        bytes[at] ^= 0x20;
                    }
                    seen += 1;
                    match parse(&bytes) {
                        Ok(message) => {
                            if let Some(id) = &message.id {
                                let out = Response::result(id, Value::Null).to_bytes();
                                let value: Value = serde_json::from_slice(&out).unwrap();
                                assert_eq!(value["id"], serde_json::to_value(id).unwrap());
                            }
                        }
                        Err(refusal) => assert!([-32700, -32600].contains(&refusal.error.code)),
                    }
                }
            }
        }
        assert!(seen > 1000, "the seeds are there ({seen} inputs)");
    }

    #[test]
    fn a_refusal_keeps_the_id_it_could_read() {
        let refusal = parse(br#"{"jsonrpc":"1.0","id":"r1","method":"x"}"#).unwrap_err();
        assert_eq!(refusal.id, Some(Id::Text("r1".into())));
        let body = Response::error(refusal.id.as_ref(), &refusal.error).to_bytes();
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["id"], json!("r1"));
        assert_eq!(value["error"]["code"], json!(-32600));
        assert!(value.get("result").is_none());
    }
}
