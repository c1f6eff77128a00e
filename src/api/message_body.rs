//! The message request extractor (contract 2.1, 4.2): a JSON body or
//! multipart/form-data, parsed and bounded by crate `warden-channel`
//! (`channel/` at the root, the same functions `fuzz/` exercises); this
//! module adds only the axum side and maps its errors to the contract's.

use axum::extract::{FromRequest, Request};
use axum::http::header;
use axum::{Error as AxumError, RequestExt};
use http_body_util::LengthLimitError;

use warden_channel::InboundError;
use warden_channel::inbound::{InboundMessage, MAX_MULTIPART_BYTES, MAX_PAYLOAD_BYTES};

use super::error::ApiError;
use super::json_body::JsonBody;

/// A parsed message, extracted from a request.
pub struct Inbound(pub InboundMessage);

impl<S: Send + Sync> FromRequest<S> for Inbound {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if content_type
            .to_ascii_lowercase()
            .starts_with("multipart/form-data")
        {
            // The route's `DefaultBodyLimit` applies to the stream.
            let body = request.with_limited_body().into_body().into_data_stream();
            return InboundMessage::from_multipart(&content_type, body)
                .await
                .map(Inbound)
                .map_err(api_error);
        }
        let JsonBody(value) = JsonBody::<MAX_PAYLOAD_BYTES>::from_request(request, state).await?;
        InboundMessage::from_payload(&value)
            .map(Inbound)
            .map_err(api_error)
    }
}

fn api_error(err: InboundError) -> ApiError {
    match err {
        InboundError::Invalid(message) => ApiError::Validation(message),
        InboundError::TooLarge { limit } => ApiError::PayloadTooLarge { limit },
        InboundError::BodyRead(source) if is_body_limit(source.as_ref()) => {
            ApiError::PayloadTooLarge {
                limit: MAX_MULTIPART_BYTES,
            }
        }
        InboundError::BodyRead(source) => {
            ApiError::Validation(format!("the multipart body is malformed: {source}"))
        }
    }
}

/// The route's body limit, as axum's limited body reports it.
fn is_body_limit(err: &(dyn std::error::Error + 'static)) -> bool {
    err.downcast_ref::<AxumError>()
        .and_then(|e| std::error::Error::source(e))
        .is_some_and(|s| s.downcast_ref::<LengthLimitError>().is_some())
        || err.downcast_ref::<LengthLimitError>().is_some()
}
