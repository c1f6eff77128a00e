//! "The manifest must contain no secret" (contract 2.5): recognising values
//! that look like credentials.
//!
//! Heuristics, tuned to catch what people paste by mistake (authorization
//! header values, vendor API keys, JWTs, private keys, URLs with passwords,
//! long random tokens) without flagging ordinary prose, identifiers, UUIDs or
//! hex digests. A false positive is fixable by the author (rephrase); a false
//! negative leaks a secret into storage and logs, so the rules lean strict.

/// Why `s` looks like a secret, or `None`.
pub fn looks_secret(s: &str) -> Option<&'static str> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    for (scheme, why) in [
        ("bearer ", "an Authorization bearer value"),
        ("basic ", "an Authorization basic value"),
    ] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(scheme) {
            let start = from + i + scheme.len();
            let token = t[start..].split_whitespace().next().unwrap_or("");
            if credential_like(token) {
                return Some(why);
            }
            from = start;
        }
    }
    if t.contains("-----BEGIN") && t.contains("PRIVATE KEY") {
        return Some("a private key");
    }
    if let Some(i) = t.find("://") {
        let authority = &t[i + 3..];
        let authority = &authority[..authority.find('/').unwrap_or(authority.len())];
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.contains(':')
        {
            return Some("a URL with a password");
        }
    }
    for token in t.split(|c: char| !(c.is_ascii_alphanumeric() || "_-+/=.".contains(c))) {
        if let Some(why) = token_secret(token) {
            return Some(why);
        }
    }
    None
}

/// The word after "Bearer " / "Basic ": a credential, not prose.
fn credential_like(token: &str) -> bool {
    let token = token.trim_end_matches(['.', ',', ';', ')', '"', '\'']);
    token.len() >= 8
        && (token.chars().any(|c| c.is_ascii_digit())
            || (token.chars().any(|c| c.is_ascii_uppercase())
                && token.chars().any(|c| c.is_ascii_lowercase()))
            || token.contains(['-', '_', '=', '+', '/']))
}

const PREFIXES: &[(&str, usize)] = &[
    ("sk_live_", 16),
    ("sk_test_", 16),
    ("rk_live_", 16),
    ("pk_live_", 16),
    ("sk-", 20),
    ("ghp_", 30),
    ("gho_", 30),
    ("ghs_", 30),
    ("ghu_", 30),
    ("github_pat_", 30),
    ("glpat-", 20),
    ("xoxb-", 20),
    ("xoxp-", 20),
    ("xoxa-", 20),
    ("AKIA", 16),
    ("ASIA", 16),
    ("AIza", 35),
    ("SG.", 40),
];

fn token_secret(token: &str) -> Option<&'static str> {
    for (p, min_rest) in PREFIXES {
        if let Some(rest) = token.strip_prefix(p)
            && rest.len() >= *min_rest
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Some("a vendor API key");
        }
    }
    // A JSON Web Token: three base64url parts, the first a JSON header.
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() == 3 && parts[0].starts_with("eyJ") && parts[1].len() >= 8 && parts[2].len() >= 8
    {
        return Some("a JSON Web Token");
    }
    // A long random-looking token: mixed letters and digits, high entropy.
    for piece in token.split('.') {
        if random_looking(piece) {
            return Some("a long random token");
        }
    }
    None
}

fn random_looking(s: &str) -> bool {
    if s.len() < 32 {
        return false;
    }
    let upper = s.chars().any(|c| c.is_ascii_uppercase());
    let lower = s.chars().any(|c| c.is_ascii_lowercase());
    let digit = s.chars().any(|c| c.is_ascii_digit());
    // Hex digests and UUIDs use one case and at most 4 bits per character:
    // they are identifiers, not secrets.
    if !(digit && upper && lower) {
        return false;
    }
    entropy(s) >= 4.2
}

fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

/// Object keys whose string value is a secret by name, wherever they occur
/// outside a schema's `properties` map.
pub fn secret_key_name(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    matches!(
        k.as_str(),
        "password"
            | "passwd"
            | "secret"
            | "client_secret"
            | "api_key"
            | "apikey"
            | "access_token"
            | "refresh_token"
            | "token"
            | "private_key"
            | "authorization"
            | "bearer"
    )
}

#[cfg(test)]
mod tests {
    use super::looks_secret;

    #[test]
    fn secrets_are_recognised() {
        for s in [
            "Bearer abcdef123456",
            "basic dXNlcjpwYXNz",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "use token Zx8Qp2Lm9Vt4Rb7Kc1Nw6Hy3Js5Df0Ga8Ue2Oi in the header",
            "https://admin:hunter2@api.shop.example/x",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE",
        ] {
            assert!(looks_secret(s).is_some(), "{s}");
        }
    }

    #[test]
    fn ordinary_values_are_not_secrets() {
        for s in [
            "Looks up an order by its public reference",
            "https://api.shop.example/v1/orders/lookup_by_customer_reference_number",
            "550e8400-e29b-41d4-a716-446655440000",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "application/json",
            "cred_orders_api",
            "Bearer tokens are never part of a manifest",
            "order_reference_with_a_very_long_descriptive_name",
        ] {
            assert!(looks_secret(s).is_none(), "{s}");
        }
    }
}
