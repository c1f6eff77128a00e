//! The crate's public value types (independent of the generated bindings).

use serde::Serialize;

use crate::SandboxError;

/// A JSON object as the server uses it.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// One broken rule at one place, as the guest reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// RFC 6901 JSON pointer into the checked document.
    pub pointer: String,
    /// Stable kebab-case rule identifier.
    pub rule: String,
    /// Human-readable sentence; not stable.
    pub message: String,
}

/// The guest's answer: `Ok` (with the output, if any) or the violations of
/// the caller's data. Sandbox faults are the outer `Result`'s error.
pub type Verdict<T> = Result<T, Vec<Violation>>;

/// A schema plus the key under which the guest may cache it. Use a key that
/// changes whenever the text does, e.g. `cap_ab12cd34@3/input`.
#[derive(Debug, Clone, Copy)]
pub struct SchemaRef<'a> {
    pub key: &'a str,
    pub text: &'a str,
}

/// Switches for `check_definition`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefinitionOptions {
    /// `WARDEN_DEV_ALLOW_LOOPBACK=1`: accept http(s) URLs on loopback only.
    pub allow_loopback_http: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationSchemaKind {
    Input,
    Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InteractionKind {
    ConfirmOperation,
    Selection,
    NotFound,
}

/// A `host_interaction` result split by audience (contract 1 rules 9, 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapedInteraction {
    pub kind: InteractionKind,
    /// Without opaque references: may reach the model, history and the
    /// client. Add `interaction_id` and `owner` to it.
    pub public: JsonObject,
    /// Only the opaque references: for the response to the host application
    /// only; never to the model, history, logs or storage.
    pub refs: JsonObject,
    /// Exactly `No hay una operación disponible para esta consulta.` for
    /// not-found; `None` otherwise.
    pub assistant_text: Option<String>,
}

/// JSON text a guest returned, not yet checked by the host.
///
/// The only way to read it is to parse it ([`GuestJson::parse`]), and that
/// parse is the check: text that is not JSON is a [`SandboxError::Contract`]
/// fault of the guest, never data. Checking it in the host first and parsing
/// it again in the caller would read every pruned result twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestJson(String);

impl GuestJson {
    pub(crate) fn new(text: String) -> Self {
        Self(text)
    }

    /// Parses the text; a guest that returned something other than JSON (or
    /// JSON not of shape `T`) has broken its contract.
    pub fn parse<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, SandboxError> {
        serde_json::from_str(&self.0)
            .map_err(|e| SandboxError::Contract(format!("{what} is not the expected JSON: {e}")))
    }

    /// The text exactly as the guest wrote it, unchecked: for byte-for-byte
    /// comparisons (tests, benchmarks), never to pass on as JSON.
    pub fn unchecked_text(&self) -> &str {
        &self.0
    }

    /// Length of the text in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
