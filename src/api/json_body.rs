//! The JSON request body extractor: checks the content type, enforces the
//! route's size limit while reading (never buffering more than the limit)
//! and parses; a string or property name holding U+0000 is refused as the
//! body's invalid JSON. Its failures are the contract's codes, not axum's plain text.

use axum::extract::{FromRequest, Request};
use axum::http::header;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use super::error::ApiError;
use crate::domain::text::refuse_nul;

/// A parsed JSON body of at most `LIMIT` bytes.
pub struct JsonBody<const LIMIT: usize>(pub Value);

impl<S: Send + Sync, const LIMIT: usize> FromRequest<S> for JsonBody<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers().get(header::CONTENT_TYPE)) {
            return Err(ApiError::InvalidJson(
                "the content type must be application/json".into(),
            ));
        }
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > LIMIT as u64) {
            return Err(ApiError::PayloadTooLarge { limit: LIMIT });
        }
        let bytes = Limited::new(request.into_body(), LIMIT)
            .collect()
            .await
            .map_err(|err| {
                if err.downcast_ref::<LengthLimitError>().is_some() {
                    ApiError::PayloadTooLarge { limit: LIMIT }
                } else {
                    ApiError::BadRequest("the request body could not be read".into())
                }
            })?;
        let value = serde_json::from_slice(&bytes.to_bytes())
            .map_err(|e| ApiError::InvalidJson(format!("the body is not valid JSON: {e}")))?;
        // Escaped (`\u0000`) it is valid JSON, yet no stored text may hold it.
        refuse_nul(&value).map_err(ApiError::InvalidJson)?;
        Ok(JsonBody(value))
    }
}

fn is_json(content_type: Option<&header::HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn recognises_json_content_types() {
        assert!(is_json(Some(&HeaderValue::from_static("application/json"))));
        assert!(is_json(Some(&HeaderValue::from_static(
            "Application/JSON; charset=utf-8"
        ))));
        assert!(is_json(Some(&HeaderValue::from_static(
            "application/merge-patch+json"
        ))));
        assert!(!is_json(Some(&HeaderValue::from_static("text/plain"))));
        assert!(!is_json(None));
    }
}
