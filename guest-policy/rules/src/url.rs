//! The capability URL rule (contract 2.5): an exact HTTPS URL, no
//! placeholders, not localhost, not a private or special address literal.
//!
//! A hand-written, strict parser: anything it does not fully understand is
//! rejected. Address literals are judged by the shared table of refused
//! address classes (`address.rs`); whether a DNS name resolves to a refused
//! address is decided at call time by the server's executor, with the same
//! table.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::address::{AddressClass, refused_class};

/// Longest URL accepted.
pub const MAX_URL: usize = 2_048;

/// The parts of an accepted URL.
#[derive(Debug, PartialEq, Eq)]
pub struct Url<'a> {
    pub scheme: &'a str,
    pub host: &'a str,
    pub port: Option<u16>,
    pub loopback: bool,
}

/// `Err((rule, message))` when the URL breaks a rule.
pub fn check(url: &str, allow_loopback_http: bool) -> Result<Url<'_>, (&'static str, String)> {
    let bad = |rule: &'static str, msg: &str| Err((rule, msg.to_string()));
    if url.len() > MAX_URL {
        return bad("url-invalid", "the URL is longer than 2048 bytes");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad(
            "url-invalid",
            "the URL contains whitespace or control characters",
        );
    }
    if has_placeholder(url) {
        return bad(
            "url-placeholder",
            "the URL contains a placeholder; an exact URL is required",
        );
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad("url-invalid", "not an absolute URL");
    };
    let scheme_lower = scheme.to_ascii_lowercase();
    if scheme != scheme_lower {
        return bad("url-invalid", "the scheme must be lowercase");
    }
    if scheme != "https" && scheme != "http" {
        return bad("url-not-https", "the URL must use https");
    }
    if rest.contains('#') {
        return bad("url-invalid", "a capability URL must not carry a fragment");
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return bad(
            "url-credentials",
            "the URL must not carry user information (credentials)",
        );
    }
    let (host, port) = split_host_port(authority)
        .ok_or(("url-invalid", "the host or port is malformed".to_string()))?;
    if host.is_empty() {
        return bad("url-invalid", "the URL has no host");
    }
    let host_lower = host.to_ascii_lowercase();
    let trimmed = host_lower.trim_end_matches('.');
    let mut loopback = false;
    if trimmed == "localhost" || trimmed.ends_with(".localhost") {
        loopback = true;
    } else if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let ip: Ipv6Addr = v6
            .parse()
            .map_err(|_| ("url-invalid", "malformed IPv6 address".to_string()))?;
        loopback = literal_allowed(IpAddr::V6(ip))?;
    } else if looks_numeric(trimmed) {
        match trimmed.parse::<Ipv4Addr>() {
            Ok(ip) => loopback = literal_allowed(IpAddr::V4(ip))?,
            // 0x7f.1, 2130706433, 0177.0.0.1: shorthand forms URL parsers and
            // resolvers turn into an address this check never saw.
            Err(_) => {
                return bad(
                    "url-invalid",
                    "the host is a numeric form that is not a dotted IPv4 address",
                );
            }
        }
    } else if !valid_dns_name(trimmed) {
        return bad("url-invalid", "the host is not a valid DNS name");
    }
    if loopback {
        if !allow_loopback_http {
            return bad(
                "url-localhost",
                "localhost and loopback URLs cannot be called by a deployed service",
            );
        }
    } else if scheme != "https" {
        return bad("url-not-https", "the URL must use https");
    }
    Ok(Url {
        scheme,
        host,
        port,
        loopback,
    })
}

fn has_placeholder(url: &str) -> bool {
    const MARKS: &[&str] = &[
        "{", "}", "<", ">", "%7b", "%7d", "%3c", "%3e", "${", "{{", "[[", "]]",
    ];
    let lower = url.to_ascii_lowercase();
    if MARKS.iter().any(|m| lower.contains(m)) {
        return true;
    }
    // `/:id` style path parameters.
    let path = lower.split_once("://").map(|(_, r)| r).unwrap_or("");
    let path = path.find('/').map(|i| &path[i..]).unwrap_or("");
    path.split(['/', '?', '&', '='])
        .any(|seg| seg.starts_with(':') && seg.len() > 1)
}

fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    if authority.starts_with('[') {
        let close = authority.find(']')?;
        let host = &authority[..=close];
        let rest = &authority[close + 1..];
        if rest.is_empty() {
            return Some((host, None));
        }
        let port = rest.strip_prefix(':')?;
        return Some((host, Some(parse_port(port)?)));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h, Some(parse_port(p)?))),
        None => Some((authority, None)),
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|&n| n != 0)
}

fn looks_numeric(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or("");
    !last.is_empty() && (last.chars().all(|c| c.is_ascii_digit()) || last.starts_with("0x"))
}

