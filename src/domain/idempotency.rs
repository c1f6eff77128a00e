//! `Idempotency-Key` (1 to 200 characters) and the request fingerprint
//! stored with it, so a reused key with a different request is detected.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub const MAX_KEY_CHARS: usize = 200;
/// How long a finished request can be replayed (documented: 24 hours).
pub const RETENTION_MILLIS: i64 = 24 * 60 * 60 * 1000;
/// An in-flight record older than this was left by a crashed server and
/// may be taken over by a retry.
pub const ABANDONED_AFTER_MILLIS: i64 = 2 * 60 * 1000;

pub fn parse_key(header: Option<&str>) -> Result<String, String> {
    let key = header.ok_or("the Idempotency-Key header is required")?;
    let len = key.chars().count();
    if !(1..=MAX_KEY_CHARS).contains(&len) || !key.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_CHARS} visible ASCII characters"
        ));
    }
    Ok(key.to_owned())
}

/// SHA-256 over the operation name and the canonical JSON of the body
/// (object keys sorted at every depth), so formatting does not matter.
pub fn request_hash(operation: &str, body: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(body, &mut canonical);
    let digest = Sha256::new()
        .chain_update(operation.as_bytes())
        .chain_update([0u8])
        .chain_update(canonical.as_bytes())
        .finalize();
    crate::crypto::hex::encode(&digest)
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_ignores_formatting_but_not_content_or_operation() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "s"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap();
        assert_eq!(request_hash("import", &a), request_hash("import", &b));
        assert_ne!(request_hash("import", &a), request_hash("create", &a));
        assert_ne!(
            request_hash("import", &a),
            request_hash("import", &json!({"a": "s"}))
        );
    }

    #[test]
    fn keys_are_bounded_visible_ascii() {
        assert!(parse_key(Some("k-1")).is_ok());
        assert!(parse_key(Some(&"k".repeat(200))).is_ok());
        assert!(parse_key(Some(&"k".repeat(201))).is_err());
        assert!(parse_key(Some("")).is_err());
        assert!(parse_key(Some("has space")).is_err());
        assert!(parse_key(None).is_err());
    }
}
