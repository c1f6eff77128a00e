//! Why a call to a host endpoint failed: a closed set of reason codes, safe
//! to store and show (no endpoint body, header or secret ever goes in).

use serde::Serialize;

use super::address_guard::AddressRefused;
use crate::domain::closed_set::closed_set;
use crate::domain::diagnostics::GapReason;
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

closed_set! {
    /// Why a call failed: the stable reason code recorded with it, shown in
    /// a contract test's result and in gap events.
    pub enum FailureReason {
        ArgumentsInvalid = "arguments_invalid",
        CredentialUnavailable = "credential_unavailable",
        AddressRefused = "address_refused",
        ConnectFailed = "connect_failed",
        Timeout = "timeout",
        HttpStatus = "http_status",
        RedirectRefused = "redirect_refused",
        ResponseTooLarge = "response_too_large",
        NotJson = "not_json",
        OutputInvalid = "output_invalid",
        InteractionInvalid = "interaction_invalid",
        SandboxFault = "sandbox_fault",
        SigningFailed = "signing_failed",
    }
}

/// Each failure is a gap's reason of the same word.
impl From<FailureReason> for GapReason {
    fn from(reason: FailureReason) -> Self {
        GapReason::parse(reason.as_str()).expect("every failure reason is a gap reason")
    }
}

impl CallFailure {
    /// The stable reason recorded with a failed call.
    pub fn reason(&self) -> FailureReason {
        match self {
            CallFailure::ArgumentsInvalid(_) => FailureReason::ArgumentsInvalid,
            CallFailure::CredentialUnavailable => FailureReason::CredentialUnavailable,
            CallFailure::AddressRefused(_) => FailureReason::AddressRefused,
            CallFailure::ConnectFailed => FailureReason::ConnectFailed,
            CallFailure::Timeout { .. } => FailureReason::Timeout,
            CallFailure::HttpStatus { .. } => FailureReason::HttpStatus,
            CallFailure::RedirectRefused { .. } => FailureReason::RedirectRefused,
            CallFailure::ResponseTooLarge { .. } => FailureReason::ResponseTooLarge,
            CallFailure::NotJson => FailureReason::NotJson,
            CallFailure::OutputInvalid(_) => FailureReason::OutputInvalid,
            CallFailure::InteractionInvalid(_) => FailureReason::InteractionInvalid,
            CallFailure::SandboxFault(_) => FailureReason::SandboxFault,
            CallFailure::SigningFailed => FailureReason::SigningFailed,
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
    pub reason: FailureReason,
    pub message: String,
}

impl From<&CallFailure> for FailureSummary {
    fn from(failure: &CallFailure) -> Self {
        FailureSummary {
            reason: failure.reason(),
            message: failure.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_reason_is_a_gap_reason() {
        for reason in FailureReason::ALL {
            assert_eq!(GapReason::from(*reason).as_str(), reason.as_str());
        }
    }
}
