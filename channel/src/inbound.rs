//! Parsing one inbound message: a JSON body, or multipart/form-data with a
//! `payload` part (application/json) and at most one `image` part.
//! Bounds are recorded in docs/contract-decisions.md.

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use serde_json::{Map, Value};

use crate::bounds::{check_bounded, refuse_nul};
use crate::error::InboundError;
use crate::image::{ImageFormat, InboundImage, MAX_IMAGE_BYTES};

pub const MAX_USER_ID_CHARS: usize = 128;
pub const MAX_CONVERSATION_ID_CHARS: usize = 128;
pub const MAX_BODY_CHARS: usize = 4_000;
pub const MAX_METADATA_KEYS: usize = 16;
pub const MAX_METADATA_KEY_CHARS: usize = 64;
pub const MAX_METADATA_VALUE_CHARS: usize = 256;
/// Metadata is free-form JSON: objects and arrays nest at most this deep
/// (the metadata object itself is level 1)…
pub const MAX_METADATA_DEPTH: usize = 4;
/// …hold at most this many values in all…
pub const MAX_METADATA_VALUES: usize = 128;
/// …and take at most this many bytes as JSON.
pub const MAX_METADATA_BYTES: usize = 8 * 1024;
/// JSON request or `payload` part.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// A whole multipart request: the image, the payload and the framing.
pub const MAX_MULTIPART_BYTES: usize = MAX_IMAGE_BYTES + MAX_PAYLOAD_BYTES + 16 * 1024;

/// Fields that would carry an image inline: not supported (contract 2.1).
const INLINE_IMAGE_FIELDS: [&str; 6] = [
    "image",
    "images",
    "image_base64",
    "image_url",
    "image_data",
    "attachments",
];

#[derive(Debug)]
pub struct InboundMessage {
    pub user_id: Option<String>,
    pub conversation_id: Option<String>,
    pub body: String,
    pub metadata: Map<String, Value>,
    pub image: Option<InboundImage>,
}

fn invalid(message: impl Into<String>) -> InboundError {
    InboundError::invalid(message)
}

impl InboundMessage {
    /// Validates the JSON of a message request (2.1) sent without an image.
    pub fn from_payload(value: &Value) -> Result<Self, InboundError> {
        Self::parse_payload(value, false)
    }

    /// `with_image`: an image part came with the payload, and then the text
    /// may be empty (rule 12: the service asks what to do with the image).
    fn parse_payload(value: &Value, with_image: bool) -> Result<Self, InboundError> {
        refuse_nul(value).map_err(invalid)?;
        let object = value
            .as_object()
            .ok_or_else(|| invalid("the payload must be a JSON object"))?;
        for key in object.keys() {
            if INLINE_IMAGE_FIELDS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "{key:?}: images are sent as one multipart `image` part, never inline"
                )));
            }
            if !["user_id", "conversation_id", "message", "metadata"].contains(&key.as_str()) {
                return Err(invalid(format!("unknown property {key:?}")));
            }
        }
        let user_id = optional_id(object, "user_id", MAX_USER_ID_CHARS)?;
        let conversation_id = optional_id(object, "conversation_id", MAX_CONVERSATION_ID_CHARS)?;
        let message = object
            .get("message")
            .and_then(Value::as_object)
            .ok_or_else(|| invalid("message is required and must be an object"))?;
        for key in message.keys() {
            if INLINE_IMAGE_FIELDS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "message.{key}: images are sent as one multipart `image` part, never inline"
                )));
            }
            if key != "type" && key != "body" {
                return Err(invalid(format!("unknown property message.{key}")));
            }
        }
        if message.get("type").and_then(Value::as_str) != Some("text") {
            return Err(invalid("message.type must be \"text\""));
        }
        let body = message
            .get("body")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("message.body is required and must be a string"))?;
        let min_chars = if with_image { 0 } else { 1 };
        check_bounded("message.body", body, min_chars, MAX_BODY_CHARS).map_err(invalid)?;
        let metadata = match object.get("metadata") {
            None => Map::new(),
            Some(Value::Object(m)) => check_metadata(m)?,
            Some(_) => return Err(invalid("metadata must be an object")),
        };
        Ok(InboundMessage {
            user_id,
            conversation_id,
            body: body.to_owned(),
            metadata,
            image: None,
        })
    }
}

fn optional_id(
    object: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, InboundError> {
    match object.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => {
            check_bounded(field, s, 1, max).map_err(invalid)?;
            if s.chars().any(char::is_whitespace) {
                return Err(invalid(format!("{field} must not contain whitespace")));
            }
            Ok(Some(s.clone()))
        }
        Some(_) => Err(invalid(format!("{field} must be a string"))),
    }
}

