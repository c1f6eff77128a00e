//! The account's diagnostic message mode (contract 2.10).

use serde::{Deserialize, Serialize};

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
