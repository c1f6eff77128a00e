//! Endpoint credentials (contract 2.8): the reference, the auth type and
//! the secret as a host sends them, validated.

use super::closed_set::closed_set;
use serde_json::Value;
use zeroize::Zeroizing;

/// Largest secret accepted, in bytes (413 beyond).
pub const MAX_SECRET_BYTES: usize = 4096;
/// Request body limit of PUT /v1/capability-credentials/{ref}.
pub const MAX_CREDENTIAL_BODY_BYTES: usize = 16 * 1024;

/// A credential reference: `^cred_[A-Za-z0-9_-]{3,120}$`, 7 to 128 characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialRef(String);

impl CredentialRef {
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix("cred_")?;
        let ok = (3..=120).contains(&rest.len())
            && (7..=128).contains(&text.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| CredentialRef(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

closed_set! {
    /// How the executor presents a credential to the host endpoint.
    pub enum AuthType {
        Bearer = "bearer",
        ApiKey = "api_key",
        Basic = "basic",
    }
}

closed_set! {
    /// A stored credential's state (contract 2.8).
    pub enum CredentialStatus {
        Configured = "configured",
        Revoked = "revoked",
    }
}

closed_set! {
    /// The headers an `api_key` credential may be sent in.
    pub enum ApiKeyHeader {
        XApiKey = "x-api-key",
        XApiToken = "x-api-token",
    }
}

/// What a PUT stores: never logged, never returned.
pub struct CredentialSpec {
    pub auth_type: AuthType,
    pub header_name: Option<String>,
    pub secret: Zeroizing<String>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("{0}")]
    Invalid(String),
    #[error("the secret is larger than {MAX_SECRET_BYTES} bytes")]
    SecretTooLarge,
}

impl CredentialSpec {
    pub fn from_json(body: &Value) -> Result<Self, CredentialError> {
        let invalid = |m: &str| CredentialError::Invalid(m.to_owned());
        let object = body
            .as_object()
            .ok_or_else(|| invalid("the body must be a JSON object"))?;
        if let Some(unknown) = object
            .keys()
            .find(|k| !["auth_type", "secret", "header_name"].contains(&k.as_str()))
        {
            return Err(CredentialError::Invalid(format!(
                "unknown property {unknown:?}"
            )));
        }
        let auth_type = object
            .get("auth_type")
            .and_then(Value::as_str)
            .and_then(AuthType::parse)
            .ok_or_else(|| invalid("auth_type must be one of bearer, api_key, basic"))?;
        let secret = match object.get("secret") {
            Some(Value::String(s)) => Zeroizing::new(s.clone()),
            _ => return Err(invalid("secret is required and must be a string")),
        };
        if secret.len() > MAX_SECRET_BYTES {
            return Err(CredentialError::SecretTooLarge);
        }
        // The secret becomes an HTTP header value: visible ASCII and spaces only.
        if secret.trim().is_empty() || !secret.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(invalid("secret must be non-blank printable ASCII"));
        }
        if auth_type == AuthType::Basic
            && !secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        {
            return Err(invalid(
                "a basic secret is the pre-encoded base64 value, without the 'Basic ' prefix",
            ));
        }
        let header_name = match (auth_type, object.get("header_name")) {
            (AuthType::ApiKey, Some(Value::String(h))) if ApiKeyHeader::parse(h).is_some() => {
                Some(h.clone())
            }
            (AuthType::ApiKey, _) => {
                return Err(invalid(
                    "header_name must be x-api-key or x-api-token for api_key",
                ));
            }
            (_, Some(_)) => {
                return Err(invalid("header_name is only valid with auth_type api_key"));
            }
            (_, None) => None,
        };
        Ok(CredentialSpec {
            auth_type,
            header_name,
            secret,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn credential_refs_follow_the_pattern() {
        for ok in [
            "cred_abc",
            "cred_A-b_9",
            &format!("cred_{}", "a".repeat(120)),
        ] {
            assert!(CredentialRef::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "cred_ab",
            "cred_a.b",
            "cre_abc",
            "",
            "cred_ábc",
            &format!("cred_{}", "a".repeat(121)),
        ] {
            assert!(CredentialRef::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn specs_are_validated() {
        assert!(
            CredentialSpec::from_json(&json!({"auth_type": "bearer", "secret": "t0k"})).is_ok()
        );
        let k = CredentialSpec::from_json(
            &json!({"auth_type": "api_key", "secret": "k", "header_name": "x-api-token"}),
        )
        .unwrap();
        assert_eq!(k.header_name.as_deref(), Some("x-api-token"));
        assert!(
            CredentialSpec::from_json(&json!({"auth_type": "basic", "secret": "dXNlcjpwYXNz"}))
                .is_ok()
        );
        for bad in [
            json!({"auth_type": "none", "secret": "x"}),
            json!({"auth_type": "bearer"}),
            json!({"auth_type": "bearer", "secret": ""}),
            json!({"auth_type": "bearer", "secret": "a\nb"}),
            json!({"auth_type": "bearer", "secret": "x", "header_name": "x-api-key"}),
            json!({"auth_type": "api_key", "secret": "x"}),
            json!({"auth_type": "api_key", "secret": "x", "header_name": "authorization"}),
            json!({"auth_type": "basic", "secret": "Basic dXNlcjpwYXNz"}),
            json!({"auth_type": "bearer", "secret": "x", "extra": 1}),
        ] {
            assert!(
                matches!(
                    CredentialSpec::from_json(&bad),
                    Err(CredentialError::Invalid(_))
                ),
                "{bad}"
            );
        }
        let big = json!({"auth_type": "bearer", "secret": "a".repeat(MAX_SECRET_BYTES + 1)});
        assert!(matches!(
            CredentialSpec::from_json(&big),
            Err(CredentialError::SecretTooLarge)
        ));
    }
}
