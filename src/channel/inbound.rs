//! Parsing one inbound message: a JSON body, or multipart/form-data with a
//! `payload` part (application/json) and at most one `image` part.
//! Bounds are recorded in docs/contract-decisions.md.

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header;
use serde_json::{Map, Value};

use super::image::{ImageFormat, InboundImage, MAX_IMAGE_BYTES};
use crate::api::error::ApiError;
use crate::api::json_body::JsonBody;
use crate::domain::text::check_bounded;

pub const MAX_USER_ID_CHARS: usize = 128;
pub const MAX_CONVERSATION_ID_CHARS: usize = 128;
pub const MAX_BODY_CHARS: usize = 4_000;
pub const MAX_METADATA_KEYS: usize = 16;
pub const MAX_METADATA_KEY_CHARS: usize = 64;
pub const MAX_METADATA_VALUE_CHARS: usize = 256;
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

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::Validation(message.into())
}

impl InboundMessage {
    /// Validates the JSON of a message request (2.1).
    pub fn from_payload(value: &Value) -> Result<Self, ApiError> {
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
        check_bounded("message.body", body, 1, MAX_BODY_CHARS).map_err(invalid)?;
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
) -> Result<Option<String>, ApiError> {
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

/// Metadata: a flat object of at most 16 scalar properties.
fn check_metadata(metadata: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(invalid(format!(
            "metadata holds at most {MAX_METADATA_KEYS} properties"
        )));
    }
    for (key, value) in metadata {
        check_bounded("a metadata key", key, 1, MAX_METADATA_KEY_CHARS).map_err(invalid)?;
        match value {
            Value::String(s) => {
                check_bounded(&format!("metadata.{key}"), s, 0, MAX_METADATA_VALUE_CHARS)
                    .map_err(invalid)?
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
            _ => {
                return Err(invalid(format!(
                    "metadata.{key} must be a string, number, boolean or null"
                )));
            }
        }
    }
    Ok(metadata.clone())
}

impl<S: Send + Sync> FromRequest<S> for InboundMessage {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if content_type
            .to_ascii_lowercase()
            .starts_with("multipart/form-data")
        {
            let multipart = Multipart::from_request(request, state)
                .await
                .map_err(|e| invalid(e.body_text()))?;
            return from_multipart(multipart).await;
        }
        let JsonBody(value) = JsonBody::<MAX_PAYLOAD_BYTES>::from_request(request, state).await?;
        InboundMessage::from_payload(&value)
    }
}

async fn from_multipart(mut multipart: Multipart) -> Result<InboundMessage, ApiError> {
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
                    .unwrap_or("application/json")
                    .to_ascii_lowercase();
                if !declared.starts_with("application/json") {
                    return Err(invalid("the payload part must be application/json"));
                }
                let bytes = read_field(&mut field, MAX_PAYLOAD_BYTES).await?;
                payload =
                    Some(serde_json::from_slice(&bytes).map_err(|e| {
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
    let mut message = InboundMessage::from_payload(&payload)?;
    message.image = image;
    Ok(message)
}

/// Reads a part, refusing it (413) as soon as it passes `limit` bytes.
async fn read_field(
    field: &mut axum::extract::multipart::Field<'_>,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    let mut buffer = bytes::BytesMut::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if buffer.len() + chunk.len() > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.freeze())
}

fn multipart_error(err: axum::extract::multipart::MultipartError) -> ApiError {
    if err.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge {
            limit: MAX_MULTIPART_BYTES,
        }
    } else {
        invalid(format!(
            "the multipart body is malformed: {}",
            err.body_text()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<InboundMessage, ApiError> {
        InboundMessage::from_payload(&v)
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
            json!({"message": {"type": "text", "body": "x"}, "metadata": {"nested": {"a": 1}}}),
            json!({"message": {"type": "text", "body": "x"}, "extra": 1}),
            json!({"conversation_id": "c".repeat(129), "message": {"type": "text", "body": "x"}}),
        ] {
            assert!(
                matches!(parse(bad.clone()), Err(ApiError::Validation(_))),
                "{bad}"
            );
        }
    }
}
