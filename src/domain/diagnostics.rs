//! The account's diagnostic message mode (contract 2.10).

use serde::{Deserialize, Serialize};

use super::closed_set::closed_set;

closed_set! {
    /// The kinds of capability-gap events (contract 2.10).
    pub enum GapKind {
        /// No capability covers what the user asked for.
        CoverageGap = "coverage_gap",
        /// A capability was meant to answer, and the turn could not.
        AgentDeadEnd = "agent_dead_end",
    }
}

closed_set! {
    /// Why a gap event was recorded. Parsed tolerantly by clients (the
    /// contract's diagnostic codes may grow); stored as one of these.
    pub enum GapReason {
        NoMatchingCapability = "no_matching_capability",
        CapabilityRefused = "capability_refused",
        PreparationMismatch = "preparation_mismatch",
        InteractionExpired = "interaction_expired",
        // A call's failure, by its reason (`executor::FailureReason`).
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticMode {
    /// The account-facing gap report is off.
    Disabled,
    /// Gap events without message text (the default).
    #[default]
    Metadata,
    /// Gap events with the original message text.
    Text,
}

impl DiagnosticMode {
    pub const ALL: [DiagnosticMode; 3] = [
        DiagnosticMode::Disabled,
        DiagnosticMode::Metadata,
        DiagnosticMode::Text,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticMode::Disabled => "disabled",
            DiagnosticMode::Metadata => "metadata",
            DiagnosticMode::Text => "text",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == text)
    }
}
