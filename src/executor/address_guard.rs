//! The SSRF guard. The executor resolves host names itself, refuses every
//! address class a host endpoint must never be (loopback, private,
//! link-local, unique-local, CGNAT, multicast, unspecified, reserved, cloud
//! metadata, and those hidden inside IPv4-mapped or NAT64 IPv6 addresses),
//! and hands the checked addresses straight to the connector: there is no
//! second lookup for DNS rebinding to change.
//!
//! The development switch (`WARDEN_DEV_ALLOW_LOOPBACK`) lets loopback
//! through, and nothing else.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

/// Which addresses a call may reach.
#[derive(Clone, Copy, Debug)]
pub struct AddressPolicy {
    pub allow_loopback: bool,
}

/// Why an address was refused; found again in reqwest's error chain.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the endpoint address {address} is refused ({class})")]
pub struct AddressRefused {
    pub address: IpAddr,
    pub class: &'static str,
}

impl AddressPolicy {
    pub fn check(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        match refused_class(ip) {
            Some("loopback") if self.allow_loopback => Ok(()),
            Some(class) => Err(AddressRefused { address: ip, class }),
            None => Ok(()),
        }
    }
}

/// The class of an address no host endpoint may have, if it is one.
pub fn refused_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => {
            // An IPv4 address inside IPv6 is judged as that IPv4 address.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_class(v4);
            }
            let s = v6.segments();
            if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                return v4_class(Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                ));
            }
            v6_class(v6)
        }
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) => {
            "cloud-metadata"
        }
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..=127).contains(&b) => "cgnat",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ if a == 192 && b == 0 && ip.octets()[2] == 0 => "reserved",
        _ if a == 198 && (18..=19).contains(&b) => "benchmarking",
        _ => return None,
    })
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) => "cloud-metadata",
        _ if first & 0xfe00 == 0xfc00 => "unique-local",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local",
        _ if ip.is_multicast() => "multicast",
        _ if first == 0x2001 && ip.segments()[1] == 0x0db8 => "documentation",
        _ => return None,
    })
}

/// Resolves a host name to addresses. The system resolver in production;
/// tests substitute answers (including ones that change between lookups).
pub trait NameLookup: Send + Sync + 'static {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The operating system's resolver.
pub struct SystemLookup;

impl NameLookup for SystemLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// reqwest's resolver: one lookup, every address checked, and a name with
/// any refused address refused whole (a mixed answer is itself suspicious).
pub struct GuardedResolver {
    pub lookup: Arc<dyn NameLookup>,
    pub policy: AddressPolicy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let lookup = self.lookup.clone();
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses = lookup.lookup(&host).await?;
            if addresses.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host} has no address"),
                )
                .into());
            }
            for ip in &addresses {
                policy.check(*ip)?;
            }
            let checked: Vec<SocketAddr> = addresses
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            Ok(Box::new(checked.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<&'static str> {
        refused_class(s.parse().unwrap())
    }

    #[test]
    fn every_refused_class_is_recognised() {
        for (ip, expected) in [
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("::1", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.5.4", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("100.64.0.1", "cgnat"),
            ("100.127.255.254", "cgnat"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("ff02::1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("169.254.169.254", "cloud-metadata"),
            ("fd00:ec2::254", "cloud-metadata"),
            ("100.100.100.200", "cloud-metadata"),
            ("255.255.255.255", "reserved"),
            ("240.0.0.1", "reserved"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "cloud-metadata"),
        ] {
            assert_eq!(class(ip), Some(expected), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_development_switch_opens_loopback_only() {
        let dev = AddressPolicy {
            allow_loopback: true,
        };
        assert!(dev.check("127.0.0.1".parse().unwrap()).is_ok());
        assert!(dev.check("::1".parse().unwrap()).is_ok());
        assert!(dev.check("10.0.0.1".parse().unwrap()).is_err());
        assert!(dev.check("169.254.169.254".parse().unwrap()).is_err());
        let prod = AddressPolicy {
            allow_loopback: false,
        };
        assert!(prod.check("127.0.0.1".parse().unwrap()).is_err());
    }
}