fn valid_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// `Ok(true)` for a loopback literal (allowed only under the development
/// switch, decided by the caller), `Ok(false)` for a public one, and the
/// violation for every other class of the shared table.
fn literal_allowed(ip: IpAddr) -> Result<bool, (&'static str, String)> {
    match refused_class(ip) {
        None => Ok(false),
        Some(AddressClass::Loopback) => Ok(true),
        Some(class) => Err((
            "url-private-address",
            format!("the URL's host is a refused address ({class})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::address::{AddressClass, EXAMPLES};
    use std::net::IpAddr;

    fn rule(url: &str) -> &'static str {
        match check(url, false) {
            Ok(_) => "ok",
            Err((r, _)) => r,
        }
    }

    #[test]
    fn exact_https_urls_pass() {
        for u in [
            "https://api.shop.example/v1/orders/lookup",
            "https://api.shop.example:8443/x?y=1",
            "https://8.8.8.8/x",
        ] {
            assert_eq!(rule(u), "ok", "{u}");
        }
    }

    #[test]
    fn rejected_urls() {
        let cases = [
            ("http://api.shop.example/x", "url-not-https"),
            ("ftp://api.shop.example/x", "url-not-https"),
            ("https://api.shop.example/orders/{id}", "url-placeholder"),
            ("https://<host>/x", "url-placeholder"),
            ("https://api.shop.example/orders/:id", "url-placeholder"),
            ("https://api.shop.example/%7Bid%7D", "url-placeholder"),
            ("https://localhost/x", "url-localhost"),
            ("https://LOCALHOST./x", "url-localhost"),
            ("https://127.0.0.1:8080/x", "url-localhost"),
            ("https://[::1]/x", "url-localhost"),
            ("https://10.1.2.3/x", "url-private-address"),
            ("https://192.168.0.10/x", "url-private-address"),
            ("https://172.16.0.1/x", "url-private-address"),
            ("https://169.254.169.254/latest", "url-private-address"),
            ("https://[fd00::1]/x", "url-private-address"),
            ("https://[::ffff:10.0.0.1]/x", "url-private-address"),
            ("https://0.0.0.0/x", "url-private-address"),
            ("https://2130706433/x", "url-invalid"),
            ("https://0x7f.1/x", "url-invalid"),
            ("https://user:pw@api.shop.example/x", "url-credentials"),
            ("https://api.shop.example/x#frag", "url-invalid"),
            ("not a url", "url-invalid"),
            ("https:///x", "url-invalid"),
            ("https://api.shop.example:99999/x", "url-invalid"),
        ];
        for (u, r) in cases {
            assert_eq!(rule(u), r, "{u}");
        }
    }

    /// A URL naming `ip` literally: dotted IPv4, bracketed IPv6.
    fn literal_url(ip: &str) -> String {
        match ip.parse::<IpAddr>().unwrap() {
            IpAddr::V4(_) => format!("https://{ip}/x"),
            IpAddr::V6(_) => format!("https://[{ip}]/x"),
        }
    }

    #[test]
    fn every_refused_class_is_refused_as_a_literal_and_named() {
        for class in AddressClass::ALL {
            assert!(EXAMPLES.iter().any(|(_, c)| *c == class), "{class}");
        }
        for (ip, class) in EXAMPLES {
            let url = literal_url(ip);
            let (rule, message) = check(&url, false).unwrap_err();
            if *class == AddressClass::Loopback {
                assert_eq!(rule, "url-localhost", "{url}");
            } else {
                assert_eq!(rule, "url-private-address", "{url}");
                assert_eq!(
                    message,
                    format!("the URL's host is a refused address ({class})"),
                    "{url}"
                );
            }
            // The development switch opens loopback only.
            let dev = check(&url, true).map(|u| u.loopback);
            if *class == AddressClass::Loopback {
                assert_eq!(dev, Ok(true), "{url}");
            } else {
                assert_eq!(dev.unwrap_err().0, "url-private-address", "{url}");
            }
        }
    }

    #[test]
    fn public_literals_and_carried_public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(rule(&literal_url(ip)), "ok", "{ip}");
        }
    }

    #[test]
    fn numeric_spellings_a_url_parser_would_normalise_are_refused() {
        // WHATWG parsers read each of these as an IPv4 address (127.0.0.1,
        // 10.0.0.1, 192.0.2.1, 8.8.8.8 ...): only the dotted form is judged.
        for host in [
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "0X7F.0.0.1",
            "0177.0.0.1",
            "127.1",
            "127.0.1",
            "10.1",
            "0xa.0.0.1",
            "012.0.0.1",
            "3221225985",
            "0x8.0x8.0x8.0x8",
            "08.8.8.8",
            "1.2.3.4.5",
            "api.0x10",
            "api.12",
        ] {
            assert_eq!(rule(&format!("https://{host}/x")), "url-invalid", "{host}");
        }
    }

    #[test]
    fn the_development_switch_allows_loopback_only() {
        assert!(check("http://127.0.0.1:8080/x", true).is_ok());
        assert!(check("http://localhost:3000/x", true).is_ok());
        assert!(check("http://[::1]:3000/x", true).is_ok());
        assert_eq!(
            check("http://api.shop.example/x", true).unwrap_err().0,
            "url-not-https"
        );
        assert_eq!(
            check("http://10.0.0.1/x", true).unwrap_err().0,
            "url-private-address"
        );
    }
}
