//! A POST body of `/v1/mcp`, read as the server does (`mcp::jsonrpc::parse`,
//! the server's own file, compiled here without the server). Whatever the
//! bytes, the answer is a message or a refusal with a standard JSON-RPC
//! code, and the response written for either is JSON carrying the id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[allow(dead_code)]
#[path = "../../src/mcp/jsonrpc.rs"]
mod jsonrpc;

fuzz_target!(|data: &[u8]| {
    let (id, bytes) = match jsonrpc::parse(data) {
        Ok(message) => {
            let Some(id) = message.id else { return };
            let bytes = jsonrpc::Response::result(&id, Value::Object(message.params)).to_bytes();
            (Some(id), bytes)
        }
        Err(refusal) => {
            assert!(
                [-32700, -32600].contains(&refusal.error.code),
                "a body is refused as a parse error or an invalid request"
            );
            let bytes = jsonrpc::Response::error(refusal.id.as_ref(), &refusal.error).to_bytes();
            (refusal.id, bytes)
        }
    };
    let written: Value = serde_json::from_slice(&bytes).expect("the response is JSON");
    assert_eq!(written["jsonrpc"], "2.0");
    match id {
        Some(id) => assert_eq!(written["id"], serde_json::to_value(&id).unwrap()),
        None => assert!(written.get("id").is_none()),
    }
});
