//! The address classes no capability endpoint may have: ONE table, read by
//! the guest for literal hosts at import (`url.rs`) and by the server's
//! executor for every address a host name resolves to at call time (the
//! server depends on this crate natively), so both refuse exactly the same.
//!
//! The table follows the IANA IPv4 and IPv6 Special-Purpose Address
//! Registries: every entry that is not globally reachable is refused, plus
//! multicast, and in IPv6 everything outside global unicast `2000::/3`.
//! An address takes the verdict of the longest prefix that contains it.
//!
//! Choices where the registries leave room (also in `docs/sandbox.md` §9):
//! - `192.0.0.0/24` and `2001::/23` (IETF protocol assignments) are refused
//!   whole, including their few globally reachable anycast, AMT, AS112 and
//!   ORCHIDv2 entries: no API lives at a protocol service address.
//! - IPv4-mapped `::ffff:0:0/96`, the well-known NAT64 prefix `64:ff9b::/96`
//!   and 6to4 `2002::/16` carry an IPv4 address, and the connection reaches
//!   (or is routed by) that address: they are judged as the IPv4 address
//!   they carry, so a public one passes. Refusing NAT64 outright would break
//!   every IPv6-only deployment behind DNS64.
//! - IPv4-compatible `::/96` (deprecated by RFC 4291), IPv4-translated
//!   `::ffff:0:0:0/96`, local-use NAT64 `64:ff9b:1::/48` (the position of its
//!   IPv4 address depends on a local prefix length) and Teredo `2001::/32`
//!   are refused outright, whatever they carry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused. [`AddressClass::name`] is stable: it appears
/// in violation messages, call failures and documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressClass {
    Unspecified,
    ThisNetwork,
    Loopback,
    Private,
    Cgnat,
    LinkLocal,
    CloudMetadata,
    ProtocolAssignment,
    Documentation,
    Benchmarking,
    SixToFourRelay,
    Multicast,
    Reserved,
    Broadcast,
    Ipv4Compatible,
    Ipv4Translated,
    Nat64Local,
    Discard,
    Teredo,
    Orchid,
    SegmentRouting,
    UniqueLocal,
    SiteLocal,
}

