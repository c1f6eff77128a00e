//! Capabilities (contract 2.5, 2.7, 3.1): identifiers, lifecycle, the
//! request wrappers around definitions and the revision precondition.
//!
//! The definition itself is judged by the policy guest (`crate::sandbox`);
//! this module only reads the few fields the server needs and checks the
//! wrappers, which are not part of the definition rules.

use super::closed_set::closed_set;
use serde_json::{Map, Value};

/// Bounds of the wrappers, recorded in docs/contract-decisions.md.
pub const MAX_DOMAIN_CHARS: usize = 100;
pub const MAX_MANIFEST_CAPABILITIES: usize = 50;
pub const MAX_CREATE_BODY_BYTES: usize = 256 * 1024;
pub const MAX_IMPORT_BODY_BYTES: usize = 2 * 1024 * 1024;
pub const MAX_IF_MATCH_CHARS: usize = 80;

/// `^cap_[a-z0-9]+$`, 8 to 80 characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CapabilityId(String);

impl CapabilityId {
    pub fn generate() -> Self {
        CapabilityId(super::id::random_id("cap_"))
    }

    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix("cap_")?;
        let ok = (8..=80).contains(&text.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        ok.then(|| CapabilityId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

closed_set! {
    /// Whether a capability may be offered and called.
    pub enum LifecycleStatus {
        Active = "active",
        Disabled = "disabled",
    }
}

closed_set! {
    /// What made a revision, as the history shows it.
    pub enum RevisionChange {
        Created = "created",
        Revised = "revised",
        Enabled = "enabled",
        Disabled = "disabled",
    }
}

impl RevisionChange {
    /// The change that moves a capability into `target`.
    pub fn into_state(target: LifecycleStatus) -> Self {
        match target {
            LifecycleStatus::Active => RevisionChange::Enabled,
            LifecycleStatus::Disabled => RevisionChange::Disabled,
        }
    }
}

/// One definition as submitted, with the fields the server itself needs.
#[derive(Clone, Debug)]
pub struct SubmittedDefinition {
    pub definition: Value,
}

impl SubmittedDefinition {
    /// The capability name, when the definition has a string one.
    pub fn name(&self) -> Option<&str> {
        self.definition.get("name").and_then(Value::as_str)
    }

    /// `auth.credential_ref`, when present as a string.
    pub fn credential_ref(&self) -> Option<&str> {
        self.definition.get("auth")?.get("credential_ref")?.as_str()
    }
}

/// A create, import or revision request, unwrapped.
#[derive(Clone, Debug)]
pub struct PublishRequest {
    pub domain: String,
    pub definitions: Vec<SubmittedDefinition>,
}

/// `{domain, capability}` (single create and revision) or
/// `{domain, capabilities: [...]}` (import).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrapper {
    Single,
    Manifest,
}

impl PublishRequest {
    pub fn from_json(body: &Value, wrapper: Wrapper) -> Result<Self, String> {
        let object = body.as_object().ok_or("the body must be a JSON object")?;
        let list_field = match wrapper {
            Wrapper::Single => "capability",
            Wrapper::Manifest => "capabilities",
        };
        if let Some(unknown) = object.keys().find(|k| *k != "domain" && *k != list_field) {
            return Err(format!(
                "unknown property {unknown:?}: the body is {{domain, {list_field}}}"
            ));
        }
        let domain = domain(object)?;
        let definitions = match (wrapper, object.get(list_field)) {
            (Wrapper::Single, Some(def @ Value::Object(_))) => vec![def.clone()],
            (Wrapper::Manifest, Some(Value::Array(items))) => {
                if items.is_empty() || items.len() > MAX_MANIFEST_CAPABILITIES {
                    return Err(format!(
                        "capabilities must hold 1 to {MAX_MANIFEST_CAPABILITIES} definitions"
                    ));
                }
                if let Some(i) = items.iter().position(|d| !d.is_object()) {
                    return Err(format!("capabilities[{i}] must be an object"));
                }
                items.clone()
            }
            (Wrapper::Single, _) => {
                return Err("capability is required and must be an object".into());
            }
            (Wrapper::Manifest, _) => {
                return Err("capabilities is required and must be an array".into());
            }
        };
        Ok(PublishRequest {
            domain,
            definitions: definitions
                .into_iter()
                .map(|definition| SubmittedDefinition { definition })
                .collect(),
        })
    }
}

fn domain(object: &Map<String, Value>) -> Result<String, String> {
    let domain = object
        .get("domain")
        .and_then(Value::as_str)
        .ok_or("domain is required and must be a string")?;
    super::text::check_bounded("domain", domain, 1, MAX_DOMAIN_CHARS)?;
    Ok(domain.to_owned())
}

/// Why an `If-Match` header is unusable (400).
#[derive(Debug, PartialEq, Eq)]
pub enum IfMatchError {
    Missing,
    Malformed,
}

/// The `If-Match` precondition: the current numeric revision, optionally
/// quoted as an entity tag (`"3"`), 1 to 80 characters.
pub fn parse_if_match(header: Option<&str>) -> Result<i64, IfMatchError> {
    let raw = header.ok_or(IfMatchError::Missing)?.trim();
    if raw.is_empty() || raw.chars().count() > MAX_IF_MATCH_CHARS {
        return Err(IfMatchError::Malformed);
    }
    let digits = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IfMatchError::Malformed);
    }
    digits
        .parse::<i64>()
        .ok()
        .filter(|r| *r >= 1)
        .ok_or(IfMatchError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_follow_the_pattern() {
        let id = CapabilityId::generate();
        assert!(CapabilityId::parse(id.as_str()).is_some());
        assert_eq!(id.as_str().len(), 28);
        for bad in [
            "cap_ABC12345",
            "cap_1",
            "capx_12345678",
            "cap_abc-12345",
            &format!("cap_{}", "a".repeat(77)),
        ] {
            assert!(CapabilityId::parse(bad).is_none(), "{bad}");
        }
        assert!(CapabilityId::parse("cap_abcd").is_some());
    }

    #[test]
    fn if_match_accepts_plain_and_quoted_revisions() {
        assert_eq!(parse_if_match(Some("3")), Ok(3));
        assert_eq!(parse_if_match(Some("\"12\"")), Ok(12));
        assert_eq!(parse_if_match(None), Err(IfMatchError::Missing));
        for bad in [
            "",
            "abc",
            "-1",
            "0",
            "W/\"3\"",
            "1.0",
            &"9".repeat(81),
            "99999999999999999999",
        ] {
            assert_eq!(
                parse_if_match(Some(bad)),
                Err(IfMatchError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn wrappers_are_closed() {
        let def = json!({"name": "x"});
        assert!(
            PublishRequest::from_json(&json!({"domain": "d", "capability": def}), Wrapper::Single)
                .is_ok()
        );
        assert!(
            PublishRequest::from_json(
                &json!({"domain": "d", "capabilities": [def]}),
                Wrapper::Manifest
            )
            .is_ok()
        );
        for (bad, wrapper) in [
            (json!({"capability": def}), Wrapper::Single),
            (
                json!({"domain": "d", "capability": def, "x": 1}),
                Wrapper::Single,
            ),
            (
                json!({"domain": "d", "capabilities": def}),
                Wrapper::Manifest,
            ),
            (
                json!({"domain": "d", "capabilities": []}),
                Wrapper::Manifest,
            ),
            (
                json!({"domain": "d", "capabilities": [1]}),
                Wrapper::Manifest,
            ),
            (json!({"domain": "", "capability": def}), Wrapper::Single),
        ] {
            assert!(PublishRequest::from_json(&bad, wrapper).is_err(), "{bad}");
        }
    }
}

/// What the executor reads from a published (guest-validated) definition.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct CapabilityDefinition {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub when_to_use: String,
    pub method: String,
    pub url: String,
    pub auth: AuthSpec,
    #[serde(default)]
    pub safe_headers: std::collections::BTreeMap<String, String>,
    pub input_schema: Value,
    pub output_schema: Value,
    #[serde(default)]
    pub examples: Vec<Value>,
    pub timeout_ms: Option<u64>,
    pub retry_count: Option<u32>,
    pub result_handling: Option<String>,
    #[serde(default)]
    pub context_bindings: Option<Value>,
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct AuthSpec {
    #[serde(rename = "type")]
    pub auth_type: super::credential::AuthType,
    pub credential_ref: String,
}

/// Used when a definition sets no `timeout_ms` (documented).
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

impl CapabilityDefinition {
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))
    }

    pub fn is_host_interaction(&self) -> bool {
        self.result_handling.as_deref() == Some("host_interaction")
    }
}