/// Metadata (free-form, 2.1): an object of at most 16 properties whose
/// values are any JSON within the depth, count, key, string and size bounds.
fn check_metadata(metadata: &Map<String, Value>) -> Result<Map<String, Value>, InboundError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(invalid(format!(
            "metadata holds at most {MAX_METADATA_KEYS} properties"
        )));
    }
    let mut values = 0usize;
    for (key, value) in metadata {
        check_metadata_value(&format!("metadata.{key}"), key, value, 2, &mut values)?;
    }
    let bytes = serde_json::to_vec(metadata).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_METADATA_BYTES {
        return Err(invalid(format!(
            "metadata takes at most {MAX_METADATA_BYTES} bytes as JSON"
        )));
    }
    Ok(metadata.clone())
}

fn check_metadata_value(
    path: &str,
    key: &str,
    value: &Value,
    level: usize,
    values: &mut usize,
) -> Result<(), InboundError> {
    check_bounded("a metadata key", key, 1, MAX_METADATA_KEY_CHARS).map_err(invalid)?;
    *values += 1;
    if *values > MAX_METADATA_VALUES {
        return Err(invalid(format!(
            "metadata holds at most {MAX_METADATA_VALUES} values in all"
        )));
    }
    let nested = |what: &str| {
        if level > MAX_METADATA_DEPTH {
            Err(invalid(format!(
                "{path}: metadata {what} nest at most {MAX_METADATA_DEPTH} levels deep"
            )))
        } else {
            Ok(())
        }
    };
    match value {
        Value::String(s) => {
            check_bounded(path, s, 0, MAX_METADATA_VALUE_CHARS).map_err(invalid)?;
        }
        Value::Number(_) | Value::Bool(_) | Value::Null => {}
        Value::Object(map) => {
            nested("objects")?;
            for (k, v) in map {
                check_metadata_value(&format!("{path}.{k}"), k, v, level + 1, values)?;
            }
        }
        Value::Array(items) => {
            nested("arrays")?;
            for (i, v) in items.iter().enumerate() {
                check_metadata_value(&format!("{path}[{i}]"), "item", v, level + 1, values)?;
            }
        }
    }
    Ok(())
}

impl InboundMessage {
    /// A `multipart/form-data` request, from its content type and its body
    /// stream. Each part is refused as soon as it passes its bound; the
    /// stream's own errors (its size limit among them) come back as
    /// [`InboundError::BodyRead`].
    pub async fn from_multipart<S, O, E>(content_type: &str, body: S) -> Result<Self, InboundError>
    where
        S: Stream<Item = Result<O, E>> + Send + 'static,
        O: Into<Bytes> + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        let boundary = multer::parse_boundary(content_type)
            .map_err(|_| invalid("Invalid `boundary` for `multipart/form-data` request"))?;
        let mut multipart = multer::Multipart::new(body, boundary);
        let mut payload: Option<Value> = None;
        let mut image: Option<InboundImage> = None;
        while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
            match field.name().unwrap_or("") {
                "payload" => {
                    if payload.is_some() {
                        return Err(invalid("only one payload part is allowed"));
                    }
                    let declared = field
                        .content_type()
                        .map(|m| m.as_ref().to_ascii_lowercase())
                        .unwrap_or_else(|| "application/json".to_string());
                    if !declared.starts_with("application/json") {
                        return Err(invalid("the payload part must be application/json"));
                    }
                    let bytes = read_field(&mut field, MAX_PAYLOAD_BYTES).await?;
                    payload = Some(serde_json::from_slice(&bytes).map_err(|e| {
                        invalid(format!("the payload part is not valid JSON: {e}"))
                    })?);
                }
                "image" => {
                    if image.is_some() {
                        return Err(invalid("at most one image part is allowed"));
                    }
                    let bytes = read_field(&mut field, MAX_IMAGE_BYTES).await?;
                    let format = ImageFormat::sniff(&bytes)
                        .ok_or_else(|| invalid("the image is not a JPEG, PNG or WebP file"))?;
                    image = Some(InboundImage { format, bytes });
                }
                other => {
                    return Err(invalid(format!(
                        "unknown part {other:?}: the parts are payload and image"
                    )));
                }
            }
        }
        let payload = payload.ok_or_else(|| invalid("the payload part is required"))?;
        let mut message = InboundMessage::parse_payload(&payload, image.is_some())?;
        message.image = image;
        Ok(message)
    }
}

/// Reads a part, refusing it as soon as it passes `limit` bytes.
async fn read_field(field: &mut multer::Field<'_>, limit: usize) -> Result<Bytes, InboundError> {
    let mut buffer = BytesMut::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if buffer.len() + chunk.len() > limit {
            return Err(InboundError::TooLarge { limit });
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.freeze())
}

