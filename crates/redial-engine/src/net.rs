//! Which destinations Redial may call. Redial sends requests to addresses users give it, so by
//! default it refuses loopback, private, link-local, shared, multicast and other non-public
//! addresses. The check is on the resolved address, not the name: a public name that resolves to
//! 127.0.0.1 is refused, and the connection goes to exactly the addresses that were checked.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether an address is on the public internet: not in any block of the IANA special-purpose
/// address registries (IPv4 and IPv6) that is not globally reachable, nor an IPv6 address that
/// embeds an IPv4 address that is not (IPv4-mapped, 6to4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            is_public_v6(v6)
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback() // 127.0.0.0/8
        || ip.is_private() // 10/8, 172.16/12, 192.168/16
        || ip.is_link_local() // 169.254/16
        || ip.is_multicast() // 224/4
        || ip.is_broadcast() // 255.255.255.255
        || ip.is_unspecified()
        || ip.is_documentation() // 192.0.2/24, 198.51.100/24, 203.0.113/24
        || a == 0 // "this network", 0/8
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier-grade NAT), 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments, 192.0.0/24
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast (deprecated), 192.88.99/24
        || (a == 198 && (b == 18 || b == 19)) // benchmarking, 198.18/15
        || a >= 240) // reserved, 240/4
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded_6to4 =
        || Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast() // ff00::/8
        || s[..6] == [0; 6] // IPv4-compatible, ::/96 (deprecated; `::127.0.0.1`)
        || (s[0] == 0x64 && s[1] == 0xff9b) // NAT64, 64:ff9b::/96 and local-use 64:ff9b:1::/48
        || (s[0] == 0x100 && s[1..4] == [0; 3]) // discard-only, 100::/64
        || (s[0] == 0x2001 && s[1] < 0x200) // IETF protocol assignments, 2001::/23 (Teredo,
                                              // benchmarking, ORCHID...)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation, 2001:db8::/32
        || (s[0] == 0x2002 && !is_public_v4(embedded_6to4())) // 6to4 of a non-public IPv4
        || (s[0] == 0x3fff && s[1] < 0x1000) // documentation, 3fff::/20
        || s[0] == 0x5f00 // segment routing (SRv6) SIDs, 5f00::/16
        || (s[0] & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (s[0] & 0xffc0) == 0xfec0) // site-local (deprecated), fec0::/10
}

/// Why a name could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("DNS: name {0} does not exist")]
    NotFound(String),
    #[error("DNS: temporary failure resolving {0}: {1}")]
    Temporary(String, String),
    #[error("destination {0} resolves only to non-public addresses ({1}); allow private networks to call it")]
    Refused(String, String),
}

/// A resolver that drops the addresses the network policy refuses.
#[derive(Clone, Copy, Debug)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let looked_up = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map(|addrs| addrs.collect::<Vec<SocketAddr>>());
            let found = match looked_up {
                Ok(addrs) => addrs,
                Err(e) => {
                    let msg = e.to_string();
                    let err = if is_nxdomain(&msg) {
                        ResolveError::NotFound(host)
                    } else {
                        ResolveError::Temporary(host, msg)
                    };
                    return Err(Box::new(err) as Box<dyn std::error::Error + Send + Sync>);
                }
            };
            if found.is_empty() {
                return Err(Box::new(ResolveError::NotFound(host)) as _);
            }
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if allowed.is_empty() {
                let list = found
                    .iter()
                    .map(|a| a.ip().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(ResolveError::Refused(host, list)) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// getaddrinfo's "no such name" answers (EAI_NONAME, EAI_NODATA), as the C library words them.
fn is_nxdomain(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("name or service not known")
        || m.contains("no address associated")
        || m.contains("nodename nor servname")
        || m.contains("not known")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One address in every block of the IANA special-purpose registries (IPv4:
    /// iana-ipv4-special-registry, IPv6: iana-ipv6-special-registry) and of the other non-public
    /// ranges, and IPv6 spellings that embed a non-public IPv4 address: none is public.
    #[test]
    fn special_purpose_blocks_are_not_public() {
        for (ip, block) in [
            ("0.1.2.3", "this network, 0/8"),
            ("10.1.2.3", "private, 10/8"),
            ("100.64.0.1", "shared address space, 100.64/10"),
            ("100.127.255.254", "shared address space, 100.64/10"),
            ("127.0.0.1", "loopback, 127/8"),
            ("127.255.255.254", "loopback, 127/8"),
            ("169.254.169.254", "link-local, 169.254/16"),
            ("172.16.0.1", "private, 172.16/12"),
            ("172.31.255.254", "private, 172.16/12"),
            ("192.0.0.8", "IETF protocol assignments, 192.0.0/24"),
            ("192.0.2.1", "documentation TEST-NET-1"),
            ("192.88.99.1", "6to4 relay anycast, 192.88.99/24"),
            ("192.168.1.1", "private, 192.168/16"),
            ("198.18.0.1", "benchmarking, 198.18/15"),
            ("198.19.255.254", "benchmarking, 198.18/15"),
            ("198.51.100.1", "documentation TEST-NET-2"),
            ("203.0.113.1", "documentation TEST-NET-3"),
            ("224.0.0.1", "multicast, 224/4"),
            ("240.0.0.1", "reserved, 240/4"),
            ("255.255.255.255", "limited broadcast"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
            ("::ffff:10.0.0.1", "IPv4-mapped private"),
            ("::127.0.0.1", "IPv4-compatible, ::/96"),
            ("::10.0.0.1", "IPv4-compatible, ::/96"),
            (
                "::8.8.8.8",
                "IPv4-compatible, ::/96 (deprecated, never public)",
            ),
            ("64:ff9b::127.0.0.1", "NAT64, 64:ff9b::/96"),
            ("64:ff9b:1::1", "local-use NAT64, 64:ff9b:1::/48"),
            ("100::1", "discard-only, 100::/64"),
            ("2001::1", "Teredo, 2001::/32"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo, 2001::/32"),
            (
                "2001:1::1",
                "port control anycast, 2001:1::1/128 (in 2001::/23)",
            ),
            ("2001:2::1", "benchmarking, 2001:2::/48"),
            ("2001:10::1", "ORCHID, 2001:10::/28"),
            ("2001:20::1", "ORCHIDv2, 2001:20::/28"),
            ("2001:1ff::1", "IETF protocol assignments, 2001::/23"),
            ("2001:db8::1", "documentation, 2001:db8::/32"),
            ("2002:7f00:1::", "6to4 of 127.0.0.1"),
            ("2002:a00:1::1", "6to4 of 10.0.0.1"),
            ("2002:c0a8:101::1", "6to4 of 192.168.1.1"),
            ("3fff::1", "documentation, 3fff::/20"),
            ("3fff:fff::1", "documentation, 3fff::/20"),
            ("3fff:fff:ffff::1", "documentation, 3fff::/20"),
            ("5f00::1", "SRv6 SIDs, 5f00::/16"),
            ("fc00::1", "unique local, fc00::/7"),
            ("fd00::1", "unique local, fc00::/7"),
            ("fe80::1", "link-local, fe80::/10"),
            ("febf::1", "link-local, fe80::/10"),
            ("fec0::1", "site-local (deprecated), fec0::/10"),
            ("ff02::1", "multicast, ff00::/8"),
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip} ({block})");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "192.88.98.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.254",
            "2606:4700:4700::1111",
            "2001:200::1",
            "2001:4860:4860::8888",
            "2002:808:808::1",
            "2a00:1450:4001::1",
            "3ffe::1",
            "3fff:1000::1",
        ] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
