//! Which MCP revision a request speaks, and whether its transport headers
//! agree with its body.
//!
//! - 2026-07-28 ("modern"): no handshake; every request carries
//!   `_meta["io.modelcontextprotocol/protocolVersion"]` (and
//!   `clientCapabilities`), the `MCP-Protocol-Version` header equal to it,
//!   `Mcp-Method` equal to `method`, and for `tools/call` `Mcp-Name` equal
//!   to `params.name` (plain or `=?base64?…?=`). A mismatch or a missing
//!   header is 400 `HeaderMismatch` (-32020); an unserved version 400
//!   `UnsupportedProtocolVersion` (-32022) naming the served ones.
//! - 2025-11-25 and 2025-06-18 ("legacy"): `initialize` names the version
//!   (answered with it, or with the newest legacy one we serve); every later
//!   request carries `MCP-Protocol-Version`. No session is minted: any
//!   replica answers any request. A missing header means 2025-03-26, which
//!   is not served (400).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::jsonrpc::{Incoming, RpcCode, RpcError};
use crate::domain::closed_set::closed_set;

closed_set! {
    /// The protocol revisions served, newest first.
    pub enum Revision {
        V2026_07_28 = "2026-07-28",
        V2025_11_25 = "2025-11-25",
        V2025_06_18 = "2025-06-18",
    }
}

impl Revision {
    /// Per-request metadata, no handshake.
    pub fn is_modern(self) -> bool {
        self == Revision::V2026_07_28
    }

    /// The newest revision reached through `initialize`.
    pub const NEWEST_LEGACY: Revision = Revision::V2025_11_25;

    fn supported() -> Vec<&'static str> {
        Revision::ALL.iter().map(|r| r.as_str()).collect()
    }
}

/// The reserved `_meta` keys of 2026-07-28 requests.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A transport header as the request carried it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Header {
    Absent,
    Text(String),
    /// Present but not visible ASCII.
    Unreadable,
}

/// The request headers MCP's Streamable HTTP transport defines.
#[derive(Clone, Debug)]
pub struct Headers {
    pub protocol_version: Header,
    pub method: Header,
    pub name: Header,
}

/// A refusal and how the transport reports it (every one here is 400).
pub type Refused = RpcError;

/// The revision `incoming` speaks, or why it is refused.
pub fn negotiate(incoming: &Incoming, headers: &Headers) -> Result<Revision, Refused> {
    let meta_version = incoming
        .params
        .get("_meta")
        .and_then(Value::as_object)
        .and_then(|meta| meta.get(META_PROTOCOL_VERSION));
    match meta_version {
        Some(version) => modern(incoming, headers, version),
        None if incoming.method == "initialize" => Ok(handshake(&incoming.params)),
        None => legacy(headers),
    }
}

/// `initialize`: the client's version when it is one we serve, else the
/// newest we serve (the client then decides; 2025-06-18 lifecycle).
fn handshake(params: &Map<String, Value>) -> Revision {
    params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .and_then(Revision::parse)
        .filter(|r| !r.is_modern())
        .unwrap_or(Revision::NEWEST_LEGACY)
}

fn legacy(headers: &Headers) -> Result<Revision, Refused> {
    let requested = match &headers.protocol_version {
        // The 2025-06-18 transport: no header means 2025-03-26.
        Header::Absent => "2025-03-26".to_owned(),
        Header::Unreadable => return Err(mismatch("MCP-Protocol-Version is not readable")),
        Header::Text(text) => text.clone(),
    };
    match Revision::parse(&requested) {
        Some(revision) if !revision.is_modern() => Ok(revision),
        Some(_) => Err(RpcError::new(
            RpcCode::InvalidParams,
            format!("a {requested} request must carry _meta[\"{META_PROTOCOL_VERSION}\"]"),
        )),
        None => Err(unsupported(&requested)),
    }
}

fn modern(incoming: &Incoming, headers: &Headers, version: &Value) -> Result<Revision, Refused> {
    let Some(version) = version.as_str() else {
        return Err(RpcError::new(
            RpcCode::InvalidParams,
            format!("_meta[\"{META_PROTOCOL_VERSION}\"] must be a string"),
        ));
    };
    match &headers.protocol_version {
        Header::Text(text) if text == version => {}
        Header::Text(text) => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version {text:?} does not match the body's {version:?}"
            )));
        }
        Header::Absent => return Err(mismatch("the MCP-Protocol-Version header is required")),
        Header::Unreadable => return Err(mismatch("MCP-Protocol-Version is not readable")),
    }
    let revision = Revision::parse(version)
        .filter(|r| r.is_modern())
        .ok_or_else(|| unsupported(version))?;
    let meta = incoming.params.get("_meta").and_then(Value::as_object);
    if !meta
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::new(
            RpcCode::InvalidParams,
            format!("_meta[\"{META_CLIENT_CAPABILITIES}\"] is required and must be an object"),
        ));
    }
    match &headers.method {
        Header::Text(method) if *method == incoming.method => {}
        Header::Absent => return Err(mismatch("the Mcp-Method header is required")),
        _ => return Err(mismatch("Mcp-Method does not match the body's method")),
    }
    if matches!(
        incoming.method.as_str(),
        "tools/call" | "resources/read" | "prompts/get"
    ) {
        let body_name = incoming
            .params
            .get(if incoming.method == "resources/read" {
                "uri"
            } else {
                "name"
            })
            .and_then(Value::as_str);
        match (&headers.name, body_name) {
            (Header::Absent, _) => return Err(mismatch("the Mcp-Name header is required")),
            (Header::Text(text), Some(name)) if decode_name(text).as_deref() == Some(name) => {}
            // A missing name is the method's own invalid params.
            (Header::Text(_), None) => {}
            _ => return Err(mismatch("Mcp-Name does not match the body's name")),
        }
    }
    Ok(revision)
}