fn multipart_error(err: multer::Error) -> InboundError {
    match err {
        multer::Error::StreamReadFailed(source) => InboundError::BodyRead(source),
        other => invalid(format!("the multipart body is malformed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<InboundMessage, InboundError> {
        InboundMessage::from_payload(&v)
    }

    /// Drives a future whose stream is in memory: it never waits.
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    /// `body` as a multipart stream cut into `chunk`-byte pieces.
    fn multipart(body: &[u8], chunk: usize) -> Result<InboundMessage, InboundError> {
        let pieces: Vec<Result<Bytes, std::io::Error>> = body
            .chunks(chunk)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        block_on(InboundMessage::from_multipart(
            "multipart/form-data; boundary=XyZ",
            futures_util::stream::iter(pieces),
        ))
    }

    fn form(parts: &[(&str, &str, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, content_type, bytes) in parts {
            body.extend_from_slice(
                format!(
                    "--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\nContent-Type: {content_type}\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        body
    }

    const PAYLOAD: &[u8] = br#"{"message":{"type":"text","body":"hola"}}"#;
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn multipart_payload_and_image_in_any_chunking() {
        let body = form(&[
            ("payload", "application/json", PAYLOAD),
            ("image", "image/jpeg", PNG),
        ]);
        for chunk in [1, 2, 7, body.len()] {
            let m = multipart(&body, chunk).unwrap();
            assert_eq!(m.body, "hola");
            assert_eq!(m.image.unwrap().format, ImageFormat::Png, "chunk {chunk}");
        }
    }

    #[test]
    fn multipart_refusals() {
        let cases: [(Vec<u8>, &str); 5] = [
            (
                form(&[("image", "image/png", PNG)]),
                "payload part is required",
            ),
            (
                form(&[("payload", "text/plain", PAYLOAD)]),
                "must be application/json",
            ),
            (
                form(&[
                    ("payload", "application/json", PAYLOAD),
                    ("x", "text/plain", b"1"),
                ]),
                "unknown part",
            ),
            (
                form(&[
                    ("payload", "application/json", PAYLOAD),
                    ("image", "image/png", b"GIF89a"),
                ]),
                "not a JPEG",
            ),
            (
                b"--XyZ\r\nContent-Disposition: form-data; name=\"payload\"\r\n\r\n{".to_vec(),
                "malformed",
            ),
        ];
        for (body, why) in cases {
            match multipart(&body, 5) {
                Err(InboundError::Invalid(m)) => assert!(m.contains(why), "{m} / {why}"),
                other => panic!("{why}: {other:?}"),
            }
        }
        let big = vec![b'x'; MAX_PAYLOAD_BYTES + 1];
        assert!(matches!(
            multipart(&form(&[("payload", "application/json", &big)]), 4096),
            Err(InboundError::TooLarge {
                limit: MAX_PAYLOAD_BYTES
            })
        ));
        let no_boundary = block_on(InboundMessage::from_multipart(
            "multipart/form-data",
            futures_util::stream::iter(Vec::<Result<Bytes, std::io::Error>>::new()),
        ));
        assert!(matches!(no_boundary, Err(InboundError::Invalid(m)) if m.contains("boundary")));
    }

    #[test]
    fn accepts_the_documented_shape() {
        let m = parse(json!({"user_id": "u-1", "conversation_id": "conv_1", "message": {"type": "text", "body": "hola"},
                             "metadata": {"channel": "web", "n": 1}})).unwrap();
        assert_eq!(
            (m.body.as_str(), m.user_id.as_deref()),
            ("hola", Some("u-1"))
        );
        assert!(parse(json!({"message": {"type": "text", "body": "hola"}})).is_ok());
        // Free-form metadata: nested objects and arrays within the bounds.
        let nested = json!({"cart": {"items": [{"sku": "X1", "qty": 2}], "coupon": null},
                            "tags": ["vip", 3, true], "a": {"b": {"c": {"d": 1}}}});
        let m =
            parse(json!({"message": {"type": "text", "body": "hola"}, "metadata": nested.clone()}))
                .unwrap();
        assert_eq!(serde_json::Value::Object(m.metadata), nested);
    }

    #[test]
    fn refuses_inline_images_and_bad_shapes() {
        for bad in [
            json!({"message": {"type": "text", "body": "x"}, "image": "iVBOR"}),
            json!({"message": {"type": "text", "body": "x", "image_base64": "iVBOR"}}),
            json!({"message": {"type": "image", "body": "x"}}),
            json!({"message": {"type": "text", "body": ""}}),
            json!({"message": {"type": "text", "body": "x".repeat(MAX_BODY_CHARS + 1)}}),
            json!({"message": {"type": "text"}}),
            json!({"user_id": "", "message": {"type": "text", "body": "x"}}),
            json!({"user_id": "a b", "message": {"type": "text", "body": "x"}}),
            json!({"message": {"type": "text", "body": "x"}, "metadata": {"a": {"b": {"c": {"d": {"e": 1}}}}}}),
            json!({"message": {"type": "text", "body": "x"}, "metadata": {"many": (0..200).collect::<Vec<_>>()}}),
            json!({"message": {"type": "text", "body": "x"}, "metadata": {"a": ["y".repeat(300)]}}),
            json!({"message": {"type": "text", "body": "x"}, "extra": 1}),
            json!({"conversation_id": "c".repeat(129), "message": {"type": "text", "body": "x"}}),
        ] {
            assert!(
                matches!(parse(bad.clone()), Err(InboundError::Invalid(_))),
                "{bad}"
            );
        }
    }
}
