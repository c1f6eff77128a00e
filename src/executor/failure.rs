//! Why a call to a host endpoint failed: a closed set of reason codes, safe
//! to store and show (no endpoint body, header or secret ever goes in).

use serde::Serialize;

use super::address_guard::AddressRefused;
use crate::sandbox::Violation;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallFailure {
    #[error("the arguments do not match the input schema")]
    ArgumentsInvalid(Vec<Violation>),
    #[error("the capability's credential is not configured")]
    CredentialUnavailable,
    /// Names the refused class, never the address (see `address_guard`).
    #[error("{0}")]
    AddressRefused(AddressRefused),
    #[error("the endpoint could not be reached")]
    ConnectFailed,
    #[error("the endpoint did not answer within {timeout_ms} ms")]
    Timeout { timeout_ms: u64 },
    #[error("the endpoint answered HTTP {status}")]
    HttpStatus { status: u16 },
    #[error("the endpoint answered a redirect (HTTP {status}); redirects are not followed")]
    RedirectRefused { status: u16 },
    #[error("the endpoint's answer is larger than {limit} bytes")]
    ResponseTooLarge { limit: usize },
    #[error("the endpoint's answer is not JSON")]
    NotJson,
    #[error("the endpoint's answer does not match the output schema")]
    OutputInvalid(Vec<Violation>),
    #[error("the endpoint's answer is not a valid host interaction")]
    InteractionInvalid(Vec<Violation>),
    #[error("the policy sandbox failed ({0})")]
    SandboxFault(&'static str),
    #[error("the request could not be signed")]
    SigningFailed,
}

impl CallFailure {
    /// The stable reason code recorded with a failed call.
    pub fn reason_code(&self) -> &'static str {
        match self {
            CallFailure::ArgumentsInvalid(_) => "arguments_invalid",
            CallFailure::CredentialUnavailable => "credential_unavailable",
            CallFailure::AddressRefused(_) => "address_refused",
            CallFailure::ConnectFailed => "connect_failed",
            CallFailure::Timeout { .. } => "timeout",
            CallFailure::HttpStatus { .. } => "http_status",
            CallFailure::RedirectRefused { .. } => "redirect_refused",
            CallFailure::ResponseTooLarge { .. } => "response_too_large",
            CallFailure::NotJson => "not_json",
            CallFailure::OutputInvalid(_) => "output_invalid",
            CallFailure::InteractionInvalid(_) => "interaction_invalid",
            CallFailure::SandboxFault(_) => "sandbox_fault",
            CallFailure::SigningFailed => "signing_failed",
        }
    }

    /// Transient failures worth another attempt (connection errors,
    /// time-outs, 502/503/504).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CallFailure::ConnectFailed
                | CallFailure::Timeout { .. }
                | CallFailure::HttpStatus { status: 502..=504 }
        )
    }

    pub fn http_status(&self) -> Option<u16> {
        match self {
            CallFailure::HttpStatus { status } | CallFailure::RedirectRefused { status } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

/// The sanitized summary stored and returned for a failed call.
#[derive(Debug, Clone, Serialize)]
pub struct FailureSummary {
    pub reason: &'static str,
    pub message: String,
}

impl From<&CallFailure> for FailureSummary {
    fn from(failure: &CallFailure) -> Self {
        FailureSummary {
            reason: failure.reason_code(),
            message: failure.to_string(),
        }
    }
}
