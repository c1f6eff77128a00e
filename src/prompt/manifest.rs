//! The integration manifest (contract 2.13), written by the operator, and
//! the public bundle derived from it. The manifest's own fields are checked
//! here; its two schemas only by the policy guest
//! (`check-integration-schema`), like every tenant schema.

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::account::AccountId;
use crate::sandbox::{IntegrationSchemaKind, PolicySandbox, Violation};

/// Largest manifest file the operator commands read.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
pub const MAX_NAME_CHARS: usize = 120;
pub const MAX_PROMPT_CHARS: usize = 16_000;
/// The widget's rule for an action: at most 32 of `[A-Za-z0-9_-]`.
pub const MAX_ACTION_CHARS: usize = 32;
pub const PUBLIC_ID_PREFIX: &str = "pi_public_";

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub version: u32,
    pub name: String,
    pub origin: String,
    pub data_classification: String,
    pub prompt: String,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// Why a manifest was refused: the field and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("the manifest is not valid JSON of the manifest's shape: {0}")]
    Shape(String),
    /// A string or property name holds U+0000.
    #[error("{0}")]
    Text(String),
    #[error("{field}: {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
    #[error("{field} is outside the supported schema subset: {}", describe(.violations))]
    Schema {
        field: &'static str,
        violations: Vec<Violation>,
    },
    #[error("the policy sandbox failed: {0}")]
    Sandbox(#[from] crate::sandbox::SandboxError),
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("{} at {:?}: {}", v.rule, v.pointer, v.message))
        .collect::<Vec<_>>()
        .join("; ")
}

fn field(field: &'static str, problem: impl Into<String>) -> ManifestError {
    ManifestError::Field {
        field,
        problem: problem.into(),
    }
}

impl Manifest {
    /// Parses and checks a manifest; the schemas in the guest.
    pub async fn parse(
        text: &str,
        sandbox: &PolicySandbox,
        account: &AccountId,
    ) -> Result<Manifest, ManifestError> {
        let shape = |e: serde_json::Error| ManifestError::Shape(e.to_string());
        let value: Value = serde_json::from_str(text).map_err(shape)?;
        // Stored as text, which cannot hold U+0000 on PostgreSQL.
        crate::domain::text::refuse_nul(&value).map_err(ManifestError::Text)?;
        let manifest: Manifest = serde_json::from_value(value).map_err(shape)?;
        if manifest.version != 1 {
            return Err(field("version", "must be 1"));
        }
        let name = manifest.name.trim();
        if name.is_empty() || manifest.name.chars().count() > MAX_NAME_CHARS {
            return Err(field(
                "name",
                format!("must be 1 to {MAX_NAME_CHARS} characters"),
            ));
        }
        Origin::parse(&manifest.origin)?;
        if manifest.data_classification != "non_sensitive" {
            return Err(field("data_classification", "must be \"non_sensitive\""));
        }
        if manifest.prompt.trim().is_empty() || manifest.prompt.chars().count() > MAX_PROMPT_CHARS {
            return Err(field(
                "prompt",
                format!("must be 1 to {MAX_PROMPT_CHARS} characters"),
            ));
        }
        for (name, kind, schema) in [
            (
                "input_schema",
                IntegrationSchemaKind::Input,
                &manifest.input_schema,
            ),
            (
                "output_schema",
                IntegrationSchemaKind::Output,
                &manifest.output_schema,
            ),
        ] {
            let violations = sandbox
                .check_integration_schema(account, kind, schema.to_string())
                .await?;
            if !violations.is_empty() {
                return Err(ManifestError::Schema {
                    field: name,
                    violations,
                });
            }
        }
        Ok(manifest)
    }
}

/// An exact origin: `scheme://host[:port]`, http or https, nothing after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub host: String,
}

impl Origin {
    pub fn parse(text: &str) -> Result<Origin, ManifestError> {
        let bad = |problem: &str| field("origin", problem.to_owned());
        if text.len() > 255 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("must be scheme://host[:port], at most 255 characters"));
        }
        let url = url::Url::parse(text).map_err(|_| bad("must be scheme://host[:port]"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("must name a host"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("must not carry credentials"));
        }
        // What a browser sends as Origin: no path (not even "/"), query or
        // fragment, the host lower-case, the default port left out.
        if url.origin().ascii_serialization() != text {
            return Err(bad(
                "must be exactly what a browser sends as Origin: scheme://host[:port], \
                 lower-case, no path, no trailing slash, no default port",
            ));
        }
        Ok(Origin {
            host: host.to_owned(),
        })
    }
}

/// A new public id: `pi_public_` and 24 URL-safe random characters.
pub fn new_public_id() -> String {
    format!("{PUBLIC_ID_PREFIX}{}", random_chars(24))
}

/// A new challenge action: stable per integration, within the widget's rule.
pub fn new_challenge_action() -> String {
    let action = format!("pi_{}", random_chars(16));
    debug_assert!(action.len() <= MAX_ACTION_CHARS);
    action
}

fn random_chars(n: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The contract's pattern for `publicId`: `^pi_public_[A-Za-z0-9_-]{16,80}$`.
pub fn is_public_id(id: &str) -> bool {
    id.strip_prefix(PUBLIC_ID_PREFIX).is_some_and(|rest| {
        (16..=80).contains(&rest.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// The public bundle (2.13): never the prompt, the output schema or a secret.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Bundle {
    pub id: String,
    pub revision: i64,
    pub status: crate::store::prompt_integrations::IntegrationStatus,
    /// The execute URL.
    pub endpoint: String,
    pub origin: String,
    pub challenge_sitekey: String,
    pub challenge_action: String,
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// Where the bundle's `endpoint` and `challenge_sitekey` come from.
#[derive(Debug, Clone, Default)]
pub struct BundleSettings {
    /// `WARDEN_PUBLIC_BASE_URL`, e.g. `https://warden.example.com`.
    pub public_base_url: String,
    /// `WARDEN_CHALLENGE_SITEKEY`.
    pub sitekey: String,
}

impl Bundle {
    pub fn of(
        row: &crate::store::prompt_integrations::PromptIntegrationRow,
        manifest: &Manifest,
        settings: &BundleSettings,
    ) -> Bundle {
        Bundle {
            id: row.id.clone(),
            revision: row.revision,
            status: row.status,
            endpoint: format!(
                "{}/v1/prompt-integrations/{}/execute",
                settings.public_base_url.trim_end_matches('/'),
                row.id
            ),
            origin: row.origin.clone(),
            challenge_sitekey: settings.sitekey.clone(),
            challenge_action: row.challenge_action.clone(),
            input_schema: manifest.input_schema.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_exact() {
        for good in [
            "https://shop.example",
            "http://127.0.0.1:8123",
            "https://a.b.example:8443",
        ] {
            assert!(Origin::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "https://shop.example/",
            "https://shop.example/form",
            "https://shop.example?x=1",
            "https://Shop.example",
            "https://shop.example:443",
            "ftp://shop.example",
            "shop.example",
            "https://user@shop.example",
            "",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_follow_the_contract() {
        let id = new_public_id();
        assert!(is_public_id(&id), "{id}");
        assert!((27..=90).contains(&id.len()));
        assert!(!is_public_id("pi_public_short"));
        assert!(!is_public_id("pi_public_has/slash_0123456789"));
        let action = new_challenge_action();
        assert!(action.len() <= MAX_ACTION_CHARS);
        assert!(
            action
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
    }
}
