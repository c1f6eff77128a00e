//! How parsing a message fails; the server maps these to the contract's errors.

use std::fmt;

#[derive(Debug)]
pub enum InboundError {
    /// The message breaks a rule of its shape (a validation error).
    Invalid(String),
    /// A part is larger than its bound, in bytes.
    TooLarge { limit: usize },
    /// The body stream failed; the error is the stream's own (the caller
    /// knows its kinds, e.g. its own size limit).
    BodyRead(Box<dyn std::error::Error + Send + Sync>),
}

impl InboundError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        InboundError::Invalid(message.into())
    }
}

impl fmt::Display for InboundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InboundError::Invalid(message) => f.write_str(message),
            InboundError::TooLarge { limit } => write!(f, "a part is larger than {limit} bytes"),
            InboundError::BodyRead(e) => write!(f, "the body could not be read: {e}"),
        }
    }
}

impl std::error::Error for InboundError {}
