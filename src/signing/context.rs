//! The claims of the `capability-context` header: who the call is for, in
//! opaque terms, and what it is. Compact JSON, ASCII only:
//! `{"v":1,"iss":"warden","sub":…,"usr":…,"cap":…,"rev":…,"aud":…,"iat":…,"exp":…}`
//! (`usr` only when the host named an end user).

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

#[derive(Serialize)]
pub struct ContextHeader<'a> {
    pub v: u8,
    pub iss: &'static str,
    /// The account's opaque subject: never its name or an internal id.
    pub sub: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usr: Option<String>,
    pub cap: &'a str,
    pub rev: i64,
    /// The endpoint's origin.
    pub aud: &'a str,
    pub iat: i64,
    pub exp: i64,
}

/// An end user's pseudonym for one account: HMAC-SHA256 of the user id
/// under the account's salt. Stable per account, unlinkable across accounts.
pub fn user_subject(salt: &str, user_id: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(salt.as_bytes()).expect("HMAC takes any key length");
    mac.update(user_id.as_bytes());
    format!(
        "usr_{}",
        crate::crypto::hex::encode(&mac.finalize().into_bytes()[..16])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudonyms_are_stable_per_salt_and_hide_the_id() {
        let a = user_subject("salt-a", "maria@example.com");
        assert_eq!(a, user_subject("salt-a", "maria@example.com"));
        assert_ne!(a, user_subject("salt-b", "maria@example.com"));
        assert!(!a.contains("maria"));
    }
}
