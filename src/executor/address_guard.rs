//! The SSRF guard. The executor resolves host names itself, refuses every
//! address of a refused class, and hands the checked addresses straight to
//! the connector: there is no second lookup for DNS rebinding to change.
//!
//! The classes are the guest's own table (`warden_policy_rules::address`,
//! linked natively): a literal refused at import and a resolved address
//! refused here are refused by the same function.
//!
//! A refusal names its class and never the address: a tenant who tests a
//! capability must not learn what an internal name resolves to.
//!
//! The development switch (`WARDEN_DEV_ALLOW_LOOPBACK`) lets loopback
//! through, and nothing else.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

pub use warden_policy_rules::address::{AddressClass, refused_class};

/// Which addresses a call may reach.
#[derive(Clone, Copy, Debug)]
pub struct AddressPolicy {
    pub allow_loopback: bool,
}

/// Why a call's target was refused before anything was sent; found again in
/// reqwest's error chain. No variant holds an address or a host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AddressRefused {
    #[error("the endpoint address is refused ({0})")]
    Class(AddressClass),
    #[error("the URL is invalid")]
    InvalidUrl,
    #[error("the URL has no host")]
    NoHost,
    #[error("the URL's scheme is not allowed")]
    Scheme,
    #[error("plain http is allowed on loopback only")]
    PlainHttp,
}

impl AddressPolicy {
    pub fn check(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        match refused_class(ip) {
            Some(AddressClass::Loopback) if self.allow_loopback => Ok(()),
            Some(class) => Err(AddressRefused::Class(class)),
            None => Ok(()),
        }
    }
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
        assert_eq!(
            prod.check("127.0.0.1".parse().unwrap()),
            Err(AddressRefused::Class(AddressClass::Loopback))
        );
    }

    #[test]
    fn a_refusal_names_the_class_and_not_the_address() {
        let prod = AddressPolicy {
            allow_loopback: false,
        };
        for ip in ["127.0.0.1", "10.9.8.7", "fd00::5", "::ffff:192.168.4.4"] {
            let message = prod.check(ip.parse().unwrap()).unwrap_err().to_string();
            assert!(!message.contains(ip), "{message}");
            assert!(message.starts_with("the endpoint address is refused ("));
        }
    }
}
