//! Who a client is, for the limits that count clients (connections per
//! client, the prompt integrations' burst): the address its connection
//! comes from, or the one a trusted proxy appended to a header; and the key
//! such a limit counts by.
//!
//! - One IPv4 address is one client. An IPv6 client is its /64: a
//!   subscriber is handed at least a /64 (RFC 6177), so counting single
//!   IPv6 addresses would let one host be 2^64 clients.
//! - Behind a proxy, a header such as `X-Forwarded-For` is a list the
//!   client starts and each proxy appends to. Only the value the trusted
//!   proxy appended is believed: the Nth from the right, N being the number
//!   of trusted proxies in front (`WARDEN_CLIENT_IP_HOPS`). Everything left
//!   of it is the client's own words.

use axum::http::{HeaderMap, HeaderName};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What a per-client limit counts: an IPv4 address or an IPv6 /64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientKey {
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6Net([u8; 8]),
}

impl ClientKey {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => ClientKey::V4(v4),
            // An IPv4 client reaching a dual-stack socket is still that IPv4 client.
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(v4),
                None => {
                    let mut net = [0u8; 8];
                    net.copy_from_slice(&v6.octets()[..8]);
                    ClientKey::V6Net(net)
                }
            },
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::V4(v4) => write!(f, "{v4}"),
            ClientKey::V6Net(net) => {
                let mut octets = [0u8; 16];
                octets[..8].copy_from_slice(net);
                write!(f, "{}/64", std::net::Ipv6Addr::from(octets))
            }
        }
    }
}

/// The header a trusted proxy writes the client's address into, and which
/// of its values (from the right) that proxy's is.
#[derive(Clone, Debug)]
pub struct TrustedHeader {
    pub name: HeaderName,
    /// 1: the last value; 2: the one before it; …
    pub hops: usize,
}

/// The client's address: the trusted header's value `hops` from the right
/// when one is configured and that value is an address (with or without a
/// port); otherwise the connection's peer (with a proxy in front, the
/// proxy: all such requests then count as one client, never as many).
pub fn client_ip(trusted: Option<&TrustedHeader>, headers: &HeaderMap, peer: SocketAddr) -> IpAddr {
    trusted
        .and_then(|trusted| appended_by_proxy(trusted, headers))
        .unwrap_or_else(|| peer.ip())
}

fn appended_by_proxy(trusted: &TrustedHeader, headers: &HeaderMap) -> Option<IpAddr> {
    // Several header lines are one list, in order (RFC 9110 5.3).
    let mut values = Vec::new();
    for line in headers.get_all(&trusted.name) {
        values.extend(line.to_str().ok()?.split(',').map(str::trim));
    }
    let index = values.len().checked_sub(trusted.hops.max(1))?;
    parse_address(values[index])
}

/// `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or `[2001:db8::1]:4711`.
fn parse_address(value: &str) -> Option<IpAddr> {
    value
        .parse::<IpAddr>()
        .ok()
        .or_else(|| value.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn forwarded(lines: &[&str], hops: usize) -> IpAddr {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append("x-forwarded-for", HeaderValue::from_str(line).unwrap());
        }
        let trusted = TrustedHeader {
            name: HeaderName::from_static("x-forwarded-for"),
            hops,
        };
        client_ip(Some(&trusted), &headers, "10.0.0.1:5000".parse().unwrap())
    }

    #[test]
    fn the_value_the_trusted_proxy_appended_counts_never_the_clients_own() {
        assert_eq!(
            forwarded(&["6.6.6.6, 203.0.113.7"], 1),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            forwarded(&["6.6.6.6", "203.0.113.7, 198.51.100.1"], 2),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            forwarded(&["[2001:db8::1]:443"], 1),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            forwarded(&["203.0.113.7:8443"], 1),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn a_missing_short_or_garbled_header_means_the_peer() {
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(forwarded(&[], 1), peer);
        assert_eq!(forwarded(&["203.0.113.7"], 2), peer);
        assert_eq!(forwarded(&["203.0.113.7, unknown"], 1), peer);
        assert_eq!(
            client_ip(None, &HeaderMap::new(), "10.0.0.1:1".parse().unwrap()),
            peer
        );
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_client_its_address() {
        let a = ClientKey::of("2001:db8:1:2::1".parse().unwrap());
        let b = ClientKey::of("2001:db8:1:2:ffff::9".parse().unwrap());
        let c = ClientKey::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(
            ClientKey::of("::ffff:198.51.100.2".parse().unwrap()),
            ClientKey::of("198.51.100.2".parse().unwrap())
        );
        assert_eq!(
            ClientKey::of("198.51.100.2".parse().unwrap()).to_string(),
            "198.51.100.2"
        );
    }
}