impl AddressClass {
    /// Every class, for documentation and for tests that must cover each.
    pub const ALL: [AddressClass; 23] = [
        AddressClass::Unspecified,
        AddressClass::ThisNetwork,
        AddressClass::Loopback,
        AddressClass::Private,
        AddressClass::Cgnat,
        AddressClass::LinkLocal,
        AddressClass::CloudMetadata,
        AddressClass::ProtocolAssignment,
        AddressClass::Documentation,
        AddressClass::Benchmarking,
        AddressClass::SixToFourRelay,
        AddressClass::Multicast,
        AddressClass::Reserved,
        AddressClass::Broadcast,
        AddressClass::Ipv4Compatible,
        AddressClass::Ipv4Translated,
        AddressClass::Nat64Local,
        AddressClass::Discard,
        AddressClass::Teredo,
        AddressClass::Orchid,
        AddressClass::SegmentRouting,
        AddressClass::UniqueLocal,
        AddressClass::SiteLocal,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            AddressClass::Unspecified => "unspecified",
            AddressClass::ThisNetwork => "this-network",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::Cgnat => "cgnat",
            AddressClass::LinkLocal => "link-local",
            AddressClass::CloudMetadata => "cloud-metadata",
            AddressClass::ProtocolAssignment => "protocol-assignment",
            AddressClass::Documentation => "documentation",
            AddressClass::Benchmarking => "benchmarking",
            AddressClass::SixToFourRelay => "6to4-relay",
            AddressClass::Multicast => "multicast",
            AddressClass::Reserved => "reserved",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Ipv4Compatible => "ipv4-compatible",
            AddressClass::Ipv4Translated => "ipv4-translated",
            AddressClass::Nat64Local => "nat64-local",
            AddressClass::Discard => "discard",
            AddressClass::Teredo => "teredo",
            AddressClass::Orchid => "orchid",
            AddressClass::SegmentRouting => "segment-routing",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::SiteLocal => "site-local",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an IPv6 prefix carries an IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:a.b.c.d`: the socket connects to `a.b.c.d` over IPv4.
    Ipv4Mapped,
    /// `64:ff9b::a.b.c.d`: a NAT64 gateway connects to `a.b.c.d`.
    Nat64,
    /// `2002:aabb:ccdd::/48`: 6to4 tunnels to `aa.bb.cc.dd`.
    SixToFour,
}

impl Embedding {
    /// The IPv4 address `ip` carries.
    pub fn ipv4(self, ip: Ipv6Addr) -> Ipv4Addr {
        let bits = u128::from(ip);
        let shift = match self {
            Embedding::Ipv4Mapped | Embedding::Nat64 => 0,
            Embedding::SixToFour => 80,
        };
        Ipv4Addr::from((bits >> shift) as u32)
    }
}

/// What the table says of the addresses under a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Refused(AddressClass),
    /// Judged as the IPv4 address carried inside.
    Carries(Embedding),
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Range<A> {
    pub network: A,
    pub prefix_len: u8,
    pub verdict: Verdict,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix_len: u8, class: AddressClass) -> Range<Ipv4Addr> {
    Range {
        network: Ipv4Addr::new(a, b, c, d),
        prefix_len,
        verdict: Verdict::Refused(class),
    }
}

const fn v6(segments: [u16; 8], prefix_len: u8, verdict: Verdict) -> Range<Ipv6Addr> {
    let [a, b, c, d, e, f, g, h] = segments;
    Range {
        network: Ipv6Addr::new(a, b, c, d, e, f, g, h),
        prefix_len,
        verdict,
    }
}

use AddressClass as C;
use Verdict::{Carries, Refused};

/// The refused IPv4 ranges (longest prefix wins).
pub const IPV4: &[Range<Ipv4Addr>] = &[
    v4(0, 0, 0, 0, 8, C::ThisNetwork),
    v4(0, 0, 0, 0, 32, C::Unspecified),
    v4(10, 0, 0, 0, 8, C::Private),
    v4(100, 64, 0, 0, 10, C::Cgnat),
    v4(100, 100, 100, 200, 32, C::CloudMetadata), // Alibaba Cloud
    v4(127, 0, 0, 0, 8, C::Loopback),
    v4(169, 254, 0, 0, 16, C::LinkLocal),
    v4(169, 254, 169, 254, 32, C::CloudMetadata), // AWS, GCP, Azure, ...
    v4(172, 16, 0, 0, 12, C::Private),
    v4(192, 0, 0, 0, 24, C::ProtocolAssignment),
    v4(192, 0, 2, 0, 24, C::Documentation), // TEST-NET-1
    v4(192, 88, 99, 0, 24, C::SixToFourRelay),
    v4(192, 168, 0, 0, 16, C::Private),
    v4(198, 18, 0, 0, 15, C::Benchmarking),
    v4(198, 51, 100, 0, 24, C::Documentation), // TEST-NET-2
    v4(203, 0, 113, 0, 24, C::Documentation),  // TEST-NET-3
    v4(224, 0, 0, 0, 4, C::Multicast),
    v4(240, 0, 0, 0, 4, C::Reserved),
    v4(255, 255, 255, 255, 32, C::Broadcast),
];

/// The IPv6 ranges: refused, or judged by the IPv4 address they carry.
pub const IPV6: &[Range<Ipv6Addr>] = &[
    // Outside global unicast 2000::/3, all is reserved unless named below.
    v6([0, 0, 0, 0, 0, 0, 0, 0], 3, Refused(C::Reserved)),
    v6([0x4000, 0, 0, 0, 0, 0, 0, 0], 2, Refused(C::Reserved)),
    v6([0x8000, 0, 0, 0, 0, 0, 0, 0], 1, Refused(C::Reserved)),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, Refused(C::Unspecified)),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, Refused(C::Loopback)),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96, Refused(C::Ipv4Compatible)),
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        Carries(Embedding::Ipv4Mapped),
    ),
    v6(
        [0, 0, 0, 0, 0xffff, 0, 0, 0],
        96,
        Refused(C::Ipv4Translated),
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        Carries(Embedding::Nat64),
    ),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Refused(C::Nat64Local)),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Refused(C::Discard)),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        Refused(C::ProtocolAssignment),
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, Refused(C::Teredo)),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, Refused(C::Benchmarking)),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, Refused(C::Orchid)), // deprecated ORCHID
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, Refused(C::Orchid)), // ORCHIDv2
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        Refused(C::Documentation),
    ),
    v6(
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        Carries(Embedding::SixToFour),
    ),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Refused(C::Documentation)),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        Refused(C::SegmentRouting),
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Refused(C::UniqueLocal)),
    v6(
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
        128,
        Refused(C::CloudMetadata),
    ), // AWS
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, Refused(C::LinkLocal)),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Refused(C::SiteLocal)),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Refused(C::Multicast)),
];

/// The class of an address no capability endpoint may have, if it is one.
pub fn refused_class(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(ip) => refused_v4(ip),
        IpAddr::V6(ip) => refused_v6(ip),
    }
}

pub fn refused_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    match longest_match(IPV4, u32::from(ip), u32::from, 32)? {
        Refused(class) => Some(class),
        // IPv4 rows never carry an address.
        Carries(_) => None,
    }
}

pub fn refused_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    match longest_match(IPV6, u128::from(ip), u128::from, 128)? {
        Refused(class) => Some(class),
        Carries(embedding) => refused_v4(embedding.ipv4(ip)),
    }
}

/// The verdict of the longest prefix of `table` containing `bits`.
fn longest_match<A: Copy, B>(
    table: &[Range<A>],
    bits: B,
    to_bits: impl Fn(A) -> B,
    width: u32,
) -> Option<Verdict>
where
    B: Copy + PartialEq + std::ops::Shr<u32, Output = B> + std::ops::BitXor<Output = B> + From<u8>,
{
    table
        .iter()
        .filter(|r| {
            let shift = width - u32::from(r.prefix_len);
            // A zero-length prefix would shift by the full width.
            shift == width || (bits ^ to_bits(r.network)) >> shift == B::from(0)
        })
        .max_by_key(|r| r.prefix_len)
        .map(|r| r.verdict)
}

/// One address (or more) per class (the tests of this table and of the
/// URL rule's literals walk it).
#[cfg(test)]
pub(crate) const EXAMPLES: &[(&str, AddressClass)] = &[
    ("0.0.0.0", AddressClass::Unspecified),
    ("::", AddressClass::Unspecified),
    ("0.1.2.3", AddressClass::ThisNetwork),
    ("127.0.0.1", AddressClass::Loopback),
    ("127.9.9.9", AddressClass::Loopback),
    ("::1", AddressClass::Loopback),
    ("10.0.0.1", AddressClass::Private),
    ("172.16.5.4", AddressClass::Private),
    ("172.31.255.255", AddressClass::Private),
    ("192.168.1.1", AddressClass::Private),
    ("100.64.0.1", AddressClass::Cgnat),
    ("100.127.255.254", AddressClass::Cgnat),
    ("169.254.1.1", AddressClass::LinkLocal),
    ("fe80::1", AddressClass::LinkLocal),
    ("febf::1", AddressClass::LinkLocal),
    ("169.254.169.254", AddressClass::CloudMetadata),
    ("100.100.100.200", AddressClass::CloudMetadata),
    ("fd00:ec2::254", AddressClass::CloudMetadata),
    ("192.0.0.1", AddressClass::ProtocolAssignment),
    ("192.0.0.170", AddressClass::ProtocolAssignment),
    ("2001:1::1", AddressClass::ProtocolAssignment),
    ("2001:4:112::1", AddressClass::ProtocolAssignment),
    ("192.0.2.1", AddressClass::Documentation),
    ("198.51.100.7", AddressClass::Documentation),
    ("203.0.113.9", AddressClass::Documentation),
    ("2001:db8::1", AddressClass::Documentation),
    ("3fff::1", AddressClass::Documentation),
    ("198.18.0.1", AddressClass::Benchmarking),
    ("198.19.255.254", AddressClass::Benchmarking),
    ("2001:2::1", AddressClass::Benchmarking),
    ("192.88.99.1", AddressClass::SixToFourRelay),
    ("224.0.0.1", AddressClass::Multicast),
    ("239.255.255.250", AddressClass::Multicast),
    ("ff02::1", AddressClass::Multicast),
    ("240.0.0.1", AddressClass::Reserved),
    ("255.255.255.254", AddressClass::Reserved),
    ("100:0:0:1::1", AddressClass::Reserved),
    ("4000::1", AddressClass::Reserved),
    ("1234::1", AddressClass::Reserved),
    ("64:ff9c::1", AddressClass::Reserved),
    ("255.255.255.255", AddressClass::Broadcast),
    ("::a00:1", AddressClass::Ipv4Compatible),
    ("::8.8.8.8", AddressClass::Ipv4Compatible),
    ("::ffff:0:8.8.8.8", AddressClass::Ipv4Translated),
    ("::ffff:0:7f00:1", AddressClass::Ipv4Translated),
    ("64:ff9b:1::808:808", AddressClass::Nat64Local),
    ("64:ff9b:1:ffff::1", AddressClass::Nat64Local),
    ("100::1", AddressClass::Discard),
    ("2001::1", AddressClass::Teredo),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", AddressClass::Teredo),
    ("2001:10::1", AddressClass::Orchid),
    ("2001:20::1", AddressClass::Orchid),
    ("5f00::1", AddressClass::SegmentRouting),
    ("fc00::1", AddressClass::UniqueLocal),
    ("fd12:3456::1", AddressClass::UniqueLocal),
    ("fec0::1", AddressClass::SiteLocal),
    // Carried IPv4 addresses take the IPv4 class.
    ("::ffff:10.0.0.1", AddressClass::Private),
    ("::ffff:127.0.0.1", AddressClass::Loopback),
    ("::ffff:192.0.2.1", AddressClass::Documentation),
    ("64:ff9b::a9fe:a9fe", AddressClass::CloudMetadata),
    ("64:ff9b::7f00:1", AddressClass::Loopback),
    ("64:ff9b::c633:6401", AddressClass::Documentation),
    ("2002:7f00:1::1", AddressClass::Loopback),
    ("2002:a00:1::", AddressClass::Private),
    ("2002:a9fe:a9fe:1::1", AddressClass::CloudMetadata),
    ("2002:c000:0201::1", AddressClass::Documentation),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<&'static str> {
        refused_class(s.parse().unwrap()).map(AddressClass::name)
    }

    #[test]
    fn every_class_has_an_example_and_each_example_its_class() {
        for class in AddressClass::ALL {
            assert!(
                EXAMPLES.iter().any(|(_, c)| *c == class),
                "no example of {class}"
            );
        }
        for (ip, expected) in EXAMPLES {
            assert_eq!(class(ip), Some(expected.name()), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "192.0.1.1",
            "192.31.196.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2620:4f:8000::1",
            "2001:200::1",
            "2a00:1450::1",
            "3fff:1000::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn names_are_distinct_and_rows_are_aligned_and_unique() {
        for (i, a) in AddressClass::ALL.iter().enumerate() {
            for b in &AddressClass::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
        // No host bits past the prefix, no prefix twice: longest match is
        // then unambiguous.
        let v4: Vec<(u128, u8)> = IPV4
            .iter()
            .map(|r| (u128::from(u32::from(r.network)) << 96, r.prefix_len))
            .collect();
        let v6: Vec<(u128, u8)> = IPV6
            .iter()
            .map(|r| (u128::from(r.network), r.prefix_len))
            .collect();
        for rows in [v4, v6] {
            for (i, (network, len)) in rows.iter().enumerate() {
                let host_bits = network.checked_shl(u32::from(*len)).unwrap_or(0);
                assert_eq!(host_bits, 0, "{network:x}/{len} has host bits set");
                assert!(
                    !rows[i + 1..].contains(&(*network, *len)),
                    "{network:x}/{len} twice"
                );
            }
        }
    }

    #[test]
    fn embedded_ipv4_addresses_are_extracted() {
        let ip = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(
            Embedding::Ipv4Mapped.ipv4(ip("::ffff:1.2.3.4")),
            Ipv4Addr::new(1, 2, 3, 4)
        );
        assert_eq!(
            Embedding::Nat64.ipv4(ip("64:ff9b::1.2.3.4")),
            Ipv4Addr::new(1, 2, 3, 4)
        );
        assert_eq!(
            Embedding::SixToFour.ipv4(ip("2002:102:304:5::6")),
            Ipv4Addr::new(1, 2, 3, 4)
        );
    }
}