/// A header value as sent: plain, or `=?base64?…?=` (the transport's
/// encoding for values that are not plain ASCII).
fn decode_name(text: &str) -> Option<String> {
    match text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(text.to_owned()),
    }
}

fn mismatch(message: impl Into<String>) -> Refused {
    RpcError::new(RpcCode::HeaderMismatch, message)
}

fn unsupported(requested: &str) -> Refused {
    RpcError::new(
        RpcCode::UnsupportedProtocolVersion,
        "Unsupported protocol version",
    )
    .with_data(json!({"supported": Revision::supported(), "requested": requested}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::jsonrpc::parse;

    fn headers(version: Option<&str>, method: Option<&str>, name: Option<&str>) -> Headers {
        let h = |v: Option<&str>| v.map_or(Header::Absent, |t| Header::Text(t.to_owned()));
        Headers {
            protocol_version: h(version),
            method: h(method),
            name: h(name),
        }
    }

    fn modern_call(name: &str) -> Incoming {
        parse(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": name, "arguments": {},
                "_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}}})
            .to_string()
            .as_bytes(),
        )
        .unwrap()
    }

    fn code(result: Result<Revision, Refused>) -> Result<Revision, i64> {
        result.map_err(|e| e.code)
    }

    #[test]
    fn modern_requests_need_matching_headers() {
        let call = modern_call("order_status");
        let ok = headers(Some("2026-07-28"), Some("tools/call"), Some("order_status"));
        assert_eq!(code(negotiate(&call, &ok)), Ok(Revision::V2026_07_28));
        let encoded = headers(
            Some("2026-07-28"),
            Some("tools/call"),
            Some("=?base64?b3JkZXJfc3RhdHVz?="),
        );
        assert_eq!(code(negotiate(&call, &encoded)), Ok(Revision::V2026_07_28));
        for wrong in [
            headers(None, Some("tools/call"), Some("order_status")),
            headers(Some("2025-11-25"), Some("tools/call"), Some("order_status")),
            headers(Some("2026-07-28"), None, Some("order_status")),
            headers(Some("2026-07-28"), Some("tools/list"), Some("order_status")),
            headers(Some("2026-07-28"), Some("tools/call"), None),
            headers(Some("2026-07-28"), Some("tools/call"), Some("other")),
        ] {
            assert_eq!(code(negotiate(&call, &wrong)), Err(-32020), "{wrong:?}");
        }
    }

    #[test]
    fn unserved_versions_name_the_served_ones() {
        let call = parse(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        )
        .unwrap();
        let refused = negotiate(
            &call,
            &headers(Some("1900-01-01"), Some("tools/list"), None),
        )
        .unwrap_err();
        assert_eq!(refused.code, -32022);
        let data = refused.data.unwrap();
        assert_eq!(data["requested"], "1900-01-01");
        assert_eq!(
            data["supported"],
            json!(["2026-07-28", "2025-11-25", "2025-06-18"])
        );
    }

    #[test]
    fn legacy_requests_take_the_header_and_initialize_answers_a_served_version() {
        let list = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        let legacy = |v| headers(Some(v), None, None);
        assert_eq!(
            code(negotiate(&list, &legacy("2025-06-18"))),
            Ok(Revision::V2025_06_18)
        );
        assert_eq!(
            code(negotiate(&list, &legacy("2025-11-25"))),
            Ok(Revision::V2025_11_25)
        );
        assert_eq!(code(negotiate(&list, &legacy("2025-03-26"))), Err(-32022));
        assert_eq!(
            code(negotiate(&list, &headers(None, None, None))),
            Err(-32022)
        );
        assert_eq!(code(negotiate(&list, &legacy("2026-07-28"))), Err(-32602));
        let init = |v: &str| {
            parse(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": v, "capabilities": {}}})
                .to_string()
                .as_bytes(),
            )
            .unwrap()
        };
        let none = headers(None, None, None);
        assert_eq!(
            code(negotiate(&init("2025-06-18"), &none)),
            Ok(Revision::V2025_06_18)
        );
        assert_eq!(
            code(negotiate(&init("2024-11-05"), &none)),
            Ok(Revision::V2025_11_25)
        );
        assert_eq!(
            code(negotiate(&init("2026-07-28"), &none)),
            Ok(Revision::V2025_11_25)
        );
    }
}
